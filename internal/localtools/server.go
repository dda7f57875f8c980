package localtools

import (
	"context"
	"encoding/json"
	"runtime"
	"sort"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
)

var emptySchema = mustJSON(map[string]any{
	"$schema":              "https://json-schema.org/draft/2020-12/schema",
	"type":                 "object",
	"additionalProperties": false,
	"properties":           map[string]any{},
})

// serverTools are the control plane: facts about this toolgate process, read-only.
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
				st := map[string]any{
					"version":        version,
					"go":             runtime.Version(),
					"started":        started.Format(time.RFC3339),
					"local_tools":    names,
					"allow_internet": cfg.AllowInternet,
					"servers":        []any{},
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
			Description: "List the upstream MCP servers this toolgate hosts and their states. " +
				"toolgate mcp hosts none yet, so the list is empty.",
			InputSchema: emptySchema,
			Annotations: ro,
			Source:      "toolgate",
			Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
				return jsonOutput(map[string]any{"servers": []any{}})
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
