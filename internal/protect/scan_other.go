//go:build !linux

package protect

import "errors"

// Snapshot is unavailable off Linux, where bash never runs (the sandbox refuses).
type Snapshot struct{}

// Scan refuses off Linux.
func Scan(dir string, extra []string) (*Snapshot, error) {
	return nil, errors.New("protecting paths from confined commands needs Linux")
}

// ReadOnlyPaths is empty off Linux.
func (s *Snapshot) ReadOnlyPaths() []string { return nil }

// Changes is empty off Linux.
func (s *Snapshot) Changes() ([]Change, error) { return nil, nil }

// Remove does nothing off Linux.
func (s *Snapshot) Remove([]Change) {}
