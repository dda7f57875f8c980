// Package trust drives upstream trust through the real binary (docs/trust.md): a
// `toolgate serve` over a data directory, the Go fixture upstream installed with
// `toolgate install` (hostile through -hostile, -tool and -pull-file), decisions made
// with `toolgate grant` and `toolgate pins`, and a Go SDK client over /mcp. Each test
// is one item of the trust model — pinning and quarantine across restarts, suspicious
// text, shadowing, hints, requests from servers, reach (names resolved only through
// TOOLGATE_TEST_HOSTS, so nothing leaves the machine), spawn hygiene — and checks that
// each refusal leaves the server's other tools and the other servers working. The
// table of cases and outcomes is docs/trust.md's "Hostile cases tried through the
// binary".
package trust
