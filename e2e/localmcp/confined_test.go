package localmcp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

const secretValue = "tg-e2e-secret-4f9a1c"

// bash and declarative tools run in the sandbox: in the workspace, without toolgate's
// environment, unable to touch what lies outside.
func TestBashAndDeclarativeToolsConfined(t *testing.T) {
	w := newWorld(t)
	decl := filepath.Join(w.ws, ".agents", "tools", "main")
	os.MkdirAll(decl, 0o755)
	os.WriteFile(filepath.Join(decl, "say.json"), []byte(`{"name":"say","description":"Echo one word",
	 "inputSchema":{"type":"object","additionalProperties":false,"required":["word"],"properties":{"word":{"type":"string"}}},
	 "command":["echo","{{word}}"],"readOnly":true}`), 0o644)
	env := append(baseEnv(t), "TOOLGATE_TOKEN="+secretValue, "AWS_SECRET_ACCESS_KEY="+secretValue)
	s := startArgs(t, env, testenv.Binary(t), "mcp", "--workspace", w.ws, "--database-dir", w.data)
	names := s.names()
	for _, n := range []string{"toolgate_local_bash", "toolgate_local_say"} {
		if !slices.Contains(names, n) {
			t.Fatalf("catalogue lacks %s (sandbox unavailable?): %v\nstderr: %s", n, names, s.stderr.String())
		}
	}
	r := s.call("toolgate_local_bash", map[string]any{"command": "echo hi; pwd; env"})
	if r.isError || !strings.Contains(r.text, "hi") || !strings.Contains(r.text, w.ws) {
		t.Errorf("bash = %+v", r)
	}
	if strings.Contains(r.text, secretValue) {
		t.Errorf("bash saw toolgate's environment: %s", r.text)
	}
	r = s.call("toolgate_local_bash", map[string]any{"command": "cat ../secret; echo pwned > ../pwned; echo x > ../secret; ln -s /etc/passwd escaped"})
	if strings.Contains(r.text, "outside secret") {
		t.Errorf("bash read outside the workspace: %s", r.text)
	}
	w.unchanged(t)
	// A link bash made is still refused by the file tools.
	s.refused(pRead, map[string]any{"path": "escaped"}, "path_outside_workspace")

	if got := s.ok("toolgate_local_say", map[string]any{"word": "$(id) ; rm -rf /"}); !strings.Contains(got, "$(id) ; rm -rf /\n") {
		t.Errorf("say = %q", got)
	}
	r = s.call("toolgate_local_say", map[string]any{"word": "--help"})
	if !r.isError || r.code != "invalid_arguments" {
		t.Errorf("option-looking value = %+v", r)
	}
	if st := s.ok("toolgate_server_status", map[string]any{}); !strings.Contains(st, `"confinement"`) {
		t.Errorf("status lacks confinement: %s", st)
	}
}
