package bridge_test

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBridgeTokenScope: the token `toolgate bridge` prints opens that bridge and
// nothing else. A harness given a bridge narrowed with --capability cannot take
// its token to a wider bridge of the same principal, nor to `toolgate serve` on
// the same data directory (where it would have the principal's whole grants).
// Before, both accepted it: the capability narrowing could be stepped around.
func TestBridgeTokenScope(t *testing.T) {
	data := testenv.PrivateDir(t)
	narrow := startBridge(t, "--data-dir", data, "--capability", "local.*")
	wide := startBridge(t, "--data-dir", data)

	post := func(url, token string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(narrow.url, narrow.token); got != http.StatusOK {
		t.Errorf("a bridge refused its own token: %d", got)
	}
	if got := post(wide.url, narrow.token); got != http.StatusUnauthorized {
		t.Errorf("the wide bridge answered the narrowed bridge's token with %d, want 401", got)
	}
	if got := post(narrow.url, wide.token); got != http.StatusUnauthorized {
		t.Errorf("the narrowed bridge answered the wide bridge's token with %d, want 401", got)
	}

	// toolgate serve over the same data directory.
	cmd := exec.Command(testenv.Binary(t), "serve", "--data-dir", data, "--listen", "127.0.0.1:0")
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	base := ""
	sc := bufio.NewScanner(errOut)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "toolgate: listening on "); ok {
			base = u
			break
		}
	}
	if base == "" {
		t.Fatal("toolgate serve did not say where it listens")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	owner, err := os.ReadFile(filepath.Join(data, "owner-token"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := get(strings.TrimSpace(string(owner))); got != http.StatusOK {
		t.Errorf("toolgate serve refused the owner token: %d", got)
	}
	if got := get(narrow.token); got != http.StatusUnauthorized {
		t.Errorf("toolgate serve answered a bridge's token with %d, want 401", got)
	}
	if got := post(base+"/mcp", narrow.token); got != http.StatusUnauthorized {
		t.Errorf("toolgate serve's /mcp answered a bridge's token with %d, want 401", got)
	}
}
