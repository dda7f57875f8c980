// Command toolgate is the MCP gateway: it hosts tool servers, decides every call, records
// each decision and re-publishes the permitted catalogue. All behaviour lives in
// internal/cli; main only connects it to the process, and installs the OTLP trace
// exporter when the environment asks for one (tracing.go).
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	flush := startTracing(os.Getenv, os.Stderr)
	code := cli.Main(os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	flush()
	os.Exit(code)
}
