package netguard

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzParseHost: no host panics the parser; an accepted host is one spelling of
// itself (its String parses back to it), a name is never something a resolver could
// read as an IPv4 address, and its characters are the ones allowed.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"example.com", "EXAMPLE.COM.", "169.254.169.254", "2852039166", "0251.0376.0251.0376", "0xa9fea9fe",
		"169.254.43518", "[::ffff:169.254.169.254]", "[fe80::1%eth0]", "::1", "１６９．２５４．１６９．２５４", "0x", "1.2.3.4.5", "a..b", "[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHost(s)
		if err != nil {
			return
		}
		back := h.String()
		if h.IsIP() && h.Addr.Is6() {
			back = "[" + back + "]"
		}
		h2, err := ParseHost(back)
		if err != nil || h2 != h {
			t.Fatalf("ParseHost(%q) = %v, whose String %q parses to %v, %v", s, h, back, h2, err)
		}
		if h.IsIP() {
			return
		}
		if _, err := netip.ParseAddr(h.Name); err == nil {
			t.Fatalf("%q accepted as the name %q, which is an address", s, h.Name)
		}
		labels := strings.Split(h.Name, ".")
		if numeric(labels[len(labels)-1]) {
			t.Fatalf("%q accepted as the name %q, which ends in a number", s, h.Name)
		}
		for _, c := range h.Name {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				t.Fatalf("name %q holds %q", h.Name, c)
			}
		}
	})
}

// FuzzCheckAddr: an IPv4 address is judged the same however it is carried (mapped,
// compatible, NAT64, 6to4); a v4 address that is refused stays refused in every
// carrier.
func FuzzCheckAddr(f *testing.F) {
	for _, a := range []string{"169.254.169.254", "127.0.0.1", "10.0.0.1", "8.8.8.8", "0.0.0.0", "224.0.0.1", "100.100.100.200"} {
		b := netip.MustParseAddr(a).As4()
		f.Add(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	}
	var p Policy
	name := Host{Name: "srv.example"}
	f.Fuzz(func(t *testing.T, n uint32) {
		b := [4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		v4 := netip.AddrFrom4(b)
		want := p.CheckAddr(v4, name) == nil
		mapped := netip.AddrFrom16(netip.AddrFrom4(b).As16())
		if got := p.CheckAddr(mapped, name) == nil; got != want {
			t.Fatalf("%s allowed %v, mapped %v", v4, want, got)
		}
		if want {
			return
		}
		var compat, nat, six [16]byte
		copy(compat[12:], b[:])
		nat = [16]byte{0, 0x64, 0xff, 0x9b}
		copy(nat[12:], b[:])
		six = [16]byte{0x20, 0x02}
		copy(six[2:], b[:])
		for _, c := range [][16]byte{nat, six, compat} {
			a := netip.AddrFrom16(c)
			if a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
				continue
			}
			if p.CheckAddr(a, name) == nil {
				t.Fatalf("%s is refused but %s, which carries it, is allowed", v4, a)
			}
		}
	})
}

// FuzzValidateURL: no URL panics validation; an accepted one is http or https with a
// host that passes the policy and an origin that validates to itself.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{"https://example.com/mcp", "http://127.0.0.1:3000/", "https://169.254.169.254/", "https://2852039166/",
		"javascript:alert(1)", "http:foo", "https://[::ffff:a9fe:a9fe]/", "https://x:0/", "HTTPS://EXAMPLE.COM.:443/"} {
		f.Add(s)
	}
	var p Policy
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ValidateURL(s, Policy{})
		if err != nil {
			return
		}
		if !strings.HasPrefix(tg.Origin, "http://") && !strings.HasPrefix(tg.Origin, "https://") {
			t.Fatalf("%q accepted with origin %q", s, tg.Origin)
		}
		if tg.Host.IsIP() && p.CheckAddr(tg.Host.Addr, tg.Host) != nil {
			t.Fatalf("%q accepted with a refused address", s)
		}
		again, err := ValidateURL(tg.Origin+"/", Policy{})
		if err != nil || again.Origin != tg.Origin {
			t.Fatalf("origin %q does not validate to itself: %v", tg.Origin, err)
		}
	})
}
