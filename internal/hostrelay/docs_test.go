package hostrelay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestDocsMatchCode keeps docs/hostrelay.md's protocol tables and bounds in step with
// the code: every method, notification and host error kind is listed, and every bound
// with its default.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "hostrelay.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, name := range []string{mCall, mCatalog, mRefresh, mStatus, mSnapshot, mRestart, mEndSession, mReload, mWatch, nCancel, nProgress, nEvent, nResync} {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/hostrelay.md has no table row for %q", name)
		}
	}
	for _, k := range serverKinds {
		if !strings.Contains(doc, "`"+k.name+"`") {
			t.Errorf("docs/hostrelay.md does not name the error kind %q", k.name)
		}
	}
	if !strings.Contains(doc, fmt.Sprintf("`Protocol` = %d", Protocol)) {
		t.Errorf("docs/hostrelay.md does not give the protocol version %d", Protocol)
	}
	mib := func(n int) string { return fmt.Sprintf("%d MiB", n>>20) }
	secs := func(d time.Duration) string { return fmt.Sprintf("%d s", int(d/time.Second)) }
	for field, want := range map[string]string{
		"MaxMessageBytes":      mib(DefaultMaxMessageBytes),
		"MaxInFlight":          fmt.Sprint(DefaultMaxInFlight),
		"NotificationQueue":    fmt.Sprint(DefaultNotificationQueue),
		"WatchQueue":           fmt.Sprint(DefaultWatchQueue),
		"WriteTimeout":         secs(DefaultWriteTimeout),
		"MaxClients":           fmt.Sprint(DefaultMaxClients),
		"Options.ElectTimeout": secs(DefaultElectTimeout),
	} {
		row := ""
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "|") && strings.Contains(line, "| `"+field+"` |") {
				row = line
			}
		}
		if !strings.Contains(row, "| "+want+" |") {
			t.Errorf("docs/hostrelay.md's bounds row for %s is %q, want default %s", field, row, want)
		}
	}
	limits := fmt.Sprintf("%d / %d / %d bytes", maxNameBytes, maxMethodBytes, maxKeyBytes)
	if !strings.Contains(doc, limits) {
		t.Errorf("docs/hostrelay.md does not give the name/method/key bounds %s", limits)
	}
}
