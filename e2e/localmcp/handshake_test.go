package localmcp

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// send writes one line that gets no answer (a notification).
func (r *rawStdio) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// errorCode returns the JSON-RPC error code of an answer, or 0 for a result.
func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestAttackToolCallBeforeInitialize: on `toolgate mcp`, a session-based
// request before initialize is a JSON-RPC -32600 and runs nothing — the file a
// write_file would create never appears and no call is audited — whether it
// comes alone, after a notifications/initialized sent too early, or batched
// behind an initialize (initialize cannot be batched). ping is served before
// initialize, as the protocol allows, and a 2026-07-28 request needs no
// handshake. After initialize the session works, and a second initialize on
// the connection is refused.
func TestAttackToolCallBeforeInitialize(t *testing.T) {
	w := newWorld(t)
	r := startRaw(t, w)
	write := func(id, path string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + pWrite + `","arguments":{"path":"` + path + `","content":"x"}}}`
	}
	planted := filepath.Join(w.ws, "planted.txt")
	refused := func(what string, m map[string]any) {
		t.Helper()
		if errorCode(m) != -32600 {
			t.Errorf("%s: %v, want a -32600 error", what, m)
		}
		if _, err := os.Stat(planted); err == nil {
			t.Fatalf("%s: the call ran before initialize", what)
		}
	}

	refused("tools/call", r.roundTrip(write("1", "planted.txt")))
	refused("tools/list", r.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	if m := r.roundTrip(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); m["result"] == nil {
		t.Errorf("ping before initialize: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	refused("tools/call after an early notifications/initialized", r.roundTrip(write("4", "planted.txt")))
	if _, err := io.WriteString(r.in, `[{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}},`+write("6", "planted.txt")+"]\n"); err != nil {
		t.Fatal(err)
	}
	line, err := r.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var batch []map[string]any
	if err := json.Unmarshal([]byte(line), &batch); err != nil || len(batch) != 2 {
		t.Fatalf("batch answer %q: %v", line, err)
	}
	refused("batched initialize", batch[0])
	refused("tools/call batched behind initialize", batch[1])

	// The stateless revision is served without a handshake.
	m := r.roundTrip(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + pRead + `","arguments":{"path":"README.md"},` + modernMeta + `}}`)
	if res := resultOf(t, m); res["isError"] != false {
		t.Errorf("2026-07-28 read_file before initialize: %v", res)
	}

	if m := r.roundTrip(`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m := r.roundTrip(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`); errorCode(m) != -32600 {
		t.Errorf("second initialize: %v, want -32600", m)
	}
	if res := resultOf(t, r.roundTrip(write("10", "after.txt"))); res["isError"] != false {
		t.Errorf("write_file after initialize: %v", res)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "after.txt")); err != nil {
		t.Errorf("write_file after initialize: %v", err)
	}
	if evs := audited(t, w.data, "local.write_file"); len(evs) != 1 {
		t.Errorf("%d write_file calls audited, want the one after initialize: %v", len(evs), evs)
	}
}
