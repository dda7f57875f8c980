package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Length limits. They keep one hostile row from growing the database without bound and
// are far above anything a real grant or escalation needs.
const (
	maxIdent = 256      // principals, namespace names, key names
	maxScope = 4096     // resources
	maxText  = 16 << 10 // notes, reasons, meta values
)

// checkIdent refuses empty, oversized, non-UTF-8 or control-character identifiers and
// leading or trailing spaces, which would make two grants look alike in a listing.
func checkIdent(field, v string, max int) error {
	if v == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	}
	if strings.TrimSpace(v) != v {
		return fmt.Errorf("%w: %s %q has leading or trailing space", ErrInvalid, field, v)
	}
	return checkLine(field, v, max)
}

// checkLine allows empty values but not control characters.
func checkLine(field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, field, len(v), max)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s contains control character %U", ErrInvalid, field, r)
		}
	}
	return nil
}

// checkText allows free text with newlines and tabs, but no NUL or other control
// characters (they corrupt terminals and are refused by PostgreSQL TEXT).
func checkText(field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, field, len(v), max)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	for _, r := range v {
		if (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f {
			return fmt.Errorf("%w: %s contains control character %U", ErrInvalid, field, r)
		}
	}
	return nil
}
