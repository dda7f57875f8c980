package netguard

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustHost(t testing.TB, s string) Host {
	t.Helper()
	h, err := ParseHost(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestDefaultPolicy(t *testing.T) {
	var p Policy
	name := Host{Name: "mcp.example.com"}
	for _, tc := range []struct {
		addr   string
		denied string // part of the reason; "" when allowed
	}{
		{"169.254.169.254", "link-local"},
		{"169.254.170.2", "link-local"},
		{"169.254.0.1", "link-local"},
		{"100.100.100.200", "Alibaba"},
		{"fd00:ec2::254", "AWS metadata"},
		{"fe80::1", "IPv6 link-local"},
		{"fe80::1%eth0", "IPv6 link-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "IPv6 multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "class E"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"64:ff9b:1::a9fe:a9fe", "local-use NAT64"},
		// IPv4 denied addresses inside IPv6 ones.
		{"::ffff:169.254.169.254", "link-local"},                  // IPv4-mapped (unmapped first)
		{"::169.254.169.254", "IPv4-compatible"},                  // IPv4-compatible
		{"::ffff:0:169.254.169.254", "SIIT"},                      // SIIT
		{"64:ff9b::169.254.169.254", "NAT64"},                     // NAT64 well-known prefix
		{"2002:a9fe:a9fe::", "6to4"},                              // 6to4
		{"2002:a9fe:a9fe:1234:5678::1", "6to4"},                   // 6to4 with a subnet
		{"2001:0:a9fe:a9fe::1", "Teredo server"},                  // Teredo server
		{"2001:0:4136:e378:8000:63bf:5601:5601", "Teredo client"}, // client 169.254.169.254, obfuscated
		{"2001:db8::5efe:a9fe:a9fe", "ISATAP"},
		{"2001:db8::200:5efe:a9fe:a9fe", "ISATAP"},
		{"::ffff:100.100.100.200", "Alibaba"},
		{"2002:e000:1::", "multicast"},
		{"2001:0:5db8:d822::1", "class E"}, // Teredo client ~0.0.0.1 = 255.255.255.254
		{"::ffff:0.0.0.0", "unspecified"},
		// Loopback through a name that is not localhost: refused.
		{"127.0.0.1", "only a URL that names loopback"},
		{"127.255.0.1", "only a URL that names loopback"},
		{"::1", "only a URL that names loopback"},
		{"::ffff:127.0.0.1", "only a URL that names loopback"},
		{"2002:7f00:1::", "only a URL that names loopback"},
		// Allowed.
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"2606:4700:4700::1111", ""},
		{"10.0.0.1", ""},
		{"172.16.5.4", ""},
		{"192.168.1.1", ""},
		{"100.64.0.1", ""},
		{"fd12:3456::1", ""},
		{"2002:5db8:d822::", ""},            // 6to4 of a public address
		{"64:ff9b::5db8:d822", ""},          // NAT64 of a public address
		{"::ffff:93.184.216.34", ""},        // mapped public
		{"2001:0:5db8:d822::f7f7:f7f7", ""}, // Teredo: server 93.184.216.34, client 8.8.8.8 (obfuscated)
		{"169.253.255.255", ""},             // just below link-local
		{"169.255.0.0", ""},                 // just above
		{"100.100.100.199", ""},             // next to Alibaba's
		{"fe7f:ffff:ffff:ffff::1", ""},      // just below fe80::/10
	} {
		err := p.CheckAddr(netip.MustParseAddr(tc.addr), name)
		if tc.denied == "" {
			if err != nil {
				t.Errorf("%s refused: %v", tc.addr, err)
			}
			continue
		}
		var de *DeniedError
		if !errors.As(err, &de) || !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tc.denied) {
			t.Errorf("%s: %v, want refused for %q", tc.addr, err, tc.denied)
		}
	}
}

func TestLoopbackModes(t *testing.T) {
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	for _, tc := range []struct {
		mode LoopbackMode
		host string
		ok   bool
	}{
		{LoopbackNamed, "127.0.0.1", true},
		{LoopbackNamed, "[::1]", true},
		{LoopbackNamed, "localhost", true},
		{LoopbackNamed, "LOCALHOST.", true},
		{LoopbackNamed, "mcp.localhost", true},
		{LoopbackNamed, "localhost.example.com", false},
		{LoopbackNamed, "evil.example", false},
		{LoopbackNamed, "[::ffff:127.0.0.1]", true},
		{LoopbackAllow, "evil.example", true},
		{LoopbackDeny, "127.0.0.1", false},
		{LoopbackDeny, "localhost", false},
	} {
		p := Policy{Loopback: tc.mode}
		h := mustHost(t, tc.host)
		for _, a := range []netip.Addr{lo4, lo6} {
			if err := p.CheckAddr(a, h); (err == nil) != tc.ok {
				t.Errorf("mode %d, host %s, %s: %v", tc.mode, tc.host, a, err)
			}
		}
	}
}

func TestPolicyOverrides(t *testing.T) {
	pfx := func(s ...string) (out []netip.Prefix) {
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	name := Host{Name: "srv.example"}
	for _, tc := range []struct {
		name string
		p    Policy
		addr string
		ok   bool
	}{
		{"private denied", Policy{DenyPrivate: true}, "10.0.0.1", false},
		{"private denied v6", Policy{DenyPrivate: true}, "fd00::1", false},
		{"private denied mapped", Policy{DenyPrivate: true}, "::ffff:192.168.0.1", false},
		{"private denied 6to4", Policy{DenyPrivate: true}, "2002:c0a8:1::", false},
		{"public with private denied", Policy{DenyPrivate: true}, "93.184.216.34", true},
		{"deny extra", Policy{Deny: pfx("93.184.216.0/24")}, "93.184.216.34", false},
		{"deny extra via mapped", Policy{Deny: pfx("93.184.216.0/24")}, "::ffff:93.184.216.34", false},
		{"deny extra via NAT64", Policy{Deny: pfx("93.184.216.0/24")}, "64:ff9b::5db8:d822", false},
		{"allow metadata", Policy{Allow: pfx("169.254.169.254/32")}, "169.254.169.254", true},
		{"allow link-local, deny one", Policy{Allow: pfx("169.254.0.0/16"), Deny: pfx("169.254.169.254/32")}, "169.254.169.254", false},
		{"allow link-local, another", Policy{Allow: pfx("169.254.0.0/16"), Deny: pfx("169.254.169.254/32")}, "169.254.1.1", true},
		{"deny wide, allow narrow", Policy{Deny: pfx("10.0.0.0/8"), Allow: pfx("10.1.0.0/16")}, "10.1.2.3", true},
		{"tie goes to allow", Policy{Deny: pfx("10.0.0.0/8"), Allow: pfx("10.0.0.0/8")}, "10.1.2.3", true},
		{"allow as mapped prefix", Policy{Allow: pfx("::ffff:169.254.0.0/112")}, "169.254.3.4", true},
		{"no defaults", Policy{NoDefaults: true}, "169.254.169.254", true},
		{"no defaults keeps loopback rule", Policy{NoDefaults: true}, "127.0.0.1", false},
		{"no defaults keeps deny", Policy{NoDefaults: true, Deny: pfx("169.254.0.0/16")}, "169.254.169.254", false},
	} {
		if err := tc.p.CheckAddr(netip.MustParseAddr(tc.addr), name); (err == nil) != tc.ok {
			t.Errorf("%s: %s: %v", tc.name, tc.addr, err)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		name string
		ok   bool
	}{
		{Policy{}, "metadata.google.internal", false},
		{Policy{}, "metadata", false},
		{Policy{}, "instance-data", false},
		{Policy{}, "instance-data.ec2.internal", false},
		{Policy{}, "metadata.google.internal.example.com", true},
		{Policy{}, "example.com", true},
		{Policy{NoDefaults: true}, "metadata", true},
		{Policy{AllowHosts: []string{"metadata"}}, "metadata", true},
		{Policy{DenyHosts: []string{".corp.example"}}, "a.b.corp.example", false},
		{Policy{DenyHosts: []string{".corp.example"}}, "corp.example", false},
		{Policy{DenyHosts: []string{".corp.example"}}, "xcorp.example", true},
		{Policy{DenyHosts: []string{"Exact.Example."}}, "exact.example", false},
		{Policy{DenyHosts: []string{"exact.example"}}, "a.exact.example", true},
	} {
		if err := tc.p.CheckName(tc.name); (err == nil) != tc.ok {
			t.Errorf("%+v %s: %v", tc.p, tc.name, err)
		}
	}
}

func TestDeniedErrorText(t *testing.T) {
	var p Policy
	err := p.CheckAddr(netip.MustParseAddr("2002:a9fe:a9fe::"), Host{Name: "evil.example"})
	want := "netguard: host evil.example reaches 2002:a9fe:a9fe:: (it embeds 169.254.169.254 (6to4)), which is refused: IPv4 link-local"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q\nwant prefix %q", err, want)
	}
	err = p.CheckAddr(netip.MustParseAddr("169.254.169.254"), mustHost(t, "169.254.169.254"))
	if err == nil || !strings.HasPrefix(err.Error(), "netguard: address 169.254.169.254 is refused: IPv4 link-local") {
		t.Errorf("error %q", err)
	}
}

func TestParseRanges(t *testing.T) {
	got, err := ParseRanges([]string{"10.0.0.0/8", " 169.254.169.254 ", "fd00::/8", "::1", "fe80::1%eth0"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "169.254.169.254/32", "fd00::/8", "::1/128", "fe80::1/128"}
	for i, p := range got {
		if p.String() != want[i] {
			t.Errorf("range %d = %s, want %s", i, p, want[i])
		}
	}
	for _, bad := range []string{"10.1.2.3/8", "0x7f000001", "127.1", "10.0.0.0/33", "", "example.com", "10.0.0.0/8/8", "0177.0.0.1/32"} {
		if _, err := ParseRanges([]string{bad}); err == nil {
			t.Errorf("ParseRanges(%q) accepted", bad)
		}
	}
}
