package upstreamauth

import (
	"context"
	"errors"
	"net/url"
)

// The kinds of RequestEvent: each request toolgate makes of an authorization
// server, and the authorization response a browser brought back.
const (
	EventAuthorize         = "authorize"          // the authorization response (the code, or the server's error)
	EventToken             = "token"              // the code exchange (grant_type authorization_code)
	EventRefresh           = "refresh"            // grant_type refresh_token
	EventClientCredentials = "client_credentials" // grant_type client_credentials
	EventRegistration      = "registration"       // dynamic client registration (RFC 7591)
	EventRevocation        = "revocation"         // RFC 7009, at logout
)

// The outcomes of a RequestEvent.
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused" // the authorization server said no (Code, when it gave one)
	OutcomeFailed  = "failed"  // the network, a 5xx or 429, an answer that cannot be used, a failed check
)

// RequestEvent is one token-related request of a sign-in, as the host audits it
// (docs/upstream-auth.md, "Audit"). It holds no token, code, verifier, secret or
// assertion: the endpoint is named without its query, the outcome by a word and
// the authorization server's OAuth error code (bounded).
type RequestEvent struct {
	Server   string
	Kind     string
	Endpoint string
	Issuer   string
	Outcome  string
	Code     string
	// Status is the HTTP status of the answer (0: none, or an authorization
	// response).
	Status int
}

// record reports one request to Config.OnRequest. It is called on the
// goroutine that made the request, with no lock of the Server held.
func (s *Server) record(kind, endpoint, issuer string, err error) {
	if s.cfg.OnRequest == nil {
		return
	}
	e := RequestEvent{Server: s.cfg.Server, Kind: kind, Endpoint: bareURL(endpoint), Issuer: issuer, Outcome: OutcomeOK}
	if err != nil {
		e.Outcome = OutcomeFailed
		var te *TokenError
		var re *RegistrationError
		var le *LoginError
		switch {
		case errors.As(err, &te):
			e.Outcome, e.Code, e.Status = OutcomeRefused, te.Code, te.Status
		case errors.As(err, &re) && re.Code != "":
			e.Outcome, e.Code = OutcomeRefused, re.Code
		case errors.As(err, &le) && le.Code != "":
			e.Outcome, e.Code = OutcomeRefused, le.Code
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			e.Code = "cancelled"
		}
	}
	s.cfg.OnRequest(e)
}

// bareURL is u without userinfo, query or fragment (an endpoint as it may be
// shown).
func bareURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	p.User, p.RawQuery, p.Fragment, p.ForceQuery = nil, "", "", false
	return p.String()
}
