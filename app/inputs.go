package app

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Inputs are a task's inputs, loaded and checked: the entries to write
// below the sandbox's home, with the app bundle's rules (regular files,
// directories and links that stay inside, the same caps, counted together
// with the app's files).
type Inputs struct {
	// Files are below the home (Rel is relative to it), parents before
	// children.
	Files      []File
	TotalBytes int64

	src   []inputSrc // where each of Files comes from, in the same order
	index map[string]int
}

type inputSrc struct {
	b   *Bundle // the input's own bundle (its root); nil for a parent directory made for it
	rel string  // the entry's path in b
}

// Open opens an input file (Rel as in Files) for reading, through the
// input's os.Root. It is safe for concurrent use (episodes in parallel).
func (in *Inputs) Open(rel string) (io.ReadCloser, error) {
	if i, ok := in.index[rel]; ok && in.src[i].b != nil {
		return in.src[i].b.Open(in.src[i].rel)
	}
	return nil, fmt.Errorf("%w: %s is not an input file", ErrInvalid, rel)
}

// Close releases the inputs' directory handles.
func (in *Inputs) Close() error {
	if in == nil {
		return nil
	}
	var errs []error
	for _, s := range in.src {
		if s.b != nil {
			errs = append(errs, s.b.Close())
		}
	}
	return errors.Join(errs...)
}

// LoadInputs checks and opens a task's inputs (From relative to t.Dir).
// app is the bundle they are staged with (nil: none): its files and bytes
// count against lim too. Errors wrap ErrInvalid and name the input.
func LoadInputs(t TaskFiles, app *Bundle, lim Limits) (*Inputs, error) {
	in := &Inputs{}
	ok := false
	defer func() {
		if !ok {
			in.Close()
		}
	}()
	files, bytes := 0, int64(0)
	if app != nil {
		files, bytes = len(app.Files), app.TotalBytes
	}
	made := map[string]bool{}
	for i, inp := range t.Inputs {
		to, err := HomePath(inp.To)
		if err != nil {
			return nil, fmt.Errorf("%w: inputs[%d].to: %v", ErrInvalid, i, err)
		}
		from := inp.From
		if !filepath.IsAbs(from) && t.Dir != "" {
			from = filepath.Join(t.Dir, from)
		}
		fi, err := os.Lstat(from)
		if err != nil {
			return nil, fmt.Errorf("%w: inputs[%d].from: %w", ErrInvalid, i, err)
		}
		var b *Bundle
		var base string // the input's path in b; "." for a directory
		switch {
		case fi.IsDir():
			b = &Bundle{Target: from, Dir: from}
			base = "."
		case fi.Mode().IsRegular():
			b = &Bundle{Target: from, Dir: filepath.Dir(from), Manifest: Manifest{Files: []string{fi.Name()}}}
			base = fi.Name()
		default:
			return nil, fmt.Errorf("%w: inputs[%d].from: %s is not a regular file or a directory (%v)", ErrInvalid, i, from, fi.Mode().Type())
		}
		if b.root, err = os.OpenRoot(b.Dir); err != nil {
			return nil, fmt.Errorf("%w: inputs[%d].from: %w", ErrInvalid, i, err)
		}
		if err := b.collect(Limits{MaxFiles: lim.MaxFiles - files, MaxBytes: lim.MaxBytes - bytes}); err != nil {
			b.Close()
			msg := strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
			msg = strings.ReplaceAll(msg, "the app directory", "the input's directory")
			if strings.Contains(msg, "exceed") || strings.Contains(msg, "more than") {
				// collect counted what was left after the app's files
				// and the inputs before: say the whole cap.
				msg = fmt.Sprintf("too large: the app's files and the inputs together may be at most %d entries and %d bytes (%d entries and %d bytes before this input)", lim.MaxFiles, lim.MaxBytes, files, bytes)
			}
			return nil, fmt.Errorf("%w: inputs[%d] (%s): %s", ErrInvalid, i, from, msg)
		}
		// The parents of to, made as directories.
		var parents []string
		for d := path.Dir(to); d != "."; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if !made[d] {
				made[d] = true
				in.Files = append(in.Files, File{Rel: d, Mode: fs.ModeDir | 0o755})
				in.src = append(in.src, inputSrc{})
				files++
			}
		}
		if base == "." {
			made[to] = true
			in.Files = append(in.Files, File{Rel: to, Mode: fi.Mode()})
			in.src = append(in.src, inputSrc{})
			files++
		}
		for _, f := range b.Files {
			s := inputSrc{b: b, rel: f.Rel}
			if base == "." {
				f.Rel = to + "/" + f.Rel
			} else {
				f.Rel = to
			}
			if f.Mode.IsDir() {
				made[f.Rel] = true
			}
			in.Files = append(in.Files, f)
			in.src = append(in.src, s)
			files++
			bytes += f.Size
			in.TotalBytes += f.Size
		}
		if len(b.Files) == 0 {
			b.Close()
		}
		if files > lim.MaxFiles {
			return nil, fmt.Errorf("%w: inputs[%d] (%s): the app's files and the inputs exceed %d files", ErrInvalid, i, from, lim.MaxFiles)
		}
	}
	in.index = make(map[string]int, len(in.Files))
	for i, f := range in.Files {
		in.index[f.Rel] = i
	}
	ok = true
	return in, nil
}
