package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// kill -9 of the daemon while it is writing files must never leave a file written
// (an executed call) without the allowed event that authorized it, and must leave the
// audit chain verifiable.
// It holds at every audit durability level (docs/performance.md): both promise that
// an event survives the process.
func TestKill9NeverLosesAnExecutedCall(t *testing.T) {
	for _, level := range []string{"process", "power"} {
		t.Run(level, func(t *testing.T) { kill9NeverLosesAnExecutedCall(t, level) })
	}
}

func kill9NeverLosesAnExecutedCall(t *testing.T, level string) {
	data, toks := setup(t, nil, "default")
	ws := workspaceDir(t)
	const rounds, workers, killAfter = 3, 8, 25
	tok := toks["default"]
	for round := 0; round < rounds; round++ {
		d := startServe(t, data, ws, "--audit-durability", level)
		if want := "toolgate: audit durability " + level + "\n"; !strings.Contains(d.stderr.String(), want) {
			t.Fatalf("serve did not take the level: %q not in\n%s", want, d.stderr.String())
		}
		var ok atomic.Int64
		killed := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				client := &http.Client{}
				for i := 0; ; i++ {
					select {
					case <-killed:
						return
					default:
					}
					body := fmt.Sprintf(`{"name":"local.write_file","arguments":{"path":"crash/r%d-w%d-%d.txt","content":"x"}}`, round, w, i)
					req, _ := http.NewRequest("POST", d.url+"/v1/tools/invoke", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+tok)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						return // the daemon is gone
					}
					var r struct{ IsError bool }
					json.NewDecoder(resp.Body).Decode(&r)
					resp.Body.Close()
					if r.IsError {
						t.Errorf("write refused: round %d worker %d call %d", round, w, i)
						return
					}
					if ok.Add(1) == killAfter {
						once.Do(func() {
							d.cmd.Process.Signal(syscall.SIGKILL)
							close(killed)
						})
					}
				}
			}(w)
		}
		wg.Wait()
		<-d.done
	}

	// Every file written (a temporary file of an interrupted atomic write aside) has
	// its allowed event, and the chain verifies.
	allowed := checkEveryFileAudited(t, data, ws)
	files, err := os.ReadDir(filepath.Join(ws, "crash"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), ".") {
			n++
		}
	}
	if n < rounds*killAfter {
		t.Errorf("only %d files written over %d rounds; the test did not exercise the crash", n, rounds)
	}
	t.Logf("%d files written, %d allowed write events", n, allowed)
}
