package trust

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
)

// health is a server's last error as `toolgate details --json` reports it.
func (r *rig) health(server string) (state, lastError string) {
	r.t.Helper()
	out, errb, code := r.run("details", server, "--json")
	if code != 0 {
		return "absent", errb
	}
	var d struct {
		Health struct {
			State        string `json:"state"`
			LastError    string `json:"last_error"`
			CatalogError string `json:"catalog_error"`
		}
	}
	json.Unmarshal([]byte(out), &d)
	return d.Health.State, d.Health.LastError + d.Health.CatalogError
}

func (r *rig) run(args ...string) (string, string, int) {
	return run(r.t, r.data, args...)
}

// counting is a loopback listener that counts the connections it accepts: a refusal
// "before any dial" leaves it at zero.
func counting(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not an MCP server", http.StatusNotFound)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &n
}

// A remote upstream's URL is refused before any connection in every hostile spelling
// — decimal, octal, hex and short IPv4, IPv4-mapped IPv6, trailing dots, link-local
// and metadata addresses and names, and names that resolve to them or to loopback —
// resolved by a test hosts file (TOOLGATE_TEST_HOSTS), so no query or packet leaves
// the machine; a redirect to another origin is refused; a stdio server installed
// with them works throughout.
func TestReachRefusedBeforeAnyDial(t *testing.T) {
	r := newRig(t)
	trap, trapped := counting(t) // what every name below would reach if resolved and dialled
	_, trapPort, _ := net.SplitHostPort(trap.Listener.Addr().String())
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte(strings.Join([]string{
		"169.254.169.254 rebind.test",
		"::ffff:169.254.169.254 mapped.test",
		"64:ff9b::a9fe:a9fe nat64.test",
		"2002:a9fe:a9fe:: sixtofour.test",
		"fd00:ec2::254 aws6.test",
		"100.100.100.200 alibaba.test",
		"127.0.0.1 loop.test",
		"0.0.0.0 zero.test",
		"127.0.0.1 localhost", // the redirect's target, so that following it would connect
	}, "\n")+"\n"), 0o600)
	t.Setenv(app.TestHostsEnv, hosts)

	// The redirect: 127.0.0.1 sends every request to localhost, another origin.
	redirected, hops := counting(t)
	_, redirPort, _ := net.SplitHostPort(redirected.Listener.Addr().String())
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "http://localhost:"+redirPort+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)

	cases := map[string]struct{ url, want string }{
		"decimal":   {"http://2852039166:" + trapPort + "/mcp", "169.254.169.254"},
		"octal":     {"http://0251.0376.0251.0376:" + trapPort + "/mcp", "169.254.169.254"},
		"hex":       {"http://0xa9fea9fe:" + trapPort + "/mcp", "169.254.169.254"},
		"short":     {"http://169.254.43518:" + trapPort + "/mcp", "169.254.169.254"},
		"mapped6":   {"https://[::ffff:169.254.169.254]:" + trapPort + "/mcp", "169.254"},
		"dotted":    {"https://169.254.169.254.:" + trapPort + "/mcp", "169.254"},
		"linklocal": {"https://[fe80::1%25lo]:" + trapPort + "/mcp", "link-local"},
		"metaname":  {"https://metadata.google.internal.:" + trapPort + "/mcp", "metadata"},
		"plainhttp": {"http://rebind.test:" + trapPort + "/mcp", "plain http reaches only loopback"},
		"rebind":    {"https://rebind.test:" + trapPort + "/mcp", "169.254.169.254"},
		"rebind6":   {"https://mapped.test:" + trapPort + "/mcp", "169.254.169.254"},
		"nat64":     {"https://nat64.test:" + trapPort + "/mcp", "64:ff9b"},
		"sixtofour": {"https://sixtofour.test:" + trapPort + "/mcp", "169.254.169.254"},
		"aws6":      {"https://aws6.test:" + trapPort + "/mcp", "fd00:ec2::254"},
		"alibaba":   {"https://alibaba.test:" + trapPort + "/mcp", "100.100.100.200"},
		"loopname":  {"https://loop.test:" + trapPort + "/mcp", "loopback"},
		"zero":      {"https://zero.test:" + trapPort + "/mcp", "0.0.0.0"},
		"redirect":  {redirector.URL + "/mcp", "redirect"},
	}
	servers := map[string]server{"ok": fixture(t)}
	for n, c := range cases {
		servers[n] = server{Type: "http", URL: c.url}
	}
	out, code := r.install(servers)
	r.grant("--principal", "default", "--tool", "*")
	r.serve()
	r.waitTools("default", "ok.echo")
	for n, c := range cases {
		if strings.Contains(out, "validation_error  "+n) {
			t.Logf("%s: refused at install", n)
			continue
		}
		var state, msg string
		eventually(t, n+" refused", func() bool {
			state, msg = r.health(n)
			return msg != ""
		})
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s (%s): %s %q, want an error naming %q", n, c.url, state, msg, c.want)
		} else {
			t.Logf("%s: %s: %s", n, state, msg)
		}
	}
	if code == 0 && strings.Contains(out, "validation_error") {
		t.Errorf("install exit 0 with a refusal: %s", out)
	}
	if n := trapped.Load(); n != 0 {
		t.Errorf("%d connections reached the loopback trap", n)
	}
	if n := hops.Load(); n != 0 {
		t.Errorf("the cross-origin redirect was followed (%d connections)", n)
	}
	if txt, isErr := call(t, r.client("default", nil), "ok.echo", map[string]any{"text": "fine"}); isErr || txt != "fine" {
		t.Fatalf("the stdio server: %s", txt)
	}
}
