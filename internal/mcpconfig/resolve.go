package mcpconfig

import (
	"context"
	"fmt"
	"net/url"

	"github.com/toolgate/toolgate/internal/keystore"
)

// SecretSource opens one server's secrets by name; *keystore.ServerSecrets (from
// Keystore.Server(scope, name)) implements it.
type SecretSource interface {
	Secret(ctx context.Context, name string) (keystore.Secret, error)
}

// The methods below put a definition's secrets back, and are meant to be called only
// where the process starts or the connection is made: what they return holds secret
// values in clear (Argv, Environ) or as keystore.Secret (Endpoint, HeaderValues). Their
// errors name the secret, never its value.

// Argv is the argument vector to execute: the command, then the arguments with
// secret ones opened. The command is not looked up in PATH here.
func (t *Transport) Argv(ctx context.Context, src SecretSource) ([]string, error) {
	argv := make([]string, 0, 1+len(t.Args))
	argv = append(argv, t.Command)
	for _, a := range t.Args {
		if a.Secret == "" {
			argv = append(argv, a.Value)
			continue
		}
		s, err := src.Secret(ctx, a.Secret)
		if err != nil {
			return nil, fmt.Errorf("opening argument %s: %w", a.Secret, err)
		}
		argv = append(argv, s.RevealString())
	}
	return argv, nil
}

// Environ is the server's declared environment as NAME=value entries, sorted by name.
// The host adds its minimal base (PATH, HOME, …) itself; nothing of toolgate's own
// environment is in here.
func (t *Transport) Environ(ctx context.Context, src SecretSource) ([]string, error) {
	env := make([]string, 0, len(t.Env))
	for _, v := range t.Env {
		s, err := src.Secret(ctx, v.Secret)
		if err != nil {
			return nil, fmt.Errorf("opening env %s: %w", v.Name, err)
		}
		env = append(env, v.Name+"="+s.RevealString())
	}
	return env, nil
}

// Endpoint is the URL to connect to, with its credential query parameters opened and
// appended. It is a Secret because it may carry them; log DisplayURL instead.
func (t *Transport) Endpoint(ctx context.Context, src SecretSource) (keystore.Secret, error) {
	u, err := t.withQuery(func(q Var) (string, error) {
		s, err := src.Secret(ctx, q.Secret)
		if err != nil {
			return "", fmt.Errorf("opening query parameter %s: %w", q.Name, err)
		}
		return url.QueryEscape(s.RevealString()), nil
	})
	if err != nil {
		return keystore.Secret{}, err
	}
	return keystore.NewSecretString(u), nil
}

// Header is one configured header with its value opened.
type Header struct {
	Name  string
	Value keystore.Secret
}

// HeaderValues opens the configured headers, sorted by name, for the transport that
// adds them to each request (and drops them on a redirect to another origin).
func (t *Transport) HeaderValues(ctx context.Context, src SecretSource) ([]Header, error) {
	hs := make([]Header, 0, len(t.Headers))
	for _, h := range t.Headers {
		s, err := src.Secret(ctx, h.Secret)
		if err != nil {
			return nil, fmt.Errorf("opening header %s: %w", h.Name, err)
		}
		hs = append(hs, Header{Name: h.Name, Value: s})
	}
	return hs, nil
}
