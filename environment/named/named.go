// Package named keeps named sandboxes (`--name NAME`): an app user's home
// that outlives the sandbox and is given to the next run of that name.
// Backends keep the home itself (a Docker volume, a directory for the
// local backend); this package keeps, on this host, what every backend
// shares: the name's rules, its lock (one run at a time), and its record
// (backend, when last used, how large the home was then).
//
// Each name has a directory below Root:
//
//	ROOT/NAME/lock        flock(2)ed by the run that holds the name; its
//	                      content says who (run ID, pid, host, since)
//	ROOT/NAME/meta.json   the record (Meta)
//	ROOT/NAME/home/       the home, for backends that keep it here (local)
//
// A holder that dies (SIGKILL, power loss) loses its flock with its
// process: the next run takes the name over, the stale holder record
// overwritten.
package named

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/internal/owner"
)

// MaxLen is the longest name: a Docker volume's name is "agentbox-home-"
// and the name, and a name is a directory's.
const MaxLen = 63

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// Validate checks a sandbox name: 1 to MaxLen characters, lower-case
// letters, digits, '.', '_' and '-', starting with a letter or digit
// (a directory's and a Docker volume's name alike, never "." or "..").
func Validate(name string) error {
	switch {
	case name == "":
		return errors.New("a sandbox name must not be empty")
	case len(name) > MaxLen:
		return fmt.Errorf("sandbox name %q is %d characters long; at most %d", name, len(name), MaxLen)
	case !nameRE.MatchString(name):
		return fmt.Errorf("sandbox name %q: use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// EnvRoot names the environment variable that overrides Root's default.
const EnvRoot = "AGENTBOX_SANDBOXES"

// Root is the directory named sandboxes are kept in: $AGENTBOX_SANDBOXES;
// else, as root, /var/lib/agentbox/sandboxes; else
// $XDG_STATE_HOME/agentbox/sandboxes, else
// ~/.local/state/agentbox/sandboxes.
func Root() (string, error) {
	if d := os.Getenv(EnvRoot); d != "" {
		if !filepath.IsAbs(d) {
			return "", fmt.Errorf("$%s (%s) must be an absolute path", EnvRoot, d)
		}
		return d, nil
	}
	if os.Geteuid() == 0 {
		return "/var/lib/agentbox/sandboxes", nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox", "sandboxes"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory to keep named sandboxes in (set $%s): %w", EnvRoot, err)
	}
	return filepath.Join(home, ".local", "state", "agentbox", "sandboxes"), nil
}

// Meta is a named sandbox's record (meta.json).
type Meta struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`
	// Created is when the first run of the name began; LastUsed when the
	// last one ended (zero while the first runs).
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used,omitzero"`
	LastRun  string    `json:"last_run,omitempty"`
	// SizeBytes is the home's size when the last run ended; -1 unknown.
	SizeBytes int64 `json:"size_bytes"`
}

// Holder is who holds a name: what its lock file says.
type Holder struct {
	RunID string    `json:"run_id"`
	PID   int       `json:"pid"`
	Start uint64    `json:"start,omitempty"` // owner.Start
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

func (h Holder) String() string {
	return fmt.Sprintf("run %s (agentbox pid %d on %s, since %s)", h.RunID, h.PID, h.Host, h.Since.Local().Format(time.DateTime))
}

// Errors of Acquire and Remove, wrapped.
var (
	// ErrLocked: another run holds the name.
	ErrLocked = errors.New("sandbox in use")
	// ErrBackend: the name belongs to another backend.
	ErrBackend = errors.New("sandbox of another backend")
	// ErrTooBig: the home holds more than the run's bound.
	ErrTooBig = errors.New("sandbox home over its size bound")
	// ErrNotFound: no sandbox has the name.
	ErrNotFound = errors.New("no such sandbox")
)

// Lock is a held name. Release it when the sandbox is gone.
type Lock struct {
	f    *os.File
	dir  string
	meta Meta
	run  string
	// lent is the Hold this lock was lent by (its flock is the hold's).
	lent *Hold
}

// Hold is a name held by one holder that makes its sandboxes one after
// another (an environment of agentbox serve, a new sandbox for each
// episode): the name stays held between them, so no other run takes it
// in the meantime. While it is held, an Acquire of the name in this
// process is lent the hold — one sandbox at a time — instead of taking
// the flock, which the hold keeps; any other Acquire (another process,
// a second Hold) finds the name locked. Release the hold when the last
// sandbox is gone.
type Hold struct {
	lock *Lock
	// lent is guarded by holds.mu.
	lent bool
}

// holds are this process's Holds, by the name's directory.
var holds struct {
	mu sync.Mutex
	m  map[string]*Hold
}

// TakeHold takes name for holder (an ID saying who, for the message of a
// run that finds it held) at once or not at all, as Acquire does; its
// errors are Acquire's.
func TakeHold(root, name, backend, holder string) (*Hold, error) {
	l, err := acquire(root, name, backend, holder, false)
	if err != nil {
		return nil, err
	}
	h := &Hold{lock: l}
	holds.mu.Lock()
	defer holds.mu.Unlock()
	if holds.m == nil {
		holds.m = make(map[string]*Hold)
	}
	holds.m[l.dir] = h
	return h, nil
}

// Release lets the name go. It is idempotent; a lock lent and not yet
// released holds nothing after it.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	holds.mu.Lock()
	if holds.m[h.lock.dir] == h {
		delete(holds.m, h.lock.dir)
	}
	holds.mu.Unlock()
	h.lock.Abandon()
}

// lend lends the hold of dir, if this process has one: ok says it has,
// and then the lock, or an ErrLocked error while it is lent already.
func lend(name, dir, backend, runID string) (l *Lock, ok bool, err error) {
	holds.mu.Lock()
	defer holds.mu.Unlock()
	h := holds.m[dir]
	if h == nil {
		return nil, false, nil
	}
	if h.lent {
		return nil, true, fmt.Errorf("%w: sandbox %s is in use by another sandbox of %s; wait for it to be gone, or use another name", ErrLocked, name, h.lock.run)
	}
	m, err := readMeta(dir)
	switch {
	case err != nil:
		return nil, true, fmt.Errorf("sandbox %s: %w", name, err)
	case m.Backend != backend:
		return nil, true, fmt.Errorf("%w: sandbox %s keeps its home in the %s backend; run it with --backend %s, or use another name", ErrBackend, name, m.Backend, m.Backend)
	}
	h.lent = true
	return &Lock{dir: dir, meta: m, run: runID, lent: h}, true, nil
}

// giveBack ends a lent lock's loan.
func (l *Lock) giveBack() {
	holds.mu.Lock()
	l.lent.lent = false
	holds.mu.Unlock()
	l.lent = nil
}

// Dir is the name's directory (ROOT/NAME).
func (l *Lock) Dir() string { return l.dir }

// HomeDir is where a backend that keeps the home on this host keeps it.
func (l *Lock) HomeDir() string { return filepath.Join(l.dir, "home") }

// Meta is the record as the lock found it (Backend set).
func (l *Lock) Meta() Meta { return l.meta }

// Acquire takes name for a run of backend, at once or not at all: while
// another run holds it, the error wraps ErrLocked and names the holder;
// a name first used with another backend is refused (ErrBackend). The
// name's directory is made (0755, so that the local backend's sandbox
// user can reach its home below when agentbox runs as root).
func Acquire(root, name, backend, runID string) (*Lock, error) {
	return acquire(root, name, backend, runID, true)
}

// acquire is Acquire; borrow says whether a Hold of this process may lend
// the name.
func acquire(root, name, backend, runID string, borrow bool) (*Lock, error) {
	if err := Validate(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, name)
	if borrow {
		if l, ok, err := lend(name, dir, backend, runID); ok {
			return l, err
		}
	}
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", name, err)
		}
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", name, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, lockedError(name, dir)
			}
			return nil, fmt.Errorf("sandbox %s: lock: %w", name, err)
		}
		// Removed (agentbox sandboxes rm) between the open and the lock:
		// this file is no longer the name's; take the new one.
		if !sameFile(f, filepath.Join(dir, "lock")) {
			f.Close()
			if attempt < 3 {
				continue
			}
			return nil, fmt.Errorf("sandbox %s: %w: it is being removed", name, ErrLocked)
		}
		l := &Lock{f: f, dir: dir, run: runID}
		m, err := readMeta(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			m = Meta{Name: name, Backend: backend, Created: time.Now().UTC(), SizeBytes: -1}
			if err := writeMeta(dir, m); err != nil {
				l.unlock()
				return nil, err
			}
		case err != nil:
			l.unlock()
			return nil, fmt.Errorf("sandbox %s: %w", name, err)
		case m.Backend != backend:
			l.unlock()
			return nil, fmt.Errorf("%w: sandbox %s keeps its home in the %s backend; run it with --backend %s, or use another name", ErrBackend, name, m.Backend, m.Backend)
		}
		l.meta = m
		host, _ := os.Hostname()
		h := Holder{RunID: runID, PID: os.Getpid(), Start: owner.Start(os.Getpid()), Host: host, Since: time.Now().UTC()}
		data, _ := json.Marshal(h)
		// Who holds it, for the next run's message; the lock holds without.
		if f.Truncate(0) == nil {
			_, _ = f.WriteAt(append(data, '\n'), 0)
		}
		return l, nil
	}
}

func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// lockedError names who holds the name, from its lock file.
func lockedError(name, dir string) error {
	if h, ok := readHolder(dir); ok {
		return fmt.Errorf("%w: sandbox %s is held by %s; wait for that run to end, or use another name", ErrLocked, name, h)
	}
	return fmt.Errorf("%w: sandbox %s is held by another agentbox; wait for it to end, or use another name", ErrLocked, name)
}

func readHolder(dir string) (Holder, bool) {
	var h Holder
	data, err := os.ReadFile(filepath.Join(dir, "lock"))
	if err != nil || json.Unmarshal(data, &h) != nil || h.PID == 0 {
		return h, false
	}
	return h, true
}

// CheckSize refuses a home that holds more than limit bytes: the bound
// a named home is held to at the start of every run (its size is also
// measured at the end of each, Release).
func (l *Lock) CheckSize(used, limit int64) error {
	if limit > 0 && used > limit {
		return fmt.Errorf("%w: sandbox %s's home holds %s, more than its bound of %s (the --tmpfs size): start it with a larger --tmpfs, or remove it (agentbox sandboxes rm %s)",
			ErrTooBig, l.meta.Name, mib(used), mib(limit), l.meta.Name)
	}
	return nil
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// Release records the run's end (when, and the home's size, -1 when
// unknown) and lets the name go. It is idempotent.
func (l *Lock) Release(size int64) error {
	if l == nil || (l.f == nil && l.lent == nil) {
		return nil
	}
	m := l.meta
	m.LastUsed, m.LastRun, m.SizeBytes = time.Now().UTC(), l.run, size
	err := writeMeta(l.dir, m)
	if l.lent != nil {
		l.giveBack()
		return err
	}
	_ = l.f.Truncate(0)
	l.unlock()
	return err
}

// Abandon lets the name go without recording a run (a sandbox that was
// never made). It is idempotent.
func (l *Lock) Abandon() {
	if l != nil && l.lent != nil {
		l.giveBack()
		return
	}
	if l != nil && l.f != nil {
		_ = l.f.Truncate(0)
		l.unlock()
	}
}

func (l *Lock) unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

func readMeta(dir string) (Meta, error) {
	var m Meta
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, "meta.json"), err)
	}
	return m, nil
}

func writeMeta(dir string, m Meta) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "meta.json"), append(data, '\n'), 0o644)
}

// Entry is one named sandbox as List finds it.
type Entry struct {
	Meta
	// Holder is the run that holds it now; nil when it is free (a holder
	// whose process is gone is not one: the name is free to take over).
	Holder *Holder
}

// List returns the named sandboxes below root, by name.
func List(root string) ([]Entry, error) {
	des, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		if !de.IsDir() || Validate(de.Name()) != nil {
			continue
		}
		e, err := Get(root, de.Name())
		if err != nil {
			continue // half made or half removed
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns one named sandbox; the error wraps ErrNotFound when there
// is none.
func Get(root, name string) (Entry, error) {
	if err := Validate(name); err != nil {
		return Entry{}, err
	}
	dir := filepath.Join(root, name)
	m, err := readMeta(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("%w: %s (none below %s)", ErrNotFound, name, root)
	}
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Meta: m}
	if h, ok := readHolder(dir); ok && held(dir) {
		e.Holder = &h
	}
	return e, nil
}

// held reports whether some process holds dir's lock, by trying to take
// it (and giving it back at once).
func held(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Remove removes a named sandbox: it takes the name's lock (a held one
// is refused, ErrLocked: only a live process holds it), calls drop to remove what the
// backend keeps of it (a Docker volume; nil when the backend keeps
// nothing beyond the directory), then removes the directory, the home
// below it included.
func Remove(root, name string, drop func(Meta) error) error {
	e, err := Get(root, name)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, name)
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return lockedError(name, dir)
	}
	if drop != nil {
		if err := drop(e.Meta); err != nil {
			return fmt.Errorf("sandbox %s: %w", name, err)
		}
	}
	// The lock file goes first: a run that opened it and waits sees it
	// is not the name's any more (Acquire's sameFile).
	_ = os.Remove(filepath.Join(dir, "lock"))
	if err := RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox %s: %w", name, err)
	}
	return nil
}

// RemoveAll removes dir like os.RemoveAll, first making every directory
// below it writable and searchable by its owner (an app may leave
// directories it cannot itself empty, 0500).
func RemoveAll(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
				_ = os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// DirSize is the bytes the regular files below dir hold (links not
// followed); what cannot be read counts nothing.
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// HostHome makes the name's home on this host (HomeDir) for a sandbox
// whose user is uid:gid on the host, and checks it: a directory (never a
// link), 0700, owned by uid:gid. A home found owned by another uid (the
// name first used as another user) is refused.
func (l *Lock) HostHome(uid, gid int) (string, error) {
	home := l.HomeDir()
	if err := os.Mkdir(home, 0o700); err == nil {
		if os.Geteuid() != uid || os.Getegid() != gid {
			if err := os.Lchown(home, uid, gid); err != nil {
				return "", fmt.Errorf("sandbox %s: %w", l.meta.Name, err)
			}
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("sandbox %s: %w", l.meta.Name, err)
	}
	fi, err := os.Lstat(home)
	if err != nil {
		return "", fmt.Errorf("sandbox %s: %w", l.meta.Name, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != uid || int(st.Gid) != gid {
		return "", fmt.Errorf("sandbox %s: %s is not a directory owned by %d:%d, which the sandbox runs as; remove the sandbox (agentbox sandboxes rm %s)", l.meta.Name, home, uid, gid, l.meta.Name)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(home, 0o700); err != nil {
			return "", fmt.Errorf("sandbox %s: %w", l.meta.Name, err)
		}
	}
	return home, nil
}
