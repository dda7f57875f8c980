// Package mcpconfig reads the `mcpServers` JSON people already have (Claude Desktop,
// Claude Code's .mcp.json, Cursor, Windsurf, Gemini CLI, VS Code's `servers`) into
// normalised server definitions, strictly, with diagnostics that name the server and
// the field and never show a secret value.
//
// A definition (Server) holds no secret: every env value, every header value, URL
// userinfo, credential-named URL query parameters, credential-looking arguments and
// anything taken from an ${env:NAME} reference are moved out into named secrets
// (Entry.Secrets) for the keystore, and the definition keeps their names and keyed
// digests. A Server can therefore be stored, logged and shown as it is; Redacted gives
// the transport as responses show it, Fingerprint identifies the definition, and
// Transport's Argv, Environ, Endpoint and HeaderValues put the secrets back at the
// moment a process starts or a request is made.
//
// What is accepted, refused and ignored, every limit, and why: docs/mcp-config.md.
package mcpconfig

import "github.com/toolgate/toolgate/internal/keystore"

// Kind is how toolgate talks to a server.
type Kind string

const (
	// Stdio runs the server as a child process speaking over stdin and stdout.
	Stdio Kind = "stdio"
	// HTTP is Streamable HTTP; the connection falls back to the legacy SSE transport
	// when the server does not speak it.
	HTTP Kind = "http"
	// SSE is the legacy HTTP+SSE transport (protocol 2024-11-05) only.
	SSE Kind = "sse"
)

// Isolation says whether callers share one connection to the server.
type Isolation string

const (
	// Shared is the default: one process or connection per server, shared by every
	// caller.
	Shared Isolation = "shared"
	// Session gives each caller session its own process or connection (for stateful
	// servers such as browsers), reaped with the session.
	Session Isolation = "session"
)

// Server is one normalised server definition. It holds no secret value.
type Server struct {
	// Name is the server's namespace: the part before the dot of its tools'
	// canonical ids, normalised from the config's key (NormalizeName).
	Name string `json:"name"`
	// DisplayName is the key exactly as the config wrote it.
	DisplayName string `json:"display_name"`
	// Description is the entry's "description" member, shown to people only.
	Description string `json:"description,omitempty"`
	// Transport is how to reach the server.
	Transport Transport `json:"transport"`
	// Isolation is Shared unless the entry asked for "session".
	Isolation Isolation `json:"isolation"`
	// Required servers are started with the host rather than on first use.
	Required bool `json:"required"`
	// CallTimeout is the entry's callTimeout, normalised ("1m30s", or NoCallTimeout);
	// empty for the host's default. CallDeadline reads it.
	CallTimeout string `json:"call_timeout,omitempty"`
	// Disabled is set when the entry said "disabled": true (Cline, Roo Code,
	// Windsurf): the installer installs such a server with its policy disabled. It is
	// policy, not definition, so it is not part of the fingerprint.
	Disabled bool `json:"disabled,omitempty"`
}

// Transport is a server's connection, with secrets by name only.
type Transport struct {
	Kind Kind `json:"kind"`
	// Command is a bare program name (looked up in PATH when the process starts) or an
	// absolute path. Stdio only.
	Command string `json:"command,omitempty"`
	// Args follow the command, each literal or a secret. Stdio only.
	Args []Arg `json:"args,omitempty"`
	// Env is the server's declared environment, sorted by name; every value is a
	// secret. Stdio only.
	Env []Var `json:"env,omitempty"`
	// Cwd is the absolute working directory, or "" for the host's choice. Stdio only.
	Cwd string `json:"cwd,omitempty"`
	// URL is the endpoint without userinfo and without the credential query
	// parameters in Query. HTTP and SSE only.
	URL string `json:"url,omitempty"`
	// Query holds the URL's credential query parameters in their original order; they
	// are appended to URL when a request is made.
	Query []Var `json:"query,omitempty"`
	// Headers are sent with every request, sorted by canonical name; every value is a
	// secret. URL userinfo becomes an Authorization header here.
	Headers []Var `json:"headers,omitempty"`
	// OAuth configures the sign-in of a remote server; nil is the default (discovery
	// and dynamic registration at the first 401). HTTP and SSE only.
	OAuth *OAuth `json:"oauth,omitempty"`
	// Network is the server's reach policy; nil is netguard's default.
	Network *Network `json:"network,omitempty"`
}

// Arg is one command-line argument: a literal Value, or a secret named Secret (then
// Value is empty and Redacted is what responses show in its place).
type Arg struct {
	Value    string `json:"value,omitempty"`
	Secret   string `json:"secret,omitempty"`
	Redacted string `json:"redacted,omitempty"`
	// Digest is the keystore's keyed digest of the secret value (keystore.Digest): it
	// enters the fingerprint and reveals nothing without the keystore's key.
	Digest string `json:"digest,omitempty"`
}

// Var is a named secret value: an env variable, a header or a query parameter.
type Var struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	Digest string `json:"digest"`
}

// Hasher gives the keyed digest of a secret value; *keystore.Keystore implements it.
type Hasher interface {
	Digest(keystore.Secret) string
}

// Secret names, as the keystore stores them under (scope, server, name).
const (
	envSecretPrefix    = "env."
	headerSecretPrefix = "header."
	argSecretPrefix    = "arg."
	querySecretPrefix  = "query."
)
