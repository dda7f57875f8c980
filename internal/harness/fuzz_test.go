package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzMerge feeds arbitrary existing-file content to every harness's merge. Invariant:
// a documented error, or a result that parses and holds toolgate's entry — never a
// panic or a hang.
func FuzzMerge(f *testing.F) {
	for _, name := range []string{"json.json", "jsonc.json", "config.toml", "goose.yaml", "cordis.patch.yml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "existing", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"{", "{}", `{"mcpServers":{"toolgate":1}}`, "[mcp_servers.toolgate]\nx=1\n[mcp_servers.toolgate]\n",
		"\"\"\"\n[mcp_servers.toolgate]", "extensions:\n  toolgate: [", "- insert: 3", "// c\n{/*", "\xff\xfe", "{\"a\":\"\\\"}\"}"} {
		f.Add([]byte(s))
	}
	hs := All()
	f.Fuzz(func(t *testing.T, existing []byte) {
		for _, h := range hs {
			if h.NoConnect {
				continue
			}
			out, err := h.Merge(existing, stdioServer)
			if err != nil {
				continue
			}
			if _, err := h.Entry(out, "toolgate"); err != nil {
				t.Fatalf("%s: merge succeeded but the result does not read back: %v\ninput %q\noutput %q", h.ID, err, existing, out)
			}
		}
	})
}

func TestTrailingTextIsRefused(t *testing.T) {
	h, _ := Lookup("claude-code")
	for _, in := range []string{"{}A", "{}\v", "{} {}", "{}\n//x"} {
		if _, err := h.Merge([]byte(in), stdioServer); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
