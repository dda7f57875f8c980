package mcpconfig

import (
	"regexp"
	"strconv"

	"github.com/toolgate/toolgate/internal/keystore"
)

// Severity grades a diagnostic.
type Severity string

const (
	// Error: the server (or, at document level, the whole config) is not installed.
	Error Severity = "error"
	// Warning: the server is installed; something in the entry was ignored or is risky.
	Warning Severity = "warning"
)

// Diagnostic is one finding about a config. Path names the member it is about as the
// config spells it ("mcpServers.github.env.TOKEN", `servers["my server"].args[2]`);
// Message never contains a secret value, nor any value of a URL, an argument, an env
// variable or a header.
type Diagnostic struct {
	Path     string   `json:"path"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// String renders "path: message", with "warning: " before a warning's message.
func (d Diagnostic) String() string {
	if d.Severity == Warning {
		return d.Path + ": warning: " + d.Message
	}
	return d.Path + ": " + d.Message
}

// Status is a whole config's outcome, as the install result reports it.
type Status string

const (
	// StatusOK: every server is valid.
	StatusOK Status = "ok"
	// StatusPartial: some servers are valid, some are not.
	StatusPartial Status = "partial"
	// StatusValidationError: no server is valid, or the document itself is not.
	StatusValidationError Status = "validation_error"
)

// Result is what Parse found.
type Result struct {
	// Container is where the servers were found: "mcpServers", "servers" or
	// "mcp.servers"; "" when the document has none.
	Container string
	// Diagnostics are about the document as a whole. An error here means no server
	// was read.
	Diagnostics []Diagnostic
	// Entries has one element per server entry, in document order.
	Entries []Entry
}

// Entry is one server entry's outcome.
type Entry struct {
	// Key is the entry's key as written.
	Key string
	// Server is the definition, nil when the entry has an error.
	Server *Server
	// Secrets are the values the definition names, sorted by name, for the installer
	// to put in the keystore under (scope, Server.Name, name). Nil when Server is.
	Secrets []keystore.Named
	// Diagnostics are the entry's errors and warnings.
	Diagnostics []Diagnostic
}

// OK reports whether the entry is valid.
func (e *Entry) OK() bool { return e.Server != nil }

// Status is StatusOK when every entry is valid, StatusPartial when some are, and
// StatusValidationError when none is or the document has an error.
func (r *Result) Status() Status {
	for _, d := range r.Diagnostics {
		if d.Severity == Error {
			return StatusValidationError
		}
	}
	ok := 0
	for i := range r.Entries {
		if r.Entries[i].OK() {
			ok++
		}
	}
	switch {
	case ok == 0:
		return StatusValidationError
	case ok < len(r.Entries):
		return StatusPartial
	}
	return StatusOK
}

// simpleKey matches keys a path shows bare; others are quoted.
var simpleKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// pathMember appends one object member to a diagnostic path.
func pathMember(path, key string) string {
	if simpleKey.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// pathIndex appends an array index to a diagnostic path.
func pathIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
