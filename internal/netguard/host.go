package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/textscan"
)

// Host is a parsed URL host: either an IP address or a DNS name.
type Host struct {
	// Addr is set for an IP literal (an IPv6 zone is kept: it is needed to dial).
	Addr netip.Addr
	// Name is set for a name: lower-cased, without a trailing dot.
	Name string
}

// IsIP reports whether the host is an IP literal.
func (h Host) IsIP() bool { return h.Addr.IsValid() }

func (h Host) String() string {
	if h.IsIP() {
		return h.Addr.String()
	}
	return h.Name
}

// namesLoopback reports whether the host itself names loopback: a loopback address,
// or localhost and the names under .localhost (RFC 6761 reserves them for loopback).
func (h Host) namesLoopback() bool {
	if h.IsIP() {
		return h.Addr.WithZone("").Unmap().IsLoopback()
	}
	return h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost")
}

// ErrBadHost is what every refusal of a host's spelling wraps.
var ErrBadHost = errors.New("netguard: invalid host")

// HostError is a host that cannot be used as written.
type HostError struct {
	Host string
	Msg  string
	// Addr is the address an IPv4 spelling decodes to, when it does: the host was
	// refused for its spelling, and this is what it would have reached.
	Addr netip.Addr
}

func (e *HostError) Error() string {
	h := escapeHost(e.Host)
	if e.Addr.IsValid() {
		return fmt.Sprintf("netguard: host %s %s %s: write it as %s", h, e.Msg, e.Addr, e.Addr)
	}
	return fmt.Sprintf("netguard: host %s %s", h, e.Msg)
}

func (e *HostError) Unwrap() error { return ErrBadHost }

// escapeHost quotes a host for an error message without letting it carry control or
// non-ASCII characters into a log.
func escapeHost(s string) string {
	q := strconv.QuoteToASCII(s)
	if len(q) > 260 {
		q = q[:256] + `…"`
	}
	return q
}

// maxHostLen is DNS's limit on a name (253 characters without the trailing dot).
const maxHostLen = 253

// ParseHost parses a host as it appears in a URL (with or without the brackets of an
// IPv6 literal) or in a dial address. It accepts exactly one spelling of each host and
// refuses the rest, because resolvers disagree on what the others mean:
//
//   - IPv6 literals in any form net/netip accepts (including IPv4-mapped
//     ::ffff:a.b.c.d and zones fe80::1%eth0); they are checked as the address they are.
//   - IPv4 only as canonical dotted decimal (169.254.169.254). Decimal (2852039166),
//     octal (0251.0376.0251.0376), hex (0xa9fea9fe) and short forms (169.254.43518)
//     are decoded — the error names the address they spell — and refused. So is a
//     host that ends in a number but is not an IPv4 address (WHATWG URL's rule).
//   - DNS names of letters, digits, '-', '_' and '.', at most 253 characters, labels
//     of at most 63; lower-cased, one trailing dot dropped. Non-ASCII names are
//     refused: net/http maps them through IDNA (UTS #46) before dialling — fullwidth
//     "１６９．２５４．１６９．２５４" becomes 169.254.169.254, a soft hyphen disappears
//     — so a check of the name as written would not be a check of the name resolved.
//     Write the ASCII (xn--) form.
func ParseHost(s string) (Host, error) {
	raw := s
	if s == "" {
		return Host{}, &HostError{Host: raw, Msg: "is empty"}
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Host{}, &HostError{Host: raw, Msg: "has an unclosed '['"}
		}
		s = s[1 : len(s)-1]
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() {
			return Host{}, &HostError{Host: raw, Msg: "is not an IPv6 address"}
		}
		return Host{Addr: a}, nil
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() {
			return Host{}, &HostError{Host: raw, Msg: "is not an IPv6 address"}
		}
		return Host{Addr: a}, nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			h := &HostError{Host: raw, Msg: "is not ASCII: write its ASCII (xn--) form, the name that is actually resolved"}
			if a, ok := disguisedIPv4(s); ok {
				h.Msg, h.Addr = "is a disguised spelling of", a
			}
			return Host{}, h
		}
	}
	if strings.HasSuffix(s, ".") {
		s = s[:len(s)-1]
	}
	s = strings.ToLower(s)
	if s == "" || len(s) > maxHostLen {
		return Host{}, &HostError{Host: raw, Msg: fmt.Sprintf("must be 1-%d characters", maxHostLen)}
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" {
			return Host{}, &HostError{Host: raw, Msg: "has an empty label"}
		}
		if len(l) > 63 {
			return Host{}, &HostError{Host: raw, Msg: "has a label longer than 63 characters"}
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return Host{}, &HostError{Host: raw, Msg: fmt.Sprintf("contains %q, which is not allowed in a host name", c)}
			}
		}
	}
	if last := labels[len(labels)-1]; numeric(last) {
		a, err := parseIPv4(labels)
		if err != nil {
			return Host{}, &HostError{Host: raw, Msg: "ends in a number but is not an IPv4 address (" + err.Error() + ")"}
		}
		if canonicalIPv4(labels) {
			return Host{Addr: a}, nil
		}
		return Host{}, &HostError{Host: raw, Msg: "is a non-canonical spelling of", Addr: a}
	}
	return Host{Name: s}, nil
}

// numeric reports whether a label reads as a number (WHATWG URL's "ends in a number"):
// all decimal digits, or 0x followed by hex digits (or nothing).
func numeric(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		for i := 0; i < len(h); i++ {
			if !isHex(h[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return l != ""
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// parseIPv4 decodes inet_aton's forms: 1–4 parts, each decimal, octal (leading 0) or
// hex (0x); every part but the last is one byte, the last fills the remaining bytes.
func parseIPv4(parts []string) (netip.Addr, error) {
	if len(parts) > 4 {
		return netip.Addr{}, errors.New("more than four parts")
	}
	var nums []uint64
	for _, p := range parts {
		n, err := parsePart(p)
		if err != nil {
			return netip.Addr{}, err
		}
		nums = append(nums, n)
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("part %d is over 255", i+1)
		}
		v = v<<8 | n
	}
	last := nums[len(nums)-1]
	rest := uint(8 * (5 - len(nums)))
	if last >= 1<<rest {
		return netip.Addr{}, errors.New("the last part is too large")
	}
	v = v<<rest | last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

func parsePart(p string) (uint64, error) {
	base, digits := 10, p
	switch {
	case strings.HasPrefix(p, "0x"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, nil // "0x" is zero to WHATWG and to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", p)
	}
	if n > 0xffffffff {
		return 0, fmt.Errorf("%q is over 32 bits", p)
	}
	return n, nil
}

// canonicalIPv4: four decimal parts without leading zeros, each at most 255.
func canonicalIPv4(parts []string) bool {
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || len(p) > 1 && p[0] == '0' || p[0] < '0' || p[0] > '9' || strings.HasPrefix(p, "0x") {
			return false
		}
		if n, err := strconv.Atoi(p); err != nil || n > 255 {
			return false
		}
	}
	return true
}

// disguisedIPv4 reports the IPv4 address a non-ASCII host becomes once hidden
// characters are dropped and fullwidth digits, letters and dots folded
// (textscan.Skeleton, the folding IDNA applies to them), if it becomes one.
func disguisedIPv4(s string) (netip.Addr, bool) {
	folded := textscan.Skeleton(s)
	for i := 0; i < len(folded); i++ {
		if folded[i] >= utf8.RuneSelf {
			return netip.Addr{}, false
		}
	}
	labels := strings.Split(strings.TrimSuffix(folded, "."), ".")
	if !numeric(labels[len(labels)-1]) {
		return netip.Addr{}, false
	}
	a, err := parseIPv4(labels)
	return a, err == nil
}
