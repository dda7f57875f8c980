package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkMCPReadFile is one read_file call after another through `toolgate mcp` over
// its stdio, in process: the MCP stdio layer, the kernel's decision, the audit append
// (at the default durability) and the confined read. docs/performance.md compares the
// same call against another server's over real pipes (scripts/bench-local.sh).
func BenchmarkMCPReadFile(b *testing.B) {
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte(strings.Repeat("0123456789abcdef\n", 160)), 0o644); err != nil {
		b.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"--data-dir", testenv.PrivateDir(b), "mcp", "--workspace", ws},
			cli.Stdio{In: inR, Out: outW, Err: io.Discard})
	}()
	defer func() { cancel(); inW.Close(); outR.Close(); <-done }()
	rd := bufio.NewReaderSize(outR, 1<<16)
	id := 0
	call := func(method, params string) []byte {
		id++
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			var m struct{ ID *int }
			if json.Unmarshal(line, &m) == nil && m.ID != nil && *m.ID == id {
				return line
			}
		}
	}
	call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req := `{"name":"toolgate_local_read_file","arguments":{"path":"a.txt"}}`
	if r := call("tools/call", req); !strings.Contains(string(r), "0123456789abcdef") {
		b.Fatalf("read_file: %s", r)
	}
	b.ReportAllocs()
	for b.Loop() {
		call("tools/call", req)
	}
}
