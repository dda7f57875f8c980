package localtools

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/toolgate/toolgate/internal/kernel"
)

// The kernel has validated arguments against the tool's schema before Access and Run
// see them; these helpers still check types, because a tool must never panic on what
// a schema bug lets through.

func argString(args map[string]any, name string) (string, bool, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", true, kernel.Failed(kernel.CodeInvalidArguments, "%s must be a string", name)
	}
	return s, true, nil
}

func argInt(args map[string]any, name string) (int64, bool, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return 0, false, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		return int64(n), true, nil
	case int64:
		return n, true, nil
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0, true, kernel.Failed(kernel.CodeInvalidArguments, "%s must be an integer", name)
		}
		return i, true, nil
	default:
		return 0, true, kernel.Failed(kernel.CodeInvalidArguments, "%s must be an integer", name)
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		return 0, true, kernel.Failed(kernel.CodeInvalidArguments, "%s must be an integer", name)
	}
	return int64(f), true, nil
}

func requireString(args map[string]any, name string) (string, error) {
	s, ok, err := argString(args, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", kernel.Failed(kernel.CodeInvalidArguments, "%s is required", name)
	}
	return s, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("localtools: static schema does not encode: %v", err))
	}
	return b
}

func boolp(b bool) *bool { return &b }
