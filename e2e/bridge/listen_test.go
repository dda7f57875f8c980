package bridge_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// hostIP returns an address of this machine beyond loopback, or "".
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// waitFor waits (up to ten seconds: stderr is copied by another goroutine)
// until the bridge's stderr holds want.
func (p *bridgeProc) waitFor(want string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestBridgeListenAddresses: whatever --listen names, the printed URL works
// from this machine (a ping with the printed token is answered), names the
// address actually bound rather than a name that could resolve elsewhere, and a
// bridge that listens beyond loopback says so on stderr — a wildcard bind used
// to print a 127.0.0.1 URL without a word.
func TestBridgeListenAddresses(t *testing.T) {
	type tc struct {
		listen, url, warn string
	}
	cases := []tc{
		{"0.0.0.0:0", "http://127.0.0.1:", "listening beyond loopback, on every interface (0.0.0.0:"},
		{"127.0.0.1:0", "http://127.0.0.1:", ""},
		{"localhost:0", "http://127.0.0.1:", ""},
	}
	if testenv.HaveIPv6Loopback() {
		cases = append(cases,
			tc{"[::]:0", "http://[::1]:", "listening beyond loopback, on every interface ([::]:"},
			tc{"[::1]:0", "http://[::1]:", ""})
	}
	if ip := hostIP(t); ip != "" {
		cases = append(cases, tc{ip + ":0", "http://" + ip + ":", "listening beyond loopback, on " + ip + ":"})
	} else {
		t.Log("no address beyond loopback: the specific-address case is not run")
	}
	for _, c := range cases {
		t.Run(c.listen, func(t *testing.T) {
			p := startBridge(t, "--listen", c.listen)
			if !strings.HasPrefix(p.url, c.url) || !strings.HasSuffix(p.url, "/mcp") {
				t.Errorf("URL %q, want %s…/mcp", p.url, c.url)
			}
			req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+p.token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("ping at the printed URL: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("ping at the printed URL: %d", res.StatusCode)
			}
			if c.warn != "" && !p.waitFor(c.warn) {
				t.Errorf("stderr does not say %q:\n%s", c.warn, p.stderr)
			}
			if c.warn == "" && strings.Contains(p.stderr.String(), "beyond loopback") {
				t.Errorf("a loopback bridge warns:\n%s", p.stderr)
			}
		})
	}
}
