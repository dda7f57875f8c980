package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkServeInvoke is one POST /v1/tools/invoke (local.read_file of a small file)
// against the real daemon over loopback: authentication, a turn, the kernel, the
// durable audit append, the tool and the answer.
func BenchmarkServeInvoke(b *testing.B) {
	data, toks := setup(b, nil, "default")
	d := startServe(b, data, workspaceDir(b))
	client := &http.Client{}
	body := `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`
	for b.Loop() {
		req, _ := http.NewRequest("POST", d.url+"/v1/tools/invoke", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+toks["default"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(out), "alpha") {
			b.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
}

// BenchmarkServeListTools is GET /v1/tools against the real daemon (the default
// catalogue of a workspace, about ten tools).
func BenchmarkServeListTools(b *testing.B) {
	data, toks := setup(b, nil, "default")
	d := startServe(b, data, workspaceDir(b))
	client := &http.Client{}
	for b.Loop() {
		req, _ := http.NewRequest("GET", d.url+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+toks["default"])
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}
