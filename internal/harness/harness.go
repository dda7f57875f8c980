package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// DefaultServerName is the key toolgate's entry uses in every harness file.
const DefaultServerName = "toolgate"

// Server is how a harness reaches toolgate: either a command it spawns (stdio) or a
// Streamable HTTP URL with headers. Exactly one of Command and URL is set.
type Server struct {
	// Name is the server's key in the harness file; harnesses namespace tool names
	// under it. Empty means DefaultServerName.
	Name string
	// Command and Args start toolgate over stdio (absolute binary path recommended).
	Command string
	Args    []string
	// URL is a Streamable HTTP endpoint; Headers go with every request (normally
	// Authorization: Bearer <execution token>).
	URL     string
	Headers map[string]string
}

// ServerName returns Name or the default.
func (s Server) ServerName() string {
	if s.Name == "" {
		return DefaultServerName
	}
	return s.Name
}

// IsHTTP reports whether the server is reached over Streamable HTTP.
func (s Server) IsHTTP() bool { return s.URL != "" }

// bearer returns the token in an "Authorization: Bearer X" header, if any.
func (s Server) bearer() (string, bool) {
	for k, v := range s.Headers {
		if strings.EqualFold(k, "authorization") && strings.HasPrefix(v, "Bearer ") {
			return strings.TrimPrefix(v, "Bearer "), true
		}
	}
	return "", false
}

// Validate rejects a Server that no harness file could express.
func (s Server) Validate() error {
	if (s.Command == "") == (s.URL == "") {
		return errors.New("harness: a server needs exactly one of a command (stdio) or a URL (HTTP)")
	}
	if err := validServerName(s.ServerName()); err != nil {
		return err
	}
	if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
		return fmt.Errorf("harness: URL %q must start with http:// or https://", s.URL)
	}
	for k, v := range s.Headers {
		if k == "" || strings.ContainsAny(k, ":\r\n") || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("harness: header %q is not a valid HTTP header", k)
		}
	}
	return nil
}

// validServerName keeps server names inside what every harness accepts as a key and as
// a tool-name namespace: 1-32 of [A-Za-z0-9_-], not starting with "-" and without "__"
// (which Claude Code and Codex use as their own separator).
func validServerName(n string) error {
	if n == "" || len(n) > 32 {
		return fmt.Errorf("harness: server name %q must be 1-32 characters", n)
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("harness: server name %q may only use letters, digits, '_' and '-'", n)
		}
	}
	if strings.HasPrefix(n, "-") || strings.Contains(n, "__") {
		return fmt.Errorf("harness: server name %q must not start with '-' or contain \"__\"", n)
	}
	return nil
}

// Format is the syntax of a harness file.
type Format string

const (
	FormatJSON  Format = "json"
	FormatJSONC Format = "jsonc" // JSON that may carry // and /* */ comments
	FormatTOML  Format = "toml"
	FormatYAML  Format = "yaml"
)

// Harness is one supported harness: its file, how toolgate's entry looks in it, how it
// names tools, and how `toolgate run` points it at a file.
type Harness struct {
	// ID is what users type: "claude-code", "codex", ….
	ID string
	// Title is the product name for messages.
	Title string
	// FileName is the file's conventional name (".mcp.json", "config.toml", …).
	FileName string
	Format   Format
	// DefaultPath is the file `toolgate connect` edits when --file is not given; the
	// text form is in PathDoc.
	DefaultPath func() (string, error)
	PathDoc     string
	// ProjectFile is the workspace-relative file a project of this harness configures
	// it with ("" when it has none). Such files start servers or hooks the next time the
	// harness starts there, so internal/protect protects every one (a test checks it).
	ProjectFile string
	// StdioOnly harnesses read only command-started servers from this file.
	StdioOnly bool
	// NoConnect marks outputs that are not a file a harness reads from disk (the Agent
	// SDK's options are passed in code).
	NoConnect bool
	// Names is the harness's tool naming rule.
	Names NameRule
	// render builds a complete file holding only toolgate's entry.
	render func(Server) ([]byte, error)
	// merge puts toolgate's entry into an existing file's content.
	merge func(existing []byte, s Server) ([]byte, error)
	// parse reads a file back and returns toolgate's entry as generic data (tests and
	// connect's self-check use it).
	parse func(content []byte, name string) (map[string]any, error)
	// launch points a harness command line at a connection file (toolgate run); nil
	// when the harness cannot be launched that way.
	launch func(argv []string, file string, s Server) (Launch, error)
	// LaunchDoc says how launch points the harness at the file.
	LaunchDoc string
}

// Launch is a harness command line rewritten to use a connection file.
type Launch struct {
	Args []string
	// Env are extra KEY=VALUE entries for the harness process.
	Env []string
}

// Render returns the complete connection file for s.
func (h *Harness) Render(s Server) ([]byte, error) {
	if err := h.check(s); err != nil {
		return nil, err
	}
	return h.render(s)
}

// Merge returns existing with toolgate's entry added or replaced; every other byte that
// the format lets us keep is kept. Empty existing content yields Render's output.
func (h *Harness) Merge(existing []byte, s Server) ([]byte, error) {
	if err := h.check(s); err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(existing))) == 0 {
		return h.render(s)
	}
	return h.merge(existing, s)
}

// Entry parses content and returns toolgate's entry under name, or an error when the
// file does not parse or holds no such entry.
func (h *Harness) Entry(content []byte, name string) (map[string]any, error) {
	return h.parse(content, name)
}

// Launch rewrites argv so the harness reads the connection file at file.
func (h *Harness) Launch(argv []string, file string, s Server) (Launch, error) {
	if h.launch == nil {
		return Launch{}, fmt.Errorf("harness: %s is an application, not a command toolgate run can start; use `toolgate connect %s`", h.Title, h.ID)
	}
	if len(argv) == 0 {
		return Launch{}, errors.New("harness: no command to run")
	}
	return h.launch(argv, file, s)
}

// CanLaunch reports whether toolgate run supports this harness.
func (h *Harness) CanLaunch() bool { return h.launch != nil }

func (h *Harness) check(s Server) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if h.StdioOnly && s.IsHTTP() {
		return fmt.Errorf("harness: %s reads only command-started (stdio) servers from %s; use --stdio", h.Title, h.FileName)
	}
	return nil
}

var registry = map[string]*Harness{}

func register(h *Harness) *Harness {
	if _, dup := registry[h.ID]; dup {
		panic("harness: duplicate id " + h.ID)
	}
	registry[h.ID] = h
	return h
}

// Lookup returns the harness with the given id (case-insensitive).
func Lookup(id string) (*Harness, error) {
	if h, ok := registry[strings.ToLower(strings.TrimSpace(id))]; ok {
		return h, nil
	}
	return nil, fmt.Errorf("harness: unknown harness %q (known: %s)", id, strings.Join(IDs(), ", "))
}

// IDs lists every harness id, sorted.
func IDs() []string {
	ids := make([]string, 0, len(registry))
	for id := range registry {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// All returns every harness, sorted by id.
func All() []*Harness {
	out := make([]*Harness, 0, len(registry))
	for _, id := range IDs() {
		out = append(out, registry[id])
	}
	return out
}

// homePath joins parts under the user's home directory.
func homePath(parts ...string) func() (string, error) {
	return func() (string, error) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the home directory: %w", err)
		}
		return filepath.Join(append([]string{home}, parts...)...), nil
	}
}

// cwdPath joins parts under the current directory.
func cwdPath(parts ...string) func() (string, error) {
	return func() (string, error) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("finding the current directory: %w", err)
		}
		return filepath.Join(append([]string{wd}, parts...)...), nil
	}
}

// configHomePath joins parts under $XDG_CONFIG_HOME (default ~/.config).
func configHomePath(parts ...string) func() (string, error) {
	return func() (string, error) {
		base := os.Getenv("XDG_CONFIG_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("finding the home directory: %w", err)
			}
			base = filepath.Join(home, ".config")
		}
		return filepath.Join(append([]string{base}, parts...)...), nil
	}
}

// claudeDesktopPath is where Claude Desktop keeps claude_desktop_config.json.
func claudeDesktopPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the home directory: %w", err)
	}
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json"), nil
	case "windows":
		if ad := os.Getenv("APPDATA"); ad != "" {
			return filepath.Join(ad, "Claude", "claude_desktop_config.json"), nil
		}
	}
	return configHomePath("Claude", "claude_desktop_config.json")()
}
