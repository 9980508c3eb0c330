// Package owner tells whether the agentbox process that made something
// still runs, and makes the host's temporary directories so that, after
// that process was killed, `agentbox gc` can tell them from those of live
// processes and remove them.
//
// A process is named by its PID and its start time (field 22 of
// /proc/PID/stat, clock ticks since boot): the pair survives PID reuse.
// Sandboxes carry the pair in labels (environment.OwnerAlive); a
// temporary directory carries it in its name:
//
//	$TMPDIR/agentbox-KIND-PID.START-RANDOM
//
// Every exit path of agentbox removes its own directories; only a process
// that could not run its cleanup (SIGKILL, the OOM killer, a power cut
// before a reboot that keeps /tmp) leaves one, with what it held (serve's
// uploads, a sandbox network's sockets, an agent's screenshots).
package owner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Start returns a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat), which with the PID identifies a process across PID
// reuse; 0 if unknown.
func Start(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

// Alive reports whether the process with this PID and start time (0: not
// known, the PID alone decides) still runs; else why not.
func Alive(pid int, start uint64) (bool, string) {
	if pid <= 0 {
		return false, "no owner recorded"
	}
	got := Start(pid)
	if got == 0 {
		return false, fmt.Sprintf("owner pid %d is gone", pid)
	}
	if start != 0 && start != got {
		return false, fmt.Sprintf("owner pid %d was reused by another process", pid)
	}
	return true, ""
}

// prefix begins the name of every directory TempDir makes.
const prefix = "agentbox-"

// kindPattern is what a kind may be: it is part of a file name, and the
// owner's stamp after it must stay unambiguous.
const kindPattern = `[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*`

var kindRE = regexp.MustCompile(`^` + kindPattern + `$`)

// nameRE matches the names TempDir makes (os.MkdirTemp's random part is
// decimal).
var nameRE = regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `(` + kindPattern + `)-([0-9]+)\.([0-9]+)-[0-9]+$`)

// TempDir creates a directory of mode 0700 in os.TempDir() whose name
// records this process as its owner: agentbox-KIND-PID.START-RANDOM.
// kind says what it holds ("serve", "net", "exec"): lower-case words joined
// by "-". The caller removes it when done; Orphans finds it if the caller
// was killed first.
func TempDir(kind string) (string, error) {
	if !kindRE.MatchString(kind) {
		return "", fmt.Errorf("owner: bad kind %q for a temporary directory", kind)
	}
	pid := os.Getpid()
	return os.MkdirTemp("", fmt.Sprintf("%s%s-%d.%d-", prefix, kind, pid, Start(pid)))
}

// Orphan is a directory TempDir made whose owner is gone.
type Orphan struct {
	Path    string
	Kind    string
	PID     int
	Created time.Time // the directory's modification time
	Reason  string    // why its owner counts as gone
}

// Orphans lists the directories TempDir made in dir (os.TempDir() if
// empty) whose owner no longer runs, oldest first. Only real directories
// (not symbolic links) are listed, and for a user other than root only
// the user's own: another user's are theirs to collect. Root lists any
// owner's, because root's agentbox gives a sandbox network's directory to
// the sandbox's user (SECURITY.md); removing a directory another user
// named so removes nothing but what is in it (os.RemoveAll follows no
// symbolic link).
//
// The owner is judged by its PID in this host's /proc: a process in
// another PID namespace that shares this directory would look gone.
func Orphans(dir string) ([]Orphan, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("owner: list %s: %w", dir, err)
	}
	uid := os.Geteuid()
	var out []Orphan
	for _, e := range ents {
		m := nameRE.FindStringSubmatch(e.Name())
		if m == nil || e.Type()&fs.ModeType != fs.ModeDir {
			continue
		}
		pid, err1 := strconv.Atoi(m[2])
		start, err2 := strconv.ParseUint(m[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || (uid != 0 && int(st.Uid) != uid) {
			continue
		}
		alive, why := Alive(pid, start)
		if alive {
			continue
		}
		out = append(out, Orphan{Path: path, Kind: m[1], PID: pid, Created: fi.ModTime(), Reason: why})
	}
	slices.SortStableFunc(out, func(a, b Orphan) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Remove removes an orphan and everything in it. An orphan already gone
// is no error.
func (o Orphan) Remove() error {
	if err := os.RemoveAll(o.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("owner: remove %s: %w", o.Path, err)
	}
	return nil
}
