package mcpconfig

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// digestRE is a keystore digest: 64 lower-case hex digits.
var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks that s is a definition Parse could have produced: the invariants a
// stored definition must keep when it is read back (a normalised name, a bare or
// absolute command, an absolute cwd, sorted and well-named env and headers, a public
// URL with no userinfo or credential parameter, every secret named where it sits and
// carrying a digest). It returns the first problem found.
func (s *Server) Validate() error {
	if n, err := NormalizeName(s.Name); err != nil || n != s.Name {
		return fmt.Errorf("server name %q is not a normalised server name", s.Name)
	}
	wrap := func(field string, problem string) error {
		return fmt.Errorf("server %s: %s %s", s.Name, field, problem)
	}
	switch {
	case strings.TrimSpace(s.DisplayName) == "":
		return wrap("display_name", "is empty")
	case len(s.DisplayName) > MaxKeyBytes:
		return wrap("display_name", "is too long")
	case textProblem(s.DisplayName, false) != "":
		return wrap("display_name", textProblem(s.DisplayName, false))
	case len(s.Description) > MaxDescriptionBytes:
		return wrap("description", "is too long")
	case textProblem(s.Description, false) != "":
		return wrap("description", textProblem(s.Description, false))
	case s.Isolation != Shared && s.Isolation != Session:
		return wrap("isolation", "is neither shared nor session")
	}
	if s.CallTimeout != "" {
		if ct, err := parseCallTimeout(s.CallTimeout); err != nil || ct != s.CallTimeout {
			return wrap("call_timeout", "is not a normalised call timeout")
		}
	}
	t := &s.Transport
	var problem string
	var field string
	switch t.Kind {
	case Stdio:
		field, problem = t.stdioProblem()
	case HTTP, SSE:
		field, problem = t.remoteProblem()
	default:
		field, problem = "transport.kind", "is not stdio, http or sse"
	}
	if problem != "" {
		return wrap(field, problem)
	}
	return nil
}

func (t *Transport) stdioProblem() (string, string) {
	switch {
	case t.URL != "" || len(t.Query) > 0 || len(t.Headers) > 0:
		return "transport", "has HTTP members on a stdio server"
	case strings.ContainsRune(t.Command, '/'):
		if !filepath.IsAbs(t.Command) || filepath.Clean(t.Command) != t.Command || len(t.Command) > MaxPathBytes {
			return "transport.command", "is neither a bare name nor a clean absolute path"
		}
		if p := textProblem(t.Command, false); p != "" {
			return "transport.command", p
		}
	case bareCommandProblem(t.Command) != "":
		return "transport.command", bareCommandProblem(t.Command)
	}
	if t.Cwd != "" && (!filepath.IsAbs(t.Cwd) || filepath.Clean(t.Cwd) != t.Cwd || len(t.Cwd) > MaxPathBytes || textProblem(t.Cwd, false) != "") {
		return "transport.cwd", "is not a clean absolute path"
	}
	if len(t.Args) > MaxArgs {
		return "transport.args", "has too many arguments"
	}
	for i, a := range t.Args {
		f := "transport.args[" + strconv.Itoa(i) + "]"
		if a.Secret == "" {
			if a.Redacted != "" || a.Digest != "" || len(a.Value) > MaxArgBytes || textProblem(a.Value, true) != "" {
				return f, "is not a valid literal argument"
			}
			continue
		}
		if a.Secret != argSecretPrefix+strconv.Itoa(i) || a.Value != "" || !digestRE.MatchString(a.Digest) ||
			a.Redacted == "" || textProblem(a.Redacted, true) != "" {
			return f, "is not a valid secret argument"
		}
	}
	if len(t.Env) > MaxEnv {
		return "transport.env", "has too many variables"
	}
	for i, v := range t.Env {
		if envNameProblem(v.Name) != "" || (i > 0 && t.Env[i-1].Name >= v.Name) {
			return "transport.env", "names are not valid, unique and sorted"
		}
		if err := secretVar(v, envSecretPrefix); err != nil {
			return "transport.env." + v.Name, err.Error()
		}
	}
	return "", ""
}

func (t *Transport) remoteProblem() (string, string) {
	if t.Command != "" || len(t.Args) > 0 || len(t.Env) > 0 || t.Cwd != "" {
		return "transport", "has stdio members on an HTTP server"
	}
	if p := publicURLProblem(t.URL); p != "" {
		return "transport.url", p
	}
	u, _ := parseServerURL(t.URL)
	if !u.secure && (len(t.Query) > 0 || len(t.Headers) > 0) {
		return "transport.url", "is plain http:// to a host that is not loopback, with credentials"
	}
	seen := map[string]bool{}
	for _, q := range t.Query {
		if q.Name == "" || len(q.Name) > MaxHeaderNameBytes || textProblem(q.Name, false) != "" || strings.TrimSpace(q.Name) != q.Name || seen[q.Name] {
			return "transport.query", "names are not valid and unique"
		}
		seen[q.Name] = true
		if err := secretVar(q, querySecretPrefix); err != nil {
			return "transport.query." + q.Name, err.Error()
		}
	}
	if len(t.Headers) > MaxHeaders {
		return "transport.headers", "has too many headers"
	}
	for i, h := range t.Headers {
		if headerNameProblem(h.Name) != "" || http.CanonicalHeaderKey(h.Name) != h.Name || (i > 0 && t.Headers[i-1].Name >= h.Name) {
			return "transport.headers", "names are not valid, canonical, unique and sorted"
		}
		if err := secretVar(h, headerSecretPrefix); err != nil {
			return "transport.headers." + h.Name, err.Error()
		}
	}
	return "", ""
}

// secretVar checks that a Var names its secret where it sits and carries a digest.
func secretVar(v Var, prefix string) error {
	if v.Secret != prefix+v.Name {
		return fmt.Errorf("names the secret %q, want %q", v.Secret, prefix+v.Name)
	}
	if !digestRE.MatchString(v.Digest) {
		return errors.New("has no valid digest")
	}
	return nil
}
