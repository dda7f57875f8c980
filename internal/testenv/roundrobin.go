package testenv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// RoundRobin is an HTTP load balancer for tests: each request goes to the next
// backend in turn, with no stickiness, its answer streamed back as it arrives (SSE
// included). The inbound Host is kept (backends see the proxy's loopback name, and a
// foreign Host stays foreign), hop-by-hop headers are dropped, and a request without
// Authorization gets the token given (when not empty), as an authenticating gateway would add it.
//
// It reads each request body whole before forwarding it, as nginx and haproxy buffer
// bodies by default. Streaming it instead (net/http/httputil.ReverseProxy does) cuts an
// answer now and then: toolgate sends an SSE answer's headers before the call runs;
// writing them to the client makes the proxy's http.Server close the inbound body;
// the transport's last read of that body, checking it was not longer than declared,
// then fails and tears down the backend connection mid-answer ("use of closed network
// connection"; Go issue 40747). Even one toolgate serve behind ReverseProxy showed it.
type RoundRobin struct {
	*httptest.Server
	// Hits counts the requests each backend was given.
	Hits      []atomic.Int64
	token     string // added as a bearer to requests that carry no Authorization
	backends  []string
	next      atomic.Int64
	transport *http.Transport
}

// hopByHop are the headers a proxy does not forward (RFC 9110 §7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// NewRoundRobin starts a proxy over backends (base URLs, "http://127.0.0.1:PORT"),
// closed when the test ends; token, when set, is the bearer of requests without one.
func NewRoundRobin(t testing.TB, token string, backends ...string) *RoundRobin {
	t.Helper()
	p := &RoundRobin{Hits: make([]atomic.Int64, len(backends)), token: token, backends: backends,
		transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.Close()
		p.transport.CloseIdleConnections()
	})
	return p
}

func (p *RoundRobin) serve(w http.ResponseWriter, r *http.Request) {
	i := int(p.next.Add(1)-1) % len(p.backends)
	p.Hits[i].Add(1)
	var body io.Reader
	if r.ContentLength != 0 {
		b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		body = bytes.NewReader(b)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(p.backends[i], "/")+r.URL.RequestURI(), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	out.Host = r.Host
	if p.token != "" && out.Header.Get("Authorization") == "" {
		out.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	for _, h := range hopByHop {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
