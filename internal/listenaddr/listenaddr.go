// Package listenaddr answers the questions every listener of toolgate asks about its
// address (toolgate serve, toolgate bridge, the MCP guard): does a host name only this
// machine, is a listen address acceptable, and which URL reaches what was bound from
// this machine. It is one place so that the daemon and the bridge print URLs that work
// and warn alike (docs/http-contract.md, "Endpoints"; docs/kernel.md, "toolgate serve").
package listenaddr

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// IsLoopback reports whether host (a listen host, or the host of a Host or Origin
// header) names only this machine: "localhost" in any case, or a loopback address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseBind checks a daemon's listen address "HOST:PORT": HOST must be an IP address,
// "localhost", or empty (every interface), never another name, which could resolve to
// an address the operator did not mean. loopback reports whether it binds loopback
// only.
func ParseBind(addr string) (host string, loopback bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", false, fmt.Errorf("--listen %q: invalid port", addr)
	}
	switch {
	case host == "":
		return host, false, nil // ":7077" binds every interface
	case strings.EqualFold(host, "localhost"):
		return host, true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return "", false, fmt.Errorf("--listen %q: host must be an IP address or localhost", addr)
	}
	return host, ip.IsLoopback(), nil
}

// ClientHost is the host a client on this machine uses to reach a listener that was
// asked for host and bound to ip: the bound address itself, never a name that might
// resolve to another address (where another process could hold the same port); for a
// wildcard bind (which Go makes dual-stack, reported as ::) the loopback address of
// the family asked for (an IPv6 wildcard "::" gives ::1, anything else 127.0.0.1).
func ClientHost(host string, ip net.IP) string {
	if !ip.IsUnspecified() {
		return ip.String()
	}
	if strings.Contains(host, ":") {
		return "::1"
	}
	return "127.0.0.1"
}

// BaseURL is "http://HOST:PORT" for a listener asked for host and bound to addr, with
// HOST as ClientHost gives it: a URL that works from this machine, whatever was bound.
func BaseURL(host string, addr *net.TCPAddr) string {
	return "http://" + net.JoinHostPort(ClientHost(host, addr.IP), strconv.Itoa(addr.Port))
}
