package main

import (
	"fmt"
	"strconv"
	"strings"
)

// What turns trace export on: the OpenTelemetry SDK's standard environment variables
// (docs/deployment.md, "Traces"). Export is off unless an OTLP endpoint is named or
// OTEL_TRACES_EXPORTER=otlp asks for it (then the exporter's default,
// http://localhost:4318/v1/traces), so a toolgate started without them loads no SDK
// and sends nothing.

// tracingWanted reports whether the environment asks for OTLP trace export, and a
// notice for stderr when it asks for something this binary does not do.
func tracingWanted(getenv func(string) string) (on bool, notice string) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, ""
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false, ""
	case "otlp":
	case "":
		if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
			return false, ""
		}
	default:
		return false, fmt.Sprintf("OTEL_TRACES_EXPORTER=%q is not supported (otlp or none); traces are not exported", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p := strings.TrimSpace(proto); p != "" && p != "http/protobuf" {
		return false, fmt.Sprintf("OTLP protocol %q is not supported (http/protobuf only); traces are not exported", p)
	}
	return true, ""
}

// defaultQueue is the export queue's bound (spans) unless OTEL_BSP_MAX_QUEUE_SIZE says
// otherwise: the SDK's default.
const defaultQueue = 2048

// queueSize is OTEL_BSP_MAX_QUEUE_SIZE when it is a positive number, else defaultQueue.
func queueSize(getenv func(string) string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE"))); err == nil && n > 0 {
		return n
	}
	return defaultQueue
}
