package guest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// A relaunch restages the app as the host staged it (reset.go). Writing
// it again each time costs: the mover's 4 MB binary removed and written
// anew took 2.4 ms of the guest's CPU in every reset, on a path where
// the sandbox's processes share two cores (guest CPU profile,
// 2026-12-06). stageWatch lets a reset keep the entries the app left
// as they were staged, and only those, without reading them.
//
// It holds an inotify watch on each staged entry's inode. An app cannot
// change an entry without the kernel queueing an event on that inode: a
// write (IN_MODIFY), an open for writing once closed (IN_CLOSE_WRITE,
// which also covers writes through a shared mapping, since a writable
// mapping needs a descriptor opened for writing, and a killed process's
// descriptors are closed before its exit is reported), a change of mode,
// owner, times, extended attributes or link count (IN_ATTRIB), a rename
// or removal (IN_MOVE_SELF, IN_DELETE_SELF). An entry is unchanged when
// no event came for it since the guest last wrote it, its path still
// names the inode watched, and that inode's change time is the one read
// when the guest last settled the watch. The change time is the second
// witness for the one change inotify may report late: a write through a
// shared mapping (no event of its own) whose last descriptor is closed
// only after the reset looked (held in a unix socket's message, freed by
// the kernel's collector later). Such a write moves the change time at
// once — on kernels whose file systems give fine-grained change times
// once one was read (6.13 on), always; on others only in a later tick of
// the coarse clock, so there an entry whose change time is not older
// than the clock's tick when the watch settles is not kept. An
// overflowed queue, a watch that could not be added, or no inotify at
// all leaves every entry (or that one) to be written again, as before.

// maxWatched bounds the watches of one sandbox: they count against the
// user's inotify watches, which the sandboxes of a machine (and their
// apps) share. Entries beyond it are written again at each reset. The
// one inotify instance counts against the user's instances likewise; a
// guest makes it only when it can reset in place (sandboxed).
const maxWatched = 1024

// changeMask is what is watched on each staged entry.
const changeMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_MOVE_SELF | unix.IN_DELETE_SELF | unix.IN_DONT_FOLLOW

// stageWatch tells which staged entries changed since the guest wrote
// them. The zero value watches nothing (every entry counts as changed).
type stageWatch struct {
	fd    int              // the inotify instance, non-blocking; 0: not yet made
	dir   string           // the app directory
	wds   map[int32]string // watch → entry (path below the app directory, slashes)
	ino   map[string]uint64
	ctime map[string]unix.Timespec // as settle read it
	dirty map[string]bool
	all   bool // the queue overflowed or could not be read
	// fine: the app directory's file system gives a fine-grained change
	// time to a change after one was read (fineCtime).
	fine bool
}

// watch watches the entry rel below dir, just written by the guest.
func (w *stageWatch) watch(dir, rel string) {
	if w.fd == 0 {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			fd = -1
		}
		w.fd, w.dir, w.wds, w.ino, w.ctime, w.dirty = fd, dir, map[int32]string{}, map[string]uint64{}, map[string]unix.Timespec{}, map[string]bool{}
		w.fine = fineCtime(dir)
	}
	delete(w.ino, rel)
	if w.fd < 0 || len(w.wds) >= maxWatched {
		return
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	wd, err := unix.InotifyAddWatch(w.fd, p, changeMask)
	if err != nil {
		return // never kept: written again at each reset
	}
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return
	}
	w.wds[int32(wd)] = rel
	w.ino[rel] = st.Ino
}

// read takes the events queued so far.
func (w *stageWatch) read() {
	if w.fd <= 0 {
		return
	}
	var buf [16 << 10]byte
	for {
		n, err := unix.Read(w.fd, buf[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, syscall.EAGAIN) {
				w.all = true
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
			off += unix.SizeofInotifyEvent + nameLen
			if mask&unix.IN_Q_OVERFLOW != 0 {
				w.all = true
				continue
			}
			rel, ok := w.wds[wd]
			if !ok {
				continue // a watch removed meanwhile
			}
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if len(name) > 0 {
				// A directory's watch tells of its entries too: the
				// event is the entry's (its own watch has it as well).
				w.dirty[rel+"/"+string(name)] = true
				continue
			}
			w.dirty[rel] = true
			if mask&unix.IN_IGNORED != 0 {
				delete(w.wds, wd) // the inode is gone
			}
		}
	}
}

// settle takes the events queued so far as the guest's own (its writes
// while staging, restaging, putting times back): what is watched is as
// written. Only when no app process can have run since the entries were
// written: before a launch, and at the end of a restage.
func (w *stageWatch) settle() {
	w.read()
	clear(w.dirty)
	w.all = false
	var coarse unix.Timespec
	if !w.fine {
		_ = unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &coarse)
	}
	for rel := range w.ino {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(w.dir, filepath.FromSlash(rel)), &st) != nil {
			w.dirty[rel] = true
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			// A directory's change time moves with what is made in
			// it, and neither a directory nor a link has content a
			// mapping could write: its events are enough.
			delete(w.ctime, rel)
			continue
		}
		w.ctime[rel] = st.Ctim
		if !w.fine && !before(st.Ctim, coarse) {
			// A write within this tick would leave it as it is.
			w.dirty[rel] = true
		}
	}
}

// before reports whether a is earlier than b.
func before(a, b unix.Timespec) bool {
	return a.Sec < b.Sec || a.Sec == b.Sec && a.Nsec < b.Nsec
}

// fineCtime reports whether dir's file system gives a file a new change
// time for a change made right after its change time was read (the
// kernel's fine-grained, "multigrain", timestamps): three tries on a
// file of its own, each change within microseconds of the read.
func fineCtime(dir string) bool {
	f, err := os.CreateTemp(dir, ".agentbox-ctime-*")
	if err != nil {
		return false
	}
	defer os.Remove(f.Name())
	defer f.Close()
	for i := range 3 {
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) != nil {
			return false
		}
		if _, err := f.WriteAt([]byte{byte(i)}, 0); err != nil {
			return false
		}
		if unix.Fstat(int(f.Fd()), &b) != nil || a.Ctim == b.Ctim {
			return false
		}
	}
	return true
}

// unchanged reports whether the entry rel is as the guest last wrote it:
// watched, no event for it since, its path names the same inode, and,
// for a regular file, its change time is the one settle read.
func (w *stageWatch) unchanged(rel string) bool {
	ino, ok := w.ino[rel]
	if !ok || w.all || w.dirty[rel] {
		return false
	}
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(w.dir, filepath.FromSlash(rel)), &st) != nil || st.Ino != ino {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return true
	}
	ctime, read := w.ctime[rel]
	return read && st.Ctim == ctime
}

// close ends the watches.
func (w *stageWatch) close() {
	if w.fd > 0 {
		unix.Close(w.fd)
	}
	*w = stageWatch{}
}
