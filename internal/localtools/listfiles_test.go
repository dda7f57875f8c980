package localtools

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// hugeDir creates n empty files in a fresh directory (on tmpfs when /dev/shm exists,
// where creating a million files takes seconds) and returns its parent workspace.
func hugeDir(tb testing.TB, n int) (*workspace.Workspace, string) {
	tb.Helper()
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	parent, err := os.MkdirTemp(base, "toolgate-listfiles-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(parent) })
	dir := filepath.Join(parent, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		// Names in an order unrelated to their sort order, so the listing must choose.
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%07d", (i*7919)%n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	ws, err := workspace.Open(parent)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ws.Close() })
	return ws, "big"
}

// peakHeap runs fn with the collector made eager (GOGC=10, so the heap in use stays
// close to what is live) while sampling HeapAlloc every millisecond, and returns the
// highest value seen above the heap in use before fn started.
func peakHeap(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			mu.Lock()
			peak = max(peak, m.HeapAlloc)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	if peak < base {
		return 0
	}
	return peak - base
}

// The memory list_files uses over one huge directory is bounded by its caps, not by
// the directory: 100000 entries, a listing of 1000. Reading the directory whole (as
// fs.WalkDir does) kept every entry and peaked at about 30 MB here; the chunked,
// bounded read stays under a few MB. This is a measurement of the heap, not of time.
func TestListFilesMemoryBoundedByCaps(t *testing.T) {
	n := 100000
	if testing.Short() {
		n = 20000
	}
	ws, dir := hugeDir(t, n)
	var out string
	var err error
	peak := peakHeap(func() {
		var o *kernel.Output
		o, err = listOnce(ws, map[string]any{"path": dir, "max_entries": 1000.0})
		if o != nil {
			out = o.Text
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1001 || lines[0] != "f0000000" || lines[999] != "f0000999" || !strings.HasPrefix(lines[1000], "[truncated: stopped at 1000 entries") {
		t.Fatalf("listing of %d entries: %d lines, first %q, last %q", n, len(lines), lines[0], lines[len(lines)-1])
	}
	t.Logf("%d entries, max_entries 1000: peak heap above the start %.1f MB", n, float64(peak)/(1<<20))
	if limit := uint64(12 << 20); peak > limit {
		t.Errorf("peak heap %.1f MB over a directory of %d entries; want under %d MB (bounded by the caps)", float64(peak)/(1<<20), n, limit>>20)
	}
}

// BenchmarkListFilesHugeDir measures the peak heap of one list_files call over a
// directory of TOOLGATE_LISTFILES_N entries (default 10^6), reported as peak-MB:
//
//	go test -run '^$' -bench ListFilesHugeDir -benchtime 3x ./internal/localtools/
func BenchmarkListFilesHugeDir(b *testing.B) {
	n := 1000000
	if v := os.Getenv("TOOLGATE_LISTFILES_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	ws, dir := hugeDir(b, n)
	var peak uint64
	b.ResetTimer()
	for b.Loop() {
		peak = max(peak, peakHeap(func() {
			if _, err := listOnce(ws, map[string]any{"path": dir}); err != nil {
				b.Fatal(err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
}

// TestListFilesOrderMatchesWalkDir: over random trees, with and without patterns and
// with small caps, the bounded walk lists exactly what a whole-directory fs.WalkDir in
// byte order lists (the listing's order is unchanged), and says truncated whenever
// the reference has more to give.
func TestListFilesOrderMatchesWalkDir(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 2))
	for round := range 30 {
		dir := t.TempDir()
		for i := range 40 + rng.IntN(200) {
			p := filepath.Join(dir, randomRel(rng, i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if rng.IntN(5) == 0 {
				os.MkdirAll(p, 0o755)
			} else {
				os.WriteFile(p, nil, 0o644)
			}
		}
		ws, err := workspace.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, pattern := range []string{"", "**/*.go", "*", "*/*", "**/b*"} {
			for _, maxEntries := range []int{1, 3, 10, 1000} {
				for _, depth := range []int{1, 2, 32} {
					args := map[string]any{"max_entries": float64(maxEntries), "max_depth": float64(depth)}
					if pattern != "" {
						args["pattern"] = pattern
					}
					o, err := listOnce(ws, args)
					if err != nil {
						t.Fatal(err)
					}
					got, note := splitListing(o.Text)
					want, more := walkDirReference(t, dir, pattern, depth, maxEntries)
					if strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Fatalf("round %d pattern %q max_entries %d depth %d:\n got %q\nwant %q", round, pattern, maxEntries, depth, got, want)
					}
					if more && !strings.HasPrefix(note, "[truncated") {
						t.Errorf("round %d pattern %q max_entries %d depth %d: the reference has more, the note is %q", round, pattern, maxEntries, depth, note)
					}
				}
			}
		}
		ws.Close()
	}
}

// listOnce runs list_files once, directly.
func listOnce(ws *workspace.Workspace, args map[string]any) (*kernel.Output, error) {
	return listFiles(context.Background(), ws, args)
}

func randomRel(rng *rand.Rand, i int) string {
	names := []string{"a", "b", "c", "ab", "b.go", "x.go", "Z", "_", "a-b", "é"}
	var parts []string
	for range 1 + rng.IntN(4) {
		parts = append(parts, names[rng.IntN(len(names))])
	}
	parts[len(parts)-1] += fmt.Sprint(i % 7)
	if rng.IntN(3) == 0 {
		parts[len(parts)-1] += ".go"
	}
	return filepath.Join(parts...)
}

// splitListing separates the entry lines from a trailing [..] note.
func splitListing(text string) (entries []string, note string) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "[") && lines[n-1] != "[no entries]" {
		note, lines = lines[n-1], lines[:n-1]
	}
	if len(lines) == 1 && lines[0] == "[no entries]" {
		lines = nil
	}
	return lines, note
}

// walkDirReference is what list_files listed before it read directories in chunks:
// fs.WalkDir (whole directories, sorted), the same depth and pattern rules. more
// reports that entries beyond maxEntries matched.
func walkDirReference(t *testing.T, dir, pattern string, depth, maxEntries int) (entries []string, more bool) {
	t.Helper()
	segs := strings.Split(pattern, "/")
	err := fs.WalkDir(os.DirFS(dir), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if pattern == "" || globMatch(strings.Join(segs, "/"), name) {
			if len(entries) >= maxEntries {
				more = true
				return fs.SkipAll
			}
			e := safeName(name)
			if d.IsDir() {
				e += "/"
			}
			entries = append(entries, e)
		}
		if d.IsDir() && strings.Count(name, "/")+1 >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, more
}

// A directory crowded with subdirectories that do not match the pattern cannot be
// listed in order within the bound: the listing ends there and says so, rather than
// skipping ahead (what it printed is still a prefix of the ordered walk).
func TestListFilesCrowdedDirectorySaysSo(t *testing.T) {
	dir := t.TempDir()
	for i := range 2*readDirChunk + 10 {
		os.Mkdir(filepath.Join(dir, fmt.Sprintf("d%05d", i)), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "a.go"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "zz.go"), nil, 0o644)
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	o, err := listOnce(ws, map[string]any{"pattern": "**/*.go", "max_entries": 5.0})
	if err != nil {
		t.Fatal(err)
	}
	if o.Text != "a.go\n[truncated: a directory held more non-matching subdirectories than one listing keeps in order; narrow path or pattern]\n" {
		t.Errorf("crowded listing = %q", o.Text)
	}
	// The same tree without the crowding (a higher level) lists everything.
	o, err = listOnce(ws, map[string]any{"pattern": "*.go", "max_depth": 1.0, "max_entries": 5.0})
	if err != nil || !strings.HasPrefix(o.Text, "a.go\nzz.go\n[depth limit") {
		t.Errorf("uncrowded listing = %q, %v", o.Text, err)
	}
}
