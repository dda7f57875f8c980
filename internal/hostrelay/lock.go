package hostrelay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/datadir"
)

// Files of the election in the data directory (docs/hostrelay.md, "Election").
const (
	// lockName is held (flock, exclusive) by the process that hosts the upstream
	// servers, for as long as any of them may run; it holds that process's pid. It is
	// never removed: a lock file deleted while others wait on it would split the lock.
	lockName = "upstream.lock"
	// sockName is the relay's socket, bound by the lock holder after it took the lock.
	sockName = "upstream.sock"
)

// tryLock opens upstream.lock (0600, never through a symbolic link) and tries to take
// it without waiting. It returns the open file when it got the lock.
func tryLock(dir string) (*os.File, bool, error) {
	f, _, err := datadir.OpenFile("upstream lock", filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, false, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return f, true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		return nil, false, nil
	}
	f.Close()
	return nil, false, fmt.Errorf("hostrelay: locking %s: %w", f.Name(), err)
}

// lockFree reports whether no process holds upstream.lock (it takes and drops it).
func lockFree(dir string) (bool, error) {
	f, ok, err := tryLock(dir)
	if ok {
		f.Close()
	}
	return ok, err
}

// writePID records the holder's pid in the lock file, for the messages of the others.
func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("hostrelay: writing %s: %w", f.Name(), err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return fmt.Errorf("hostrelay: writing %s: %w", f.Name(), err)
	}
	return nil
}

// holderPID reads the pid the lock holder recorded; 0 if there is none.
func holderPID(dir string) int {
	f, _, err := datadir.OpenFile("upstream lock", filepath.Join(dir, lockName), os.O_RDONLY)
	if err != nil {
		return 0
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 32))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// unlock releases the lock (closing the file would too).
func unlock(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	f.Close()
}
