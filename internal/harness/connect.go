package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// connect edits a harness's own file in place, so it is careful in the ways a user's
// config deserves: it refuses symlinks, directories and unparseable files (leaving them
// untouched), shows a diff, keeps the original bytes in a backup before the first
// change, writes through a temp file + fsync + rename, and undo puts the original bytes
// back exactly — refusing if the file was edited since, so no later edit is lost.

// BackupSuffix and StateSuffix name the files connect keeps next to the config.
const (
	BackupSuffix = ".toolgate-backup"
	StateSuffix  = ".toolgate-state.json"
)

// maxConfigBytes bounds the config files connect reads.
const maxConfigBytes = 8 << 20

// Plan is one prepared connect: the file's bytes before and after.
type Plan struct {
	Harness *Harness
	Path    string
	Existed bool
	Mode    fs.FileMode
	Before  []byte
	After   []byte
}

// Changed reports whether applying the plan changes the file.
func (p *Plan) Changed() bool { return !p.Existed || !bytes.Equal(p.Before, p.After) }

// Diff renders the change as a unified-style line diff.
func (p *Plan) Diff() string {
	from := p.Path
	if !p.Existed {
		from = "/dev/null"
	}
	return LineDiff(from, p.Path, p.Before, p.After)
}

// connectState records what connect did, so undo can check nothing changed since.
type connectState struct {
	Harness string `json:"harness"`
	// Existed is false when connect created the file; undo then removes it.
	Existed bool `json:"existed"`
	// Written is the SHA-256 of the bytes connect last wrote.
	Written string `json:"written_sha256"`
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// readConfig reads path, refusing anything but a regular file (a missing file is fine).
func readConfig(path string) (content []byte, mode fs.FileMode, existed bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(path)
		if di, derr := os.Stat(dir); derr == nil && !di.IsDir() {
			return nil, 0, false, fmt.Errorf("%s is not a directory", dir)
		}
		return nil, 0o600, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading %s: %w", path, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return nil, 0, false, fmt.Errorf("%s is a symbolic link (to %s); toolgate does not write through links — pass the real file with --file", path, target)
	case fi.IsDir():
		return nil, 0, false, fmt.Errorf("%s is a directory, not a config file", path)
	case !fi.Mode().IsRegular():
		return nil, 0, false, fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > maxConfigBytes:
		return nil, 0, false, fmt.Errorf("%s is larger than %d bytes; refusing to edit it", path, maxConfigBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, fi.Mode().Perm(), true, nil
}

// PlanConnect reads path and computes the merged content, without writing anything.
func (h *Harness) PlanConnect(path string, s Server) (*Plan, error) {
	if h.NoConnect {
		return nil, fmt.Errorf("harness: %s has no config file to connect; use toolgate config %s", h.Title, h.ID)
	}
	before, mode, existed, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	after, err := h.Merge(before, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := h.Entry(after, s.ServerName()); err != nil {
		return nil, fmt.Errorf("%s: the merged file does not read back (%v); nothing was written", path, err)
	}
	return &Plan{Harness: h, Path: path, Existed: existed, Mode: mode, Before: before, After: after}, nil
}

// Apply writes the plan: backup of the original (first connect only), then the new
// content atomically, then the state file. It fails without writing if the file changed
// after PlanConnect read it.
func (p *Plan) Apply() error {
	cur, _, existed, err := readConfig(p.Path)
	if err != nil {
		return err
	}
	if existed != p.Existed || !bytes.Equal(cur, p.Before) {
		return fmt.Errorf("%s changed while toolgate was preparing the edit; run connect again", p.Path)
	}
	dir := filepath.Dir(p.Path)
	if !p.Existed {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	statePath := p.Path + StateSuffix
	var st connectState
	haveState := false
	if b, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("reading %s: %w (remove it if you no longer need undo)", statePath, err)
		}
		haveState = true
		if st.Written != sha(cur) {
			return fmt.Errorf("%s was edited after an earlier toolgate connect, and %s still holds the original; run connect --undo --force or remove %s and %s first", p.Path, p.Path+BackupSuffix, statePath, p.Path+BackupSuffix)
		}
	}
	if !haveState {
		st = connectState{Harness: p.Harness.ID, Existed: p.Existed}
		if p.Existed {
			if err := WriteFileAtomic(p.Path+BackupSuffix, p.Before, 0o600); err != nil {
				return fmt.Errorf("writing the backup: %w", err)
			}
		}
	}
	mode := p.Mode
	if mode == 0 {
		mode = 0o600
	}
	if err := WriteFileAtomic(p.Path, p.After, mode); err != nil {
		return err
	}
	st.Written = sha(p.After)
	sb, _ := json.MarshalIndent(st, "", "  ")
	if err := WriteFileAtomic(statePath, append(sb, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", statePath, err)
	}
	return nil
}

// Undo restores the file a connect changed: the original bytes back (or the file
// removed when connect created it), then the backup and state removed. Unless force is
// set it refuses when the file was edited after connect, since restoring would lose
// that edit.
func Undo(path string, force bool) (restored string, err error) {
	statePath := path + StateSuffix
	b, err := os.ReadFile(statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("nothing to undo: %s has no toolgate connect record (%s)", path, statePath)
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", statePath, err)
	}
	var st connectState
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("reading %s: %w", statePath, err)
	}
	cur, mode, existed, err := readConfig(path)
	if err != nil {
		return "", err
	}
	if !force && (!existed || sha(cur) != st.Written) {
		return "", fmt.Errorf("%s changed after toolgate connect wrote it; undo would lose that change. The original is in %s; pass --force to restore it anyway", path, path+BackupSuffix)
	}
	if st.Existed {
		orig, err := os.ReadFile(path + BackupSuffix)
		if err != nil {
			return "", fmt.Errorf("reading the backup: %w", err)
		}
		if mode == 0 {
			mode = 0o600
		}
		if err := WriteFileAtomic(path, orig, mode); err != nil {
			return "", err
		}
		restored = "restored the original " + path
	} else {
		if existed {
			if err := os.Remove(path); err != nil {
				return "", fmt.Errorf("removing %s: %w", path, err)
			}
		}
		restored = "removed " + path + " (toolgate connect had created it)"
	}
	_ = os.Remove(path + BackupSuffix)
	if err := os.Remove(statePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return restored, fmt.Errorf("removing %s: %w", statePath, err)
	}
	return restored, nil
}

// WriteFileAtomic replaces path with data: a temp file in the same directory, written
// and fsynced, renamed over path, then the directory fsynced. A reader sees the old
// content or the new, never a mix; a crash leaves at most a stray temp file.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// LineDiff renders a minimal unified-style diff of two texts: the common leading and
// trailing lines are context, the middle is shown removed and added. Connect's edits
// are one contiguous change, for which this is exact.
func LineDiff(fromName, toName string, a, b []byte) string {
	al, bl := splitLines(a), splitLines(b)
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	if pre == len(al) && pre == len(bl) {
		return ""
	}
	const ctx = 3
	cs := max(0, pre-ctx)
	ce := min(len(al), len(al)-suf+ctx)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", fromName, toName)
	fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", cs+1, ce-cs, cs+1, ce-cs+(len(bl)-len(al)))
	for _, l := range al[cs:pre] {
		sb.WriteString(" " + l + "\n")
	}
	for _, l := range al[pre : len(al)-suf] {
		sb.WriteString("-" + l + "\n")
	}
	for _, l := range bl[pre : len(bl)-suf] {
		sb.WriteString("+" + l + "\n")
	}
	for _, l := range al[len(al)-suf : ce] {
		sb.WriteString(" " + l + "\n")
	}
	return sb.String()
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.Split(s, "\n")
}
