package app_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// A 2026-07-28 caller reaches an upstream that speaks that revision (the go-sdk's
// conformance server over stdio) as itself, on the server's stateless connection:
// concurrent callers declaring different client capabilities each get the input
// requests their own capabilities allow, never the other's; the upstream's input
// rounds cross for prompts/get too, with toolgate's sealed state refused when
// altered; and all of it runs on two processes (the legacy connection and its
// stateless twin), whatever the number of calls.
func TestStatelessCallersAreThemselves(t *testing.T) {
	spec, marker := upstreamtest.EverythingSpec(t)
	w := &upstreamWorld{markers: map[string]string{spec.Name: marker}}
	w.open(t, upstreamtest.Dialer{ToClient: true}.Host(spec), nil)
	w.sync(t, spec.Name, true, true)
	w.grant(t, "everything.*")
	for _, tool := range []string{app.RequestElicitation, app.RequestSampling, app.RequestRoots} {
		w.grant(t, tool)
	}
	b := serverBridge(t, w, "everything")

	keys := func(res string) string {
		var r struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
		}
		if err := json.Unmarshal([]byte(res), &r); err != nil || r.ResultType != "input_required" {
			t.Fatalf("not input_required: %s", res)
		}
		var ks []string
		for k := range r.InputRequests {
			ks = append(ks, k)
		}
		return strings.Join(ks, ",")
	}
	const call = `{"name":"test_input_required_result_capabilities","arguments":{}}`
	var wg sync.WaitGroup
	for range 8 {
		for caps, want := range map[string]string{`{"sampling":{}}`: "greeting", `{"elicitation":{}}`: "user_name"} {
			wg.Go(func() {
				res, e := rpcAs(t, b.URL(), caps, "tools/call", call)
				if e != "" {
					t.Errorf("%s: %s", caps, e)
					return
				}
				if got := keys(res); got != want {
					t.Errorf("declaring %s the upstream asked for %q, want %q", caps, got, want)
				}
			})
		}
	}
	wg.Wait()
	// A caller declaring nothing the tool can ask for is told so by the upstream.
	if res, e := rpcAs(t, b.URL(), `{}`, "tools/call", call); e != "" || !strings.Contains(res, "No declared client capability") {
		t.Errorf("no capabilities: %s %s", res, e)
	}

	// prompts/get: the upstream's own input round and key, toolgate's state.
	const prompt = `{"name":"test_input_required_result_prompt"}`
	res, e := rpcAs(t, b.URL(), `{"elicitation":{}}`, "prompts/get", prompt)
	if e != "" || keys(res) != "user_context" {
		t.Fatalf("prompts/get: %s %s", res, e)
	}
	var r struct {
		RequestState string `json:"requestState"`
	}
	json.Unmarshal([]byte(res), &r)
	if !strings.HasPrefix(r.RequestState, "tgs1.") {
		t.Fatalf("requestState %q is not toolgate's", r.RequestState)
	}
	retry := func(state string) (string, string) {
		sb, _ := json.Marshal(state)
		return rpcAs(t, b.URL(), `{"elicitation":{}}`, "prompts/get",
			`{"name":"test_input_required_result_prompt","inputResponses":{"user_context":{"action":"accept","content":{"context":"ctx-7"}}},"requestState":`+string(sb)+`}`)
	}
	if _, e := retry(r.RequestState + "-TAMPERED"); !strings.Contains(e, "-32602") {
		t.Errorf("tampered prompt state: %s", e)
	}
	if res, e := retry(r.RequestState); e != "" || !strings.Contains(res, "Context: ctx-7") {
		t.Errorf("prompts/get retry: %s %s", res, e)
	}

	// One legacy connection and one stateless twin: no process per call.
	if n := len(upstreamtest.Processes(t, marker)); n != 2 {
		t.Errorf("%d upstream processes after 18 stateless requests, want 2", n)
	}
}
