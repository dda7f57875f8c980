package listenaddr_test

import (
	"net"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/listenaddr"
)

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "127.9.9.9": true, "::1": true,
		"0.0.0.0": false, "::": false, "10.0.0.5": false, "example.com": false, "": false, "localhost.": false,
	} {
		if got := listenaddr.IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestParseBind(t *testing.T) {
	for addr, want := range map[string]struct {
		loopback bool
		err      string
	}{
		"127.0.0.1:7077":  {loopback: true},
		"localhost:0":     {loopback: true},
		"[::1]:0":         {loopback: true},
		"0.0.0.0:7077":    {},
		"[::]:7077":       {},
		":7077":           {},
		"10.0.0.5:1":      {},
		"example.com:1":   {err: "host must be an IP address or localhost"},
		"nonsense":        {err: "--listen"},
		"127.0.0.1:x":     {err: "invalid port"},
		"127.0.0.1:70000": {err: "invalid port"},
	} {
		_, loopback, err := listenaddr.ParseBind(addr)
		switch {
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err)):
			t.Errorf("ParseBind(%q) error %v, want %q", addr, err, want.err)
		case want.err == "" && err != nil:
			t.Errorf("ParseBind(%q): %v", addr, err)
		case want.err == "" && loopback != want.loopback:
			t.Errorf("ParseBind(%q) loopback %v, want %v", addr, loopback, want.loopback)
		}
	}
}

// The URL names what was bound, and for a wildcard the loopback address of the family
// asked for: never "0.0.0.0" or "[::]", which are not addresses a client can reach.
func TestBaseURL(t *testing.T) {
	for _, c := range []struct {
		host string
		ip   string
		want string
	}{
		{"", "::", "http://127.0.0.1:7077"},
		{"0.0.0.0", "0.0.0.0", "http://127.0.0.1:7077"},
		{"::", "::", "http://[::1]:7077"},
		{"localhost", "127.0.0.1", "http://127.0.0.1:7077"},
		{"::1", "::1", "http://[::1]:7077"},
		{"10.0.0.5", "10.0.0.5", "http://10.0.0.5:7077"},
	} {
		if got := listenaddr.BaseURL(c.host, &net.TCPAddr{IP: net.ParseIP(c.ip), Port: 7077}); got != c.want {
			t.Errorf("BaseURL(%q, %s) = %s, want %s", c.host, c.ip, got, c.want)
		}
	}
}
