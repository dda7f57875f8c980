package mcpconfig_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
	"github.com/toolgate/toolgate/internal/mcpconfig"
)

func fingerprint(t *testing.T, h mcpconfig.Hasher, doc string) string {
	t.Helper()
	r := mcpconfig.Parse([]byte(doc), h, &mcpconfig.Options{LookupEnv: lookup(map[string]string{"T": "tok"})})
	if r.Status() != mcpconfig.StatusOK || len(r.Entries) != 1 {
		t.Fatalf("%s: %v %v", doc, r.Diagnostics, r.Entries)
	}
	return r.Entries[0].Server.Fingerprint()
}

const fpBase = `{"mcpServers": {"github": {"command": "npx", "args": ["-y", "srv", "--token=abc"], "env": {"A": "1", "B": "2"}, "cwd": "/w"}}}`

// TestFingerprintVector freezes the canonical encoding: a changed encoding would make
// every installed server look updated on the next install of the same config. The
// expected values were computed by an independent implementation of the encoding
// docs/mcp-config.md documents (a few lines of Python building the same JSON), with
// testHasher's digest.
func TestFingerprintVector(t *testing.T) {
	for doc, want := range map[string]string{
		fpBase: "sha256:509f2b9203881aa91f06c00bd08c8bf5d48c8a786a4d99ddab0d53f8f5f55553",
		`{"mcpServers": {"remote": {"url": "https://u:p@mcp.example.com/mcp?x=1&token=t", "headers": {"X-A": "a"}, "isolation": "session", "required": true}}}`: "sha256:ccfde6e986e0a11486e9887e3888bed682e7d7b0cdf234f741e875f490a95413",
	} {
		if got := fingerprint(t, testHasher{}, doc); got != want {
			t.Errorf("fingerprint of %s\n= %s\nwant %s", doc, got, want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	base := fingerprint(t, testHasher{}, fpBase)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(base) {
		t.Fatalf("fingerprint %q", base)
	}
	same := map[string]string{
		"reinstalled":             fpBase,
		"env in another order":    `{"mcpServers": {"github": {"env": {"B": "2", "A": "1"}, "cwd": "/w", "args": ["-y", "srv", "--token=abc"], "command": "npx"}}}`,
		"another shape":           `{"servers": {"github": {"type": "stdio", "command": "npx", "args": ["-y", "srv", "--token=abc"], "env": {"A": "1", "B": "2"}, "cwd": "/w/"}}}`,
		"display name":            `{"mcpServers": {"GitHub": {"command": "npx", "args": ["-y", "srv", "--token=abc"], "env": {"A": "1", "B": "2"}, "cwd": "/w"}}}`,
		"description":             `{"mcpServers": {"github": {"command": "npx", "args": ["-y", "srv", "--token=abc"], "env": {"A": "1", "B": "2"}, "cwd": "/w", "description": "d"}}}`,
		"disabled (policy)":       `{"mcpServers": {"github": {"command": "npx", "args": ["-y", "srv", "--token=abc"], "env": {"A": "1", "B": "2"}, "cwd": "/w", "disabled": true}}}`,
		"ignored harness setting": `{"mcpServers": {"github": {"command": "npx", "args": ["-y", "srv", "--token=abc"], "env": {"A": "1", "B": "2"}, "cwd": "/w", "autoApprove": ["x"]}}}`,
	}
	for name, doc := range same {
		if got := fingerprint(t, testHasher{}, doc); got != base {
			t.Errorf("%s: fingerprint changed", name)
		}
	}
	if fingerprint(t, testHasher{}, strings.Replace(fpBase, `"B": "2"`, `"B": "tok"`, 1)) !=
		fingerprint(t, testHasher{}, strings.Replace(fpBase, `"B": "2"`, `"B": "${env:T}"`, 1)) {
		t.Error("the same value written out and taken from the environment give different fingerprints")
	}
	differ := map[string]string{
		"secret env value":   strings.Replace(fpBase, `"B": "2"`, `"B": "3"`, 1),
		"secret argument":    strings.Replace(fpBase, "--token=abc", "--token=abd", 1),
		"literal argument":   strings.Replace(fpBase, `"srv"`, `"srv2"`, 1),
		"argument order":     strings.Replace(fpBase, `"-y", "srv"`, `"srv", "-y"`, 1),
		"env added":          strings.Replace(fpBase, `"B": "2"`, `"B": "2", "C": ""`, 1),
		"env renamed":        strings.Replace(fpBase, `"B": "2"`, `"BB": "2"`, 1),
		"command":            strings.Replace(fpBase, `"npx"`, `"/usr/bin/npx"`, 1),
		"cwd":                strings.Replace(fpBase, `"/w"`, `"/x"`, 1),
		"isolation":          strings.Replace(fpBase, `"cwd": "/w"`, `"cwd": "/w", "isolation": "session"`, 1),
		"required":           strings.Replace(fpBase, `"cwd": "/w"`, `"cwd": "/w", "required": true`, 1),
		"call timeout":       strings.Replace(fpBase, `"cwd": "/w"`, `"cwd": "/w", "callTimeout": "90s"`, 1),
		"no call timeout":    strings.Replace(fpBase, `"cwd": "/w"`, `"cwd": "/w", "callTimeout": "none"`, 1),
		"server name":        strings.Replace(fpBase, `"github"`, `"gitlab"`, 1),
		"secret moved to an": strings.Replace(fpBase, `"env": {"A": "1", "B": "2"}`, `"env": {"A": "2", "B": "1"}`, 1),
	}
	seen := map[string]string{base: "base"}
	for name, doc := range differ {
		got := fingerprint(t, testHasher{}, doc)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: fingerprint equals that of %s", name, prev)
		}
		seen[got] = name
	}
	http := `{"mcpServers": {"r": {"url": "https://h.example.com/mcp?api_key=K", "headers": {"X-A": "a"}}}}`
	hbase := fingerprint(t, testHasher{}, http)
	for name, doc := range map[string]string{
		"query secret": strings.Replace(http, "api_key=K", "api_key=L", 1),
		"header value": strings.Replace(http, `"X-A": "a"`, `"X-A": "b"`, 1),
		"url":          strings.Replace(http, "/mcp", "/mcp2", 1),
		"kind":         strings.Replace(http, `"url"`, `"type": "sse", "url"`, 1),
		"userinfo":     strings.Replace(http, "https://", "https://u:p@", 1),
	} {
		if fingerprint(t, testHasher{}, doc) == hbase {
			t.Errorf("%s: fingerprint did not change", name)
		}
	}
}

// TestFingerprintKeyed: with the keystore's digest, one data directory gives a config
// the same fingerprint every time, another data directory a different one, and the
// fingerprint holds no digest of any secret.
func TestFingerprintKeyed(t *testing.T) {
	a, _ := keystoretest.New(t)
	b, _ := keystoretest.New(t)
	fa := fingerprint(t, a, fpBase)
	if fa != fingerprint(t, a, fpBase) {
		t.Error("one keystore gives one config two fingerprints")
	}
	if fa == fingerprint(t, b, fpBase) {
		t.Error("two keystores give a config with secrets the same fingerprint: the digest is not keyed")
	}
	plain := `{"mcpServers": {"s": {"command": "npx", "args": ["-y", "pkg"]}}}`
	if fingerprint(t, a, plain) != fingerprint(t, b, plain) {
		t.Error("a config without secrets depends on the keystore")
	}
	r := mcpconfig.Parse([]byte(fpBase), a, nil)
	def, _ := json.Marshal(r.Entries[0].Server)
	if strings.Contains(string(def), "=abc") || !strings.Contains(string(def), "--token=[redacted]") {
		t.Error("the definition holds a secret value")
	}
}

// callTimeout's normalised form and the deadline it gives the host.
func TestCallDeadline(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "none": -1, "90s": 90 * time.Second, "1m30s": 90 * time.Second, "24h": 24 * time.Hour, "1s": time.Second} {
		doc := `{"mcpServers": {"s": {"command": "x"}}}`
		if v != "" {
			doc = `{"mcpServers": {"s": {"command": "x", "callTimeout": "` + v + `"}}}`
		}
		r := mcpconfig.Parse([]byte(doc), testHasher{}, nil)
		if r.Status() != mcpconfig.StatusOK || len(r.Entries) != 1 {
			t.Fatalf("%q: %v %v", v, r.Diagnostics, r.Entries)
		}
		srv := r.Entries[0].Server
		if got := srv.CallDeadline(); got != want {
			t.Errorf("callTimeout %q: deadline %s, want %s", v, got, want)
		}
		if err := srv.Validate(); err != nil {
			t.Errorf("callTimeout %q: %v", v, err)
		}
	}
}
