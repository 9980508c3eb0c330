// Package collectfs finds the files a task collects below the sandbox's
// home (docs/tasks.md): globs with *, ?, […] and ** (any depth), walked
// through an os.Root without following a link, devices, FIFOs and sockets
// refused, within a count of files and bytes. The guest uses it where the
// files are; the rules are here so they can be tested without a sandbox.
package collectfs

import (
	"context"
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
)

// Limits bound a collection: how many files and how many bytes in all.
type Limits struct {
	Files int
	Bytes int64
}

// Match is a regular file to collect, by its path below the root.
type Match struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Refused is a match left out, and why.
type Refused struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MaxRefused is how many refusals are listed one by one; the rest are
// counted in one last entry.
const MaxRefused = 100

// MaxVisit bounds the entries one collection walks: a home with millions
// of files cannot keep the end of an episode busy.
const MaxVisit = 1_000_000

// Reasons a match is refused.
const (
	ReasonLink      = "a symbolic link (not followed)"
	ReasonDevice    = "a device"
	ReasonFIFO      = "a FIFO"
	ReasonSocket    = "a socket"
	ReasonOther     = "not a regular file"
	ReasonFileLimit = "over the file limit"
	ReasonByteLimit = "over the byte limit"
)

// CheckPattern accepts a pattern relative to the root: slash-separated,
// no "..", not absolute, each segment a valid path.Match glob or "**".
func CheckPattern(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return fmt.Errorf("pattern %q: want a relative path below the home", p)
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "..":
			return fmt.Errorf("pattern %q leaves the home (..)", p)
		case seg == "**":
		case strings.Contains(seg, "**"):
			return fmt.Errorf("pattern %q: ** stands alone between slashes", p)
		default:
			if _, err := path.Match(seg, ""); err != nil {
				return fmt.Errorf("pattern %q: bad glob %q: %v", p, seg, err)
			}
		}
	}
	return nil
}

// pattern is a checked pattern's segments.
type pattern []string

func compile(p string) pattern {
	var segs pattern
	for _, s := range strings.Split(path.Clean(p), "/") {
		if s != "." && s != "" {
			segs = append(segs, s)
		}
	}
	return segs
}

// states is the set of pattern positions reached after some segments
// (position len(p) means the whole pattern matched).
type states []bool

func (p pattern) start() states {
	st := make(states, len(p)+1)
	st[0] = true
	return p.closure(st)
}

// closure adds the positions after a ** (it may match no segment).
func (p pattern) closure(st states) states {
	for j := 0; j < len(p); j++ {
		if st[j] && p[j] == "**" {
			st[j+1] = true
		}
	}
	return st
}

// step consumes one path segment.
func (p pattern) step(st states, seg string) states {
	next := make(states, len(p)+1)
	for j := 0; j < len(p); j++ {
		if !st[j] {
			continue
		}
		if p[j] == "**" {
			next[j] = true
			continue
		}
		if ok, _ := path.Match(p[j], seg); ok {
			next[j+1] = true
		}
	}
	return p.closure(next)
}

// Matches reports whether the pattern names rel: rel itself, or a
// directory above it (a pattern naming a directory collects what is in
// it).
func Matches(pat, rel string) bool {
	p := compile(pat)
	st := p.start()
	for _, seg := range strings.Split(rel, "/") {
		if st[len(p)] {
			return true
		}
		st = p.step(st, seg)
	}
	return st[len(p)]
}

// mayHold reports whether something below the directory dir can match.
func (p pattern) mayHold(dir []string) bool {
	st := p.start()
	for _, seg := range dir {
		if st[len(p)] {
			return true
		}
		st = p.step(st, seg)
	}
	for _, ok := range st {
		if ok {
			return true
		}
	}
	return false
}

// literalPrefix is the directory a pattern's walk can start from: its
// leading segments without glob characters (but not the last one, which
// may be a file).
func (p pattern) literalPrefix() string {
	var out []string
	for _, s := range p[:max(len(p)-1, 0)] {
		if s == "**" || strings.ContainsAny(s, "*?[\\") {
			break
		}
		out = append(out, s)
	}
	return path.Join(out...)
}

// Result is what Find found.
type Result struct {
	Files   []Match   // in path order, within the limits
	Refused []Refused // at most MaxRefused entries and one that counts the rest
	Bytes   int64     // the total size of Files
}

type finder struct {
	root    *os.Root
	pats    []pattern
	lim     Limits
	res     Result
	seen    map[string]bool
	extra   map[string]int // refusals beyond MaxRefused, by reason
	visited int
}

// Find walks root for the patterns (each checked by CheckPattern) and
// returns the regular files they name, in path order, within lim; links,
// devices, FIFOs, sockets and what is over the limits are refused. No link
// is followed, at any depth. Its error is a bad pattern or ctx's.
func Find(ctx context.Context, root *os.Root, patterns []string, lim Limits) (Result, error) {
	f := &finder{root: root, lim: lim, seen: map[string]bool{}, extra: map[string]int{}}
	var starts []string
	for _, p := range patterns {
		if err := CheckPattern(p); err != nil {
			return Result{}, err
		}
		cp := compile(p)
		if len(cp) == 0 {
			return Result{}, fmt.Errorf("pattern %q names the home itself", p)
		}
		f.pats = append(f.pats, cp)
		starts = append(starts, cp.literalPrefix())
	}
	sort.Strings(starts)
	var walked []string
	for _, s := range starts {
		covered := false
		for _, w := range walked {
			if w == "" || s == w || strings.HasPrefix(s, w+"/") {
				covered = true
			}
		}
		if covered {
			continue
		}
		walked = append(walked, s)
		if err := f.walk(ctx, s); err != nil {
			return f.result(), err
		}
	}
	return f.result(), nil
}

func (f *finder) result() Result {
	r := f.res
	for _, reason := range []string{ReasonFileLimit, ReasonByteLimit, ReasonLink, ReasonDevice, ReasonFIFO, ReasonSocket, ReasonOther, "walk"} {
		if n := f.extra[reason]; n > 0 {
			if reason == "walk" {
				r.Refused = append(r.Refused, Refused{Path: "…", Reason: fmt.Sprintf("the walk stopped after %d entries; what lies beyond was not looked at", MaxVisit)})
				continue
			}
			r.Refused = append(r.Refused, Refused{Path: "…", Reason: fmt.Sprintf("%d more: %s", n, reason)})
		}
	}
	return r
}

var errStop = errors.New("stop")

// walk walks from start (a directory below the root, "" for the root),
// checking first that no component of start is a link.
func (f *finder) walk(ctx context.Context, start string) error {
	dir := "."
	if start != "" {
		for _, seg := range strings.Split(start, "/") {
			next := path.Join(dir, seg)
			fi, err := f.root.Lstat(filepath.FromSlash(next))
			if err != nil {
				return nil // nothing there: nothing matches
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				if f.matches(next) || f.mayHold(next) {
					f.refuse(next, ReasonLink)
				}
				return nil
			}
			if !fi.IsDir() {
				f.entry(next, fi)
				return nil
			}
			dir = next
		}
	}
	err := fs.WalkDir(f.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: skipped
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.visited++
		if f.visited > MaxVisit {
			f.extra["walk"]++
			return errStop
		}
		if p == "." {
			return nil
		}
		if d.IsDir() {
			if !f.mayHold(p) {
				return fs.SkipDir
			}
			return nil
		}
		if !f.matches(p) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		f.entry(p, fi)
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

func (f *finder) matches(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, p := range f.pats {
		st := p.start()
		for _, seg := range segs {
			if st[len(p)] {
				return true
			}
			st = p.step(st, seg)
		}
		if st[len(p)] {
			return true
		}
	}
	return false
}

func (f *finder) mayHold(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, p := range f.pats {
		if p.mayHold(segs) {
			return true
		}
	}
	return false
}

// entry judges one match (not a directory).
func (f *finder) entry(rel string, fi fs.FileInfo) {
	if f.seen[rel] {
		return
	}
	f.seen[rel] = true
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		f.refuse(rel, ReasonLink)
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		f.refuse(rel, ReasonDevice)
	case m&fs.ModeNamedPipe != 0:
		f.refuse(rel, ReasonFIFO)
	case m&fs.ModeSocket != 0:
		f.refuse(rel, ReasonSocket)
	case !m.IsRegular():
		f.refuse(rel, ReasonOther)
	case len(f.res.Files) >= f.lim.Files:
		f.refuse(rel, fmt.Sprintf("%s (%d files)", ReasonFileLimit, f.lim.Files))
	case fi.Size() > f.lim.Bytes-f.res.Bytes:
		f.refuse(rel, fmt.Sprintf("%s (%d bytes, with %d collected already; the limit is %d)", ReasonByteLimit, fi.Size(), f.res.Bytes, f.lim.Bytes))
	default:
		f.res.Files = append(f.res.Files, Match{Path: rel, Size: fi.Size()})
		f.res.Bytes += fi.Size()
	}
}

func (f *finder) refuse(rel, reason string) {
	if len(f.res.Refused) < MaxRefused {
		f.res.Refused = append(f.res.Refused, Refused{Path: rel, Reason: reason})
		return
	}
	for _, r := range []string{ReasonFileLimit, ReasonByteLimit} {
		if strings.HasPrefix(reason, r) {
			reason = r
		}
	}
	f.extra[reason]++
}

// Open opens a file Find returned for reading: through the root, not
// following a link in its last component (the root refuses any that
// leaves it), without blocking on a FIFO swapped in meanwhile, and only
// if it is still a regular file.
func Open(root *os.Root, rel string) (*os.File, error) {
	if err := CheckPattern(rel); err != nil {
		return nil, err
	}
	fh, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("%s is no longer a regular file", rel)
	}
	return fh, nil
}

// ReadAt reads up to n bytes of rel from off (Open's rules); eof says the
// file ends within them.
func ReadAt(root *os.Root, rel string, off int64, n int) (data []byte, eof bool, err error) {
	fh, err := Open(root, rel)
	if err != nil {
		return nil, false, err
	}
	defer fh.Close()
	buf := make([]byte, n)
	m, err := fh.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		return buf[:m], true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return buf[:m], false, nil
}
