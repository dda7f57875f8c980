package store

import (
	"errors"
	"fmt"
	"os"
)

// ErrDatabaseGone is wrapped by an audit append refused because the SQLite database
// file is no longer the one this store opened (removed, or replaced under its name):
// its open descriptors would keep writing to an unlinked file, and every event written
// there would be lost at the next start.
var ErrDatabaseGone = errors.New("the database file was removed or replaced")

// fileID identifies the database file as opened (device and inode).
type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	return sysFileID(fi), nil
}

// checkFile is called before each audit batch: one stat of the path, cheap beside the
// commit it guards. PostgreSQL stores have no file to check.
func (s *Store) checkFile() error {
	if s.fileID == (fileID{}) {
		return nil
	}
	id, err := statID(s.path)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDatabaseGone, s.path, err)
	}
	if id != s.fileID {
		return fmt.Errorf("%w: %s is another file now", ErrDatabaseGone, s.path)
	}
	return nil
}
