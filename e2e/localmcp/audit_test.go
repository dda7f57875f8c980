package localmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAuditHoldsWhatDocsAuditSays checks docs/audit.md ("What the trail holds in
// clear") against the trail a real `toolgate mcp` writes: the normalised resource is
// recorded in clear (path:notes/plan.md, whatever the spelling the caller used), every
// argument value only as its HMAC, so a file body, a search pattern and the caller's
// own spelling of a path (./notes//./plan.md) appear in no file of the data directory.
func TestAuditHoldsWhatDocsAuditSays(t *testing.T) {
	w := newWorld(t)
	s := w.start(t)
	const body, pattern = "BODY-CANARY-91c2", "*PATTERN-CANARY-5d7e*"
	spelled := "./notes//./plan.md"
	s.ok(pWrite, map[string]any{"path": spelled, "content": body})
	s.ok(pList, map[string]any{"path": "notes", "pattern": pattern})
	s.session.Close()

	cmd := exec.Command(testenv.Binary(t), "audit", "--json", "--data-dir", w.data)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolgate audit: %v\n%s", err, errb.String())
	}
	var write, list *audit.Event
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch e.Tool {
		case "local.write_file":
			write = &e
		case "local.list_files":
			list = &e
		}
	}
	if write == nil || list == nil {
		t.Fatalf("no write/list events in\n%s", out.String())
	}
	if write.Resource != "path:notes/plan.md" || list.Resource != "path:notes" {
		t.Errorf("resources %q, %q; docs/audit.md says the normalised resource is kept in clear", write.Resource, list.Resource)
	}

	st, err := store.Open(context.Background(), w.data)
	if err != nil {
		t.Fatal(err)
	}
	key, err := st.Key(context.Background(), "audit-hmac")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := audit.HashArgs(key, map[string]any{"path": spelled, "content": body})
	if write.Args["path"] != want["path"] || write.Args["content"] != want["content"] {
		t.Errorf("write args %v, want the HMACs %v", write.Args, want)
	}
	if got := audit.HashArgs(key, map[string]any{"pattern": pattern})["pattern"]; list.Args["pattern"] != got {
		t.Errorf("list pattern arg %q, want the HMAC %q", list.Args["pattern"], got)
	}

	entries, err := os.ReadDir(w.data)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		b, err := os.ReadFile(filepath.Join(w.data, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"BODY-CANARY", "PATTERN-CANARY", "notes//./plan"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %q in clear", ent.Name(), secret)
			}
		}
	}
}
