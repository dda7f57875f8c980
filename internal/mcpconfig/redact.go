package mcpconfig

import (
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/internal/keystore"
)

// RedactedTransport is a server's transport as every response shows it: the command,
// literal arguments, working directory and URL in full, each secret as its ref (env,
// headers, query parameters) or "[redacted]" in its place (arguments, the URL's
// credential parameters), never a value.
type RedactedTransport struct {
	Kind    Kind                 `json:"kind"`
	Command string               `json:"command,omitempty"`
	Args    []string             `json:"args,omitempty"`
	Cwd     string               `json:"cwd,omitempty"`
	Env     map[string]SecretRef `json:"env,omitempty"`
	URL     string               `json:"url,omitempty"`
	Query   map[string]SecretRef `json:"query,omitempty"`
	Headers map[string]SecretRef `json:"headers,omitempty"`
}

// SecretRef shows a secret by its ref id ("sec_…", keystore.Ref.ID).
type SecretRef struct {
	SecretRef string `json:"secret_ref"`
}

// Redacted returns the transport as responses show it, for a server installed in
// scope (the keystore scope its secrets are stored under).
func (s *Server) Redacted(scope string) RedactedTransport {
	t := &s.Transport
	ref := func(name string) SecretRef {
		return SecretRef{SecretRef: keystore.Ref{Scope: scope, Server: s.Name, Name: name}.ID()}
	}
	refs := func(vs []Var) map[string]SecretRef {
		if len(vs) == 0 {
			return nil
		}
		m := make(map[string]SecretRef, len(vs))
		for _, v := range vs {
			m[v.Name] = ref(v.Secret)
		}
		return m
	}
	out := RedactedTransport{Kind: t.Kind, Command: t.Command, Cwd: t.Cwd, URL: t.DisplayURL(),
		Env: refs(t.Env), Query: refs(t.Query), Headers: refs(t.Headers)}
	for _, a := range t.Args {
		if a.Secret != "" {
			out.Args = append(out.Args, a.Redacted)
		} else {
			out.Args = append(out.Args, a.Value)
		}
	}
	return out
}

// DisplayURL is the URL with its credential query parameters shown as
// name=[redacted], for responses and log lines.
func (t *Transport) DisplayURL() string {
	u, _ := t.withQuery(func(Var) (string, error) { return keystore.Redacted, nil })
	return u
}

// withQuery is URL with the credential query parameters appended, each value the
// already-encoded text value gives for it.
func (t *Transport) withQuery(value func(q Var) (string, error)) (string, error) {
	if len(t.Query) == 0 {
		return t.URL, nil
	}
	var b strings.Builder
	b.WriteString(t.URL)
	sep := byte('?')
	if strings.Contains(t.URL, "?") {
		sep = '&'
	}
	for _, q := range t.Query {
		v, err := value(q)
		if err != nil {
			return "", err
		}
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(url.QueryEscape(q.Name) + "=" + v)
	}
	return b.String(), nil
}
