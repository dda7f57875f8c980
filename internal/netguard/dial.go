package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// Resolver looks host names up. *net.Resolver satisfies it; tests use their own, so
// that hostile names resolve to hostile addresses without any DNS traffic.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard dials for one server under its Policy: every address is checked after
// resolution and again, by the dialer's Control hook, on the socket about to connect.
// A Guard is safe for concurrent use.
type Guard struct {
	policy   Policy
	resolver Resolver
	dialer   net.Dialer
	// dial connects to one checked address; tests replace it to prove that a refusal
	// happens before any connection is attempted.
	dial func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error)
}

// NewGuard returns a Guard for p. A nil resolver means net.DefaultResolver.
func NewGuard(p Policy, r Resolver) *Guard {
	if r == nil {
		r = net.DefaultResolver
	}
	return &Guard{policy: p, resolver: r,
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		dial: func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
			return d.DialContext(ctx, network, address)
		}}
}

// Policy returns the guard's policy.
func (g *Guard) Policy() Policy { return g.policy }

// DialContext connects to address ("host:port") for network tcp, tcp4 or tcp6: the
// host is parsed (ParseHost: one spelling per host), a name is checked (CheckName),
// resolved, and every address checked (CheckAddr) before the first connection attempt;
// only addresses that pass are dialled, as IP literals, so nothing is resolved twice.
// The dialer's Control hook checks the address of the socket itself before it
// connects. Use it as http.Transport.DialContext (NewTransport does).
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("netguard: network %q is not tcp", network)
	}
	hostPart, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial address %s: %w", escapeHost(address), err)
	}
	h, err := ParseHost(hostPart)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if h.IsIP() {
		if err := g.policy.CheckAddr(h.Addr, h); err != nil {
			return nil, err
		}
		addrs = []netip.Addr{unmap(h.Addr)}
	} else {
		if err := g.policy.CheckName(h.Name); err != nil {
			return nil, err
		}
		ipNet := map[string]string{"tcp": "ip", "tcp4": "ip4", "tcp6": "ip6"}[network]
		found, err := g.resolver.LookupNetIP(ctx, ipNet, h.Name)
		if err != nil {
			return nil, fmt.Errorf("netguard: resolving %s: %w", h.Name, err)
		}
		var first error
		for _, a := range found {
			if err := g.policy.CheckAddr(a, h); err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			if h.namesLoopback() && !a.WithZone("").Unmap().IsLoopback() {
				if first == nil {
					first = &DeniedError{Host: h.Name, Addr: a, Via: "resolved from localhost", Reason: "localhost must resolve to loopback (RFC 6761)"}
				}
				continue
			}
			a = unmap(a) // dial what the socket will report, so Control can compare
			if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			if first == nil {
				first = fmt.Errorf("netguard: %s has no address", h.Name)
			}
			return nil, first
		}
	}
	d := g.dialer
	d.ControlContext = g.controlFor(h, addrs)
	var errs []error
	for _, a := range addrs {
		c, err := g.dial(ctx, &d, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// controlFor is the Control hook of a dial for host: the socket's address must be one
// of the addresses checked for it, and pass the policy again.
func (g *Guard) controlFor(h Host, checked []netip.Addr) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(_ context.Context, network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("netguard: connecting to %s: %w", escapeHost(address), err)
		}
		if !slices.Contains(checked, unmap(ap.Addr())) {
			return &DeniedError{Host: h.String(), Addr: ap.Addr(), Reason: "not an address that was checked for this host"}
		}
		return g.policy.CheckAddr(ap.Addr(), h)
	}
}

// unmap turns an IPv4-mapped address into the IPv4 address (zone dropped), which is
// what a socket connecting to it reports.
func unmap(a netip.Addr) netip.Addr {
	if a.Is4In6() {
		return a.Unmap()
	}
	return a
}

// Control is a net.Dialer Control hook for dialers toolgate does not build itself: it
// checks the address a socket is about to connect to. It cannot know which name was
// asked for, so under LoopbackNamed it refuses loopback; prefer DialContext.
func (g *Guard) Control(network, address string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: connecting to %s: %w", escapeHost(address), err)
	}
	return g.policy.CheckAddr(ap.Addr(), Host{})
}
