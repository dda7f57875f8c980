// Package netguard limits where toolgate connects on behalf of a remote upstream MCP
// server: only http and https URLs, never to link-local addresses, cloud metadata
// services, multicast, unspecified or broadcast addresses (in any spelling of them),
// and — since the address checked must be the address dialled — the check runs on the
// resolved address at connect time, so DNS rebinding between a check and the
// connection is impossible. Redirects to another origin are refused, or followed
// without the server's configured headers when its policy allows it.
//
// The deny list, and why each entry is on it, is in docs/trust.md ("Reach"). An owner
// extends or overrides it per server (Policy).
//
// Loopback is a decision, not an accident: a local gateway's upstreams are often local
// servers (http://127.0.0.1:3000/mcp), so a URL that names loopback — 127.0.0.1, [::1],
// localhost — reaches it. A name that merely resolves to loopback does not (by
// default): that is what a DNS-rebinding attack on local services looks like.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Rule is one range of the deny list and why it is there.
type Rule struct {
	Prefix netip.Prefix
	Reason string
}

func rule(p, reason string) Rule { return Rule{netip.MustParsePrefix(p), reason} }

// DefaultDeny is refused unless a server's policy says NoDefaults or allows the
// address explicitly.
var DefaultDeny = []Rule{
	rule("0.0.0.0/8", `unspecified ("this network"; connecting to 0.0.0.0 reaches the local host)`),
	rule("169.254.0.0/16", "IPv4 link-local, where cloud metadata services answer (169.254.169.254 on AWS, GCP, Azure, OCI; 169.254.170.2 for ECS task credentials)"),
	rule("100.100.100.200/32", "the Alibaba Cloud metadata service"),
	rule("224.0.0.0/4", "IPv4 multicast"),
	rule("240.0.0.0/4", "reserved IPv4 (class E), including the broadcast address 255.255.255.255"),
	rule("::/128", "the IPv6 unspecified address"),
	rule("fe80::/10", "IPv6 link-local"),
	rule("fd00:ec2::254/128", "the AWS metadata service over IPv6"),
	rule("ff00::/8", "IPv6 multicast"),
	rule("64:ff9b:1::/48", "the local-use NAT64 prefix (RFC 8215): which IPv4 address it reaches depends on the network's prefix length, so it cannot be checked"),
}

// LoopbackRanges are the loopback addresses (see LoopbackMode).
var LoopbackRanges = []Rule{
	rule("127.0.0.0/8", "IPv4 loopback"),
	rule("::1/128", "IPv6 loopback"),
}

// PrivateRanges are refused when a policy sets DenyPrivate. They are allowed by
// default: an owner's own servers on the office network or a VPN are ordinary
// upstreams for a gateway running on the owner's machine.
var PrivateRanges = []Rule{
	rule("10.0.0.0/8", "private (RFC 1918)"),
	rule("172.16.0.0/12", "private (RFC 1918)"),
	rule("192.168.0.0/16", "private (RFC 1918)"),
	rule("100.64.0.0/10", "shared address space (RFC 6598: carrier-grade NAT, Tailscale)"),
	rule("fc00::/7", "IPv6 unique local"),
	rule("fec0::/10", "IPv6 site-local (deprecated)"),
}

// NameRule is a host name refused before any lookup.
type NameRule struct {
	// Name is an exact name, or ".domain" for every name under domain.
	Name   string
	Reason string
}

// DefaultDenyNames are the metadata services' well-known names. The address rules
// stop them anyway (each resolves into 169.254.0.0/16); refusing the names too gives a
// clearer error and needs no lookup.
var DefaultDenyNames = []NameRule{
	{"metadata.google.internal", "the Google Cloud metadata service"},
	{"metadata", "the Google Cloud metadata service (its short name)"},
	{"instance-data.ec2.internal", "the AWS instance metadata service"},
	{"instance-data", "the AWS instance metadata service (its short name)"},
}

// LoopbackMode says when loopback addresses may be reached.
type LoopbackMode uint8

// The modes.
const (
	// LoopbackNamed (the default) reaches loopback only when the URL's host is a
	// loopback address or localhost (or a name under .localhost, RFC 6761).
	LoopbackNamed LoopbackMode = iota
	// LoopbackAllow reaches loopback through any name (e.g. an /etc/hosts entry).
	LoopbackAllow
	// LoopbackDeny never reaches loopback.
	LoopbackDeny
)

// Policy is one server's reach. The zero value is the default policy.
type Policy struct {
	// Loopback says when loopback may be reached.
	Loopback LoopbackMode
	// DenyPrivate refuses PrivateRanges too.
	DenyPrivate bool
	// InsecureHTTP allows plain http to hosts other than loopback. Without it, http
	// reaches loopback only: a server's headers are its secrets, and plain http sends
	// them in the clear to every network in between.
	InsecureHTTP bool
	// Deny adds ranges to refuse.
	Deny []netip.Prefix
	// DenyHosts adds host names to refuse (exact, or ".domain" for all under domain).
	DenyHosts []string
	// Allow are ranges reached whatever else says: the owner's override for this
	// server (for example a lab server on a link-local address). The most specific
	// entry of Allow and Deny wins; Allow wins a tie.
	Allow []netip.Prefix
	// AllowHosts are names exempt from the name rules (their addresses are still
	// checked).
	AllowHosts []string
	// NoDefaults drops DefaultDeny and DefaultDenyNames (Deny and DenyHosts still
	// apply, and so do the loopback and private rules).
	NoDefaults bool
}

// ErrDenied is what every refusal of an address or a name wraps.
var ErrDenied = errors.New("netguard: address refused")

// DeniedError is a refused host or address.
type DeniedError struct {
	// Host is the host as requested (a name or an address).
	Host string
	// Addr is the refused address (invalid when a name itself was refused).
	Addr netip.Addr
	// Via explains how Addr was reached from what was checked: "resolved from",
	// "embedded in 2002:a9fe:a9fe:: (6to4)", …; "" when Addr was requested directly.
	Via string
	// Reason is the deny list's reason.
	Reason string
}

func (e *DeniedError) Error() string {
	var b strings.Builder
	b.WriteString("netguard: ")
	switch {
	case !e.Addr.IsValid():
		fmt.Fprintf(&b, "host %s is refused: %s", e.Host, e.Reason)
	case e.Host != "" && e.Host != e.Addr.String():
		fmt.Fprintf(&b, "host %s reaches %s", e.Host, e.Addr)
		if e.Via != "" {
			fmt.Fprintf(&b, " (%s)", e.Via)
		}
		fmt.Fprintf(&b, ", which is refused: %s", e.Reason)
	default:
		fmt.Fprintf(&b, "address %s is refused", e.Addr)
		if e.Via != "" {
			fmt.Fprintf(&b, " (%s)", e.Via)
		}
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	return b.String()
}

func (e *DeniedError) Unwrap() error { return ErrDenied }

// CheckAddr decides whether addr may be reached when host was asked for. host decides
// only the loopback rule (LoopbackNamed): pass the Host the URL named.
func (p *Policy) CheckAddr(addr netip.Addr, host Host) error {
	if err := p.checkAddr(addr, host, 0); err != nil {
		err.Host = host.String()
		return err
	}
	return nil
}

func (p *Policy) checkAddr(addr netip.Addr, host Host, depth int) *DeniedError {
	a := addr.WithZone("").Unmap()
	if !a.IsValid() {
		return &DeniedError{Addr: addr, Reason: "not an IP address"}
	}
	allow, allowBits := longest(p.Allow, a)
	deny, denyBits := longest(p.Deny, a)
	if allow && allowBits >= denyBits {
		return nil
	}
	if deny {
		return &DeniedError{Addr: a, Reason: "on this server's deny list"}
	}
	if depth < 2 {
		for _, e := range embedded(a) {
			if err := p.checkAddr(e.v4, host, depth+1); err != nil {
				return &DeniedError{Addr: a, Via: fmt.Sprintf("it embeds %s (%s)", e.v4, e.how), Reason: err.Reason}
			}
		}
	}
	if !p.NoDefaults {
		if r, ok := match(DefaultDeny, a); ok {
			return &DeniedError{Addr: a, Reason: r}
		}
	}
	if r, ok := match(LoopbackRanges, a); ok {
		switch {
		case p.Loopback == LoopbackDeny:
			return &DeniedError{Addr: a, Reason: r + ": this server's policy refuses loopback"}
		case p.Loopback == LoopbackNamed && !host.namesLoopback():
			return &DeniedError{Addr: a, Reason: r + ": only a URL that names loopback (127.0.0.1, [::1], localhost) reaches it"}
		}
	}
	if p.DenyPrivate {
		if r, ok := match(PrivateRanges, a); ok {
			return &DeniedError{Addr: a, Reason: r + ": this server's policy refuses private addresses"}
		}
	}
	return nil
}

// CheckName decides whether a host name may be looked up at all.
func (p *Policy) CheckName(name string) error {
	for _, a := range p.AllowHosts {
		if nameMatches(normName(a), name) {
			return nil
		}
	}
	for _, d := range p.DenyHosts {
		if nameMatches(normName(d), name) {
			return &DeniedError{Host: name, Reason: "on this server's deny list"}
		}
	}
	if !p.NoDefaults {
		for _, r := range DefaultDenyNames {
			if nameMatches(r.Name, name) {
				return &DeniedError{Host: name, Reason: r.Reason}
			}
		}
	}
	return nil
}

func normName(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// nameMatches: pattern "x.y" matches exactly; ".x.y" matches x.y and every name under it.
func nameMatches(pattern, name string) bool {
	if d, ok := strings.CutPrefix(pattern, "."); ok {
		return name == d || strings.HasSuffix(name, pattern)
	}
	return name == pattern
}

func match(rules []Rule, a netip.Addr) (string, bool) {
	for _, r := range rules {
		if r.Prefix.Contains(a) {
			return r.Reason, true
		}
	}
	return "", false
}

// longest reports whether a prefix of ps contains a, and the longest such prefix's bits.
func longest(ps []netip.Prefix, a netip.Addr) (bool, int) {
	found, bits := false, -1
	for _, p := range ps {
		q := p.Masked()
		if q.Addr().Is4In6() { // a v4-mapped prefix written by an owner means the v4 range
			q = netip.PrefixFrom(q.Addr().Unmap(), max(0, q.Bits()-96))
		}
		if q.Contains(a) && q.Bits() > bits {
			found, bits = true, q.Bits()
		}
	}
	return found, bits
}

// embedding is an IPv4 address carried inside an IPv6 one.
type embedding struct {
	v4  netip.Addr
	how string
}

var (
	sixToFour   = netip.MustParsePrefix("2002::/16")
	teredo      = netip.MustParsePrefix("2001::/32")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	compatible  = netip.MustParsePrefix("::/96")
	translated  = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT, RFC 2765
	isatapLocal = [4]byte{0x00, 0x00, 0x5e, 0xfe}
	isatapUniv  = [4]byte{0x02, 0x00, 0x5e, 0xfe}
)

// embedded lists the IPv4 addresses an IPv6 address carries: IPv4-compatible
// (::a.b.c.d), SIIT-translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::a.b.c.d), 6to4
// (2002:aabb:ccdd::), Teredo (server and obfuscated client), ISATAP (…:5efe:a.b.c.d).
// IPv4-mapped addresses are unmapped before this is called.
func embedded(a netip.Addr) []embedding {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(off int) netip.Addr { return netip.AddrFrom4([4]byte{b[off], b[off+1], b[off+2], b[off+3]}) }
	var out []embedding
	switch {
	case compatible.Contains(a):
		if x := v4(12); x != netip.AddrFrom4([4]byte{}) && x != netip.AddrFrom4([4]byte{0, 0, 0, 1}) {
			out = append(out, embedding{x, "IPv4-compatible"})
		}
	case translated.Contains(a):
		out = append(out, embedding{v4(12), "SIIT-translated"})
	case nat64.Contains(a):
		out = append(out, embedding{v4(12), "NAT64"})
	case sixToFour.Contains(a):
		out = append(out, embedding{v4(2), "6to4"})
	case teredo.Contains(a):
		c := v4(12)
		c4 := c.As4()
		for i := range c4 {
			c4[i] ^= 0xff
		}
		out = append(out, embedding{v4(4), "Teredo server"}, embedding{netip.AddrFrom4(c4), "Teredo client"})
	}
	if [4]byte(b[8:12]) == isatapLocal || [4]byte(b[8:12]) == isatapUniv {
		out = append(out, embedding{v4(12), "ISATAP"})
	}
	return out
}

// ParseRanges reads the ranges of a server's policy: CIDR prefixes ("10.0.0.0/8",
// "fd00::/8") or single addresses ("169.254.169.254", a /32 or /128), in the strict
// syntax of net/netip (no octal, hex or short IPv4 forms). A prefix with host bits set
// ("10.1.2.3/8") is refused: it is more likely a mistake than the range it masks to.
func ParseRanges(ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for i, s := range ss {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			if p, err = netip.ParsePrefix(s); err != nil {
				return nil, fmt.Errorf("netguard: range %d (%s): %w", i+1, escapeHost(s), err)
			}
			if p.Masked() != p {
				return nil, fmt.Errorf("netguard: range %d (%s) has bits set past its length: did you mean %s?", i+1, escapeHost(s), p.Masked())
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("netguard: range %d (%s) is neither a CIDR prefix nor an address: %w", i+1, escapeHost(s), err)
			}
			p = netip.PrefixFrom(a.WithZone(""), a.BitLen())
		}
		out = append(out, p)
	}
	return out, nil
}
