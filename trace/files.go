package trace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A trace is input like any other: it may come from someone else, or have
// been edited. Every path read from it — screenshots named in steps.jsonl,
// the images replay.json points at, the logs — must name a plain file
// inside the trace directory: a local path (filepath.IsLocal) with no
// symbolic link on the way, opened through an os.Root of the directory, so
// nothing outside it is reached even if the directory changes meanwhile.
// A hard link is a plain file and is read (it cannot be told from one).

// ErrRefused marks a path a trace names that is not read: outside the
// trace, through a symbolic link, or not a regular file.
var ErrRefused = errors.New("refused")

// MaxRunBytes bounds run.json.
const MaxRunBytes = 64 << 20

// OpenFile opens name, a slash-separated path relative to the trace
// directory dir, for reading. It fails with an error wrapping ErrRefused
// when name is not a plain file inside dir, and with fs.ErrNotExist when
// there is nothing there.
func OpenFile(dir, name string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer root.Close()
	return openIn(root, name)
}

// ReadFile reads a file of the trace as OpenFile opens it; a file larger
// than max bytes is an error.
func ReadFile(dir, name string, max int64) ([]byte, error) {
	f, err := OpenFile(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, name, max)
}

// CheckFile reports, without opening it, whether OpenFile would open name
// (the errors are OpenFile's).
func CheckFile(dir, name string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer root.Close()
	_, err = checkIn(root, name)
	return err
}

// refusedError says why a path was refused.
type refusedError struct {
	name, why string
}

func (e *refusedError) Error() string { return fmt.Sprintf("%q: %s", e.name, e.why) }
func (e *refusedError) Unwrap() error { return ErrRefused }

// checkIn checks name inside root component by component, without
// following links, and returns it as a local OS path.
func checkIn(root *os.Root, name string) (string, error) {
	local := filepath.FromSlash(name)
	if name == "" || !filepath.IsLocal(local) || strings.Contains(name, "\\") {
		return "", &refusedError{name, "not a path inside the trace directory"}
	}
	local = filepath.Clean(local)
	parts := strings.Split(local, string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		fi, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("trace: %s: %w", name, fs.ErrNotExist)
		case err != nil:
			return "", fmt.Errorf("trace: %w", err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", &refusedError{name, "a symbolic link (" + p + "); links in a trace are not followed"}
		case i < len(parts)-1 && !fi.IsDir():
			return "", &refusedError{name, p + " is not a directory"}
		case i == len(parts)-1 && !fi.Mode().IsRegular():
			return "", &refusedError{name, "not a regular file (" + fi.Mode().Type().String() + ")"}
		}
	}
	return local, nil
}

func openIn(root *os.Root, name string) (*os.File, error) {
	local, err := checkIn(root, name)
	if err != nil {
		return nil, err
	}
	// The root keeps the open inside the directory whatever changed since
	// the check; O_NONBLOCK keeps a FIFO swapped in from blocking the open,
	// and the type is checked again on what was opened.
	f, err := root.OpenFile(local, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &refusedError{name, "not a regular file"}
	}
	return f, nil
}

func readAll(f *os.File, name string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("trace: %s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("trace: %s is larger than %d bytes", name, max)
	}
	return data, nil
}
