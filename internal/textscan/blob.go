package textscan

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Blob thresholds. A base64 run of 64 characters carries 48 bytes: more than any
// identifier or ordinary word, less than a sentence worth hiding. Hex is held to a
// higher bar for Medium because a 64-digit SHA-256 in an example is ordinary.
const (
	minBlob        = 64
	hexMediumBlob  = 128
	minDataURIBody = 16
)

// dataURI matches a base64 data URI; group 1 is the media type, group 2 the payload.
var dataURI = regexp.MustCompile(`(?i)\bdata:([a-z]+/[a-z0-9.+-]+)(?:;[a-z0-9=._-]+)*;base64,([A-Za-z0-9+/=]{16,})`)

func isB64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_' || c == '='
}

// blobs flags base64 and hex runs and base64 data URIs, showing (and scanning) what
// they decode to when that is readable text.
// blobs flags base64 and hex runs and base64 data URIs, showing (and scanning) what
// they decode to when that is readable text. An image data URI is what MCP icons are
// made of (icons[].src): it is recorded as Info and its payload is not reported again.
func blobs(add func(Finding), text string) {
	if len(text) < minDataURIBody {
		return
	}
	skipFrom, skipTo := -1, -1
	if !mayHaveDataURI(text) {
		// no data URI: skip the regexp
	} else if m := dataURI.FindStringSubmatchIndex(text); m != nil {
		skipFrom, skipTo = m[4], m[5]
		media := strings.ToLower(text[m[2]:m[3]])
		f := Finding{Kind: KindBlob, Severity: Medium, Detail: "a base64 data URI of type " + media, Count: 1, Excerpt: excerpt(text, m[0], min(m[1], m[0]+40))}
		if strings.HasPrefix(media, "image/") && media != "image/svg+xml" {
			f.Severity = Info // an SVG can carry text and script; other images are pictures
		} else if b, ok := decodeB64(strings.TrimRight(text[m[4]:m[5]], "=")); ok {
			f = readable(add, f, b)
		}
		add(f)
	}
	if len(text) < minBlob {
		return
	}
	reported := 0
	for i := 0; i < len(text) && reported < 2; {
		if !isB64(text[i]) {
			i++
			continue
		}
		j := i
		var upper, lower, digit, slash, other int
		for j < len(text) && isB64(text[j]) {
			switch c := text[j]; {
			case c >= 'A' && c <= 'Z':
				upper++
			case c >= 'a' && c <= 'z':
				lower++
			case c >= '0' && c <= '9':
				digit++
			case c == '/':
				slash++
			default:
				other++
			}
			j++
		}
		run := strings.TrimRight(text[i:j], "=")
		start := i
		i = j
		if len(run) < minBlob || start < skipTo && j > skipFrom {
			continue
		}
		isHex := other == 0 && slash == 0 && digit > 0 && isHexRun(run)
		switch {
		case isHex:
			sev := Low
			if len(run) >= hexMediumBlob {
				sev = Medium
			}
			f := Finding{Kind: KindBlob, Severity: sev, Detail: fmt.Sprintf("a %d-digit hex blob", len(run)), Count: 1, Excerpt: excerpt(text, start, start+16)}
			if b, err := hex.DecodeString(run[:len(run)&^1]); err == nil {
				f = readable(add, f, b)
			}
			add(f)
			reported++
		case digit > 0 && upper*4 >= upper+lower && lower*4 >= upper+lower && slash*16 <= len(run):
			// Base64 mixes cases about evenly; a long camelCase identifier or a path does not.
			f := Finding{Kind: KindBlob, Severity: Medium, Detail: fmt.Sprintf("a %d-character base64 blob", len(run)), Count: 1, Excerpt: excerpt(text, start, start+16)}
			if b, ok := decodeB64(run); ok {
				f = readable(add, f, b)
			}
			add(f)
			reported++
		}
	}
}

// mayHaveDataURI reports whether text contains "base64," in any case.
func mayHaveDataURI(text string) bool {
	for i := strings.IndexByte(text, ','); i >= 0; {
		if i >= 6 && strings.EqualFold(text[i-6:i], "base64") {
			return true
		}
		k := strings.IndexByte(text[i+1:], ',')
		if k < 0 {
			return false
		}
		i += k + 1
	}
	return false
}

func isHexRun(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func decodeB64(s string) ([]byte, bool) {
	if len(s)%4 == 1 {
		s = s[:len(s)-1] // a run cut mid-quantum: decode what is whole
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// readable: when b is mostly printable UTF-8 text, the finding shows it, and a phrase
// rule that matches inside it is reported High.
func readable(add func(Finding), f Finding, b []byte) Finding {
	if len(b) > maxDecoded {
		b = b[:maxDecoded]
	}
	if !utf8.Valid(b) {
		return f
	}
	printable := 0
	for _, r := range string(b) {
		if r >= 0x20 && r != 0x7F || r == '\n' || r == '\t' || r == '\r' {
			printable++
		}
	}
	if printable*10 < utf8.RuneCount(b)*9 {
		return f
	}
	f.Decoded = decodedText(b)
	f.Detail += " that decodes to text"
	f.Severity = max(f.Severity, Medium) // readable text nobody can read in place is hidden text
	for _, p := range phrases(string(b)) {
		add(Finding{Kind: KindInstruction, Severity: High, Rule: p.rule.id, Detail: p.rule.detail + ", hidden in " + f.Detail, Count: 1, Decoded: f.Decoded})
	}
	return f
}
