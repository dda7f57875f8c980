package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// ControlPlane is what the control-plane tools (server.*, internal/localtools) report
// from: an App's upstream servers, its open turns and its store's backups. It
// satisfies localtools.ControlPlane.
type ControlPlane struct{ A *App }

// ServerSummary is one upstream server as server.list_servers and server.status show
// it: what the host reports of it and what the kernel publishes of it.
type ServerSummary struct {
	Name    string        `json:"name"`
	Policy  ServerPolicy  `json:"policy"`
	Runtime ServerRuntime `json:"runtime"`
	// CatalogVersion and ToolsCount are the host's catalogue; PublishedTools how many
	// of its tools the kernel publishes (to whom, the grants decide).
	CatalogVersion uint64 `json:"catalog_version"`
	ToolsCount     int    `json:"tools_count"`
	PublishedTools int    `json:"published_tools"`
	Diagnostics    int    `json:"diagnostics"`
}

// ServerPolicy is a server's policy as SyncUpstream last saw it.
type ServerPolicy struct {
	Enabled                 bool `json:"enabled"`
	AllowImplicitInvocation bool `json:"allow_implicit_invocation"`
}

// ServerRuntime is the host's view of a server (docs/host.md, "States").
type ServerRuntime struct {
	State      string     `json:"state"`
	Live       bool       `json:"live"`
	LastSeenAt *time.Time `json:"last_seen_at,omitempty"`
	Reason     string     `json:"reason,omitempty"`
}

// ServerState is server.read_state's answer.
type ServerState struct {
	ServerSummary
	Since       time.Time `json:"since"`
	LastError   string    `json:"last_error,omitempty"`
	Connections int       `json:"connections"`
	InFlight    int       `json:"in_flight"`
	Retry       struct {
		Attempts    int        `json:"attempts"`
		Failures    int        `json:"failures"`
		NextAttempt *time.Time `json:"next_attempt,omitempty"`
		CircuitOpen bool       `json:"circuit_open"`
	} `json:"retry"`
	Catalog struct {
		Version   uint64      `json:"version"`
		Digest    string      `json:"digest,omitempty"`
		FetchedAt *time.Time  `json:"fetched_at,omitempty"`
		Counts    host.Counts `json:"counts"`
		Truncated bool        `json:"truncated,omitempty"`
		Error     string      `json:"error,omitempty"`
	} `json:"catalog"`
	Bindings       []upstreamtools.Binding    `json:"bindings"`
	ToolDiagnostic []upstreamtools.Diagnostic `json:"tool_diagnostics,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// maxErrorText bounds an upstream's error text a control-plane answer repeats.
const maxErrorText = 500

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// states returns the host's statuses by name (none when this App has no upstreams)
// and what SyncUpstream published, by name.
func (cp ControlPlane) states(ctx context.Context) (map[string]host.Status, map[string]UpstreamTools, error) {
	st := map[string]host.Status{}
	if up := cp.A.ut.up; up != nil {
		snap, err := up.Snapshot(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the upstream servers' states: %w", err)
		}
		for _, s := range snap.Servers {
			st[s.Name] = s
		}
	}
	pub := map[string]UpstreamTools{}
	for _, u := range cp.A.UpstreamTools() {
		pub[u.Server.Name] = u
	}
	return st, pub, nil
}

func summary(name string, s host.Status, hosted bool, u UpstreamTools, synced bool) ServerSummary {
	sum := ServerSummary{Name: name}
	if synced {
		sum.Policy = ServerPolicy{Enabled: u.Server.Enabled, AllowImplicitInvocation: u.Server.Implicit}
		sum.PublishedTools, sum.Diagnostics = len(u.Bindings), len(u.Diagnostics)
		sum.CatalogVersion = u.CatalogVersion
	} else {
		sum.Policy.Enabled = s.Enabled
	}
	if hosted {
		sum.Runtime = ServerRuntime{State: string(s.State), Live: s.Live, LastSeenAt: timePtr(s.LastSeenAt), Reason: string(s.Reason)}
		sum.CatalogVersion, sum.ToolsCount = s.Catalog.Version, s.Catalog.Counts.Tools
	} else {
		sum.Runtime.State = "unknown"
	}
	return sum
}

// Servers implements localtools.ControlPlane: every server the host knows or
// SyncUpstream published, by name.
func (cp ControlPlane) Servers(ctx context.Context) (any, error) {
	st, pub, err := cp.states(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for n := range st {
		names = append(names, n)
	}
	for n := range pub {
		if _, ok := st[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]ServerSummary, 0, len(names))
	for _, n := range names {
		s, hosted := st[n]
		u, synced := pub[n]
		out = append(out, summary(n, s, hosted, u, synced))
	}
	return out, nil
}

// ServerState implements localtools.ControlPlane.
func (cp ControlPlane) ServerState(ctx context.Context, name string) (any, bool, error) {
	st, pub, err := cp.states(ctx)
	if err != nil {
		return nil, false, err
	}
	s, hosted := st[name]
	u, synced := pub[name]
	if !hosted && !synced {
		return nil, false, nil
	}
	out := ServerState{ServerSummary: summary(name, s, hosted, u, synced), Bindings: u.Bindings, ToolDiagnostic: u.Diagnostics}
	if out.Bindings == nil {
		out.Bindings = []upstreamtools.Binding{}
	}
	if hosted {
		out.Since, out.LastError = s.Since.UTC(), clipText(s.LastError, maxErrorText)
		out.Connections, out.InFlight = s.Connections, s.InFlight
		out.Retry.Attempts, out.Retry.Failures = s.Retry.Attempts, s.Retry.Failures
		out.Retry.NextAttempt, out.Retry.CircuitOpen = timePtr(s.Retry.NextAttempt), s.Retry.CircuitOpen
		c := s.Catalog
		out.Catalog.Version, out.Catalog.Digest, out.Catalog.FetchedAt = c.Version, c.Digest, timePtr(c.FetchedAt)
		out.Catalog.Counts, out.Catalog.Truncated, out.Catalog.Error = c.Counts, c.Truncated, clipText(c.Error, maxErrorText)
	}
	return out, true, nil
}

// Clients implements localtools.ControlPlane.
func (cp ControlPlane) Clients(context.Context) (any, error) { return cp.A.Clients(), nil }

// BackupDir is where server.manage_backup writes, inside the data directory.
const BackupDir = "backups"

// Backup is one copy of the store in BackupDir.
type Backup struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
}

// backupName is the form of the names Backup creates; delete accepts only these, so
// no name can reach outside BackupDir.
var backupName = regexp.MustCompile(`^toolgate-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}\.db$`)

// maxListedBackups bounds a list answer.
const maxListedBackups = 1000

// Backup implements localtools.ControlPlane: "create" copies the store now (a
// consistent online snapshot, store.BackupTo) into backups/ (0700) as an owner-only
// file, "list" lists the copies, newest first, "delete" removes one by name.
func (cp ControlPlane) Backup(ctx context.Context, action, name string) (any, error) {
	dir := filepath.Join(cp.A.dir, BackupDir)
	switch action {
	case "create":
		if err := privateDir(dir); err != nil {
			return nil, err
		}
		var r [4]byte
		_, _ = rand.Read(r[:])
		now := time.Now().UTC()
		n := "toolgate-" + now.Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:]) + ".db"
		p := filepath.Join(dir, n)
		if err := cp.A.st.BackupTo(ctx, p); err != nil {
			return nil, err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		return map[string]any{"created": Backup{Name: n, Size: fi.Size(), Created: now}, "dir": dir}, nil
	case "list":
		list, err := listBackups(dir)
		if err != nil {
			return nil, err
		}
		return map[string]any{"backups": list, "dir": dir}, nil
	case "delete":
		if !backupName.MatchString(name) {
			return nil, kernel.Failed(kernel.CodeInvalidArguments, "%q is not a backup name (toolgate-YYYYMMDDTHHMMSSZ-xxxxxxxx.db, as list shows)", clipText(name, 128))
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, kernel.Failed(kernel.CodeInvalidArguments, "no backup %q", name)
			}
			return nil, fmt.Errorf("deleting backup %s: %w", name, err)
		}
		return map[string]any{"deleted": name}, nil
	}
	return nil, kernel.Failed(kernel.CodeInvalidArguments, "action %q is not create, list or delete", clipText(action, 64))
}

func listBackups(dir string) ([]Backup, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return []Backup{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing backups: %w", err)
	}
	out := []Backup{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !backupName.MatchString(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, Backup{Name: e.Name(), Size: fi.Size(), Created: fi.ModTime().UTC()})
	}
	slices.SortFunc(out, func(x, y Backup) int { return strings.Compare(y.Name, x.Name) })
	if len(out) > maxListedBackups {
		out = out[:maxListedBackups]
	}
	return out, nil
}

// privateDir makes dir (0700) or checks the one there: a real directory of this
// user's that nobody else can write to, so nobody can plant a link where a copy of
// the database is written.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to another user (uid %d)", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is open to other users (mode %v): make it 0700", dir, fi.Mode().Perm())
	}
	return nil
}
