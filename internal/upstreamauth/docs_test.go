package upstreamauth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
)

// TestDocsMatchCode keeps docs/upstream-auth.md's parking table and the
// defaults it names equal to the code's.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "upstream-auth.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, r := range []string{upstream.AuthReasonLoginRequired, upstream.AuthReasonGrantRevoked, upstream.AuthReasonTokenRejected,
		upstream.AuthReasonClientRejected, upstream.AuthReasonAuthorizationFailed, upstream.AuthReasonInsufficientScope} {
		if !strings.Contains(doc, "| `"+r+"` |") {
			t.Errorf("reason %s is not in the parking table", r)
		}
	}
	for _, st := range []string{upstreamauth.StateSignedIn, upstreamauth.StateSignedOut, upstreamauth.StateExpired, upstreamauth.StateSignInRequired} {
		if !strings.Contains(doc, "`"+st+"`") {
			t.Errorf("state %s is not in the docs", st)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("within %d s (`RefreshAhead`)", int(upstreamauth.DefaultRefreshAhead/time.Second)),
		fmt.Sprintf("`MaxStepUps` (%d)", upstreamauth.DefaultMaxStepUps),
		fmt.Sprintf("waits %d minutes (`LoginTimeout`)", int(upstreamauth.DefaultLoginTimeout/time.Minute)),
		fmt.Sprintf("`RequestTimeout` (%d s)", int(upstreamauth.DefaultRequestTimeout/time.Second)),
		"`" + upstreamauth.DefaultCallbackAddr + "`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the docs do not say %q", want)
		}
	}
}
