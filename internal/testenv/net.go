package testenv

import "net"

// HaveIPv6Loopback reports whether this machine can listen on [::1] (containers often
// cannot), for tests of IPv6 listen addresses.
func HaveIPv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
