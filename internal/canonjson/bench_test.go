package canonjson

import (
	"os"
	"testing"
)

// BenchmarkParseCanonical measures parse plus canonical encoding of one real tool
// definition list (server-github's, in internal/textscan/testdata).
func BenchmarkParseCanonical(b *testing.B) {
	data, err := os.ReadFile("../textscan/testdata/catalogues/server-github.json")
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		v, err := Parse(data, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		buf = AppendCanonical(buf[:0], &v)
	}
}
