package telemetry

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// An installed Streamable HTTP server behind the real binary, with no exporter
// configured: the HTTP request toolgate makes for a traced call carries the
// caller's trace id in the traceparent and tracestate headers and in
// params._meta; a call with a malformed traceparent sends no trace context at all.
func TestTraceparentReachesHTTPUpstream(t *testing.T) {
	up := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	data := filepath.Join(t.TempDir(), "data")
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"rx": map[string]any{"type": "http", "url": up.URL}}})
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	tg(t, data, "install", cfg, "--allow-implicit-invocation=true")
	tg(t, data, "grant", "add", "--principal", "default", "--tool", "rx.*", "--action", "execute")
	srv := testenvStart(t, data)
	c := open(t, srv.URL, ownerToken(t, data), "rx.awkward")
	hdr := http.Header{"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"}, "Tracestate": {"vendor=v1"}}
	if raw, code := c.post("tools/call", `{"name":"rx.awkward","arguments":{"n":1.5,"ref":"traced-http"}}`, hdr); code != http.StatusOK || !strings.Contains(string(raw), `"result"`) {
		t.Fatalf("traced call: %d %s", code, raw)
	}
	bad := http.Header{"Traceparent": {"00-" + callerTrace + "-zz-01"}}
	if raw, code := c.post("tools/call", `{"name":"rx.awkward","arguments":{"n":1.5,"ref":"bad-http"}}`, bad); code != http.StatusOK || !strings.Contains(string(raw), `"result"`) {
		t.Fatalf("call with a malformed traceparent: %d %s", code, raw)
	}
	if err := srv.Stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve: %v", err)
	}
	// No SDK: the spans record nothing, and the context sent is the caller's own.
	want := "00-" + callerTrace + "-" + callerSpan + "-01"
	seen := map[string]bool{}
	for _, r := range up.Requests() {
		for _, text := range []string{"traced-http", "bad-http"} {
			if r.Method != http.MethodPost || !strings.Contains(r.Body, text) {
				continue
			}
			seen[text] = true
			tp, ts := r.Header.Get("Traceparent"), r.Header.Get("Tracestate")
			if text == "traced-http" && (tp != want || ts != "vendor=v1" || !strings.Contains(r.Body, `"traceparent":"`+want+`"`)) {
				t.Errorf("traced call reached the upstream with traceparent %q, tracestate %q, body %s", tp, ts, r.Body)
			}
			if text == "bad-http" && (tp != "" || ts != "" || strings.Contains(r.Body, "traceparent")) {
				t.Errorf("malformed call reached the upstream with traceparent %q, tracestate %q, body %s", tp, ts, r.Body)
			}
		}
	}
	if !seen["traced-http"] || !seen["bad-http"] {
		t.Fatalf("the upstream saw %v of the two calls", seen)
	}
}
