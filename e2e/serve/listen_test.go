package serve

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestServeListenAddresses: whatever --listen names, the URL toolgate serve prints
// works from this machine (the owner token lists tools there) and names the address
// bound, never a wildcard; a listener beyond loopback says so. serve used to print
// http://[::]:PORT and http://0.0.0.0:PORT for a wildcard bind, which are not
// addresses a client can connect to everywhere.
func TestServeListenAddresses(t *testing.T) {
	type tc struct{ listen, url, warn string }
	cases := []tc{
		{"0.0.0.0:0", "http://127.0.0.1:", "listening beyond loopback, on every interface (0.0.0.0:"},
		{":0", "http://127.0.0.1:", "listening beyond loopback, on every interface (:"},
		{"127.0.0.1:0", "http://127.0.0.1:", ""},
		{"localhost:0", "http://127.0.0.1:", ""},
	}
	if testenv.HaveIPv6Loopback() {
		cases = append(cases,
			tc{"[::]:0", "http://[::1]:", "listening beyond loopback, on every interface ([::]:"},
			tc{"[::1]:0", "http://[::1]:", ""})
	}
	for _, c := range cases {
		t.Run(c.listen, func(t *testing.T) {
			d := startServeAt(t, filepath.Join(t.TempDir(), "data"), c.listen)
			defer d.stop(syscall.SIGTERM)
			if !strings.HasPrefix(d.url, c.url) {
				t.Errorf("listening on %q, want %s…", d.url, c.url)
			}
			if !strings.Contains(d.stderr.String(), "MCP endpoint "+d.url+"/mcp") {
				t.Errorf("the MCP endpoint is not %s/mcp:\n%s", d.url, d.stderr)
			}
			if status, _, body := request(t, "GET", d.url+"/v1/tools", d.ownerToken(), ""); status != 200 {
				t.Errorf("GET %s/v1/tools: %d %s", d.url, status, body)
			}
			switch {
			case c.warn != "" && !strings.Contains(d.stderr.String(), c.warn):
				t.Errorf("stderr does not say %q:\n%s", c.warn, d.stderr)
			case c.warn == "" && strings.Contains(d.stderr.String(), "beyond loopback"):
				t.Errorf("a loopback daemon warns:\n%s", d.stderr)
			}
		})
	}
}
