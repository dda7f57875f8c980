package mgmt_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// FuzzHandler posts arbitrary bodies as the owner. Whatever the body, the answer is
// 200, 400 or 413 with exactly one strictly decodable JSON-RPC answer whose error (if
// any) carries a documented data.code with its JSON-RPC code; a 200 answers the
// request's own id; and nothing panics.
func FuzzHandler(f *testing.F) {
	files, _ := filepath.Glob("testdata/golden/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, fl := range ar.Files {
			if fl.Name == "request" {
				if _, body, ok := strings.Cut(string(fl.Data), "\n\n"); ok {
					f.Add([]byte(strings.TrimSuffix(body, "\n")))
				}
			}
		}
	}
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"jsonrpc":"2.0","id":1,"method":"mcp/list","params":null}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"mcp/list"}`, `{"jsonrpc":"2.0","id":1,"method":"mcp/install","params":{"config_json":"{\"mcpServers\":{\"a\":{\"command\":\"x\",\"command\":\"y\"}}}"}}`} {
		f.Add([]byte(s))
	}
	stack, _ := serveStack(f, mgmttest.NewSeeded(), mgmt.Options{MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, mgmt.Path, strings.NewReader(string(body)))
		req.Host = "127.0.0.1:7077"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+ownerToken)
		rec := httptest.NewRecorder()
		stack.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 413:
		default:
			t.Fatalf("HTTP %d for %q", rec.Code, body)
		}
		a, err := mgmt.ReadAnswer(rec.Body.Bytes())
		if err != nil {
			t.Fatalf("answer is not one JSON-RPC response (%v): %s", err, rec.Body.Bytes())
		}
		if a.Error != nil {
			var d struct {
				Code string `json:"code"`
			}
			if json.Unmarshal(a.Error.Data, &d) != nil || !documentedCode(d.Code, a.Error.Code) {
				t.Fatalf("error without a documented code: %s", rec.Body.Bytes())
			}
		} else if rec.Code != 200 {
			t.Fatalf("a result with HTTP %d", rec.Code)
		}
		if rec.Code == 200 {
			in, _ := rpcwire.Decode(body)
			if in == nil || in.Batch || in.Items[0].Msg == nil || string(rpcwire.EncodeID(in.Items[0].Msg.ID)) != string(a.ID) {
				t.Fatalf("a 200 answer to %q with id %v", body, a.ID)
			}
		}
	})
}

// documentedCode reports whether code is in docs/management.md's error table with
// JSON-RPC code n.
func documentedCode(code string, n int64) bool {
	for _, row := range docsErrorTable() {
		if row.code == code && row.rpc == n {
			return true
		}
	}
	return false
}
