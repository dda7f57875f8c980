package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/datadir"
)

// DaemonFile is the file toolgate serve writes in its data directory while it runs
// (0600): the URL its management protocol answers on, so that the management
// commands (toolgate install, ls, …) talk to it rather than open the data directory
// themselves (docs/management.md, "The CLI").
const DaemonFile = "daemon.json"

// DaemonInfo is DaemonFile's content. StartTicks is the process's start time in clock
// ticks since boot (/proc/PID/stat), so a file left by a daemon that died is not
// mistaken for a live one whose pid was reused.
type DaemonInfo struct {
	URL        string `json:"url"`
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	StartedAt  string `json:"started_at"`
}

// WriteDaemonFile records that this process serves the data directory at url.
func (a *App) WriteDaemonFile(url string) error {
	info := DaemonInfo{URL: url, PID: os.Getpid(), StartTicks: startTicks(os.Getpid()),
		StartedAt: time.Now().UTC().Format(time.RFC3339)}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	p := filepath.Join(a.dir, DaemonFile)
	tmp := p + "." + strconv.Itoa(os.Getpid()) + ".tmp"
	f, _, err := datadir.OpenFile("daemon file", tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

// RemoveDaemonFile removes DaemonFile if this process wrote it (another daemon may
// have replaced it since).
func (a *App) RemoveDaemonFile() {
	p := filepath.Join(a.dir, DaemonFile)
	if info, err := readDaemonFile(p); err == nil && info.PID == os.Getpid() {
		os.Remove(p)
	}
}

// FindDaemon reads the data directory's DaemonFile: ok is true when a live process
// wrote it. A stale file (its process is gone, or the pid now belongs to another
// process) is removed and reported as no daemon. A file that is not private is an
// error (datadir.ErrUnsafe), never trusted.
func FindDaemon(dataDir string) (info DaemonInfo, ok bool, err error) {
	p := filepath.Join(dataDir, DaemonFile)
	info, err = readDaemonFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return DaemonInfo{}, false, nil
	}
	if err != nil {
		return DaemonInfo{}, false, err
	}
	if !alive(info.PID, info.StartTicks) {
		os.Remove(p)
		return DaemonInfo{}, false, nil
	}
	return info, true, nil
}

func readDaemonFile(p string) (DaemonInfo, error) {
	f, _, err := datadir.OpenFile("daemon file", p, os.O_RDONLY)
	if err != nil {
		return DaemonInfo{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return DaemonInfo{}, fmt.Errorf("reading %s: %w", p, err)
	}
	var info DaemonInfo
	if err := json.Unmarshal(b, &info); err != nil || info.PID <= 0 ||
		!(strings.HasPrefix(info.URL, "http://") || strings.HasPrefix(info.URL, "https://")) {
		return DaemonInfo{}, fmt.Errorf("%s is not a daemon file (delete it): %w", p, os.ErrNotExist)
	}
	return info, nil
}

// alive reports whether pid runs and, when ticks is known, started at ticks.
func alive(pid int, ticks uint64) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if ticks == 0 {
		return true
	}
	now := startTicks(pid)
	return now == 0 || now == ticks
}

// startTicks is field 22 of /proc/PID/stat (0 where there is no /proc).
func startTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command (field 2) is in parentheses and may hold spaces: count after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

// OwnerTokenOf reads the owner token of dataDir without opening it (the management
// commands use it to talk to the daemon serving it).
func OwnerTokenOf(dataDir string) (string, error) {
	f, _, err := datadir.OpenFile("owner token", filepath.Join(dataDir, OwnerTokenFile), os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("reading the owner token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
