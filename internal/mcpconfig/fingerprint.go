package mcpconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// fingerprintFormat versions the canonical encoding: changing what enters the
// fingerprint changes this string, so no two encodings share a fingerprint.
const fingerprintFormat = "toolgate/mcpconfig/fingerprint/v1"

type fpArg struct {
	Value  *string `json:"v,omitempty"`
	Digest string  `json:"d,omitempty"`
}

type fpVar struct {
	Name   string `json:"n"`
	Digest string `json:"d"`
}

type fpDoc struct {
	Format    string    `json:"f"`
	Name      string    `json:"name"`
	Kind      Kind      `json:"kind"`
	Command   string    `json:"command"`
	Args      []fpArg   `json:"args"`
	Env       []fpVar   `json:"env"`
	Cwd       string    `json:"cwd"`
	URL       string    `json:"url"`
	Query     []fpVar   `json:"query"`
	Headers   []fpVar   `json:"headers"`
	Isolation Isolation `json:"isolation"`
	Required  bool      `json:"required"`
	// OAuth is absent without an oauth member, so older fingerprints stay as they were.
	OAuth *fpOAuth `json:"oauth,omitempty"`
	// Network likewise: a changed reach policy changes what the server may be sent to.
	Network *Network `json:"network,omitempty"`
	// CallTimeout is absent without a callTimeout member, for the same reason.
	CallTimeout string `json:"call_timeout,omitempty"`
}

type fpOAuth struct {
	Disabled          bool     `json:"disabled"`
	Grant             string   `json:"grant"`
	ClientID          string   `json:"client_id"`
	ClientSecret      string   `json:"client_secret"`
	PrivateKey        string   `json:"private_key"`
	Issuer            string   `json:"issuer"`
	Scopes            []string `json:"scopes"`
	ClientMetadataURL string   `json:"client_metadata_url"`
}

// Fingerprint identifies the definition: "sha256:" and the hex SHA-256 of a canonical
// JSON encoding of everything that changes what runs or what it is sent (the name,
// the transport, isolation, required, the call timeout) and nothing that only changes how it is shown
// (display name, description) or policy (disabled). Secrets enter only as their keyed
// digests, so a changed secret changes the fingerprint while the fingerprint reveals
// nothing about it. Env and headers are sorted, so the order a config wrote them in
// does not matter; the order of arguments and query parameters does.
func (s *Server) Fingerprint() string {
	t := &s.Transport
	doc := fpDoc{
		Format: fingerprintFormat, Name: s.Name, Kind: t.Kind, Command: t.Command, Cwd: t.Cwd, URL: t.URL,
		Isolation: s.Isolation, Required: s.Required, CallTimeout: s.CallTimeout,
		Args: []fpArg{}, Env: fpVars(t.Env), Query: fpVars(t.Query), Headers: fpVars(t.Headers),
	}
	if o := t.OAuth; o != nil {
		doc.OAuth = &fpOAuth{Disabled: o.Disabled, Grant: o.Grant, ClientID: o.ClientID, ClientSecret: o.ClientSecret.Digest,
			PrivateKey: o.PrivateKey.Digest, Issuer: o.Issuer, Scopes: o.Scopes, ClientMetadataURL: o.ClientMetadataURL}
	}
	doc.Network = t.Network
	for _, a := range t.Args {
		if a.Secret != "" {
			doc.Args = append(doc.Args, fpArg{Digest: a.Digest})
		} else {
			doc.Args = append(doc.Args, fpArg{Value: &a.Value})
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("mcpconfig: encoding a fingerprint: " + err.Error()) // only strings, bools and slices of them
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func fpVars(vs []Var) []fpVar {
	out := make([]fpVar, len(vs))
	for i, v := range vs {
		out[i] = fpVar{Name: v.Name, Digest: v.Digest}
	}
	return out
}
