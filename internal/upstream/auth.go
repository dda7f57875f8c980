package upstream

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolgate/toolgate/internal/keystore"
)

// Authorizer gives an HTTP upstream's requests their Authorization header and
// answers the server's challenges. OAuth lives behind it (internal/upstreamauth,
// docs/upstream-auth.md); this package only asks and obeys, so the rules about
// when to refresh, step up or give up are in one place.
//
// It is asked on every request to the configured origin (never for another
// origin), on the request's goroutine, and must be safe for concurrent use.
type Authorizer interface {
	// Authorization returns the credential for the next request. A zero
	// Credential sends no Authorization (the server's 401 then tells what it
	// wants). An error, typically an *AuthRequiredError, fails the request
	// before anything is sent: a parked server costs no request.
	Authorization(ctx context.Context) (Credential, error)
	// Challenged is told of a 401, or a 403 with a challenge, answered to a
	// request that carried used. retry true means new credentials are ready
	// and the request is sent once more; otherwise err (or, when nil, ch) is
	// the request's error.
	Challenged(ctx context.Context, ch *AuthRequiredError, used Credential) (retry bool, err error)
	// Accepted is told that the server took a request that carried used
	// (any answer but a challenge). It must not block.
	Accepted(used Credential)
}

// Credential is what one request carries.
type Credential struct {
	// Header is the Authorization header's value ("Bearer …"); the zero
	// Secret sends none.
	Header keystore.Secret
	// Generation names the credential, so a challenge to an old one (another
	// request already replaced it) is told apart from a challenge to the
	// current one. Zero is "none".
	Generation uint64
}

// maxAuthRounds bounds how often one request is sent again after a challenge
// the Authorizer answered (a refresh, then a step-up or two): a server that
// refuses every credential cannot keep a request going.
const maxAuthRounds = 4

// challengeParam returns a parameter of the first Bearer challenge (error,
// scope, resource_metadata), or "" when there is none or the header does not
// parse.
func challengeParam(challenge []string, name string) string {
	cs, err := oauthex.ParseWWWAuthenticate(challenge)
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// newAuthRequired builds the error for a challenge the server sent.
func newAuthRequired(status int, challenge []string, safeURL string) *AuthRequiredError {
	e := &AuthRequiredError{StatusCode: status, Challenge: challenge, URL: safeURL}
	if status == 403 && challengeParam(challenge, "error") == "insufficient_scope" {
		e.Reason = AuthReasonInsufficientScope
		e.Scopes = strings.Fields(challengeParam(challenge, "scope"))
	}
	return e
}
