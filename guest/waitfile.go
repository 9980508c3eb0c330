package guest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// savedFile is what wait until file looks at: a regular file's identity,
// size and modification time. A save by rename (LibreOffice writes a
// temporary file and renames it over the old) changes the inode.
type savedFile struct {
	ino   uint64
	size  int64
	mtime time.Time
}

// statHome looks at rel below the home through root: no link followed
// (the root refuses any path that leaves it; the last component is
// Lstat'ed), only a regular file.
func statHome(root *os.Root, rel string) (savedFile, error) {
	fi, err := root.Lstat(filepath.FromSlash(rel))
	if err != nil {
		return savedFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return savedFile{}, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	st := savedFile{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// waitFile polls rel below home until it has been written after since
// (its mtime later) and kept its inode, size and mtime for stable. It
// returns whether that held before ctx ended and, when it did not, what
// was seen last.
func waitFile(ctx context.Context, home, rel string, since time.Time, stable, poll time.Duration) (bool, string, error) {
	root, err := os.OpenRoot(home)
	if err != nil {
		return false, "", err
	}
	defer root.Close()
	var (
		last    savedFile
		lastAt  time.Time
		have    bool
		seen    = "nothing seen yet"
		tick    = time.NewTicker(poll)
		display = "~/" + rel
	)
	defer tick.Stop()
	for {
		st, err := statHome(root, rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			have, seen = false, fmt.Sprintf("%s does not exist", display)
		case err != nil:
			have, seen = false, fmt.Sprintf("%s: %v", display, err)
		case !st.mtime.After(since):
			have, seen = false, fmt.Sprintf("%s not written since the app was launched (modified %s, launched %s)",
				display, st.mtime.UTC().Format(time.RFC3339Nano), since.UTC().Format(time.RFC3339Nano))
		case !have || st != last:
			have, last, lastAt = true, st, time.Now()
			seen = fmt.Sprintf("%s written (%d bytes, modified %s) but still changing", display, st.size, st.mtime.UTC().Format(time.RFC3339Nano))
		case time.Since(lastAt) >= stable:
			return true, "", nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false, seen, nil
		}
	}
}
