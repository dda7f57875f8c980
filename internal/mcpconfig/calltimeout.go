package mcpconfig

import (
	"fmt"
	"time"
)

// The bounds of an entry's callTimeout (docs/mcp-config.md, "Call timeout").
const (
	MinCallTimeout = time.Second
	MaxCallTimeout = 24 * time.Hour
	// NoCallTimeout is the callTimeout that sets no deadline at all.
	NoCallTimeout = "none"
)

// parseCallTimeout reads a callTimeout value: a Go duration within
// [MinCallTimeout, MaxCallTimeout] ("90s", "10m"), or NoCallTimeout. It returns the
// normalised form kept in Server.CallTimeout.
func parseCallTimeout(v string) (string, error) {
	if v == NoCallTimeout {
		return v, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinCallTimeout || d > MaxCallTimeout {
		return "", fmt.Errorf(`must be a duration from %s to %s such as "90s" or "10m", or %q for no deadline`, MinCallTimeout, MaxCallTimeout, NoCallTimeout)
	}
	return d.String(), nil
}

// CallDeadline is the deadline each call to the server gets, as host.Definition's
// CallTimeout takes it: 0 for the host's default (no callTimeout), negative for none.
func (s *Server) CallDeadline() time.Duration {
	switch s.CallTimeout {
	case "":
		return 0
	case NoCallTimeout:
		return -1
	}
	d, err := time.ParseDuration(s.CallTimeout)
	if err != nil {
		return 0 // not a value parseCallTimeout makes (Validate refuses it): the default
	}
	return d
}
