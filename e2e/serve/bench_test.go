package serve

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/rpcwire/rpcwiretest"
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

// peakRSS is the daemon's VmHWM (the most resident memory it ever had), in
// bytes.
func (d *daemon) peakRSS(b *testing.B) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	b.Skip("no VmHWM")
	return 0
}

// BenchmarkServeLargeCall posts 3 MiB tools/call requests to the real
// daemon's /mcp, one after another, and reports how far its peak resident
// memory rose above what it had after a small call (peak-RSS-growth-MiB): the
// memory one large request costs, body, decoding, the kernel's parse and the
// tool included.
func BenchmarkServeLargeCall(b *testing.B) {
	for _, shape := range rpcwiretest.Shapes {
		b.Run(shape, func(b *testing.B) {
			data, _ := setup(b, nil)
			d := startServe(b, data, workspaceDir(b))
			token := d.ownerToken()
			status, h, body := request(b, "POST", d.url+"/mcp", token, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
			if status != 200 {
				b.Fatalf("initialize: %d %s", status, body)
			}
			sid := h.Get("Mcp-Session-Id")
			call := func(body string) {
				status, _, out := request(b, "POST", d.url+"/mcp", token, body, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-06-18")
				if status != 200 || !strings.Contains(string(out), `"result"`) {
					b.Fatalf("%d %.300s", status, out)
				}
			}
			call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.write_file","arguments":{"path":"small.txt","content":"x"}}}`)
			before := d.peakRSS(b)
			// local.write_file: the string shape is written, the tree shape
			// refused by the tool's schema after it was read and parsed.
			big := string(rpcwiretest.LargeCall("local.write_file", shape, 3<<20))
			b.SetBytes(int64(len(big)))
			for b.Loop() {
				call(big)
			}
			b.ReportMetric(float64(d.peakRSS(b)-before)/(1<<20), "peak-RSS-growth-MiB")
		})
	}
}
