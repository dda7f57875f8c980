//go:build nootlp

package main

import (
	"fmt"
	"io"
)

// startTracing in a build without the exporter (-tags nootlp, docs/deployment.md,
// "Traces") says so when the environment asks for OTLP export; the trace context
// still flows through toolgate and to its upstreams.
func startTracing(getenv func(string) string, stderr io.Writer) (flush func()) {
	if on, _ := tracingWanted(getenv); on {
		fmt.Fprintln(stderr, "toolgate: this build has no OTLP exporter (built with -tags nootlp); traces are not exported")
	}
	return func() {}
}
