package names_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/harness"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/names"
)

// builtins are the tools every registry starts with in these tests: the control plane
// and the local tools toolgate publishes itself.
var builtins = []string{
	"toolgate.escalate", "server.status", "server.version", "server.list_servers",
	"server.read_state", "server.list_clients", "server.manage_backup",
	"local.read_file", "local.write_file", "local.patch_file", "local.list_files", "local.bash",
	"local.git_status", "local.ask_user",
}

func registry(t testing.TB, more ...string) *names.Registry {
	t.Helper()
	r := names.New(names.Options{})
	if refused := r.AddAll(append(append([]string{}, builtins...), more...)); refused != nil {
		t.Fatalf("setup refused: %v", refused)
	}
	return r
}

func TestDefaultSurfacesMatchLocaltools(t *testing.T) {
	pre, none := localtools.Namer(localtools.DefaultPrefix), localtools.Namer("")
	s := names.DefaultSurfaces()
	for _, id := range builtins {
		if got, want := s[1].Publish(id), pre(id); got != want {
			t.Errorf("%s: prefixed %q, localtools %q", id, got, want)
		}
		if got, want := s[2].Publish(id), none(id); got != want {
			t.Errorf("%s: unprefixed %q, localtools %q", id, got, want)
		}
	}
	// Upstream tools: unprefixed, localtools publishes them canonically, as the
	// unprefixed surface does; prefixed, in the toolgate_<ns>_<name> style.
	if got := s[2].Publish("github.create_issue"); got != none("github.create_issue") {
		t.Errorf("unprefixed upstream form %q", got)
	}
	if got, want := s[1].Publish("github.create_issue"), pre("github.create_issue"); got != "toolgate_github_create_issue" || got != want {
		t.Errorf("prefixed upstream form %q, localtools %q", got, want)
	}
}

func TestForms(t *testing.T) {
	r := names.New(names.Options{})
	have := map[string]string{}
	for _, f := range r.Forms("github.create_issue") {
		have[names.Key(f.Name)] = f.Surface
	}
	for name, surface := range map[string]string{
		"github.create_issue":                         names.SurfaceCanonical,
		"toolgate_github_create_issue":                names.SurfacePrefixed,
		"mcp__toolgate__github_create_issue":          "claude-agent-sdk display name",
		"mcp__toolgate__toolgate_github_create_issue": "claude-agent-sdk display name",
		"mcp_toolgate_github.create_issue":            "gemini display name",
		"mcp_toolgate_github_create_issue_e877a647":   "vscode display name",
		"github_create_issue_e877a647":                "claude-desktop short form",
	} {
		if have[names.Key(name)] != surface {
			t.Errorf("form %s: surface %q, want %q", name, have[names.Key(name)], surface)
		}
	}
	// A name a harness rejects gets its short form, which is also a name.
	long := "srv." + strings.Repeat("very_long_tool_name_", 4)
	var shorts int
	for _, f := range r.Forms(long) {
		if strings.HasSuffix(f.Surface, "short form") {
			shorts++
		}
	}
	if shorts == 0 {
		t.Errorf("no short forms for %s", long)
	}
}

func TestShadowing(t *testing.T) {
	for _, tc := range []struct {
		newcomer string
		holder   string // "" when it must be accepted
		bare     string // the holder when upstream tools are also published bare (BareUpstream)
	}{
		// What a local tool is called under --tool-prefix none, in any spelling.
		{"read.file", "local.read_file", "local.read_file"},
		{"READ.FILE", "local.read_file", "local.read_file"},
		{"read.File", "local.read_file", "local.read_file"},
		{"evil_read.file", "", ""},
		{"evil.read_file", "", "local.read_file"}, // evil.read_file, never read_file, unless published bare
		{"evil.toolgate_local_read_file", "", "local.read_file"},
		// The control plane.
		{"toolgate_server.status", "server.status", "server.status"},
		{"evil.toolgate_escalate", "", "toolgate.escalate"},
		{"evil.Toolgate_Escalate", "", "toolgate.escalate"},
		{"evil.toolgate.escalate", "", "toolgate.escalate"},
		{"evil.toolgate_server_status", "", "server.status"},
		// Published bare, "escalate" is what opencode shows as toolgate_escalate: the name
		// toolgate's own instructions give the control plane's escalate tool.
		{"evil.escalate", "", "toolgate.escalate"},
		// Lookalikes and hidden characters.
		{"read.fil\u0435", "local.read_file", "local.read_file"},     // Cyrillic е
		{"re\u0430d.file", "local.read_file", "local.read_file"},     // Cyrillic а
		{"ｒｅａｄ.file", "local.read_file", "local.read_file"},          // fullwidth
		{"read.\u200bfile", "local.read_file", "local.read_file"},    // zero width space
		{"read.fi\u00adle", "local.read_file", "local.read_file"},    // soft hyphen
		{"\U0001D42Bead.file", "local.read_file", "local.read_file"}, // mathematical bold r
		{"read.file\u2060", "local.read_file", "local.read_file"},    // word joiner
		// Another server's tool.
		{"github_create.issue", "github.create_issue", "github.create_issue"},
		{"toolgate_github.create_issue", "github.create_issue", "github.create_issue"},
		{"github.Create_Issue", "github.create_issue", "github.create_issue"},
		{"gh.toolgate_github_create_issue", "", "github.create_issue"},
		{"github.create-issue", "", ""}, // '-' is kept by every harness: a different name
		{"gitlab.create_issue", "", "github.create_issue"},
		{"github.create_issues", "", ""},
	} {
		for _, bare := range []bool{false, true} {
			want := tc.holder
			if bare {
				want = tc.bare
			}
			r := names.New(names.Options{BareUpstream: bare})
			if refused := r.AddAll(append(append([]string{}, builtins...), "github.create_issue")); refused != nil {
				t.Fatal(refused)
			}
			err := r.Add(tc.newcomer)
			if want == "" {
				if err != nil {
					t.Errorf("bare=%v: %s refused: %v", bare, tc.newcomer, err)
				}
				continue
			}
			var re *names.RefusedError
			if !errors.As(err, &re) {
				t.Errorf("bare=%v: %s accepted, want a collision with %s", bare, tc.newcomer, want)
				continue
			}
			c := re.Collisions[0]
			if c.Newcomer != tc.newcomer || c.Holder != want {
				t.Errorf("bare=%v: %s: collision %+v, want holder %s", bare, tc.newcomer, c, want)
			}
			msg := err.Error()
			if !strings.Contains(msg, want+" keeps the name") || !strings.Contains(msg, "is refused") {
				t.Errorf("%s: message %q", tc.newcomer, msg)
			}
			// The holder keeps its name; nothing of the newcomer was registered.
			if id, _, ok := r.Resolve(c.HolderForm.Name); !ok || id != want {
				t.Errorf("%s: holder lost its name: %q %v", tc.newcomer, id, ok)
			}
			for _, f := range r.Forms(tc.newcomer) {
				if id, _, ok := r.Resolve(f.Name); ok && id == tc.newcomer {
					t.Errorf("%s: a refused newcomer holds %s", tc.newcomer, f)
				}
			}
		}
	}
}

func TestCollisionNamesBoth(t *testing.T) {
	r := registry(t)
	err := r.Add("read.File")
	want := `read.File would be published as "read.File" (canonical id), which reads as ` +
		`"read_file" (toolgate mcp --tool-prefix none) of local.read_file (a local tool): local.read_file keeps the name and read.File is refused`
	if err == nil || err.Error() != "names: "+want {
		t.Errorf("error:\n%v\nwant\nnames: %s", err, want)
	}
	err = r.Add("evil.\u202eelif_daer")
	if err != nil {
		t.Fatalf("a bidi name with no collision was refused: %v", err)
	}
	err = r.Add("evil.\u202eelif_daer2\u200b")
	if err != nil && strings.ContainsRune(err.Error(), 0x202E) {
		t.Errorf("a message carries a raw bidi control: %q", err)
	}
}

func TestBatchOrderIsDeterministic(t *testing.T) {
	for _, order := range [][]string{{"s.Foo", "s.foo", "s.FOO"}, {"s.foo", "s.FOO", "s.Foo"}} {
		r := names.New(names.Options{})
		refused := r.AddAll(order)
		if len(refused) != 2 || refused["s.Foo"] == nil || refused["s.foo"] == nil || refused["s.FOO"] != nil {
			t.Errorf("order %v: refused %v", order, refused)
		}
		if ids := r.IDs(); len(ids) != 1 || ids[0] != "s.FOO" {
			t.Errorf("order %v: kept %v, want the byte-order first s.FOO", order, ids)
		}
	}
}

func TestRemoveFreesNames(t *testing.T) {
	r := registry(t, "github.create_issue", "github.list_issues")
	if err := r.Add("github_create.issue"); err == nil {
		t.Fatal("no collision")
	}
	if got := r.RemoveNamespace("github"); len(got) != 2 || got[0] != "github.create_issue" {
		t.Fatalf("RemoveNamespace = %v", got)
	}
	if err := r.Add("github_create.issue"); err != nil {
		t.Fatalf("after removal: %v", err)
	}
	if !r.Remove("github_create.issue") || r.Remove("github_create.issue") {
		t.Error("Remove reports wrongly")
	}
	if _, _, ok := r.Resolve("toolgate_github_create_issue"); ok {
		t.Error("a removed tool still resolves")
	}
	if err := r.Add("local.read_file"); err != nil {
		t.Errorf("re-adding a registered id: %v", err)
	}
	if err := r.Add("nonamespace"); !errors.Is(err, names.ErrInvalidID) {
		t.Errorf("invalid id: %v", err)
	}
	if _, err := r.Check(".x"); !errors.Is(err, names.ErrInvalidID) {
		t.Errorf("invalid id: %v", err)
	}
}

func TestOthers(t *testing.T) {
	r := registry(t, "github.create_issue", "slack.post_message")
	tools, ns := r.Others("github")
	if tools["toolgate_slack_post_message"] != "slack.post_message" || tools["toolgate_local_read_file"] != "local.read_file" || tools["read_file"] != "local.read_file" {
		t.Errorf("Others(github) tools lack expected names: %d entries", len(tools))
	}
	for name, id := range tools {
		if strings.HasPrefix(id, "github.") {
			t.Errorf("Others(github) includes github's own %s", name)
		}
	}
	if fmt.Sprint(ns) != "[local server slack toolgate]" {
		t.Errorf("namespaces %v", ns)
	}
}

func TestConcurrentAdds(t *testing.T) {
	r := registry(t)
	var wg sync.WaitGroup
	results := make([]error, 16)
	for i := range results {
		wg.Go(func() { results[i] = r.Add(fmt.Sprintf("s%d.same_tool", i%2) + strings.Repeat("", i)) })
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		if err == nil {
			ok++
		}
	}
	if ok != 16 { // s0.same_tool and s1.same_tool do not collide; re-adds are no-ops
		t.Errorf("%d of 16 adds succeeded", ok)
	}
	if err := r.Add("s0_same.tool"); err == nil {
		t.Error("no collision with s0.same_tool")
	}
}

// TestHarnessDisplayCollision: two names that differ only in what a harness rewrites
// meet in its display name even when no other form matches.
func TestHarnessDisplayCollision(t *testing.T) {
	h, err := harness.Lookup("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	r := names.New(names.Options{Surfaces: names.DefaultSurfaces()[:1], Harnesses: []*harness.Harness{h}})
	if err := r.Add("a.b:c"); err != nil {
		t.Fatal(err)
	}
	err = r.Add("a.b;c")
	var re *names.RefusedError
	if !errors.As(err, &re) || re.Collisions[0].Holder != "a.b:c" {
		t.Fatalf("b;c vs b:c: %v", err)
	}
}
