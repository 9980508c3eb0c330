package guest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// The trusted observer (wire.StartRequest.Observe): the guest, which the
// app cannot signal, trace or write to (it is the sandbox's init and
// non-dumpable), records what the app does — the processes it runs and
// the files it changes below the writable directories — and hands it to
// the host at each checkpoint (the activity request: the end of each step
// and of the run). docs/architecture.md says why it polls /proc instead
// of tracing the app with ptrace.
//
// Processes: /proc is read every observePoll and at each checkpoint. A
// process seen for the first time is an exec (so is a known one whose
// program name changed); one gone is an exit, with its status when the
// observer had it: the app's own process (the guest waits for it) or a
// process caught as a zombie (/proc/PID/stat's exit_code). A process that
// began and ended between two looks is not seen: the PIDs the namespace
// handed out (ns_last_pid) that no seen process took are counted in an
// unseen event (threads take PIDs too, so it is an upper bound), never
// dropped silently.
//
// Files: inotify on every directory below the roots (new directories
// watched as they appear, their entries made before the watch counted as
// created), drained on the same ticker, coalesced per path until the
// checkpoint, where written files still there are hashed (sha256, within
// a size bound and a budget per checkpoint). The kernel's queue
// overflowing, directories past the watch bound and paths past the
// checkpoint's bound each become an overflow event.

// Bounds of the observer.
const (
	observePoll      = 25 * time.Millisecond
	maxWatches       = 4096
	maxPaths         = 2000 // distinct paths coalesced per checkpoint
	maxProcEvents    = 2000 // process events kept per checkpoint
	maxHashFile      = 16 << 20
	maxHashBudget    = 64 << 20 // bytes hashed per checkpoint
	maxArgs          = 64
	maxArgBytes      = 4096 // the whole command line
	defaultMaxEvents = 1000 // events answered per checkpoint
)

// procSeen is a process the observer knows.
type procSeen struct {
	start   uint64 // starttime, telling a reused PID from the process before
	comm    string
	argv    []string
	cut     bool
	ppid    int
	exit    *observe.Exit // seen as a zombie
	ignored bool          // there before the observer began (the guest's own)
	// launching: the app's process is still the guest's launcher.
	launching bool
	// pending: its command line was empty while it ran (read inside an
	// exec); the next look reads it and tells the exec.
	pending bool
	gen     uint64
}

// fileAgg is one path's changes since the last checkpoint.
type fileAgg struct {
	first time.Time
	ops   uint8 // bits in observe.FileOps order
	from  string
	dir   bool
}

type observer struct {
	roots []string
	home  string
	skip  []string // paths below which changes are the guest's own

	mu     sync.Mutex
	procs  map[int]*procSeen
	gen    uint64
	events []observe.ActivityEvent // process events since the checkpoint
	// Lost and counted since the checkpoint.
	procLost, unseen, qOverflow, pathsLost int64
	watchLost                              int64  // directories never watched (kept: it stays true)
	unseenWhy                              string // said once, at the first checkpoint
	countPIDs                              bool   // ns_last_pid is readable
	seeded                                 int    // processes seen outside a look since the last (started)
	lastPID                                int
	exits                                  map[int]observe.Exit // noted by the guest (the app's own)

	fd      int
	wds     map[int]string
	files   map[string]*fileAgg
	order   []string
	renames map[uint32]string // MOVED_FROM cookies waiting for their MOVED_TO
	buf     []byte
	statBuf [1024]byte

	stop    chan struct{}
	done    chan struct{}
	running bool
}

// newObserver starts observing: the processes running now are the
// guest's own and are left out; the roots are watched from now on.
func newObserver(roots []string, home string, skip []string) (*observer, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("observer: inotify: %w", err)
	}
	o := &observer{
		roots: roots, home: home, skip: skip,
		procs: map[int]*procSeen{}, exits: map[int]observe.Exit{},
		fd: fd, wds: map[int]string{}, files: map[string]*fileAgg{}, renames: map[uint32]string{},
		buf: make([]byte, 64<<10), stop: make(chan struct{}), done: make(chan struct{}),
	}
	o.lastPID, err = lastPID()
	o.countPIDs = err == nil
	if err != nil {
		o.unseenWhy = "processes that begin and end between two looks cannot be counted (" + err.Error() + ")"
	}
	o.mu.Lock()
	o.pollProcs(true)
	for _, r := range roots {
		o.watchTree(r, false)
	}
	o.mu.Unlock()
	return o, nil
}

// run polls and drains on the ticker until close.
func (o *observer) run() {
	o.mu.Lock()
	o.running = true
	o.mu.Unlock()
	defer close(o.done)
	t := time.NewTicker(observePoll)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		o.mu.Lock()
		o.drain()
		o.pollProcs(false)
		o.mu.Unlock()
	}
}

// close stops the observer; what it saw since the last checkpoint is lost.
func (o *observer) close() {
	select {
	case <-o.stop:
		return
	default:
	}
	close(o.stop)
	o.mu.Lock()
	running := o.running
	o.mu.Unlock()
	if running {
		<-o.done
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	unix.Close(o.fd)
	o.fd = -1
}

// started records the app's process at once, before the guest waits for
// it (it is at least a zombie until then), so that an app that ends
// before the next look still has its exec and its exit. argv is the app's
// command line as launched: the process may still be the guest's launcher
// (harden.go), which replaces itself with the app.
func (o *observer) started(pid int, argv []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.procs[pid]; ok {
		return
	}
	st, ok := o.readStat(pid)
	if !ok {
		return
	}
	// Still the launcher (the shell's or the guest's, harden.go): its
	// exec of the app is no event.
	self, _ := os.Executable()
	launching := st.comm == commOf(self) || st.comm == commOf(shellPath)
	p := &procSeen{start: st.start, comm: st.comm, ppid: st.ppid, gen: o.gen, argv: argv, launching: launching}
	o.procs[pid] = p
	o.seeded++
	o.proc(observe.ActivityEvent{Time: time.Now(), Kind: observe.ActExec, PID: pid, PPID: st.ppid, Argv: p.argv, Cut: p.cut})
}

// exiting records the exit status of a process the guest started, read
// from its zombie just before the guest reaps it (waitExited saw it end
// without reaping it). Reaped first, a look between the reaping and
// noteExit found it gone with no status ("status unknown", a process
// check of a grade failed: TestObserverGrade beside the whole suite in
// CI).
func (o *observer) exiting(pid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.procs[pid]
	if p == nil || p.exit != nil || p.ignored {
		return
	}
	if st, ok := o.readStat(pid); ok && st.start == p.start {
		p.zombie(st)
	}
}

// noteExit records the status of a process the guest waited for (the app).
func (o *observer) noteExit(pid int, e observe.Exit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.exits[pid] = e
}

// checkpoint returns what was seen since the previous checkpoint, at most
// max events (0: the default) besides the overflow events, written files
// hashed now.
func (o *observer) checkpoint(max int) []observe.ActivityEvent {
	if max <= 0 {
		max = defaultMaxEvents
	}
	o.mu.Lock()
	o.drain()
	o.pollProcs(false)
	procs := o.events
	o.events = nil
	for i := range procs {
		if procs[i].Kind == observe.ActExit && procs[i].Exit == nil {
			if e, ok := o.exits[procs[i].PID]; ok {
				procs[i].Exit = &e
				delete(o.exits, procs[i].PID)
			}
		}
	}
	// A file moved out of the watched directories is gone from them.
	for c, from := range o.renames {
		o.add(from, observe.OpDeleted, false)
		delete(o.renames, c)
	}
	files, order := o.files, o.order
	o.files, o.order = map[string]*fileAgg{}, nil
	procLost, unseen, qOverflow, pathsLost, watchLost := o.procLost, o.unseen, o.qOverflow, o.pathsLost, o.watchLost
	o.procLost, o.unseen, o.qOverflow, o.pathsLost = 0, 0, 0, 0
	unseenWhy := o.unseenWhy
	o.unseenWhy = ""
	o.mu.Unlock()

	// Hashing happens outside the lock: the ticker goes on meanwhile.
	evs := procs
	if unseen > 0 {
		evs = append(evs, observe.ActivityEvent{Time: time.Now(), Kind: observe.ActUnseen, N: unseen})
	}
	budget := int64(maxHashBudget)
	for _, p := range order {
		evs = append(evs, o.fileEvent(p, files[p], &budget))
	}
	var over []observe.ActivityEvent
	if n := len(evs) - max; n > 0 {
		over = append(over, observe.ActivityEvent{Kind: observe.ActOverflow, N: int64(n),
			Reason: fmt.Sprintf("more events in one checkpoint than its bound of %d", max)})
		evs = evs[:max]
	}
	for _, l := range []struct {
		n   int64
		why string
	}{
		{procLost, fmt.Sprintf("more process events in one checkpoint than the %d kept", maxProcEvents)},
		{qOverflow, "the kernel's file event queue overflowed: file changes were lost"},
		{pathsLost, fmt.Sprintf("more changed paths in one checkpoint than the %d kept", maxPaths)},
		{watchLost, fmt.Sprintf("directories not watched (more than %d): their changes are not seen", maxWatches)},
	} {
		if l.n > 0 {
			over = append(over, observe.ActivityEvent{Kind: observe.ActOverflow, N: l.n, Reason: l.why})
		}
	}
	if unseenWhy != "" {
		over = append(over, observe.ActivityEvent{Kind: observe.ActOverflow, Reason: unseenWhy})
	}
	now := time.Now()
	for i := range over {
		over[i].Time = now
	}
	return append(evs, over...)
}

// fileEvent describes one coalesced path, hashing a written file.
func (o *observer) fileEvent(p string, a *fileAgg, budget *int64) observe.ActivityEvent {
	ev := observe.ActivityEvent{Time: a.first, Kind: observe.ActFile, Path: o.display(p), Dir: a.dir}
	if a.from != "" {
		ev.From = o.display(a.from)
	}
	for i, op := range observe.FileOps {
		if a.ops&(1<<i) != 0 {
			ev.Ops = append(ev.Ops, op)
		}
	}
	if a.dir || a.ops&(opBit(observe.OpWritten)|opBit(observe.OpCreated)|opBit(observe.OpRenamed)) == 0 {
		return ev
	}
	sum, size, why := hashFile(p, budget)
	ev.SHA256, ev.Size, ev.NotHashed = sum, size, why
	return ev
}

// hashFile hashes a regular file, never through a link (the app may swap
// one in) and never blocking on a FIFO.
func hashFile(p string, budget *int64) (string, int64, string) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, "gone at the checkpoint"
		}
		if errors.Is(err, syscall.ELOOP) {
			return "", 0, "a symbolic link"
		}
		return "", 0, "cannot open: " + err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return "", 0, "cannot stat: " + err.Error()
	case !st.Mode().IsRegular():
		return "", 0, "not a regular file"
	case st.Size() > maxHashFile:
		return "", st.Size(), fmt.Sprintf("larger than %d MiB", maxHashFile>>20)
	case st.Size() > *budget:
		return "", st.Size(), fmt.Sprintf("the checkpoint's hashing budget (%d MiB) is spent", maxHashBudget>>20)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxHashFile+1))
	*budget -= n
	if err != nil {
		return "", n, "cannot read: " + err.Error()
	}
	if n > maxHashFile {
		return "", n, fmt.Sprintf("larger than %d MiB", maxHashFile>>20)
	}
	return hex.EncodeToString(h.Sum(nil)), n, ""
}

// display names a path as the trace shows it: "~/…" below the home.
func (o *observer) display(p string) string {
	if o.home != "" {
		if p == o.home {
			return "~"
		}
		if rel, ok := strings.CutPrefix(p, o.home+"/"); ok {
			return "~/" + rel
		}
	}
	return p
}

func opBit(op string) uint8 { return 1 << slices.Index(observe.FileOps, op) }

// add coalesces one change of path p.
func (o *observer) add(p, op string, dir bool) {
	for _, s := range o.skip {
		if p == s || strings.HasPrefix(p, s+"/") {
			return
		}
	}
	a, ok := o.files[p]
	if !ok {
		if len(o.files) >= maxPaths {
			o.pathsLost++
			return
		}
		a = &fileAgg{first: time.Now()}
		o.files[p] = a
		o.order = append(o.order, p)
	}
	a.ops |= opBit(op)
	a.dir = a.dir || dir
}

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// watchTree watches dir and every directory below it; with created, the
// entries found are changes (a directory that appeared: what was made in
// it before its watch).
func (o *observer) watchTree(dir string, created bool) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != dir && created {
			o.add(p, observe.OpCreated, d.IsDir())
			if d.Type().IsRegular() {
				o.add(p, observe.OpWritten, false)
			}
		}
		if !d.IsDir() {
			return nil
		}
		if len(o.wds) >= maxWatches {
			o.watchLost++
			return nil
		}
		wd, err := unix.InotifyAddWatch(o.fd, p, watchMask)
		if err != nil {
			if errors.Is(err, unix.ENOSPC) {
				o.watchLost++
			}
			return nil
		}
		o.wds[wd] = p
		return nil
	})
}

// drain reads every event the kernel holds (the fd does not block).
func (o *observer) drain() {
	for o.fd >= 0 {
		n, err := unix.Read(o.fd, o.buf)
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&o.buf[off]))
			nameLen := int(ev.Len)
			name := ""
			if nameLen > 0 {
				raw := o.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				name = string(bytes.TrimRight(raw, "\x00"))
			}
			off += unix.SizeofInotifyEvent + nameLen
			o.event(int(ev.Wd), ev.Mask, ev.Cookie, name)
		}
	}
}

func (o *observer) event(wd int, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		o.qOverflow++
		return
	}
	dir, ok := o.wds[wd]
	if !ok {
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(o.wds, wd)
		return
	}
	if name == "" {
		return
	}
	p := dir + "/" + name
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&unix.IN_CREATE != 0:
		o.add(p, observe.OpCreated, isDir)
		if isDir {
			o.watchTree(p, true)
		}
	case mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
		if !isDir {
			o.add(p, observe.OpWritten, false)
		}
	case mask&unix.IN_DELETE != 0:
		o.add(p, observe.OpDeleted, isDir)
	case mask&unix.IN_MOVED_FROM != 0:
		o.renames[cookie] = p
	case mask&unix.IN_MOVED_TO != 0:
		from, known := o.renames[cookie]
		delete(o.renames, cookie)
		o.moved(from, p, isDir, known)
	}
}

// moved records a rename to p: the path gets what was seen of its old
// name in this checkpoint (a file written under a temporary name and then
// renamed over the real one is one event), and a directory's watches
// follow it.
func (o *observer) moved(from, p string, isDir, known bool) {
	if !known {
		// From outside the watched directories.
		o.add(p, observe.OpCreated, isDir)
		if isDir {
			o.watchTree(p, true)
		}
		return
	}
	o.add(p, observe.OpRenamed, isDir)
	if a, ok := o.files[p]; ok {
		if old, ok := o.files[from]; ok {
			a.ops |= old.ops
			if old.first.Before(a.first) {
				a.first = old.first
			}
			delete(o.files, from)
			o.order = slices.DeleteFunc(o.order, func(s string) bool { return s == from })
		}
		a.from = from
	}
	if isDir {
		for wd, d := range o.wds {
			if d == from || strings.HasPrefix(d, from+"/") {
				o.wds[wd] = p + strings.TrimPrefix(d, from)
			}
		}
	}
}

// pollProcs reads /proc: new processes (or programs) are execs, those gone
// exits. With baseline, what runs is the guest's own and is left out.
func (o *observer) pollProcs(baseline bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	o.gen++
	fresh := o.seeded
	o.seeded = 0
	now := time.Now()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		p := o.procs[pid]
		if p != nil && p.ignored {
			p.gen = o.gen // the guest's own: listed, never read
			continue
		}
		st, ok := o.readStat(pid)
		if !ok {
			continue
		}
		if p != nil && p.start != st.start {
			o.gone(pid, p, now)
			p = nil
		}
		switch {
		case p == nil:
			p = &procSeen{start: st.start, comm: st.comm, ppid: st.ppid, ignored: baseline}
			o.procs[pid] = p
			if !baseline {
				fresh++
				p.argv, p.cut = readCmdline(pid)
				if len(p.argv) == 0 && st.state != 'Z' {
					// Perhaps looked at inside an exec: the kernel renames
					// the task before it maps the new command line. The
					// next look reads it again and tells the exec then,
					// with an empty command line if it still has none.
					p.pending = true
					break
				}
				o.proc(observe.ActivityEvent{Time: now, Kind: observe.ActExec, PID: pid, PPID: st.ppid, Argv: p.argv, Cut: p.cut})
			}
		case p.pending:
			p.pending = false
			p.comm = st.comm
			if argv, cut := readCmdline(pid); len(argv) > 0 || st.state != 'Z' {
				p.argv, p.cut = argv, cut
				o.proc(observe.ActivityEvent{Time: now, Kind: observe.ActExec, PID: pid, PPID: st.ppid, Argv: p.argv, Cut: p.cut})
			}
		case st.comm != p.comm && (st.state == 'Z' || p.launching):
			// A zombie has no command line left to read; the launcher
			// became the app, whose command line started has.
			p.comm, p.launching = st.comm, false
		case st.comm != p.comm && !p.ignored:
			p.comm = st.comm
			if argv, cut := readCmdline(pid); len(argv) > 0 {
				p.argv, p.cut = argv, cut
				o.proc(observe.ActivityEvent{Time: now, Kind: observe.ActExec, PID: pid, PPID: st.ppid, Argv: p.argv, Cut: p.cut})
			} else if st.state != 'Z' {
				// Inside an exec whose command line is not mapped yet, or
				// just ended: the next look reads it again.
				p.pending = true
			}
		}
		if !p.ignored {
			p.zombie(st)
		}
		p.gen = o.gen
	}
	for pid, p := range o.procs {
		if p.gen != o.gen {
			o.gone(pid, p, now)
		}
	}
	if !o.countPIDs {
		return
	}
	last, err := lastPID()
	if err != nil {
		return
	}
	if !baseline && last > o.lastPID {
		if n := last - o.lastPID - fresh; n > 0 {
			o.unseen += int64(n)
		}
	}
	o.lastPID = last
}

// zombie records a zombie's exit status, read from its stat, once.
func (p *procSeen) zombie(st statLine) {
	if st.state == 'Z' && p.exit == nil {
		e := exitOfStatus(st.exitCode)
		p.exit = &e
	}
}

func (o *observer) gone(pid int, p *procSeen, now time.Time) {
	delete(o.procs, pid)
	if !p.ignored {
		o.proc(observe.ActivityEvent{Time: now, Kind: observe.ActExit, PID: pid, PPID: p.ppid, Argv: p.argv, Exit: p.exit, Cut: p.cut})
	}
}

func (o *observer) proc(ev observe.ActivityEvent) {
	if len(o.events) >= maxProcEvents {
		o.procLost++
		return
	}
	o.events = append(o.events, ev)
}

// statLine is what the observer reads of /proc/PID/stat.
type statLine struct {
	comm     string
	state    byte
	ppid     int
	start    uint64
	exitCode int // waitpid's status, meaningful for a zombie
}

func (o *observer) readStat(pid int) (statLine, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return statLine{}, false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, o.statBuf[:])
	if err != nil || n <= 0 {
		return statLine{}, false
	}
	return parseStat(o.statBuf[:n])
}

// parseStat reads a stat line: "pid (comm) state ppid …"; comm may hold
// spaces and parentheses, so the fields start after the last ')'.
func parseStat(b []byte) (statLine, bool) {
	var s statLine
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return s, false
	}
	s.comm = string(b[open+1 : end])
	f := strings.Fields(string(b[end+1:]))
	// Fields from 3 (state): f[0] is field 3, so field k is f[k-3].
	if len(f) < 20 {
		return s, false
	}
	s.state = f[0][0]
	s.ppid, _ = strconv.Atoi(f[1])
	s.start, _ = strconv.ParseUint(f[19], 10, 64) // field 22
	if len(f) >= 50 {
		s.exitCode, _ = strconv.Atoi(f[49]) // field 52
	}
	return s, true
}

// exitOfStatus reads a waitpid status.
func exitOfStatus(status int) observe.Exit {
	ws := syscall.WaitStatus(status)
	switch {
	case ws.Signaled():
		return observe.Exit{Code: -1, Signal: signalName(ws.Signal())}
	default:
		return observe.Exit{Code: ws.ExitStatus()}
	}
}

// readCmdline reads a process's argv, bounded.
func readCmdline(pid int) ([]string, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxArgBytes+1))
	cut := len(b) > maxArgBytes
	if cut {
		b = b[:maxArgBytes]
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, cut
	}
	args := strings.Split(string(b), "\x00")
	if len(args) > maxArgs {
		args, cut = args[:maxArgs], true
	}
	return args, cut
}

// commOf is the kernel's name of a process running the program at path:
// its base name, cut to TASK_COMM_LEN.
func commOf(path string) string {
	c := filepath.Base(path)
	if len(c) > 15 {
		c = c[:15]
	}
	return c
}

// lastPID is the last PID handed out in the guest's PID namespace.
func lastPID() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// startObserver starts the trusted observer before the first launch of a
// sandbox started with it; it goes on across relaunches.
func (g *Guest) startObserver() error {
	if !g.observeOn || g.obs != nil {
		return nil
	}
	roots := []string{g.home}
	if strings.HasPrefix(g.home, "/tmp/") {
		roots = []string{"/tmp"} // the home and the app directory are below it
	}
	o, err := newObserver(roots, g.home, []string{filepath.Join(g.home, ".run")})
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	g.obs = o
	go o.run()
	return nil
}

// activity answers a checkpoint of the observer.
func (g *Guest) activity(req wire.ActivityRequest) (wire.ActivityResponse, error) {
	if !g.observeOn {
		return wire.ActivityResponse{}, wire.Errorf(wire.CodeInvalid, "activity: the sandbox was started without the observer")
	}
	if g.obs == nil {
		return wire.ActivityResponse{Events: []observe.ActivityEvent{}}, nil // nothing launched yet
	}
	return wire.ActivityResponse{Events: g.obs.checkpoint(req.MaxEvents)}, nil
}
