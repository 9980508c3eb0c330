package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/codegirl-games/agentbox/internal/stagepath"
)

// Limits caps what may be staged.
type Limits struct {
	MaxFiles int   // files, directories and links
	MaxBytes int64 // total size of regular files
}

// DefaultLimits keeps a bundle well below the default 256 MiB tmpfs.
var DefaultLimits = Limits{MaxFiles: 10000, MaxBytes: 192 << 20}

// File is one entry to stage.
type File struct {
	Rel  string      // slash-separated, relative to the bundle root
	Mode fs.FileMode // type and permission bits
	Size int64       // regular files
	Link string      // symlink target (relative, stays inside)
}

// Bundle is an app ready to stage.
type Bundle struct {
	// Target is the TARGET as the user gave it.
	Target string
	// Path is TARGET's absolute path (the executable, the directory or the
	// manifest); empty for a program of the image (a bare name).
	Path string
	// Executable says TARGET is the executable itself (no manifest): the
	// app is named by the file, not by its directory.
	Executable bool
	// Dir is the absolute app directory the files come from.
	Dir      string
	Manifest Manifest
	// InImage says Command is a program of the image, not a staged file.
	InImage    bool
	Files      []File
	TotalBytes int64

	root *os.Root
}

// SameFiles reports whether b and o stage the same files: the same
// bundle, or copies of one Load (a per-episode copy with its own
// environment shares the loaded file list). A warm pool that staged b
// ahead hands the sandbox to o's episode only then.
func (b *Bundle) SameFiles(o *Bundle) bool {
	if b == nil || o == nil {
		return false
	}
	if b == o {
		return true
	}
	return b.Dir == o.Dir && len(b.Files) > 0 && len(b.Files) == len(o.Files) && &b.Files[0] == &o.Files[0]
}

// Open opens a bundle file for reading through an os.Root, so a file swapped
// for a link after Load still cannot reach outside Dir.
func (b *Bundle) Open(rel string) (io.ReadCloser, error) {
	if b.root == nil {
		return nil, fmt.Errorf("%w: bundle %s is closed", ErrInvalid, b.Target)
	}
	f, err := b.root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	return f, nil
}

// Close releases the directory handle.
func (b *Bundle) Close() error {
	if b.root == nil {
		return nil
	}
	err := b.root.Close()
	b.root = nil
	return err
}

// Load resolves TARGET: an executable file, a directory holding
// agentbox.json, a manifest file, or a program of the image: a bare name
// (no slash) with no such file here, looked up on the sandbox's PATH as a
// manifest's bare command is. Every staged path is checked.
func Load(target string, lim Limits) (*Bundle, error) {
	fi, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) && IsProgramName(target) {
		return &Bundle{Target: target, Manifest: Manifest{Command: target}, InImage: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: target %s: %w", ErrInvalid, target, err)
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, fmt.Errorf("%w: target %s: %w", ErrInvalid, target, err)
	}
	var b *Bundle
	switch {
	case fi.IsDir():
		mpath := filepath.Join(abs, ManifestName)
		if _, err := os.Lstat(mpath); err != nil {
			return nil, fmt.Errorf("%w: %s is a directory without %s; add one (see README: the manifest) or pass the executable itself", ErrInvalid, target, ManifestName)
		}
		b, err = loadManifest(target, mpath, lim)
	case strings.HasSuffix(fi.Name(), ".json"):
		b, err = loadManifest(target, abs, lim)
	default:
		b, err = loadExecutable(target, abs, fi, lim)
	}
	if err != nil {
		return nil, err
	}
	b.Path = abs
	return b, nil
}

// IsProgramName reports whether a TARGET that is no file here names a
// program of the image: a bare name such as xterm or gnome-calculator — no
// slash, no leading dash or dot, not a manifest (.json).
func IsProgramName(target string) bool {
	if target == "" || len(target) > 255 || strings.HasSuffix(target, ".json") || target[0] == '-' || target[0] == '.' {
		return false
	}
	for _, r := range target {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r)) {
			return false
		}
	}
	return true
}

func loadExecutable(target, abs string, fi fs.FileInfo, lim Limits) (*Bundle, error) {
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, target)
	}
	if fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("%w: %s is not executable (chmod +x it)", ErrInvalid, target)
	}
	if err := checkExecutable(abs); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, target, err)
	}
	if fi.Size() > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes; the limit is %d", ErrInvalid, target, fi.Size(), lim.MaxBytes)
	}
	if n := nlink(fi); n > 1 {
		return nil, fmt.Errorf("%w: %s has %d hard links; copy it instead (hard links are refused)", ErrInvalid, target, n)
	}
	dir := filepath.Dir(abs)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, dir, err)
	}
	name := filepath.Base(abs)
	return &Bundle{
		Target:     target,
		Executable: true,
		Dir:        dir,
		Manifest:   Manifest{Command: name},
		Files:      []File{{Rel: name, Mode: fi.Mode(), Size: fi.Size()}},
		TotalBytes: fi.Size(),
		root:       root,
	}, nil
}

// checkExecutable accepts ELF files and scripts with a #! line.
func checkExecutable(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.Equal(head, []byte("\x7fELF")) || bytes.HasPrefix(head, []byte("#!")) {
		return nil
	}
	return errors.New("not a Linux executable (no ELF header or #! line)")
}

func loadManifest(target, mpath string, lim Limits) (*Bundle, error) {
	fi, err := os.Lstat(mpath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, mpath)
	}
	if fi.Size() > 1<<20 {
		return nil, fmt.Errorf("%w: %s is %d bytes; a manifest is at most 1 MiB", ErrInvalid, mpath, fi.Size())
	}
	data, err := os.ReadFile(mpath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	m, err := ParseManifest(mpath, data)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(mpath)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, dir, err)
	}
	m.Task.Dir = dir
	b := &Bundle{Target: target, Dir: dir, Manifest: *m, root: root}
	ok := false
	defer func() {
		if !ok {
			root.Close()
		}
	}()
	if err := b.collect(lim); err != nil {
		return nil, err
	}
	// The command: a staged file, or a program of the image.
	cmd := m.Command
	switch f := b.find(path.Clean(cmd)); {
	case f != nil && f.Mode.IsRegular():
		if f.Mode&0o111 == 0 {
			return nil, fmt.Errorf("%w: %s: command %q is not executable (chmod +x it)", ErrInvalid, mpath, cmd)
		}
	case f != nil:
		return nil, fmt.Errorf("%w: %s: command %q is not a regular file", ErrInvalid, mpath, cmd)
	case strings.Contains(cmd, "/"):
		return nil, fmt.Errorf("%w: %s: command %q is not a file in %s", ErrInvalid, mpath, cmd, dir)
	default:
		b.InImage = true
	}
	ok = true
	return b, nil
}

func (b *Bundle) find(rel string) *File {
	for i := range b.Files {
		if b.Files[i].Rel == rel {
			return &b.Files[i]
		}
	}
	return nil
}

// collect walks the directory (or the manifest's files) and checks every
// entry.
func (b *Bundle) collect(lim Limits) error {
	seen := map[string]bool{}
	add := func(rel string, fi fs.FileInfo) error {
		if seen[rel] {
			return nil
		}
		seen[rel] = true
		f := File{Rel: rel, Mode: fi.Mode()}
		where := filepath.Join(b.Dir, filepath.FromSlash(rel))
		switch mode := fi.Mode(); {
		case mode.IsDir():
		case mode.IsRegular():
			if n := nlink(fi); n > 1 {
				return fmt.Errorf("%w: %s has %d hard links; hard links are refused (copy the file)", ErrInvalid, where, n)
			}
			f.Size = fi.Size()
			b.TotalBytes += f.Size
			if b.TotalBytes > lim.MaxBytes {
				return fmt.Errorf("%w: %s: the app's files exceed %d bytes (at %s)", ErrInvalid, b.Dir, lim.MaxBytes, where)
			}
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(where)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			if err := stagepath.LinkInside(rel, filepath.ToSlash(target)); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
			}
			f.Link = target
		case mode&fs.ModeNamedPipe != 0:
			return fmt.Errorf("%w: %s is a FIFO; only files, directories and links are staged", ErrInvalid, where)
		case mode&fs.ModeDevice != 0, mode&fs.ModeCharDevice != 0:
			return fmt.Errorf("%w: %s is a device; only files, directories and links are staged", ErrInvalid, where)
		case mode&fs.ModeSocket != 0:
			return fmt.Errorf("%w: %s is a socket; only files, directories and links are staged", ErrInvalid, where)
		default:
			return fmt.Errorf("%w: %s has an unsupported file type %v", ErrInvalid, where, mode.Type())
		}
		b.Files = append(b.Files, f)
		if len(b.Files) > lim.MaxFiles {
			return fmt.Errorf("%w: %s holds more than %d files", ErrInvalid, b.Dir, lim.MaxFiles)
		}
		return nil
	}
	walk := func(start string) error {
		return filepath.WalkDir(filepath.Join(b.Dir, filepath.FromSlash(start)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			rel, err := filepath.Rel(b.Dir, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if rel == "." {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			// Parents of an explicitly listed file.
			for dir := path.Dir(rel); dir != "." && !seen[dir]; dir = path.Dir(dir) {
				dfi, err := os.Lstat(filepath.Join(b.Dir, filepath.FromSlash(dir)))
				if err != nil {
					return fmt.Errorf("%w: %w", ErrInvalid, err)
				}
				if !dfi.IsDir() {
					return fmt.Errorf("%w: %s: parent %s is not a directory", ErrInvalid, rel, dir)
				}
				if err := add(dir, dfi); err != nil {
					return err
				}
			}
			return add(rel, fi)
		})
	}
	if len(b.Manifest.Files) == 0 {
		if err := walk("."); err != nil {
			return err
		}
	} else {
		for _, f := range b.Manifest.Files {
			if _, err := os.Lstat(filepath.Join(b.Dir, filepath.FromSlash(f))); err != nil {
				return fmt.Errorf("%w: manifest lists %q: %w", ErrInvalid, f, err)
			}
			if err := walk(path.Clean(f)); err != nil {
				return err
			}
		}
	}
	// Parents before children.
	sort.SliceStable(b.Files, func(i, j int) bool { return b.Files[i].Rel < b.Files[j].Rel })
	return b.checkLinks()
}

// checkLinks resolves every link as the sandbox's kernel will, through the
// bundle's own links, and refuses any that leaves the app directory however
// it is chained: with s -> . and t -> s/.., t is the app directory's
// parent, though "s/.." alone looks local.
func (b *Bundle) checkLinks() error {
	r := &linkResolver{files: make(map[string]*File, len(b.Files)), memo: map[string]*resolved{}}
	for i := range b.Files {
		r.files[b.Files[i].Rel] = &b.Files[i]
	}
	for _, f := range b.Files {
		if f.Link == "" {
			continue
		}
		_, err := r.link(f.Rel)
		var esc *escapeError
		if errors.As(err, &esc) {
			where := filepath.Join(b.Dir, filepath.FromSlash(f.Rel))
			chain := ""
			if len(esc.via) > 1 {
				chain = " (through " + strings.Join(esc.via[1:], ", ") + ")"
			}
			return fmt.Errorf("%w: %s: symbolic link to %s leaves the app directory%s", ErrInvalid, where, f.Link, chain)
		}
	}
	return nil
}

// escapeError says a path goes above the app directory; via lists the
// links followed on the way, outermost first, as "name -> target".
type escapeError struct{ via []string }

func (e *escapeError) Error() string { return "leaves the app directory" }

// errLoop says a path goes round in links: the kernel refuses it (ELOOP),
// so it leads nowhere, inside or out.
var errLoop = errors.New("too many levels of symbolic links")

type resolved struct {
	comps []string // the target's components below the app directory
	via   []string // the links followed to get there, as "name -> target"
	err   error    // *escapeError or errLoop
	busy  bool     // being resolved: meeting it again is a loop
}

// linkResolver resolves the bundle's links, each once.
type linkResolver struct {
	files map[string]*File
	memo  map[string]*resolved
}

// link resolves the link rel to its final target. Its error, an
// *escapeError, lists rel first and then the links followed.
func (r *linkResolver) link(rel string) ([]string, error) {
	m := r.follow(rel)
	return m.comps, m.err
}

func (r *linkResolver) follow(rel string) *resolved {
	if m := r.memo[rel]; m != nil {
		if m.busy {
			return &resolved{err: errLoop}
		}
		return m
	}
	m := &resolved{busy: true}
	r.memo[rel] = m
	var dir []string // the link's directory: every parent of a staged entry is a real directory
	if d := path.Dir(rel); d != "." {
		dir = strings.Split(d, "/")
	}
	target := r.files[rel].Link
	m.comps, m.via, m.err = r.walk(dir, target)
	m.via = shortVia(append([]string{rel + " -> " + target}, m.via...))
	if m.err != nil {
		m.comps = nil
		if _, ok := m.err.(*escapeError); ok {
			m.err = &escapeError{via: m.via}
		}
	}
	m.busy = false
	return m
}

// shortVia keeps the first links of a chain, enough for an error message:
// a chain of n links must not cost n² to describe.
func shortVia(via []string) []string {
	const keep = 8
	if len(via) > keep {
		return append(via[:keep:keep], "…")
	}
	return via
}

// walk resolves name (slash-separated) from the directory dir, following
// the bundle's links at every component, the last included, and returns
// the result's components and the links followed. A component that is not
// staged is taken as a plain name: opening such a path fails in the
// sandbox, and resolving it lexically is the cautious reading.
func (r *linkResolver) walk(dir []string, name string) (comps, via []string, err error) {
	if path.IsAbs(name) {
		return nil, nil, &escapeError{}
	}
	cur := append([]string(nil), dir...)
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, via, &escapeError{}
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := path.Join(path.Join(cur...), c)
		if f := r.files[next]; f == nil || f.Link == "" {
			cur = append(cur, c)
			continue
		}
		m := r.follow(next)
		via = shortVia(append(via, m.via...))
		if m.err != nil {
			return nil, via, m.err
		}
		cur = append(cur[:0:0], m.comps...)
	}
	return cur, via, nil
}

func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// PolicyPath is the file of the manifest's policy (Manifest.Policy,
// relative to the app directory), or "" when it names none.
func (b *Bundle) PolicyPath() string {
	p := b.Manifest.Policy
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.Dir, p)
}
