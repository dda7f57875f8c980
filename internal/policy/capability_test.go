package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCapability(t *testing.T) {
	for in, want := range map[string]Capability{
		"*":                  {Tool: "*"},
		"*:read":             {Tool: "*", Action: "read"},
		"files.*":            {Tool: "files.*"},
		"files.*:write":      {Tool: "files.*", Action: "write"},
		"files.read":         {Tool: "files.read"},
		"git.log.v2:execute": {Tool: "git.log.v2", Action: "execute"},
	} {
		got, err := ParseCapability(in)
		if err != nil || got != want {
			t.Errorf("ParseCapability(%q) = %+v, %v; want %+v", in, got, err, want)
			continue
		}
		if got.String() != in {
			t.Errorf("%q written back as %q", in, got.String())
		}
	}
	for in, mention := range map[string]string{
		"":                       "empty",
		"files.re*":              `"*" is allowed only`,
		"*.read":                 `"*" is allowed only`,
		"files.read:delete":      `action "delete"`,
		"files.read:":            "read, write or execute",
		"files.read:*":           "leave it out",
		"files.read:READ":        `action "READ"`,
		"path:docs/":             "canonical id",
		"files.read\x1b[2J":      "canonical id",
		strings.Repeat("a", 600): "at most",
	} {
		_, err := ParseCapability(in)
		if !errors.Is(err, ErrInvalidCapability) || !strings.Contains(err.Error(), mention) {
			t.Errorf("ParseCapability(%q) = %v; want ErrInvalidCapability mentioning %q", in, err, mention)
		}
	}
}

func TestCapabilitiesMatch(t *testing.T) {
	var none *Capabilities
	if !none.Covers("a.b") || !none.Allows("a.b", "write") || none.Key() != "" {
		t.Errorf("nil capabilities must narrow nothing")
	}
	if c, err := CompileCapabilities(nil); c != nil || err != nil {
		t.Errorf("no specs = %v, %v; want nil, nil", c, err)
	}
	c, err := CompileCapabilities([]string{"files.*:read", "web.fetch", "files.write:write", "files.*:read"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, action string
		covers, ok   bool
	}{
		{"files.read", "read", true, true},
		{"files.read", "write", true, false},
		{"files.write", "write", true, true},
		{"files.write", "execute", true, false},
		{"web.fetch", "execute", true, true},
		{"web.fetcher", "read", false, false},
		{"filesx.read", "read", false, false}, // "files.*" is the namespace, not a string prefix
		{"bash.run", "execute", false, false},
	} {
		if got := c.Covers(tc.tool); got != tc.covers {
			t.Errorf("Covers(%s) = %v", tc.tool, got)
		}
		if got := c.Allows(tc.tool, tc.action); got != tc.ok {
			t.Errorf("Allows(%s, %s) = %v", tc.tool, tc.action, got)
		}
	}
	if c.Key() != "files.*:read\nfiles.write:write\nweb.fetch" || c.String() != "files.*:read,files.write:write,web.fetch" {
		t.Errorf("canonical form %q / %q", c.Key(), c.String())
	}
	d, _ := CompileCapabilities([]string{"web.fetch", "files.write:write", "files.*:read"})
	if d.Key() != c.Key() {
		t.Errorf("order or duplicates change the key: %q vs %q", d.Key(), c.Key())
	}
	if _, err := CompileCapabilities(make([]string, MaxCapabilities+1)); !errors.Is(err, ErrInvalidCapability) {
		t.Errorf("%d capabilities: %v", MaxCapabilities+1, err)
	}
}

// FuzzParseCapability: parsing never panics; an accepted capability writes back to a
// form that parses to itself, and its pattern is one a grant accepts.
func FuzzParseCapability(f *testing.F) {
	for _, s := range []string{"*", "files.*:read", "a.b", "a.b:", ":read", "a.b:read:write", "x.*:execute", "\xff.a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCapability(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidCapability) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidCapability", s, err)
			}
			return
		}
		again, err := ParseCapability(c.String())
		if err != nil || again != c {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, c, c.String(), again, err)
		}
		if err := Validate(Grant{Principal: "p", Tool: c.Tool, Action: "*", Effect: Allow}); err != nil {
			t.Fatalf("capability pattern %q is not a grant pattern: %v", c.Tool, err)
		}
	})
}

// BenchmarkCapabilitiesAllows is the per-call capability check with 16 capabilities,
// the matching one last.
func BenchmarkCapabilitiesAllows(b *testing.B) {
	var specs []string
	for i := 0; i < 15; i++ {
		specs = append(specs, "ns"+strings.Repeat("x", i)+".*")
	}
	specs = append(specs, "files.*:read")
	c, err := CompileCapabilities(specs)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !c.Allows("files.read", "read") {
			b.Fatal("refused")
		}
	}
}
