// Package localtools builds the tools toolgate runs itself for one workspace: the file
// tools (read_file, write_file, patch_file, list_files), ask_user, declarative tools
// from <workspace>/.agents/tools/main, the bash and git tools of the shelltool and
// gittool packages, and the control-plane server.* tools. They are ordinary
// *kernel.Tool values: the kernel lists, authorizes and audits them like any other, so
// nothing here decides who may call what. Each tool's Access names exactly the path it
// touches, so grants can be scoped to paths and protected paths stay protected.
//
// Build also applies the narrowing a `toolgate mcp` user asks for (a profile, a --tools
// list); Namer gives the published names of docs/toolgate-mcp.md (toolgate_local_read_file,
// toolgate_server_status, or unprefixed with --tool-prefix none).
package localtools

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Canonical namespaces of the tools built here.
const (
	LocalNamespace  = "local"
	ServerNamespace = "server"
)

// DefaultPrefix is the published prefix of local tools unless --tool-prefix says otherwise.
const DefaultPrefix = "toolgate_local_"

// ServerPrefix is the published prefix of control-plane tools; it never changes.
const ServerPrefix = "toolgate_server_"

// Config says which local tools to build.
type Config struct {
	// Workspace confines every local tool; nil builds the control plane alone.
	Workspace *workspace.Workspace
	// AllowInternet lets bash and declarative tools reach the network.
	AllowInternet bool
	// Profile narrows local tools to a preset set (see Profiles); "" keeps all.
	Profile string
	// Tools narrows local tools to these names (unprefixed, e.g. "read_file"); nil keeps
	// all. Applied after Profile: a tool must pass both.
	Tools []string
	// Extra are tools built elsewhere for the same workspace (bash, git_*); they are
	// filtered like the rest. Their ids must be local.<name>.
	Extra []*kernel.Tool
	// Declarative enables discovering <workspace>/.agents/tools/main/**/*.json. It
	// needs Runner: declarative tools never run unconfined.
	Runner Runner
	// Status adds facts to server.status (for example the confinement in force).
	Status func() map[string]any
	// Version is reported by server.version and server.status.
	Version string
	// Warn receives warnings (invalid declarative tool files); nil writes to os.Stderr.
	Warn io.Writer
	// NoConfined leaves out the tools that run programs (bash, git_*) and the sandbox
	// runner for declarative tools; Extra and Runner are then used as given. For tests
	// of the file tools and for callers that assemble those tools themselves.
	NoConfined bool
	// DisabledReason, when the workspace is nil, says why (reported by server.status).
	DisabledReason string
	// ControlPlane, when set, returns what the control-plane tools report from (the
	// running App); it is called per call, so it may start answering once the App
	// exists. Nil, or a nil result, reports no servers and no clients and refuses
	// backups.
	ControlPlane func() ControlPlane
	// DataDir is toolgate's data directory (store, grants, audit log, keys). Build
	// refuses a workspace that contains it: the tools would let the agent read the keys
	// and rewrite its own grants and the audit log.
	DataDir string
}

func (c *Config) warnf(format string, args ...any) {
	w := c.Warn
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, format, args...)
}

// Profiles lists each profile's local tools. "*" in a set means every declarative tool.
var Profiles = map[string][]string{
	"coding": {"read_file", "write_file", "patch_file", "list_files", "bash", "git_status", "git_diff",
		"git_log", "git_show", "git_add", "git_commit", "git_branch", "git_checkout", "ask_user", "*"},
	"review":  {"read_file", "list_files", "git_status", "git_diff", "git_log", "git_show", "ask_user"},
	"chat":    {"read_file", "list_files", "ask_user"},
	"minimal": {"read_file", "list_files"},
}

// ProfileNames returns the profile names, sorted.
func ProfileNames() []string {
	var ns []string
	for n := range Profiles {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Build assembles the tools for cfg: the server.* control plane always, and, when a
// workspace is set, the local tools that pass the profile and --tools filters.
func Build(cfg Config) ([]*kernel.Tool, error) {
	if cfg.Warn == nil {
		cfg.Warn = os.Stderr
	}
	var local []*kernel.Tool
	if cfg.Workspace != nil && cfg.DataDir != "" {
		in, err := cfg.Workspace.Encloses(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if in {
			return nil, fmt.Errorf("the data directory %s is inside the workspace %s, where the local tools could read its keys and rewrite grants and the audit log; "+
				"give a data directory outside the workspace (--database-dir or TOOLGATE_HOME) or another workspace", cfg.DataDir, cfg.Workspace.Dir())
		}
	}
	if cfg.Workspace != nil {
		if !cfg.NoConfined {
			confined(&cfg, cfg.Workspace)
		}
		local = append(local, fileTools(cfg.Workspace)...)
		local = append(local, askUserTool())
		for _, t := range cfg.Extra {
			if !strings.HasPrefix(t.ID, LocalNamespace+".") {
				return nil, fmt.Errorf("building local tools: extra tool %q is not in namespace %q", t.ID, LocalNamespace)
			}
			local = append(local, t)
		}
		if cfg.Runner != nil {
			reserved := map[string]bool{}
			for _, t := range local {
				reserved[localName(t.ID)] = true
			}
			local = append(local, Declarative(cfg.Workspace, cfg.Runner, reserved, cfg.AllowInternet, cfg.Warn)...)
		}
	}
	filtered, err := filter(local, cfg.Profile, cfg.Tools)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, t := range filtered {
		if seen[t.ID] {
			return nil, fmt.Errorf("building local tools: duplicate tool %q", t.ID)
		}
		seen[t.ID] = true
	}
	return append(filtered, serverTools(cfg, filtered)...), nil
}

func localName(id string) string { return strings.TrimPrefix(id, LocalNamespace+".") }

// filter keeps the tools the profile and the explicit list both allow. Unknown names in
// either are errors, so a typo never silently publishes nothing (or everything).
func filter(tools []*kernel.Tool, profile string, names []string) ([]*kernel.Tool, error) {
	known := map[string]bool{}
	for _, t := range tools {
		known[localName(t.ID)] = true
	}
	keep := func(*kernel.Tool) bool { return true }
	if profile != "" {
		set, ok := Profiles[profile]
		if !ok {
			return nil, fmt.Errorf("unknown tools profile %q (known: %s)", profile, strings.Join(ProfileNames(), ", "))
		}
		in := map[string]bool{}
		for _, n := range set {
			in[n] = true
		}
		prev := keep
		keep = func(t *kernel.Tool) bool {
			if !prev(t) {
				return false
			}
			return in[localName(t.ID)] || (in["*"] && t.Source == "workspace")
		}
	}
	if names != nil {
		in := map[string]bool{}
		for _, n := range names {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			n = strings.TrimPrefix(n, LocalNamespace+".")
			if !known[n] {
				var ks []string
				for k := range known {
					ks = append(ks, k)
				}
				sort.Strings(ks)
				if len(ks) == 0 {
					return nil, fmt.Errorf("--tools names %q but no local tools are available", n)
				}
				return nil, fmt.Errorf("unknown tool %q in --tools (available: %s)", n, strings.Join(ks, ", "))
			}
			in[n] = true
		}
		prev := keep
		keep = func(t *kernel.Tool) bool { return prev(t) && in[localName(t.ID)] }
	}
	var out []*kernel.Tool
	for _, t := range tools {
		if keep(t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// ParsePrefix turns a --tool-prefix value into the prefix used: "none" (any case) means
// unprefixed. A prefix must itself be a valid start of an MCP tool name.
func ParsePrefix(p string) (string, error) {
	if strings.EqualFold(p, "none") {
		return "", nil
	}
	if !prefixRE.MatchString(p) {
		return "", fmt.Errorf("invalid --tool-prefix %q: use letters, digits, '_', '-' or '.', at most 64 characters, or none", p)
	}
	// A prefix that begins a control-plane name would let a workspace's declarative
	// tool (say "escalate" under "toolgate_") take that name; the catalogue would then
	// refuse to open and toolgate mcp would not start in that workspace.
	for _, c := range controlPlaneNames {
		if len(p) < len(c) && strings.HasPrefix(c, p) {
			return "", fmt.Errorf("invalid --tool-prefix %q: it begins the control-plane name %s, so a declarative tool could take that name", p, c)
		}
	}
	if strings.HasPrefix(p, ServerPrefix) {
		return "", fmt.Errorf("invalid --tool-prefix %q: %s is reserved for the control plane", p, ServerPrefix)
	}
	// toolgate_<server>_ begins an upstream server's tools (Namer): a local tool under
	// such a prefix could take one of their names.
	if p != DefaultPrefix && len(p) > len("toolgate_") && strings.HasPrefix(p, "toolgate_") {
		return "", fmt.Errorf("invalid --tool-prefix %q: toolgate_<name>_ is how upstream servers' tools are published", p)
	}
	return p, nil
}

// controlPlaneNames are the published names a local tool's name must never equal.
var controlPlaneNames = []string{ServerPrefix + "status", ServerPrefix + "version", ServerPrefix + "list_servers",
	ServerPrefix + "list_clients", ServerPrefix + "read_state", ServerPrefix + "manage_backup", "toolgate_escalate"}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Namer returns the published-name mapping of `toolgate mcp`: local.<n> becomes
// prefix+<n>, server.<n> becomes toolgate_server_<n>, toolgate.<n> becomes
// toolgate_<n>; any other id, an upstream server's tool <server>.<tool>, becomes
// toolgate_<server>_<tool> (the prefixed style of internal/names), or, unprefixed
// (prefix ""), keeps its canonical id, so two servers' tools of one name never meet.
// It is one-to-one over any catalogue Build produces (declarative names are checked
// against the built-in names, and, when unprefixed, may not start with "toolgate_");
// the kernel checks it again over the whole catalogue.
func Namer(prefix string) func(string) string {
	return func(id string) string {
		switch {
		case strings.HasPrefix(id, LocalNamespace+"."):
			return prefix + id[len(LocalNamespace)+1:]
		case strings.HasPrefix(id, ServerNamespace+"."):
			return ServerPrefix + id[len(ServerNamespace)+1:]
		case strings.HasPrefix(id, "toolgate."):
			return "toolgate_" + id[len("toolgate."):]
		}
		if ns, name, ok := strings.Cut(id, "."); ok && prefix != "" {
			return "toolgate_" + ns + "_" + name
		}
		return id
	}
}
