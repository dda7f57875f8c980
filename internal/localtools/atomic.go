package localtools

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// pending is a file fully written and synced under a temporary name next to its target,
// waiting to be renamed into place.
type pending struct {
	rel, tmp string
}

// stage writes data to a fresh temporary file in rel's directory (created if needed)
// through the workspace root, and syncs it. O_EXCL means the temporary name can never
// be a planted link.
func stage(ws *workspace.Workspace, rel string, data []byte, perm fs.FileMode) (*pending, error) {
	dir := path.Dir(rel)
	if dir != "." {
		if err := ws.Root().MkdirAll(dir, 0o755); err != nil {
			return nil, kernel.Failed(kernel.CodeToolFailed, "creating directory %s: %v", dir, stripRoot(err))
		}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, ".toolgate-tmp-"+hex.EncodeToString(rnd[:]))
	f, err := ws.Root().OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, kernel.Failed(kernel.CodeToolFailed, "creating a temporary file in %s: %v", dir, stripRoot(err))
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := firstErr(werr, serr, cerr); err != nil {
		ws.Root().Remove(tmp)
		return nil, kernel.Failed(kernel.CodeToolFailed, "writing %s: %v", rel, stripRoot(err))
	}
	return &pending{rel: rel, tmp: tmp}, nil
}

// commit renames the temporary file over its target and syncs the directory, so the
// rename itself survives a crash.
func (p *pending) commit(ws *workspace.Workspace) error {
	if err := ws.Root().Rename(p.tmp, p.rel); err != nil {
		return kernel.Failed(kernel.CodeToolFailed, "replacing %s: %v", p.rel, stripRoot(err))
	}
	if d, err := ws.Root().Open(path.Dir(p.rel)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func (p *pending) abort(ws *workspace.Workspace) { ws.Root().Remove(p.tmp) }

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
