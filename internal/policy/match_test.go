package policy

import (
	"errors"
	"testing"
)

func mustCompile(t *testing.T, gs ...Grant) *Set {
	t.Helper()
	s, err := Compile(gs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func allow(id, principal, tool, action, res string) Grant {
	return Grant{ID: id, Principal: principal, Tool: tool, Action: action, Resource: res, Effect: Allow}
}

func deny(id, principal, tool, action, res string) Grant {
	g := allow(id, principal, tool, action, res)
	g.Effect = Deny
	return g
}

func TestDecideDefaultDeny(t *testing.T) {
	s := mustCompile(t)
	d := s.Decide(Request{Principal: "p", Tool: "files.read", Action: "read", Resource: "path:a"})
	if d.Allowed || d.Reason != ReasonNoGrant || d.Grant != nil {
		t.Errorf("empty set decided %+v, want no_matching_grant", d)
	}
}

func TestDecideToolPatterns(t *testing.T) {
	cases := []struct {
		pattern, tool string
		want          bool
	}{
		{"*", "files.read", true},
		{"files.*", "files.read", true},
		{"files.*", "filesx.read", false},
		{"files.*", "files", false},
		{"files.read", "files.read", true},
		{"files.read", "files.readx", false},
		{"files.read", "files.write", false},
	}
	for _, c := range cases {
		s := mustCompile(t, allow("g1", "p", c.pattern, "*", ""))
		got := s.Decide(Request{Principal: "p", Tool: c.tool, Action: "read"}).Allowed
		if got != c.want {
			t.Errorf("pattern %q tool %q: allowed=%v, want %v", c.pattern, c.tool, got, c.want)
		}
	}
}

func TestDecidePrincipalAndAction(t *testing.T) {
	s := mustCompile(t, allow("g1", "alice", "files.*", "read", ""), allow("g2", "*", "echo.say", "execute", ""))
	cases := []struct {
		principal, tool, action string
		want                    bool
		grant                   string
	}{
		{"alice", "files.read", "read", true, "g1"},
		{"alice", "files.read", "write", false, ""},
		{"bob", "files.read", "read", false, ""},
		{"bob", "echo.say", "execute", true, "g2"},
		{"alice", "echo.say", "execute", true, "g2"},
		{"alice", "echo.say", "read", false, ""},
	}
	for _, c := range cases {
		d := s.Decide(Request{Principal: c.principal, Tool: c.tool, Action: c.action})
		if d.Allowed != c.want || d.GrantID() != c.grant {
			t.Errorf("%s %s %s: got allowed=%v grant=%q, want %v %q", c.principal, c.tool, c.action, d.Allowed, d.GrantID(), c.want, c.grant)
		}
	}
}

func TestDecideExplicitDenyWins(t *testing.T) {
	s := mustCompile(t,
		allow("a1", "p", "*", "*", "*"),
		deny("z9", "p", "files.write", "write", "path:secrets/"),
	)
	d := s.Decide(Request{Principal: "p", Tool: "files.write", Action: "write", Resource: "path:secrets/k"})
	if d.Allowed || d.Reason != ReasonDenied || d.GrantID() != "z9" {
		t.Errorf("got %+v, want explicit_deny by z9", d)
	}
	d = s.Decide(Request{Principal: "p", Tool: "files.write", Action: "write", Resource: "path:public/k"})
	if !d.Allowed || d.GrantID() != "a1" {
		t.Errorf("got %+v, want allowed by a1", d)
	}
	// A deny for everyone beats a principal's own allow.
	s = mustCompile(t, allow("a1", "p", "*", "*", ""), deny("d1", "*", "bash.run", "*", ""))
	if d := s.Decide(Request{Principal: "p", Tool: "bash.run", Action: "execute"}); d.Reason != ReasonDenied {
		t.Errorf("wildcard deny: got %+v", d)
	}
}

func TestDecideResourceScopes(t *testing.T) {
	cases := []struct {
		scope, res string
		want       bool
	}{
		{"", "path:anything", true},
		{"*", "url:example.com", true},
		{"path:", "path:src/a.go", true},
		{"path:", "repo:.", false},
		{"path:docs/", "path:docs/a.md", true},
		{"path:docs/", "path:docs", true},
		{"path:docs/", "path:docsx/a.md", false},
		{"path:docs/", "path:src/x", false},
		{"path:docs/a.md", "path:docs/a.md", true},
		{"path:docs/a.md", "path:docs/a.md.bak", false},
		{"url:example.com", "url:example.com", true},
		{"url:example.com", "url:example.com.evil", false},
	}
	for _, c := range cases {
		s := mustCompile(t, allow("g", "p", "*", "*", c.scope))
		got := s.Decide(Request{Principal: "p", Tool: "x.y", Action: "read", Resource: c.res}).Allowed
		if got != c.want {
			t.Errorf("scope %q resource %q: allowed=%v, want %v", c.scope, c.res, got, c.want)
		}
	}
}

// A grant on docs/ must refuse docs/../src/x: matching is done on the normalised form.
func TestScopedGrantAfterNormalisation(t *testing.T) {
	s := mustCompile(t, allow("g", "p", "files.read", "read", "path:docs/"))
	for _, raw := range []string{"path:docs/../src/x", "path:docs/./../../etc/passwd", "path:docs/a/../../src"} {
		res, err := NormalizeResource(raw)
		if err != nil {
			if !errors.Is(err, ErrOutsideWorkspace) {
				t.Errorf("NormalizeResource(%q): %v, want ErrOutsideWorkspace or a path", raw, err)
			}
			continue
		}
		if d := s.Decide(Request{Principal: "p", Tool: "files.read", Action: "read", Resource: res}); d.Allowed {
			t.Errorf("%q (normalised %q) was allowed by a docs/ grant", raw, res)
		}
	}
	res, err := NormalizeResource("path:docs/sub/../a.md")
	if err != nil || res != "path:docs/a.md" {
		t.Fatalf("NormalizeResource = %q, %v", res, err)
	}
	if d := s.Decide(Request{Principal: "p", Tool: "files.read", Action: "read", Resource: res}); !d.Allowed {
		t.Errorf("docs/a.md refused: %+v", d)
	}
}

func TestNormalizeResource(t *testing.T) {
	ok := map[string]string{
		"":                "",
		"path:":           "path:.",
		"path:.":          "path:.",
		"path:a//b/./c/":  "path:a/b/c",
		"repo:.":          "repo:.",
		"url:example.com": "url:example.com",
	}
	for in, want := range ok {
		got, err := NormalizeResource(in)
		if err != nil || got != want {
			t.Errorf("NormalizeResource(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"path:../x", "path:/etc/passwd", "path:a/../../b", "path:..", "path:a\\b", "noscheme", ":x", "path:a\x00b", "path:a\nb"} {
		if got, err := NormalizeResource(in); err == nil {
			t.Errorf("NormalizeResource(%q) = %q, want an error", in, got)
		}
	}
}

func TestProtectedResources(t *testing.T) {
	req := Request{Principal: "p", Tool: "files.write", Action: "write", Resource: "path:.git/hooks/pre-commit", Protected: true, ProtectedRoot: "path:.git/hooks"}
	cases := []struct {
		scope string
		want  bool
	}{
		{"", false},
		{"*", false},
		{"path:", false},
		{"path:.git/", false}, // a prefix above the protected path
		{"path:.git/hooks/", true},
		{"path:.git/hooks/pre-commit", true},
		{"path:.git/hooks/other", false},
	}
	for _, c := range cases {
		s := mustCompile(t, allow("g", "p", "*", "*", c.scope))
		d := s.Decide(req)
		if d.Allowed != c.want {
			t.Errorf("scope %q on protected resource: allowed=%v, want %v", c.scope, d.Allowed, c.want)
		}
		if !c.want && c.scope != "path:.git/hooks/other" && d.Reason != ReasonProtected {
			t.Errorf("scope %q: reason %q, want protected_path", c.scope, d.Reason)
		}
	}
	// Without a root the resource itself is the protected path.
	s := mustCompile(t, allow("g", "p", "*", "*", "path:.gitattributes"))
	if d := s.Decide(Request{Principal: "p", Tool: "t.w", Action: "write", Resource: "path:.gitattributes", Protected: true}); !d.Allowed {
		t.Errorf("exact grant on a protected file refused: %+v", d)
	}
	// A broad deny still refuses a protected resource.
	s = mustCompile(t, allow("a", "p", "*", "*", "path:.git/hooks/"), deny("d", "p", "*", "*", "*"))
	if d := s.Decide(req); d.Reason != ReasonDenied {
		t.Errorf("broad deny on protected: %+v", d)
	}
}

func TestMayUse(t *testing.T) {
	s := mustCompile(t,
		allow("a", "p", "files.*", "read", "path:docs/"),
		allow("b", "p", "bash.run", "execute", ""),
		deny("c", "p", "bash.run", "*", ""),
		allow("d", "p", "git.*", "*", ""),
		deny("e", "p", "git.push", "write", "*"), // does not shadow action "*"
		deny("f", "p", "files.delete", "*", "path:docs/"),
	)
	cases := map[string]bool{
		"files.read":   true,
		"files.delete": true, // deny is scoped; other resources could be allowed
		"bash.run":     false,
		"git.push":     true,
		"other.tool":   false,
	}
	for tool, want := range cases {
		if got := s.MayUse("p", tool); got != want {
			t.Errorf("MayUse(p, %s) = %v, want %v", tool, got, want)
		}
	}
	if s.MayUse("q", "files.read") {
		t.Errorf("another principal may use p's tool")
	}
}

func TestValidate(t *testing.T) {
	good := []Grant{
		allow("", "*", "*", "*", ""),
		allow("", "p", "files.*", "read", "path:docs/"),
		allow("", "p", "files.read", "write", "path:"),
		allow("", "p", "server.tool.with.dots", "execute", "url:example.com"),
	}
	for _, g := range good {
		if err := Validate(g); err != nil {
			t.Errorf("Validate(%+v): %v", g, err)
		}
	}
	bad := []Grant{
		allow("", "", "*", "*", ""),
		allow("", "p", "", "*", ""),
		allow("", "p", "fi*", "*", ""),
		allow("", "p", "files.re*", "*", ""),
		allow("", "p", "Files.read", "*", ""),
		allow("", "p", "files", "*", ""),
		allow("", "p", "*", "delete", ""),
		allow("", "p", "*", "*", "path:docs/../src/"),
		allow("", "p", "*", "*", "path:../"),
		allow("", "p", "*", "*", "path:./"),
		allow("", "p", "*", "*", "nocolon"),
		allow("", "p\n", "*", "*", ""),
		{Principal: "p", Tool: "*", Action: "*", Effect: "maybe"},
	}
	for _, g := range bad {
		if err := Validate(g); !errors.Is(err, ErrInvalidGrant) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidGrant", g, err)
		}
	}
	if _, err := Compile(bad[:1]); err == nil {
		t.Errorf("Compile accepted an invalid grant")
	}
}

func BenchmarkDecide(b *testing.B) {
	var gs []Grant
	for i := 0; i < 200; i++ {
		gs = append(gs, allow(string(rune('a'+i%26))+string(rune('a'+i/26)), "other", "ns.*", "*", ""))
	}
	gs = append(gs, allow("zz", "p", "files.*", "read", "path:docs/"))
	s, err := Compile(gs)
	if err != nil {
		b.Fatal(err)
	}
	r := Request{Principal: "p", Tool: "files.read", Action: "read", Resource: "path:docs/a.md"}
	for b.Loop() {
		if !s.Decide(r).Allowed {
			b.Fatal("refused")
		}
	}
}
