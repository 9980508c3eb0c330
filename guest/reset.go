package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/wire"
)

// A relaunch (wire.MethodReset) puts the sandbox back to its state after
// start, before any app ran, so that the next launch meets what a fresh
// sandbox's would: see docs/architecture.md, "Reset in place".

// writableRoots are the sandbox's writable directories (every backend
// mounts these as tmpfs: the home and the app directory are below /tmp).
var writableRoots = []string{"/tmp", "/dev/shm"}

// maxBaselineFile bounds the content of one file the baseline keeps (the
// window manager's configuration, a lock file); a larger one is restored
// empty.
const maxBaselineFile = 256 << 10

// fileState is one entry of a writable directory at the baseline.
type fileState struct {
	mode fs.FileMode
	data []byte // a regular file's content
	link string // a symlink's target
	// atime and mtime are the entry's times, put back by a restore.
	atime, mtime syscall.Timespec
}

// baseline is the sandbox's state a reset returns to.
type baseline struct {
	roots []string // the writable directories
	x     *x11.Baseline
	files map[string]fileState
	keep  []int // the desktop's processes (the X server, the window manager, the bus)
}

// takeBaseline records the state a reset returns to; start calls it last.
// A guest that is not sandboxed records nothing: it never resets the
// host's directories.
func (g *Guest) takeBaseline(ctx context.Context) error {
	if !g.opts.Sandboxed {
		return nil
	}
	xctx, cancel := context.WithTimeout(ctx, xTimeout)
	defer cancel()
	xb, err := g.x.TakeBaseline(xctx)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	b := snapshotFiles(writableRoots)
	b.x = xb
	b.keep = append(b.keep, g.server.Pid())
	if g.wm != nil {
		b.keep = append(b.keep, g.wm.Pid())
	}
	if g.bus != nil {
		b.keep = append(b.keep, g.bus.PIDs()...)
	}
	g.base = b
	return nil
}

// snapshotFiles records every entry below roots (a regular file's
// content up to maxBaselineFile).
func snapshotFiles(roots []string) *baseline {
	b := &baseline{roots: roots, files: map[string]fileState{}}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st := fileState{mode: fi.Mode()}
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				st.atime, st.mtime = sys.Atim, sys.Mtim
			}
			switch {
			case fi.Mode().IsRegular() && fi.Size() <= maxBaselineFile:
				st.data, _ = os.ReadFile(p)
			case fi.Mode()&fs.ModeSymlink != 0:
				st.link, _ = os.Readlink(p)
			}
			b.files[p] = st
			return nil
		})
	}
	return b
}

// reset kills the app and everything it left running, resets the X
// server's state and restores the writable directories, so that the next
// launch finds the sandbox as start left it. The app's exit (if it was
// running) and the windows going away are sent before wire.EventReset,
// and that before the answer: the host passes on what follows to the next
// episode.
func (g *Guest) reset(ctx context.Context) (wire.ResetResponse, error) {
	var resp wire.ResetResponse
	switch {
	case g.x == nil:
		return resp, wire.Errorf(wire.CodeInvalid, "reset: the display is not up")
	case g.base == nil:
		return resp, wire.Errorf(wire.CodeInvalid, "reset: only a sandboxed guest resets in place (agentbox guest --sandboxed)")
	}
	if sandboxInit() == "" {
		return resp, wire.Errorf(wire.CodeInvalid, "reset: PID 1 is not a sandbox's init")
	}
	resp.Killed = g.killApp()
	app := g.app
	g.app = nil
	// Every process of the app has ended (killApp waited for them). The
	// X server's reset (and the windows' going) and the directories'
	// restore touch nothing of each other's: they run at once, and
	// beside the wait until the app's exit is reported (its output
	// drained), which neither needs.
	xctx, cancel := context.WithTimeout(ctx, xTimeout)
	defer cancel()
	var st x11.ResetStats
	xdone := make(chan error, 1)
	go func() {
		var err error
		st, err = g.x.Reset(xctx, g.base.x)
		if err == nil {
			g.waitNoWindows(ctx)
		}
		xdone <- err
	}()
	// The staged app's entries the app left as they were are kept, not
	// removed and written again (stagewatch.go).
	resp.Removed = g.base.restore(g.staged.keep(g.appDir))
	removeSysVShm()
	resp.AppKept = g.staged.restage(g.appDir)
	g.base.retime(g.appDir) // which the restage wrote into
	if app != nil {
		select {
		case <-app.done:
		case <-time.After(3 * time.Second):
			return resp, fmt.Errorf("reset: the app did not end within 3 s of SIGKILL")
		}
		_, resp.Exit = app.status()
	}
	if err := <-xdone; err != nil {
		return resp, fmt.Errorf("reset the X server: %w", err)
	}
	resp.Clients, resp.Props = st.Clients, st.Props
	if err := g.conn.Notify(wire.EventReset, struct{}{}, nil); err != nil {
		return resp, err
	}
	return resp, nil
}

// killApp kills, with SIGKILL, every process of the sandbox but its init,
// the guest and the desktop's processes (and their children): the app and
// whatever it started, daemons included. It returns how many it killed.
func (g *Guest) killApp() int {
	self := os.Getpid()
	// keep: a desktop process or a descendant of one (the accessibility
	// bus's daemons). The app is the guest's child, and what it
	// daemonised the init's: neither is kept.
	keep := func(pid int) bool {
		for pid > 1 && pid != self {
			if slices.Contains(g.base.keep, pid) {
				return true
			}
			pid = parentOf(pid)
		}
		return false
	}
	n := 0
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		alive := 0
		var killed []int // pidfds of the processes killed in this pass
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == 1 || pid == self || keep(pid) {
				continue
			}
			if zombie(pid) {
				continue
			}
			alive++
			// The pidfd first: it names this process even if the pid
			// is reused after it ends.
			fd, ferr := unix.PidfdOpen(pid, 0)
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
			if ferr == nil {
				killed = append(killed, fd)
			}
		}
		if alive == 0 {
			break
		}
		// Wait until they have ended (a pidfd reads as ready then), not
		// a fixed pause of 2 ms; the next pass finds what they started
		// meanwhile. The kill took 3.1–3.4 ms of a relaunch's reset,
		// now 2.4 (medians of 41, Docker, the mover).
		waitPidfds(killed, time.Until(deadline))
	}
	return n
}

// waitPidfds waits until every process of fds has ended, or d has
// passed (or 2 ms when no process has a pidfd), and closes fds.
func waitPidfds(fds []int, d time.Duration) {
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if len(fds) == 0 {
		time.Sleep(2 * time.Millisecond)
		return
	}
	end := time.Now().Add(d)
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for len(pfds) > 0 {
		ms := int(time.Until(end).Milliseconds())
		if ms <= 0 {
			return
		}
		nr, err := unix.Poll(pfds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil || nr == 0 {
			return
		}
		pfds = slices.DeleteFunc(pfds, func(p unix.PollFd) bool { return p.Revents != 0 })
	}
}

// parentOf is pid's parent (0 when unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// zombie reports whether pid has ended and waits to be reaped (or is gone).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// sandboxInit is PID 1's name when it is a sandbox's init, else "".
func sandboxInit() string {
	comm, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		return ""
	}
	name := string(bytes.TrimSpace(comm))
	if !initNames[name] {
		return ""
	}
	return name
}

// waitNoWindows refreshes the window list until no window is mapped (the
// killed clients' windows are gone), for at most a second: their unmapped
// events then go to the episode that ends.
func (g *Guest) waitNoWindows(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		_ = g.refreshWindows() // a failed read is tried again below
		g.winMu.Lock()
		n, ch := len(g.windows), g.winCh
		g.winMu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-wctx.Done():
			return
		}
	}
}

// restore puts the writable directories back to the baseline: what was
// added is removed (but what keep holds: the staged app's entries as they
// were staged), what changed is rewritten, what went is made again (but
// sockets, which only their server can make), and what remains has no
// extended attribute and the baseline's times (resetAttrs). It returns
// how many entries it removed or restored.
func (b *baseline) restore(keep func(p string, d fs.DirEntry) bool) int {
	n := 0
	for _, root := range b.roots {
		var extra []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			st, ok := b.files[p]
			if !ok && keep != nil && keep(p, d) {
				return nil // a directory kept is walked: what the app added in it goes
			}
			if !ok || st.mode.Type() != d.Type() {
				extra = append(extra, p)
				if d.IsDir() {
					return filepath.SkipDir
				}
			}
			return nil
		})
		for _, p := range extra {
			if os.RemoveAll(p) == nil {
				n++
			}
		}
	}
	paths := make([]string, 0, len(b.files))
	for p := range b.files {
		paths = append(paths, p)
	}
	slices.Sort(paths) // parents first
	for _, p := range paths {
		st := b.files[p]
		fi, err := os.Lstat(p)
		switch {
		case st.mode.IsDir():
			if err != nil {
				_ = os.Mkdir(p, st.mode.Perm())
				n++
			} else if fi.Mode() != st.mode {
				_ = os.Chmod(p, st.mode.Perm())
				n++
			}
		case st.mode.IsRegular():
			if err == nil && fi.Mode() == st.mode && fi.Size() == int64(len(st.data)) {
				if cur, rerr := os.ReadFile(p); rerr == nil && bytes.Equal(cur, st.data) {
					continue
				}
			}
			_ = os.WriteFile(p, st.data, st.mode.Perm())
			_ = os.Chmod(p, st.mode.Perm())
			n++
		case st.mode&fs.ModeSymlink != 0:
			if err != nil {
				_ = os.Symlink(st.link, p)
				n++
			}
		}
	}
	// The attributes last, children before their directories: a
	// directory's times change with what is made or removed in it.
	for i := len(paths) - 1; i >= 0; i-- {
		p := paths[i]
		if st := b.files[p]; st.mode.IsDir() || st.mode.IsRegular() || st.mode&fs.ModeSymlink != 0 {
			resetAttrs(p, st.atime, st.mtime)
		}
	}
	return n
}

// retime puts the baseline's times back on p (a directory written into
// after the restore).
func (b *baseline) retime(p string) {
	if st, ok := b.files[p]; ok {
		setTimes(p, st.atime, st.mtime)
	}
}

// resetAttrs takes from p what its content and mode do not show but an
// app could leave in it for the next episode: its extended attributes
// (tmpfs keeps user.* ones) go, and its access and modification times
// are put back to atime and mtime. The link p itself, never its target.
func resetAttrs(p string, atime, mtime syscall.Timespec) {
	if n, err := unix.Llistxattr(p, nil); err == nil && n > 0 {
		buf := make([]byte, n)
		if n, err = unix.Llistxattr(p, buf); err == nil {
			for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
				if name != "" {
					_ = unix.Lremovexattr(p, name)
				}
			}
		}
	}
	setTimes(p, atime, mtime)
}

// setTimes sets p's access and modification times (a link's own, never
// its target's).
func setTimes(p string, atime, mtime syscall.Timespec) {
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{unix.Timespec(atime), unix.Timespec(mtime)}, unix.AT_SYMLINK_NOFOLLOW)
}

// removeSysVShm removes the System V shared-memory segments nobody has
// attached (the app's, left behind); the sandbox has its own IPC
// namespace. The guest's and the X server's capture segment is attached.
func removeSysVShm() {
	f, err := os.Open("/proc/sysvipc/shm")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// key shmid perms size cpid lpid nattch …
		fl := strings.Fields(sc.Text())
		if len(fl) < 7 || fl[6] != "0" {
			continue
		}
		id, err := strconv.Atoi(fl[1])
		if err != nil {
			continue
		}
		if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil && !errors.Is(err, unix.EINVAL) {
			continue
		}
	}
}

// maxKeptApp bounds the guest's copy of a staged app (its memory counts
// against the sandbox's): a larger app is sent again after a reset.
const maxKeptApp = 64 << 20

// stagedApp is the guest's copy of the entries the host staged into the
// app directory, in order, so that a reset can restage them itself: the
// host's bytes, never what the app made of them.
type stagedApp struct {
	entries []stagedEntry
	bytes   int64
	over    bool // more than maxKeptApp: nothing kept
	// restaged: the entries were restaged by a reset; the next write
	// begins a new staging.
	restaged bool
	// w tells which entries the app changed (stagewatch.go); times holds
	// each entry's times as first written, which every restage puts back;
	// kept is what a reset's restore kept (keep), which restage does not
	// write again.
	w     stageWatch
	times map[string]syscall.Timespec
	kept  map[string]bool
}

type stagedEntry struct {
	req  wire.WriteFileRequest
	data []byte
}

// add records one entry as the host staged it. data is kept, not copied:
// it is the request's own payload, which the wire reads into a buffer of
// its own for each message in the guest (no wire.Header.PayloadBuf), and
// nothing writes to it after the write_file. A copy cost a cold start
// about 23 ms of the sandbox's CPU for the mover's 4 MB (page faults of
// fresh memory and the copy; guest CPU profiles, 2026-12-04).
func (s *stagedApp) add(req wire.WriteFileRequest, data []byte) {
	if s.restaged {
		s.w.close()
		*s = stagedApp{}
	}
	if s.over {
		return
	}
	s.bytes += int64(len(data))
	if s.bytes > maxKeptApp {
		s.w.close()
		*s = stagedApp{over: true}
		return
	}
	s.entries = append(s.entries, stagedEntry{req: req, data: data})
}

// wrote records that the guest wrote the entry req below dir: it is
// watched from now on, and its times, the first time, are kept.
func (s *stagedApp) wrote(dir string, req wire.WriteFileRequest) {
	if s.over {
		return
	}
	s.w.watch(dir, req.Path)
	if _, ok := s.times[req.Path]; ok {
		return
	}
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(dir, filepath.FromSlash(req.Path)), &st) == nil {
		if s.times == nil {
			s.times = map[string]syscall.Timespec{}
		}
		s.times[req.Path] = syscall.Timespec(st.Mtim)
	}
}

// settle takes what happened to the staged entries so far as the
// guest's own doing (stageWatch.settle): a launch calls it before the
// app starts.
func (s *stagedApp) settle() { s.w.settle() }

// keep is the reset's keep for the restore of the app directory dir: it
// holds, and records, the staged entries the app left as they were
// staged (stageWatch: no change since the guest wrote them, of content,
// mode, owner, times, attributes or name), which restage then does not
// write again; what the app added in a directory kept still goes. nil
// when nothing can be kept.
func (s *stagedApp) keep(dir string) func(p string, d fs.DirEntry) bool {
	s.kept = nil
	if s.over || len(s.entries) == 0 {
		return nil
	}
	s.w.read()
	staged := make(map[string]bool, len(s.entries))
	for _, e := range s.entries {
		staged[e.req.Path] = true
	}
	s.kept = map[string]bool{}
	return func(p string, d fs.DirEntry) bool {
		rel, err := filepath.Rel(dir, p)
		if err != nil || !filepath.IsLocal(rel) {
			return false
		}
		rel = filepath.ToSlash(rel)
		if !staged[rel] || !s.w.unchanged(rel) {
			return false
		}
		s.kept[rel] = true
		return true
	}
}

// restage writes the kept entries into dir again; false when there are
// none (nothing was staged, the app was too large, or a write failed:
// the host then stages it again).
func (s *stagedApp) restage(dir string) bool {
	if s.over || len(s.entries) == 0 {
		*s = stagedApp{over: s.over}
		return false
	}
	for _, e := range s.entries {
		if s.kept[e.req.Path] {
			continue // as staged (keep)
		}
		if err := writeStaged(dir, e.req, e.data); err != nil {
			s.w.close()
			*s = stagedApp{}
			return false
		}
		s.wrote(dir, e.req)
	}
	// Every entry, kept or written again, gets its first times back,
	// children before their directories: the next instance can tell
	// neither which entries the last one changed nor a time it set.
	paths := make([]string, 0, len(s.times))
	for p := range s.times {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for i := len(paths) - 1; i >= 0; i-- {
		t := s.times[paths[i]]
		setTimes(filepath.Join(dir, filepath.FromSlash(paths[i])), t, t)
	}
	s.w.settle() // the writes and times above are the guest's
	s.kept = nil
	s.restaged = true
	return true
}
