package kernel

import (
	"crypto/rand"
	"encoding/hex"
)

// newID returns prefix + 32 random hex characters. Ids are unguessable so that a call or
// execution id seen in one place cannot be used to address another principal's turn.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + hex.EncodeToString(b[:])
}
