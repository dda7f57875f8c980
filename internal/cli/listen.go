package cli

import (
	"fmt"
	"io"
	"net"
	"strconv"
)

// warnBeyondLoopback tells the operator, on stderr, that a listener (toolgate serve's
// daemon, a bridge) accepts connections from other machines: its printed URL is one for
// this machine (listenaddr.BaseURL), and other machines reach it only under the address
// it is bound to or a name given with --allow-host. host is the one asked for, addr
// what was bound; what names the listener ("the daemon", "the bridge"), token the
// credential every request needs ("a bearer token", "the bearer token").
func warnBeyondLoopback(w io.Writer, what, token, host string, addr *net.TCPAddr) {
	where := net.JoinHostPort(host, strconv.Itoa(addr.Port))
	if addr.IP.IsUnspecified() {
		fmt.Fprintf(w, "toolgate: warning: listening beyond loopback, on every interface (%s); every request must carry %s\n", where, token)
		fmt.Fprintf(w, "toolgate: the URL printed is for this machine; other machines must address %s by a name or address given with --allow-host\n", what)
		return
	}
	if net.ParseIP(host) == nil {
		where += " (" + addr.IP.String() + ")"
	}
	fmt.Fprintf(w, "toolgate: warning: listening beyond loopback, on %s; every request must carry %s\n", where, token)
}
