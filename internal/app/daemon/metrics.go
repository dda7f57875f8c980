package daemon

import (
	"crypto/subtle"
	"net/http"

	"github.com/toolgate/toolgate/internal/httpwire"
)

// ownerOnly serves next to the owner token's bearer only: /metrics describes the whole
// deployment (every principal's calls, by tool and reason), which no execution token
// — one principal's identity — may read. A scraper reads the token from the data
// directory's owner-token file (docs/deployment.md, "Metrics").
func ownerOnly(owner string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, present, ok := httpwire.Bearer(r)
		if !ok || !present || owner == "" || subtle.ConstantTimeCompare([]byte(token), []byte(owner)) != 1 {
			httpwire.Write(w, httpwire.Unauthorized, "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
