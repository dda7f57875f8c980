package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/version"
)

func TestVersion(t *testing.T) {
	want := "toolgate " + version.String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if code := Run(context.Background(), args, Stdio{Out: &out, Err: io.Discard}); code != 0 || out.String() != want {
			t.Errorf("%v: exit %d, stdout %q, want %q", args, code, out.String(), want)
		}
	}
	var errb bytes.Buffer
	if code := Run(context.Background(), []string{"version", "extra"}, Stdio{Out: io.Discard, Err: &errb}); code == 0 || !strings.Contains(errb.String(), "toolgate:") {
		t.Errorf("version with an argument: exit %d, stderr %q", code, errb.String())
	}
}
