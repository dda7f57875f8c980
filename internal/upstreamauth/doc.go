// Package upstreamauth signs toolgate in to remote MCP servers that sit behind
// OAuth 2.1, as the MCP authorization specification describes, and keeps it
// signed in. A Server is one upstream's authorization: it plugs into
// internal/upstream's HTTP dial as its upstream.Authorizer (HTTPSpec.Auth),
// and it is the library behind `toolgate auth login|status|logout` (StartLogin,
// Status, Logout). docs/upstream-auth.md explains the flows to an operator.
//
// What it guarantees, and why:
//
//   - No retry storm. A server without credentials, a refused refresh token, a
//     token the server rejects right after it was issued: each parks the Server
//     with an *upstream.AuthRequiredError (its Reason says which), and while it
//     is parked every request fails before anything is sent, with no token
//     request. Only new credentials (a completed login) lift it. Concurrent
//     requests that meet the same expiry share one refresh.
//   - Every token request is bound to the server: the resource indicator
//     (RFC 8707) is on the authorization request and on every token request,
//     refresh and client credentials included; credentials are bound to the
//     issuer that issued them, and a server that moves to another
//     authorization server gets a new registration there, never the old one's.
//   - Everything it fetches goes through the server's netguard policy
//     (internal/netguard): metadata, registration and token requests are
//     dialled through the guard, redirects of token and registration requests
//     are not followed, and an authorization URL that is not http(s), or is
//     plain http to anything but loopback, is refused before anyone opens it.
//   - Secrets stay secrets: tokens and client secrets are keystore.Secret
//     values in memory and sealed in the keystore at rest (KeystoreStore); no
//     error, log line or Status holds one, and nothing reaches a process's
//     argv (the authorization URL holds only the PKCE challenge and a state).
//   - The person's flow is a loopback redirect (RFC 8252): a listener on
//     127.0.0.1 that accepts exactly one callback carrying the login's state,
//     PKCE S256, and the authorization response's iss checked (RFC 9207).
//
// The go-sdk's own pieces are used where they fit: oauthex's metadata types,
// WWW-Authenticate parsing and the authorization-server metadata discovery
// with its issuer and PKCE checks (auth.GetAuthServerMetadata), and x/oauth2's
// PKCE verifier. The protected-resource metadata lookup, registration, token
// requests and the flow itself are here, because the go-sdk's handler keeps
// tokens only in memory, refreshes without the resource indicator, continues
// past a resource mismatch, puts response bodies in its errors and runs the
// whole flow inside one blocked request.
//
// Files: config.go (Config, New), store.go (Store, Grant, Client,
// KeystoreStore), discovery.go (RFC 9728 and RFC 8414), register.go (client
// ID metadata documents, pre-registered and dynamic clients), token.go (the
// token endpoint, client authentication), jwt.go (private_key_jwt),
// authorizer.go (the upstream.Authorizer: refresh, step-up, parking),
// login.go (the person's flow and the headless one), status.go (Status,
// Logout).
package upstreamauth
