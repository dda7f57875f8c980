package harness

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func TestAliases(t *testing.T) {
	cases := []struct{ harness, tool, want string }{
		{"claude-code", "files.read", "mcp__toolgate__files_read"},
		{"claude-agent-sdk", "files.read", "mcp__toolgate__files_read"},
		{"codex", "github.create_issue", "mcp__toolgate__github_create_issue"},
		{"deepseek", "files_read", "mcp__toolgate__files_read"},
		{"gemini", "files.read", "mcp_toolgate_files.read"},
		{"gemini", "a b", "mcp_toolgate_a_b"},
		{"opencode", "files.read", "toolgate_files_read"},
		{"pi", "files.read", "toolgate_files_read"},
		{"goose", "files_read", "toolgate__files_read"},
		{"vscode", "files_read", "mcp_toolgate_files_read"},
		{"cursor", "files_read", "files_read"},
		{"claude-desktop", "files_read", "files_read"},
	}
	for _, c := range cases {
		h, _ := Lookup(c.harness)
		if got := h.Names.Alias("toolgate", c.tool); got != c.want {
			t.Errorf("%s alias of %s = %s; want %s", c.harness, c.tool, got, c.want)
		}
	}
}

var providerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// TestShortFormsFitEveryHarness checks, for hostile and ordinary ids on every harness,
// that the published name satisfies the rule, is stable, and that ids the harness
// accepts are published unchanged.
func TestShortFormsFitEveryHarness(t *testing.T) {
	ids := []string{
		"files.read", "local.read_file", "toolgate.escalate", "a", "x.y.z",
		"github." + strings.Repeat("create_pull_request_review_", 5),
		"ns.tool/with/slashes", "ns.ünïcødé", "ns.tool name with spaces", "ns.\x00nul", "...", "-.-",
		strings.Repeat("x", 300),
	}
	for _, h := range All() {
		for _, server := range []string{"toolgate", "tg", strings.Repeat("s", 32)} {
			for _, id := range ids {
				pub := h.Names.Published(server, id)
				if h.Names.Problem(server, id) == "" && pub != id {
					t.Errorf("%s: acceptable id %q renamed to %q", h.ID, id, pub)
				}
				if pub != id {
					if p := h.Names.Problem(server, pub); p != "" && len(server) < 32 {
						t.Errorf("%s/%s: short form %q of %q still %s", h.ID, server, pub, id, p)
					}
					if !providerName.MatchString(pub) {
						t.Errorf("%s: short form %q is not a safe name", h.ID, pub)
					}
					if again := h.Names.Published(server, id); again != pub {
						t.Errorf("%s: short form not stable: %q then %q", h.ID, pub, again)
					}
				}
			}
		}
	}
}

func TestClaudeCodeBudgetCountsItsPrefix(t *testing.T) {
	h, _ := Lookup("claude-code")
	// mcp__toolgate__ is 15 characters, so a 49-character id fits and a 50 does not.
	fits := "n." + strings.Repeat("a", 47)
	over := "n." + strings.Repeat("a", 48)
	if p := h.Names.Problem("toolgate", fits); p != "" {
		t.Errorf("49-character id rejected: %s", p)
	}
	if h.Names.Problem("toolgate", over) == "" {
		t.Error("50-character id accepted although mcp__toolgate__ makes it 65")
	}
	pub := h.Names.Published("toolgate", over)
	if a := h.Names.Alias("toolgate", pub); len(a) != 64 {
		t.Errorf("short form alias %q is %d characters; want the full 64 used", a, len(a))
	}
}

func TestNamerRecordsRenamesAndIsSafeConcurrently(t *testing.T) {
	h, _ := Lookup("cursor")
	n := h.Namer("")
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n.Name(fmt.Sprintf("ns.tool%d", i%4))
			n.Name("plain_name")
		}(i)
	}
	wg.Wait()
	rs := n.Renames()
	if len(rs) != 4 {
		t.Fatalf("renames = %+v", rs)
	}
	for _, r := range rs {
		if !strings.HasPrefix(r.Published, "ns_tool") || r.Alias != r.Published || !strings.Contains(r.Reason, "'.'") {
			t.Errorf("rename %+v", r)
		}
	}
}

func TestCheckReportsCollisions(t *testing.T) {
	cc, _ := Lookup("claude-code")
	// Claude Code shows files.read and files_read under one name.
	fs := cc.Check("toolgate", []string{"files.read", "files_read", "other.tool"})
	if len(fs) != 1 || fs[0].Renamed || !strings.Contains(fs[0].Reason, "same name") {
		t.Errorf("findings = %v", fs)
	}
	// A canonical id equal to another id's short form.
	cu, _ := Lookup("cursor")
	short := cu.Names.Published("toolgate", "a.b")
	fs = cu.Check("toolgate", []string{"a.b", short})
	var dup bool
	for _, f := range fs {
		if strings.Contains(f.Reason, "also the name of") {
			dup = true
		}
	}
	if !dup {
		t.Errorf("collision with a short form not reported: %v", fs)
	}
	// A server name too long leaves no room on Cursor.
	fs = cu.Check(strings.Repeat("s", 59), []string{"ab"})
	if len(fs) == 0 || fs[len(fs)-1].Renamed {
		t.Errorf("impossible budget not reported: %v", fs)
	}
	if len(cc.Check("toolgate", []string{"files.read", "local.read_file"})) != 0 {
		t.Error("Claude Code findings for ordinary ids")
	}
}
