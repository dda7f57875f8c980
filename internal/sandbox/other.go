//go:build !linux

package sandbox

import (
	"context"
	"fmt"
)

// Probe reports that no confinement is available off Linux.
func Probe() Capabilities {
	return Capabilities{Reason: "confinement needs Linux namespaces and Landlock"}
}

// LandlockABI is 0 off Linux.
func LandlockABI() int { return 0 }

// Run always refuses off Linux: the command never runs unconfined.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	return nil, fmt.Errorf("%w: %s", ErrUnavailable, Probe().Reason)
}

// StopInheritingDescriptors does nothing off Linux.
func StopInheritingDescriptors() error { return nil }
