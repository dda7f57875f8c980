//go:build linux && !amd64

package sandbox

// legacyModeCalls: none outside amd64 (arm64 has only the *at forms of setIDCalls).
var legacyModeCalls []modeCall
