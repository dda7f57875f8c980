package localmcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/testenv"
)

// harnessConfig is one server entry as a harness reads it.
type harnessConfig struct {
	name    string
	command string
	args    []string
}

var fence = regexp.MustCompile("(?s)```(json|yaml)\n(.*?)```")

// docConfigs extracts the harness configuration examples from the README, so
// the documentation is exactly what is tested.
func docConfigs(t *testing.T) []harnessConfig {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []harnessConfig
	for _, m := range fence.FindAllStringSubmatch(string(doc), -1) {
		switch {
		case m[1] == "json" && strings.Contains(m[2], "mcpServers"):
			var c struct {
				MCPServers map[string]struct {
					Command string   `json:"command"`
					Args    []string `json:"args"`
				} `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(m[2]), &c); err != nil {
				t.Fatalf("doc JSON example: %v\n%s", err, m[2])
			}
			for n, s := range c.MCPServers {
				out = append(out, harnessConfig{"json:" + n, s.Command, s.Args})
			}
		case m[1] == "yaml" && strings.Contains(m[2], "extensions:"):
			var c struct {
				Extensions map[string]struct {
					Enabled bool     `yaml:"enabled"`
					Type    string   `yaml:"type"`
					Cmd     string   `yaml:"cmd"`
					Args    []string `yaml:"args"`
				} `yaml:"extensions"`
			}
			if err := yaml.Unmarshal([]byte(m[2]), &c); err != nil {
				t.Fatalf("doc YAML example: %v\n%s", err, m[2])
			}
			for n, e := range c.Extensions {
				if !e.Enabled || e.Type != "stdio" {
					t.Errorf("goose example %s: enabled=%v type=%q", n, e.Enabled, e.Type)
				}
				out = append(out, harnessConfig{"goose:" + n, e.Cmd, e.Args})
			}
		}
	}
	return out
}

// TestHarnessConfigExamples starts each documented configuration the way its harness
// would (command + args, from a directory that is not the workspace) and checks the
// published names: prefixed by default, unprefixed with --tool-prefix none.
func TestHarnessConfigExamples(t *testing.T) {
	cfgs := docConfigs(t)
	if len(cfgs) != 3 {
		t.Fatalf("found %d harness examples in README.md, want 3 (Claude Desktop, Cursor, Goose)", len(cfgs))
	}
	unprefixed := 0
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			if c.command != "toolgate" {
				t.Fatalf("command = %q, want toolgate", c.command)
			}
			w := newWorld(t)
			args := slices.Clone(c.args)
			for i, a := range args {
				if a == "/path/to/my-project" {
					args[i] = w.ws
				}
			}
			if !slices.Contains(args, w.ws) {
				t.Fatalf("example has no /path/to/my-project workspace: %v", c.args)
			}
			s := startArgs(t, baseEnv(t), testenv.Binary(t), args...)
			names := s.names()
			want, notWant := "toolgate_local_read_file", "read_file"
			if slices.Contains(args, "none") {
				want, notWant = notWant, want
				unprefixed++
			}
			if !slices.Contains(names, want) || slices.Contains(names, notWant) || !slices.Contains(names, "toolgate_server_status") {
				t.Errorf("names = %v; want %s and not %s", names, want, notWant)
			}
			if got := s.ok(want, map[string]any{"path": "README.md"}); got != "one\ntwo\nthree\n" {
				t.Errorf("read through %s = %q", want, got)
			}
		})
	}
	if unprefixed != 1 {
		t.Errorf("%d examples use --tool-prefix none, want 1 (Cursor)", unprefixed)
	}
}
