package netguard

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseHostAccepts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"example.com", "example.com"},
		{"EXAMPLE.COM.", "example.com"},
		{"a-b_c.example", "a-b_c.example"},
		{"xn--nxasmq6b.com", "xn--nxasmq6b.com"},
		{"1e3", "1e3"},   // ends in a letter: a name
		{"0xg1", "0xg1"}, // not hex: a name (WHATWG agrees)
		{"169.254.169.254", "169.254.169.254"},
		{"169.254.169.254.", "169.254.169.254"},
		{"127.0.0.1", "127.0.0.1"},
		{"0.0.0.0", "0.0.0.0"},
		{"[::1]", "::1"},
		{"::1", "::1"},
		{"[fe80::1%eth0]", "fe80::1%eth0"},
		{"[::ffff:169.254.169.254]", "::ffff:169.254.169.254"},
		{"[0:0:0:0:0:ffff:a9fe:a9fe]", "::ffff:169.254.169.254"},
		{"[64:ff9b::169.254.169.254]", "64:ff9b::a9fe:a9fe"},
		{"localhost", "localhost"},
	} {
		h, err := ParseHost(tc.in)
		if err != nil || h.String() != tc.want {
			t.Errorf("ParseHost(%q) = %v, %v; want %s", tc.in, h, err, tc.want)
		}
	}
}

func TestParseHostRefuses(t *testing.T) {
	for _, tc := range []struct {
		in      string
		msg     string
		decoded string // the address a refused IPv4 spelling decodes to
	}{
		{"2852039166", "non-canonical", "169.254.169.254"},
		{"0251.0376.0251.0376", "non-canonical", "169.254.169.254"},
		{"0xa9fea9fe", "non-canonical", "169.254.169.254"},
		{"0XA9FEA9FE", "non-canonical", "169.254.169.254"},
		{"0xa9.0xfe.0xa9.0xfe", "non-canonical", "169.254.169.254"},
		{"169.254.43518", "non-canonical", "169.254.169.254"},
		{"169.16689662", "non-canonical", "169.254.169.254"},
		{"0x7f.1", "non-canonical", "127.0.0.1"},
		{"127.1", "non-canonical", "127.0.0.1"},
		{"0177.0.0.1", "non-canonical", "127.0.0.1"},
		{"127.0.0.01", "non-canonical", "127.0.0.1"},
		{"2130706433.", "non-canonical", "127.0.0.1"},
		{"0", "non-canonical", "0.0.0.0"},
		{"0x", "non-canonical", "0.0.0.0"},
		{"256.1.1.1", "not an IPv4 address", ""},
		{"1.2.3.4.5", "not an IPv4 address", ""},
		{"4294967296", "not an IPv4 address", ""},
		{"08.1.1.1", "not an IPv4 address", ""},
		{"example.123", "not an IPv4 address", ""},
		{"１６９．２５４．１６９．２５４", "disguised", "169.254.169.254"},
		{"169.254.169.254。", "disguised", "169.254.169.254"},
		{"０x7f.1", "disguised", "127.0.0.1"},
		{"1\u00ad27.0.0.1", "disguised", "127.0.0.1"},
		{"ｍetadata.google.internal", "not ASCII", ""},
		{"exa\u00admple.com", "not ASCII", ""},
		{"bücher.example", "not ASCII", ""},
		{"", "empty", ""},
		{".", "1-253", ""},
		{"[::1", "unclosed", ""},
		{"[1.2.3.4]", "not an IPv6", ""},
		{"[example.com]", "not an IPv6", ""},
		{"1:2", "not an IPv6", ""},
		{"a b", "contains", ""},
		{"a/b", "contains", ""},
		{"a@b", "contains", ""},
		{"a%31", "contains", ""},
		{"a\x00b", "contains", ""},
		{"a..b", "empty label", ""},
		{".a", "empty label", ""},
		{"a..", "empty label", ""},
		{strings.Repeat("a", 64) + ".com", "longer than 63", ""},
		{strings.Repeat("a.", 127) + "aa", "1-253", ""},
	} {
		_, err := ParseHost(tc.in)
		var he *HostError
		if !errors.As(err, &he) || !errors.Is(err, ErrBadHost) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseHost(%q) = %v, want a host error containing %q", tc.in, err, tc.msg)
			continue
		}
		if tc.decoded != "" && he.Addr != netip.MustParseAddr(tc.decoded) {
			t.Errorf("ParseHost(%q): decoded %v, want %s", tc.in, he.Addr, tc.decoded)
		}
		for _, r := range err.Error() {
			if r < 0x20 || r > 0x7e && r != '…' {
				t.Errorf("ParseHost(%q): error carries %q", tc.in, r)
			}
		}
	}
}

func TestValidateURL(t *testing.T) {
	for _, tc := range []struct {
		url    string
		p      Policy
		origin string // "" when refused
		is     error
	}{
		{"https://example.com/mcp", Policy{}, "https://example.com:443", nil},
		{"HTTPS://EXAMPLE.COM.:443/mcp", Policy{}, "https://example.com:443", nil},
		{"https://user:pw@example.com:8443/x?q=1#f", Policy{}, "https://example.com:8443", nil},
		{"http://127.0.0.1:3000/mcp", Policy{}, "http://127.0.0.1:3000", nil},
		{"http://localhost:3000/mcp", Policy{}, "http://localhost:3000", nil},
		{"http://[::1]:3000/mcp", Policy{}, "http://[::1]:3000", nil},
		{"http://mcp.localhost/", Policy{}, "http://mcp.localhost:80", nil},
		{"http://example.com/", Policy{InsecureHTTP: true}, "http://example.com:80", nil},
		{"https://10.1.2.3/", Policy{}, "https://10.1.2.3:443", nil},
		{"http://example.com/", Policy{}, "", ErrBadURL},
		{"http://10.1.2.3/", Policy{}, "", ErrBadURL},
		{"ftp://example.com/", Policy{}, "", ErrBadURL},
		{"file:///etc/passwd", Policy{}, "", ErrBadURL},
		{"javascript:alert(1)", Policy{}, "", ErrBadURL},
		{"data:text/plain,hi", Policy{}, "", ErrBadURL},
		{"http:foo", Policy{}, "", ErrBadURL},
		{"//example.com/", Policy{}, "", ErrBadURL},
		{"https://", Policy{}, "", ErrBadURL},
		{"https://x:0/", Policy{}, "", ErrBadURL},
		{"https://x:99999/", Policy{}, "", ErrBadURL},
		{"https://x:/", Policy{}, "", ErrBadURL},
		{"https://x y/", Policy{}, "", ErrBadURL},
		{"http://x/$(touch /tmp/pwn)", Policy{}, "", ErrBadURL},
		{"https://169.254.169.254/latest/meta-data/", Policy{}, "", ErrDenied},
		{"https://[::ffff:169.254.169.254]/", Policy{}, "", ErrDenied},
		{"https://[::ffff:a9fe:a9fe]/", Policy{}, "", ErrDenied},
		{"https://[fe80::1%25eth0]/", Policy{}, "", ErrDenied},
		{"https://[fd00:ec2::254]/", Policy{}, "", ErrDenied},
		{"https://100.100.100.200/", Policy{}, "", ErrDenied},
		{"https://[2002:a9fe:a9fe::]/", Policy{}, "", ErrDenied},
		{"https://0.0.0.0/", Policy{}, "", ErrDenied},
		{"https://255.255.255.255/", Policy{}, "", ErrDenied},
		{"https://224.0.0.251/", Policy{}, "", ErrDenied},
		{"https://metadata.google.internal/computeMetadata/v1/", Policy{}, "", ErrDenied},
		{"https://METADATA.GOOGLE.INTERNAL./", Policy{}, "", ErrDenied},
		{"https://2852039166/", Policy{}, "", ErrBadHost},
		{"https://0xa9fea9fe/", Policy{}, "", ErrBadHost},
		{"https://169.254.43518/", Policy{}, "", ErrBadHost},
		{"https://ｍetadata.google.internal/", Policy{}, "", ErrBadHost},
		{"https://１６９．２５４．１６９．２５４/", Policy{}, "", ErrBadHost},
		{"https://169.254.169.254/", Policy{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}, "https://169.254.169.254:443", nil},
	} {
		got, err := ValidateURL(tc.url, tc.p)
		switch {
		case tc.origin != "":
			if err != nil || got.Origin != tc.origin {
				t.Errorf("ValidateURL(%q) = %v, %v; want origin %s", tc.url, got, err, tc.origin)
			}
		case err == nil:
			t.Errorf("ValidateURL(%q) accepted", tc.url)
		case !errors.Is(err, ErrBadURL) || !errors.Is(err, tc.is):
			t.Errorf("ValidateURL(%q) = %v, want %v", tc.url, err, tc.is)
		}
	}
	_, err := ValidateURL("https://2852039166/", Policy{})
	if err == nil || !strings.Contains(err.Error(), "non-canonical spelling of 169.254.169.254") {
		t.Errorf("the decoded address is not named: %v", err)
	}
}
