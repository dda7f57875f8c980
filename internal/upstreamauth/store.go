package upstreamauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/keystore"
)

// Store keeps each server's grant (its tokens) and its dynamically registered
// client. The Server owns this interface; KeystoreStore implements it on the
// keystore, sealed at rest. A Load of nothing stored returns nil and no error.
// Implementations must be safe for concurrent use.
type Store interface {
	LoadGrant(ctx context.Context, server string) (*Grant, error)
	SaveGrant(ctx context.Context, server string, g *Grant) error
	DeleteGrant(ctx context.Context, server string) error
	LoadClient(ctx context.Context, server string) (*Client, error)
	SaveClient(ctx context.Context, server string, c *Client) error
	DeleteClient(ctx context.Context, server string) error
}

// The kinds of grant.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Grant is what one sign-in obtained: the tokens and what they are bound to.
type Grant struct {
	// Kind is GrantAuthorizationCode or GrantClientCredentials.
	Kind string
	// Resource is the resource indicator the tokens were issued for.
	Resource string
	// Issuer is the authorization server that issued them: the tokens and the
	// client are used with no other.
	Issuer             string
	TokenEndpoint      string
	RevocationEndpoint string
	// ClientID is the client the tokens were issued to, and ClientAuthMethod
	// how it authenticated (a refresh authenticates the same way).
	ClientID         string
	ClientAuthMethod string

	AccessToken  keystore.Secret
	RefreshToken keystore.Secret
	// Expiry is when the access token lapses (zero: the server did not say).
	Expiry time.Time
	// Scopes are the scopes granted (the token response's scope, else those
	// asked for); Requested are those asked for.
	Scopes     []string
	Requested  []string
	ObtainedAt time.Time
	// Headless says the sign-in was completed by following the authorization
	// server's immediate redirects, with no person (toolgate auth login
	// --headless, Config.Headless): a step-up for insufficient_scope is then
	// followed the same way rather than failing the request.
	Headless bool
}

// Client is a client registered with one authorization server.
type Client struct {
	// Kind is how it came to be: metadata_document, preregistered, dynamic,
	// client_credentials.
	Kind string
	// Issuer is the authorization server it belongs to.
	Issuer string
	ID     string
	Secret keystore.Secret
	// AuthMethod is its token_endpoint_auth_method: none,
	// client_secret_basic, client_secret_post, private_key_jwt.
	AuthMethod      string
	RedirectURIs    []string
	SecretExpiresAt time.Time
	RegisteredAt    time.Time

	privateKey keystore.Secret // private_key_jwt (never stored: it is configured)
	signingAlg string
}

// The kinds of client.
const (
	ClientMetadataDocument  = "metadata_document"
	ClientPreregistered     = "preregistered"
	ClientDynamic           = "dynamic"
	ClientClientCredentials = "client_credentials"
)

// KeystoreStore keeps grants and clients sealed in the keystore, one secret
// each per server, under the scope "oauth:" + scope: apart from the server's
// configured secrets, which an install replaces wholesale
// (Keystore.ReplaceServer) and must not take a sign-in with them. Uninstalling
// a server must call Forget too.
type KeystoreStore struct {
	ks    *keystore.Keystore
	scope string
}

// NewKeystoreStore returns the store of the servers installed under scope
// (the keystore scope their configured secrets use, e.g. "user").
func NewKeystoreStore(ks *keystore.Keystore, scope string) *KeystoreStore {
	return &KeystoreStore{ks: ks, scope: "oauth:" + scope}
}

// The keystore names of a server's records.
const (
	grantName  = "oauth.grant"
	clientName = "oauth.client"
)

func (k *KeystoreStore) ref(server, name string) keystore.Ref {
	return keystore.Ref{Scope: k.scope, Server: server, Name: name}
}

// grantRecord and clientRecord are the sealed JSON forms. They exist only
// between Marshal and the seal (and the open and Unmarshal): the clear bytes
// are wiped as soon as they are sealed or read.
type grantRecord struct {
	Kind               string    `json:"kind"`
	Resource           string    `json:"resource"`
	Issuer             string    `json:"issuer"`
	TokenEndpoint      string    `json:"token_endpoint"`
	RevocationEndpoint string    `json:"revocation_endpoint,omitempty"`
	ClientID           string    `json:"client_id"`
	ClientAuthMethod   string    `json:"client_auth_method,omitempty"`
	AccessToken        string    `json:"access_token"`
	RefreshToken       string    `json:"refresh_token,omitempty"`
	Expiry             time.Time `json:"expiry,omitzero"`
	Scopes             []string  `json:"scopes,omitempty"`
	Requested          []string  `json:"requested,omitempty"`
	ObtainedAt         time.Time `json:"obtained_at"`
	Headless           bool      `json:"headless,omitempty"`
}

type clientRecord struct {
	Kind            string    `json:"kind"`
	Issuer          string    `json:"issuer"`
	ID              string    `json:"client_id"`
	Secret          string    `json:"client_secret,omitempty"`
	AuthMethod      string    `json:"token_endpoint_auth_method"`
	RedirectURIs    []string  `json:"redirect_uris,omitempty"`
	SecretExpiresAt time.Time `json:"client_secret_expires_at,omitzero"`
	RegisteredAt    time.Time `json:"registered_at"`
}

// LoadGrant implements Store.
func (k *KeystoreStore) LoadGrant(ctx context.Context, server string) (*Grant, error) {
	var r grantRecord
	if ok, err := k.load(ctx, k.ref(server, grantName), &r); !ok || err != nil {
		return nil, err
	}
	defer wipeStrings(&r.AccessToken, &r.RefreshToken)
	return &Grant{
		Kind: r.Kind, Resource: r.Resource, Issuer: r.Issuer, TokenEndpoint: r.TokenEndpoint,
		RevocationEndpoint: r.RevocationEndpoint, ClientID: r.ClientID, ClientAuthMethod: r.ClientAuthMethod,
		AccessToken: keystore.NewSecretString(r.AccessToken), RefreshToken: keystore.NewSecretString(r.RefreshToken),
		Expiry: r.Expiry, Scopes: r.Scopes, Requested: r.Requested, ObtainedAt: r.ObtainedAt, Headless: r.Headless,
	}, nil
}

// SaveGrant implements Store.
func (k *KeystoreStore) SaveGrant(ctx context.Context, server string, g *Grant) error {
	r := grantRecord{
		Kind: g.Kind, Resource: g.Resource, Issuer: g.Issuer, TokenEndpoint: g.TokenEndpoint,
		RevocationEndpoint: g.RevocationEndpoint, ClientID: g.ClientID, ClientAuthMethod: g.ClientAuthMethod,
		AccessToken: g.AccessToken.RevealString(), RefreshToken: g.RefreshToken.RevealString(),
		Expiry: g.Expiry, Scopes: g.Scopes, Requested: g.Requested, ObtainedAt: g.ObtainedAt, Headless: g.Headless,
	}
	return k.save(ctx, k.ref(server, grantName), &r)
}

// DeleteGrant implements Store.
func (k *KeystoreStore) DeleteGrant(ctx context.Context, server string) error {
	return k.ks.Delete(ctx, k.ref(server, grantName))
}

// LoadClient implements Store.
func (k *KeystoreStore) LoadClient(ctx context.Context, server string) (*Client, error) {
	var r clientRecord
	if ok, err := k.load(ctx, k.ref(server, clientName), &r); !ok || err != nil {
		return nil, err
	}
	defer wipeStrings(&r.Secret)
	return &Client{
		Kind: r.Kind, Issuer: r.Issuer, ID: r.ID, Secret: keystore.NewSecretString(r.Secret),
		AuthMethod: r.AuthMethod, RedirectURIs: r.RedirectURIs, SecretExpiresAt: r.SecretExpiresAt, RegisteredAt: r.RegisteredAt,
	}, nil
}

// SaveClient implements Store.
func (k *KeystoreStore) SaveClient(ctx context.Context, server string, c *Client) error {
	r := clientRecord{
		Kind: c.Kind, Issuer: c.Issuer, ID: c.ID, Secret: c.Secret.RevealString(), AuthMethod: c.AuthMethod,
		RedirectURIs: c.RedirectURIs, SecretExpiresAt: c.SecretExpiresAt, RegisteredAt: c.RegisteredAt,
	}
	return k.save(ctx, k.ref(server, clientName), &r)
}

// DeleteClient implements Store.
func (k *KeystoreStore) DeleteClient(ctx context.Context, server string) error {
	return k.ks.Delete(ctx, k.ref(server, clientName))
}

// Forget deletes everything kept for server (uninstall).
func (k *KeystoreStore) Forget(ctx context.Context, server string) error {
	return k.ks.DeleteServer(ctx, k.scope, server)
}

func (k *KeystoreStore) load(ctx context.Context, ref keystore.Ref, v any) (bool, error) {
	sec, err := k.ks.Get(ctx, ref)
	if errors.Is(err, keystore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = sec.Use(func(b []byte) error { return json.Unmarshal(b, v) })
	if err != nil {
		// json's messages quote no values of a well-formed record, but a
		// damaged one is reported without any detail all the same.
		return false, fmt.Errorf("upstreamauth: the stored %s is not a valid record", ref)
	}
	return true, nil
}

func (k *KeystoreStore) save(ctx context.Context, ref keystore.Ref, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("upstreamauth: encoding %s: %w", ref, err)
	}
	sec := keystore.NewSecret(b)
	clear(b)
	return k.ks.Put(ctx, ref, sec)
}

// wipeStrings drops references to clear copies (Go strings cannot be
// overwritten; this only shortens how long they are reachable).
func wipeStrings(ss ...*string) {
	for _, s := range ss {
		*s = ""
	}
}

// hasScopes reports whether granted holds every scope of want.
func hasScopes(granted, want []string) bool {
	for _, w := range want {
		if !slices.Contains(granted, w) {
			return false
		}
	}
	return true
}

// unionScopes is a's scopes then b's new ones, in order, without repeats.
func unionScopes(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, s := range append(append([]string(nil), a...), b...) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
