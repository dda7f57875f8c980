package mgmt_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/toolgate/toolgate/internal/mgmt"
)

// TestDocsErrorTable checks docs/management.md's error table against the code: every
// stable code is a row, with its JSON-RPC code and its refusal status.
func TestDocsErrorTable(t *testing.T) {
	rows := docsErrorTable()
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.code] {
			t.Errorf("%s is listed twice", r.code)
		}
		seen[r.code] = true
		n, ok := mgmt.RPCCodes[r.code]
		if !ok {
			t.Errorf("the docs list %s, which the code does not have", r.code)
			continue
		}
		if n != r.rpc {
			t.Errorf("%s: docs say JSON-RPC %d, code says %d", r.code, r.rpc, n)
		}
		if s := mgmt.HTTPStatus(r.code); s != r.status {
			t.Errorf("%s: docs say HTTP %d, code says %d", r.code, r.status, s)
		}
	}
	for code := range mgmt.RPCCodes {
		if !seen[code] {
			t.Errorf("%s is missing from the docs' error table", code)
		}
	}
}

// goldenExchanges returns every (request body, answer body) pair of the golden files
// and every message a socket received.
func goldenExchanges(t *testing.T) (pairs map[[2]string]bool, received map[string]bool) {
	pairs, received = map[[2]string]bool{}, map[string]bool{}
	files, _ := filepath.Glob("testdata/golden/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range ar.Files {
			switch f.Name {
			case "request":
				_, req, _ := strings.Cut(string(f.Data), "\n\n")
				_, ans, _ := strings.Cut(string(ar.Files[i+1].Data), "\n\n")
				pairs[[2]string{strings.TrimSuffix(req, "\n"), strings.TrimSuffix(ans, "\n")}] = true
			case "receive":
				for _, l := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
					received[l] = true
				}
			}
		}
	}
	return pairs, received
}

var docBlock = regexp.MustCompile("(?m)^(Request|Answer|Answer \\(HTTP \\d+\\)|Notification):\n\n```json\n((?s:.*?))\n```")

func compact(t *testing.T, s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("docs example is not JSON: %v\n%s", err, s)
	}
	return b.String()
}

// TestDocsExamples checks every worked example in docs/management.md against the
// golden files: each Request/Answer pair is one of their exchanges, and each
// Notification one a socket received. Whitespace aside, the examples are the bytes.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/management.md")
	if err != nil {
		t.Fatal(err)
	}
	pairs, received := goldenExchanges(t)
	blocks := docBlock.FindAllStringSubmatch(string(doc), -1)
	methods := map[string]bool{}
	for i := 0; i < len(blocks); i++ {
		kind, body := blocks[i][1], compact(t, blocks[i][2])
		switch {
		case kind == "Notification":
			if !received[body] {
				t.Errorf("notification example not in the golden files:\n%s", body)
			}
			var n struct{ Method string }
			_ = json.Unmarshal([]byte(body), &n)
			methods[n.Method] = true
		case kind == "Request":
			if i+1 >= len(blocks) || !strings.HasPrefix(blocks[i+1][1], "Answer") {
				t.Fatalf("request example without an answer:\n%s", body)
			}
			answer := compact(t, blocks[i+1][2])
			if !pairs[[2]string{body, answer}] {
				t.Errorf("example not in the golden files:\n%s\n%s", body, answer)
			}
			var r struct{ Method string }
			_ = json.Unmarshal([]byte(body), &r)
			methods[r.Method] = true
			i++
		default:
			t.Fatalf("answer example without a request:\n%s", body)
		}
	}
	for _, m := range []string{mgmt.MethodList, mgmt.MethodInstall, mgmt.MethodPolicySet, mgmt.MethodRestart, mgmt.MethodUninstall,
		mgmt.MethodDetails, mgmt.NotifyChanged, mgmt.NotifyStatusChanged, mgmt.NotifyCatalogChanged} {
		if !methods[m] {
			t.Errorf("docs/management.md has no worked example of %s", m)
		}
	}
	if len(blocks) < 20 || !slices.ContainsFunc(blocks, func(b []string) bool { return b[1] == "Answer (HTTP 403)" }) {
		t.Fatalf("found only %d example blocks", len(blocks))
	}
}

var docsTable []docsRow

type docsRow struct {
	code   string
	rpc    int64
	status int
}

// docsErrorTable reads the table under "## Errors" in docs/management.md: rows
// "| `code` | -32xxx | status | meaning |".
func docsErrorTable() []docsRow {
	if docsTable != nil {
		return docsTable
	}
	data, err := os.ReadFile("../../docs/management.md")
	if err != nil {
		panic(err)
	}
	_, section, _ := strings.Cut(string(data), "\n## Errors\n")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") || strings.TrimSpace(cells[2]) == "JSON-RPC" {
			continue
		}
		var row docsRow
		row.code = strings.Trim(strings.TrimSpace(cells[1]), "`")
		if err := json.Unmarshal([]byte(strings.TrimSpace(cells[2])), &row.rpc); err != nil {
			panic("docs/management.md: bad JSON-RPC code in " + line)
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(cells[3])), &row.status); err != nil {
			panic("docs/management.md: bad HTTP status in " + line)
		}
		docsTable = append(docsTable, row)
	}
	return docsTable
}
