package mcpconfig

import (
	"net/url"
	"slices"
	"strings"
)

// OAuth is how a remote server's connection signs in (docs/mcp-config.md, "oauth";
// docs/upstream-auth.md). A remote server without it still signs in: discovery and
// dynamic client registration at its first 401. Secrets are named in the keystore,
// like headers: ClientSecret and PrivateKey hold the secret's name and digest.
type OAuth struct {
	// Disabled sends no OAuth at all ("enabled": false): a 401 parks the server.
	Disabled bool `json:"disabled,omitempty"`
	// Grant is "authorization_code" (a person signs in, the default) or
	// "client_credentials" (machine to machine: no person, no browser).
	Grant string `json:"grant,omitempty"`
	// ClientID is a pre-registered client (or the machine client).
	ClientID string `json:"client_id,omitempty"`
	// ClientSecret and PrivateKey (PEM, private_key_jwt) authenticate it; their
	// Name is empty when not configured.
	ClientSecret Var `json:"client_secret,omitzero"`
	PrivateKey   Var `json:"private_key,omitzero"`
	// Issuer is the authorization server the client belongs to; another is refused.
	Issuer string `json:"issuer,omitempty"`
	// Scopes are asked for instead of the challenge's or the metadata's.
	Scopes []string `json:"scopes,omitempty"`
	// ClientMetadataURL is toolgate's client ID metadata document (https).
	ClientMetadataURL string `json:"client_metadata_url,omitempty"`
}

// OAuth grants.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Secret names of the oauth member's secrets.
const (
	oauthSecretName     = "oauth.client_secret"
	oauthPrivateKeyName = "oauth.private_key"
)

// Limits of the oauth member.
const (
	MaxOAuthScopes     = 64
	MaxOAuthValueBytes = 16 << 10 // a client secret, a PEM key
)

// oauthMembers are the oauth object's members; config files from other clients
// use camelCase, toolgate's own documents snake_case, and both are read.
var oauthMembers = map[string]string{
	"enabled": "enabled", "grant": "grant", "grantType": "grant", "grant_type": "grant",
	"clientId": "client_id", "client_id": "client_id",
	"clientSecret": "client_secret", "client_secret": "client_secret",
	"privateKey": "private_key", "private_key": "private_key",
	"issuer": "issuer", "scopes": "scopes",
	"clientMetadataUrl": "client_metadata_url", "client_metadata_url": "client_metadata_url",
}

// oauth reads the oauth member of a remote server.
func (p *entryParser) oauth(obj map[string]any, t *Transport) {
	v, ok := field(obj, "oauth")
	if !ok {
		return
	}
	path := pathMember(p.path, "oauth")
	m, isObj := v.(map[string]any)
	if !isObj {
		p.errorf(path, "must be an object (enabled, grant, clientId, clientSecret, privateKey, issuer, scopes, clientMetadataUrl)")
		return
	}
	o := &OAuth{}
	seen := map[string]string{}
	for _, k := range sortedKeys(m) {
		canon, known := oauthMembers[k]
		if !known {
			p.errorf(pathMember(path, k), "is not an oauth setting toolgate reads: endpoints come from the server's metadata (docs/upstream-auth.md); it takes enabled, grant, clientId, clientSecret, privateKey, issuer, scopes, clientMetadataUrl")
			continue
		}
		if prev, dup := seen[canon]; dup {
			p.errorf(pathMember(path, k), "repeats %s: keep one", prev)
			continue
		}
		seen[canon] = k
	}
	mp := func(canon string) (string, string, bool) {
		k, ok := seen[canon]
		if !ok {
			return "", "", false
		}
		return k, pathMember(path, k), true
	}
	str := func(canon string) (string, string) {
		k, kp, ok := mp(canon)
		if !ok {
			return "", ""
		}
		s, isStr := m[k].(string)
		if !isStr || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) || len(s) > MaxURLBytes {
			p.errorf(kp, "must be a string without control characters, at most %d bytes", MaxURLBytes)
			return "", ""
		}
		if hasRef(s) {
			p.errorf(kp, "holds a ${…} reference; references are resolved only in clientSecret, privateKey, args, env and headers")
			return "", ""
		}
		return s, kp
	}
	if k, kp, ok := mp("enabled"); ok {
		b, isBool := m[k].(bool)
		if !isBool {
			p.errorf(kp, "must be true or false")
		}
		o.Disabled = !b
	}
	o.Grant, _ = str("grant")
	switch o.Grant {
	case "", GrantAuthorizationCode, GrantClientCredentials:
	default:
		p.errorf(pathMember(path, seen["grant"]), `must be "authorization_code" or "client_credentials"`)
	}
	if o.Grant == GrantAuthorizationCode {
		o.Grant = ""
	}
	o.ClientID, _ = str("client_id")
	if s, kp := str("issuer"); s != "" {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.errorf(kp, "must be the authorization server's https URL")
		} else {
			o.Issuer = s
		}
	}
	if s, kp := str("client_metadata_url"); s != "" {
		if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			p.errorf(kp, "must be an https URL with a path")
		} else {
			o.ClientMetadataURL = s
		}
	}
	if k, kp, ok := mp("scopes"); ok {
		o.Scopes = p.scopes(kp, m[k])
	}
	secret := func(canon, name string) Var {
		k, kp, ok := mp(canon)
		if !ok {
			return Var{}
		}
		s, isStr := m[k].(string)
		if !isStr || s == "" {
			p.errorf(kp, "must be a non-empty string%s", quoteHint(m[k]))
			return Var{}
		}
		value, _, _, failed := p.value(kp, s, MaxOAuthValueBytes)
		if failed {
			return Var{}
		}
		return Var{Name: canon, Secret: name, Digest: p.secret(name, value)}
	}
	o.ClientSecret = secret("client_secret", oauthSecretName)
	o.PrivateKey = secret("private_key", oauthPrivateKeyName)
	switch {
	case o.Disabled:
		if len(seen) > 1 {
			p.warnf(path, "enabled is false, so the other oauth settings have no effect")
		}
	case (o.ClientSecret.Secret != "" || o.PrivateKey.Secret != "") && o.ClientID == "":
		p.errorf(path, "has a client secret or private key but no clientId")
	case o.Grant == GrantClientCredentials && o.ClientSecret.Secret == "" && o.PrivateKey.Secret == "":
		p.errorf(path, "client_credentials needs clientSecret or privateKey")
	case o.Grant != GrantClientCredentials && o.PrivateKey.Secret != "":
		p.errorf(pathMember(path, seen["private_key"]), `is for grant "client_credentials" (private_key_jwt)`)
	case o.ClientSecret.Secret != "" && o.PrivateKey.Secret != "":
		p.errorf(path, "has both clientSecret and privateKey: keep one")
	}
	if slices.ContainsFunc(t.Headers, func(h Var) bool { return h.Name == "Authorization" }) && !o.Disabled {
		p.errorf(path, "is set, and the server has its own Authorization (headers or user:password@ in the URL): keep one")
	}
	t.OAuth = o
}

// scopes reads scopes: a list of strings, or one space-separated string.
func (p *entryParser) scopes(path string, v any) []string {
	var out []string
	switch x := v.(type) {
	case string:
		out = strings.Fields(x)
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok || s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= 0x20 || r == 0x7f || r == '"' || r == '\\' }) {
				p.errorf(path, "must be scope names (no spaces, quotes or control characters)")
				return nil
			}
			out = append(out, s)
		}
	default:
		p.errorf(path, "must be a list of scope names")
		return nil
	}
	if len(out) > MaxOAuthScopes {
		p.errorf(path, "holds %d scopes, at most %d", len(out), MaxOAuthScopes)
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}
