package netguard

import (
	"net/netip"
	"testing"
)

// BenchmarkCheckAddr is the per-connection cost of the address check (a 6to4 address,
// which carries an IPv4 address to check as well).
func BenchmarkCheckAddr(b *testing.B) {
	var p Policy
	a := netip.MustParseAddr("2002:5db8:d822::1")
	h := Host{Name: "mcp.example.com"}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.CheckAddr(a, h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateURL is the per-request cost of URL validation.
func BenchmarkValidateURL(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateURL("https://mcp.example.com/v1/mcp?x=1", Policy{}); err != nil {
			b.Fatal(err)
		}
	}
}
