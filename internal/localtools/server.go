package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sort"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
)

// ControlPlane answers the control-plane tools' questions about the running toolgate:
// its upstream servers, its connected clients and its store's backups. internal/app
// implements it; the answers are JSON values, reported as they are.
type ControlPlane interface {
	// Servers lists the installed upstream servers with their runtime states.
	Servers(ctx context.Context) (any, error)
	// ServerState is one server's runtime state and catalogue version; ok is false
	// when no server of that name is installed.
	ServerState(ctx context.Context, name string) (state any, ok bool, err error)
	// Clients lists the connected harness sessions.
	Clients(ctx context.Context) (any, error)
	// Backup creates ("create"), lists ("list") or deletes ("delete" name) copies of
	// the store.
	Backup(ctx context.Context, action, name string) (any, error)
}

var emptySchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"properties":           map[string]any{},
})

var readStateSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"server"},
	"properties": map[string]any{
		"server": map[string]any{"type": "string", "minLength": 1, "maxLength": 128, "description": "the installed server's name"},
	},
})

var backupSchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"action"},
	"properties": map[string]any{
		"action": map[string]any{"enum": []string{"create", "list", "delete"},
			"description": "create a consistent copy of the store now, list the copies, or delete one"},
		"name": map[string]any{"type": "string", "minLength": 1, "maxLength": 128, "description": "for delete: the copy's name, as list reports it"},
	},
})

// errNoControlPlane answers a control-plane call in a process that has none wired.
var errNoControlPlane = errors.New("this toolgate process does not manage a store's backups")

// serverTools are the control plane: facts about this toolgate process. All are
// read-only except server.manage_backup (action write: the default server.* read grant
// does not cover it).
func serverTools(cfg Config, local []*kernel.Tool) []*kernel.Tool {
	started := time.Now().UTC()
	names := make([]string, 0, len(local))
	for _, t := range local {
		names = append(names, localName(t.ID))
	}
	sort.Strings(names)
	ro := kernel.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: boolp(false)}
	version := cfg.Version
	if version == "" {
		version = "(devel)"
	}
	plane := func() ControlPlane {
		if cfg.ControlPlane == nil {
			return nil
		}
		return cfg.ControlPlane()
	}
	// ask is what the control plane answers with get, or an empty list without one.
	ask := func(ctx context.Context, get func(ControlPlane, context.Context) (any, error)) (any, error) {
		if p := plane(); p != nil {
			return get(p, ctx)
		}
		return []any{}, nil
	}
	servers := func(ctx context.Context) (any, error) { return ask(ctx, ControlPlane.Servers) }
	// list answers {key: the control plane's answer to get}.
	list := func(key string, get func(ControlPlane, context.Context) (any, error)) func(context.Context, *kernel.Call) (*kernel.Output, error) {
		return func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
			v, err := ask(ctx, get)
			if err != nil {
				return nil, err
			}
			return jsonOutput(map[string]any{key: v})
		}
	}
	return []*kernel.Tool{
		{
			ID:    "server.status",
			Title: "toolgate status",
			Description: "Report this toolgate process's status: version, workspace, the local tools " +
				"in this catalogue, the confinement in force for bash and declarative tools, and upstream servers.",
			InputSchema: emptySchema,
			Annotations: ro,
			Source:      "toolgate",
			Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
				srv, err := servers(ctx)
				if err != nil {
					return nil, err
				}
				st := map[string]any{
					"version":        version,
					"go":             runtime.Version(),
					"started":        started.Format(time.RFC3339),
					"local_tools":    names,
					"allow_internet": cfg.AllowInternet,
					"servers":        srv,
				}
				if cfg.Workspace != nil {
					st["workspace"] = cfg.Workspace.Dir()
				} else {
					st["workspace"] = nil
					st["local_tools_disabled"] = cfg.DisabledReason
				}
				if cfg.Status != nil {
					for k, v := range cfg.Status() {
						st[k] = v
					}
				}
				return jsonOutput(st)
			},
		},
		{
			ID:          "server.version",
			Title:       "toolgate version",
			Description: "Report toolgate's version and the Go version it was built with.",
			InputSchema: emptySchema,
			Annotations: ro,
			Source:      "toolgate",
			Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
				return jsonOutput(map[string]any{"version": version, "go": runtime.Version()})
			},
		},
		{
			ID:    "server.list_servers",
			Title: "List upstream servers",
			Description: "List the upstream MCP servers installed in this toolgate's data directory: " +
				"each one's policy, runtime state and catalogue.",
			InputSchema: emptySchema,
			Annotations: ro,
			Source:      "toolgate",
			Run:         list("servers", ControlPlane.Servers),
		},
		{
			ID:    "server.read_state",
			Title: "Read an upstream server's state",
			Description: "Report one installed upstream server's runtime state (state, reason, last error, " +
				"retry information) and its catalogue version.",
			InputSchema: readStateSchema,
			Annotations: ro,
			Source:      "toolgate",
			Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
				name, _ := call.Args["server"].(string)
				p := plane()
				if p == nil {
					return nil, kernel.Failed(kernel.CodeInvalidArguments, "no server %q is installed", name)
				}
				st, ok, err := p.ServerState(ctx, name)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, kernel.Failed(kernel.CodeInvalidArguments, "no server %q is installed", name)
				}
				return jsonOutput(st)
			},
		},
		{
			ID:    "server.list_clients",
			Title: "List connected clients",
			Description: "List the harness sessions connected to this toolgate process: principal, transport, " +
				"protocol version, client info, when each opened and last called a tool.",
			InputSchema: emptySchema,
			Annotations: ro,
			Source:      "toolgate",
			Run:         list("clients", ControlPlane.Clients),
		},
		{
			ID:    "server.manage_backup",
			Title: "Manage store backups",
			Description: "Create a consistent copy of toolgate's database now (into backups/ in the data directory, " +
				"owner-only), list the copies, or delete one. Needs a grant with action write.",
			InputSchema: backupSchema,
			Annotations: kernel.Annotations{Destructive: true, OpenWorld: boolp(false)},
			Source:      "toolgate",
			Access: func(args map[string]any) (kernel.Access, error) {
				return kernel.Access{Action: kernel.ActionWrite}, nil
			},
			Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
				action, _ := call.Args["action"].(string)
				name, _ := call.Args["name"].(string)
				p := plane()
				if p == nil {
					return nil, errNoControlPlane
				}
				out, err := p.Backup(ctx, action, name)
				if err != nil {
					return nil, err
				}
				return jsonOutput(out)
			},
		},
	}
}

func jsonOutput(v any) (*kernel.Output, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &kernel.Output{Text: string(b)}, nil
}
