// Package atomicfile replaces a file's contents all at once: the new
// contents are written to a temporary file in the same directory, synced,
// and renamed over the target, and the directory is synced. A reader sees
// the old file or the new one, never half of either; a crash leaves one of
// them; and a failure at any step leaves no temporary file behind.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Option changes how a file is committed.
type Option uint8

// NoSync skips the fsyncs: the rename is still atomic for readers, but a
// crash may lose the new contents. For files rewritten often whose loss is
// harmless (a run's screenshots, its run.json while it is running).
const NoSync Option = 1

// NoReplace makes Commit fail, with an error wrapping fs.ErrExist, when
// the target exists by then, instead of replacing it: for files written
// on the user's behalf under a name the user chose (an exported video),
// which must not silently replace one that appeared meanwhile.
const NoReplace Option = 2

// File is the new version of a file, written under a temporary name until
// Commit puts it in place. Call Abort (in a defer) on every path: after
// Commit it does nothing.
type File struct {
	f         *os.File
	target    string
	perm      fs.FileMode
	sync      bool
	noReplace bool
	done      bool
}

// Create starts a new version of path. The temporary file is a dot file
// beside it, .NAME.tmp-RANDOM: it never matches a pattern such as *.png
// that the finished files match.
func Create(path string, perm fs.FileMode, opts ...Option) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	af := &File{f: f, target: path, perm: perm, sync: true}
	for _, o := range opts {
		switch o {
		case NoSync:
			af.sync = false
		case NoReplace:
			af.noReplace = true
		}
	}
	return af, nil
}

// Name is the temporary file's path.
func (f *File) Name() string { return f.f.Name() }

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Commit gives the temporary file the permissions perm (exactly, whatever
// the umask), syncs it, renames it over the target and syncs the directory.
// On an error before the rename the target is unchanged and the temporary
// file is gone.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s: already committed or aborted", f.target)
	}
	err := os.Chmod(f.f.Name(), f.perm) // by name: a program may have written it by name
	if err == nil && f.sync {
		err = f.f.Sync()
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && f.noReplace {
		err = renameNoReplace(f.f.Name(), f.target)
	} else if err == nil {
		err = os.Rename(f.f.Name(), f.target)
	}
	f.done = true
	if err != nil {
		os.Remove(f.f.Name())
		return err
	}
	if f.sync {
		return syncDir(filepath.Dir(f.target))
	}
	return nil
}

// Abort discards the temporary file, unless Commit has run.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.f.Close()
	os.Remove(f.f.Name())
}

// WriteFile replaces path with data, as Create, Write and Commit do.
func WriteFile(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	f, err := Create(path, perm, opts...)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// renameNoReplace renames old to new unless new exists
// (renameat2 RENAME_NOREPLACE; a hard link and an unlink on file systems
// without it). Its error wraps fs.ErrExist when new exists.
func renameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if err := os.Link(old, new); err != nil {
			return err
		}
		return os.Remove(old)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
	}
	return nil
}

// SyncDir syncs a directory, so the names created or renamed in it last.
func SyncDir(dir string) error { return syncDir(dir) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
