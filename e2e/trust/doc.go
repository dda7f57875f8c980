// Package trust drives the owner's side of upstream trust through the real binary
// (docs/trust.md): a hostile fixture upstream's rug pull is quarantined by an App over
// a data directory, and `toolgate pins ls|show|approve|reject|policy` reviews and
// decides it; the App publishes what was approved and nothing else.
package trust
