package guest

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/wire"
)

// TestRestoreFiles: a restore puts a directory back as its snapshot had
// it — what was added removed (files, directories, links), what changed
// rewritten (content and mode), what went made again.
func TestRestoreFiles(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("home/.config/openbox/rc.xml", "<openbox/>", 0o644)
	write("lock", "42", 0o444)
	b := snapshotFiles([]string{root})

	write("home/.config/openbox/rc.xml", "<changed/>", 0o644)
	os.Chmod(filepath.Join(root, "lock"), 0o666)
	write("home/new/deep/file", "dirt", 0o600)
	write("dirt.txt", "dirt", 0o644)
	os.Symlink("/etc/passwd", filepath.Join(root, "home", "link"))
	os.Remove(filepath.Join(root, "lock"))
	os.MkdirAll(filepath.Join(root, "lock"), 0o755) // a directory where the file was

	if n := b.restore(nil); n == 0 {
		t.Fatal("restore changed nothing")
	}
	var got []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		got = append(got, rel)
		return nil
	})
	want := []string{".", "home", "home/.config", "home/.config/openbox", "home/.config/openbox/rc.xml", "lock"}
	if !slices.Equal(got, want) {
		t.Fatalf("after restore: %q, want %q", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "home/.config/openbox/rc.xml")); string(data) != "<openbox/>" {
		t.Errorf("rc.xml: %q", data)
	}
	if fi, err := os.Stat(filepath.Join(root, "lock")); err != nil || fi.Mode().Perm() != 0o444 || !fi.Mode().IsRegular() {
		t.Errorf("lock: %v, %v", fi.Mode(), err)
	}
}

// TestStagedAppRestage: the guest's copy of the staged app is written
// again after a wipe, as the host sent it; a new staging replaces it; an
// app above the bound is not kept.
func TestStagedAppRestage(t *testing.T) {
	dir := t.TempDir()
	var s stagedApp
	s.add(wire.WriteFileRequest{Path: "bin", Dir: true, Mode: 0o755}, nil)
	s.add(wire.WriteFileRequest{Path: "bin/app", Mode: 0o755}, []byte("#!/bin/sh\n"))
	s.add(wire.WriteFileRequest{Path: "bin/app", Append: true}, []byte("exit 0\n"))
	if !s.restage(dir) {
		t.Fatal("nothing restaged")
	}
	data, err := os.ReadFile(filepath.Join(dir, "bin", "app"))
	if err != nil || string(data) != "#!/bin/sh\nexit 0\n" {
		t.Fatalf("restaged: %q, %v", data, err)
	}
	s.add(wire.WriteFileRequest{Path: "other", Mode: 0o644}, []byte("x"))
	if len(s.entries) != 1 {
		t.Errorf("a staging after a restage kept %d entries, want 1", len(s.entries))
	}
	var big stagedApp
	big.add(wire.WriteFileRequest{Path: "huge", Mode: 0o644}, make([]byte, maxKeptApp+1))
	if big.restage(t.TempDir()) {
		t.Error("an app above the bound was restaged")
	}
}

// TestWaitPidfds: the wait after a relaunch's SIGKILLs ends when the
// processes have ended (not after a fixed pause), and at its bound when
// one has not.
func TestWaitPidfds(t *testing.T) {
	start := func() (*exec.Cmd, int) {
		t.Helper()
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			t.Skipf("no pidfd here: %v", err)
		}
		return cmd, fd
	}
	a, fa := start()
	b, fb := start()
	a.Process.Signal(syscall.SIGKILL)
	b.Process.Signal(syscall.SIGKILL)
	waitPidfds([]int{fa, fb}, time.Minute)
	for _, c := range []*exec.Cmd{a, b} {
		if !zombie(c.Process.Pid) {
			t.Errorf("process %d has not ended when the wait returned", c.Process.Pid)
		}
	}
	live, fl := start()
	waitPidfds([]int{fl}, 20*time.Millisecond) // returns at its bound
	if zombie(live.Process.Pid) {
		t.Errorf("a process that was not killed has ended")
	}
}

// TestInitNamesHoldTheGuests: the guest binaries the images carry are
// sandbox inits when they are PID 1 (a Docker container's, a Pod's
// container's), so that a reset in place and the kill of detached
// daemons work there; a Pod running the small binary refused every reset
// until its name was in the list.
func TestInitNamesHoldTheGuests(t *testing.T) {
	for _, p := range []string{images.GuestPath, images.GuestSmallPath} {
		// /proc/1/comm holds the first 15 bytes of the program's name.
		name := filepath.Base(p)
		if len(name) > 15 {
			name = name[:15]
		}
		if !initNames[name] {
			t.Errorf("%s (PID 1 of a sandbox) is not a sandbox init: %q is not in initNames", p, name)
		}
	}
}

// TestRestoreResetsAttrs: what an app can hide in a baseline entry
// besides its content and mode — extended attributes, times it set —
// does not outlive the restore.
func TestRestoreResetsAttrs(t *testing.T) {
	root := t.TempDir()
	f := filepath.Join(root, "home", "rc.xml")
	os.MkdirAll(filepath.Dir(f), 0o755)
	os.WriteFile(f, []byte("<openbox/>"), 0o644)
	b := snapshotFiles([]string{root})
	want := b.files[f].mtime
	secret := time.Unix(1234567890, 0)
	os.Chtimes(f, secret, secret)
	os.Chtimes(filepath.Dir(f), secret, secret)
	xattrs := unix.Lsetxattr(f, "user.secret", []byte("42"), 0) == nil
	b.restore(nil)
	for _, p := range []string{f, filepath.Dir(f)} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Mtim != b.files[p].mtime || st.Atim != b.files[p].atime {
			t.Errorf("%s: times %v/%v, want the baseline's", p, st.Atim, st.Mtim)
		}
	}
	if b.files[f].mtime != want {
		t.Error("the baseline's time moved")
	}
	if n, _ := unix.Llistxattr(f, nil); xattrs && n > 0 {
		t.Error("the app's extended attribute survived the restore")
	}
	if !xattrs {
		t.Log("this file system takes no user extended attributes: that part is not checked")
	}
}

// TestRestageKeepsWhatIsAsStaged: a reset keeps the staged app's entries
// the app left as they were (not written again: the same inode) and
// writes the rest afresh — a file whose content changed (by write, by a
// shared mapping, at once after the staging, within the same tick of the
// clock), whose mode, times or extended attributes changed, one renamed
// away and back, one removed — while what the app added goes. Every
// entry then has its first times back, kept or not.
func TestRestageKeepsWhatIsAsStaged(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "app")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := snapshotFiles([]string{root})
	var s stagedApp
	defer s.w.close()
	stage := func(req wire.WriteFileRequest, data []byte) {
		t.Helper()
		s.add(req, data)
		if err := writeStaged(dir, req, data); err != nil {
			t.Fatal(err)
		}
		s.wrote(dir, req)
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	names := []string{"same", "written", "mapped", "mode", "xattr", "timed", "renamed", "gone"}
	stage(wire.WriteFileRequest{Path: "lib", Dir: true, Mode: 0o755}, nil)
	stage(wire.WriteFileRequest{Path: "app", Mode: 0o755}, big[:1<<20])
	stage(wire.WriteFileRequest{Path: "app", Append: true}, big[1<<20:])
	for _, n := range names {
		stage(wire.WriteFileRequest{Path: "lib/" + n, Mode: 0o644}, []byte("staged "+n))
	}
	stage(wire.WriteFileRequest{Path: "link", Link: "lib/same"}, nil)
	first := maps.Clone(s.times)
	s.settle() // as the launch does

	// The episode's app at work, at once (within the clock's tick).
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	if err := os.WriteFile(p("lib/written"), []byte("staged WRITTEN"), 0o644); err != nil { // the same size
		t.Fatal(err)
	}
	f, err := os.OpenFile(p("lib/mapped"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 6, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, "STAGED")
	unix.Munmap(m)
	f.Close()
	os.Chmod(p("lib/mode"), 0o600)
	xattrs := unix.Lsetxattr(p("lib/xattr"), "user.secret", []byte("42"), 0) == nil
	secret := time.Unix(1234567890, 0)
	os.Chtimes(p("lib/timed"), secret, secret)
	os.Rename(p("lib/renamed"), p("lib/away"))
	os.Rename(p("lib/away"), p("lib/renamed"))
	os.Remove(p("lib/gone"))
	os.WriteFile(p("lib/added"), []byte("dirt"), 0o644)

	b.restore(s.keep(dir))
	var kept []string
	for rel := range s.kept {
		kept = append(kept, rel)
	}
	slices.Sort(kept)
	want := []string{"app", "lib", "lib/same", "link"}
	if !xattrs {
		want = []string{"app", "lib", "lib/same", "lib/xattr", "link"}
		t.Log("this file system takes no user extended attributes: that part is not checked")
	}
	if !slices.Equal(kept, want) {
		t.Errorf("kept %q, want %q", kept, want)
	}
	if !s.restage(dir) {
		t.Fatal("nothing restaged")
	}
	// The times first: reading a file sets its access time.
	for rel, t0 := range first {
		fi, err := os.Lstat(p(rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Mtim != t0 || st.Atim != t0 {
			t.Errorf("%s: times %v/%v, want the first staging's %v", rel, st.Atim, st.Mtim, t0)
		}
	}
	for _, n := range names {
		if data, err := os.ReadFile(p("lib/" + n)); err != nil || string(data) != "staged "+n {
			t.Errorf("lib/%s: %q, %v", n, data, err)
		}
	}
	if data, err := os.ReadFile(p("app")); err != nil || !slices.Equal(data, big) {
		t.Errorf("app: %d bytes, %v; want the %d staged", len(data), err, len(big))
	}
	if _, err := os.Lstat(p("lib/added")); err == nil {
		t.Error("lib/added, the app's, survived")
	}
	if fi, err := os.Stat(p("lib/mode")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("lib/mode: %v, %v; want -rw-r--r--", fi.Mode(), err)
	}
	if n, _ := unix.Llistxattr(p("lib/xattr"), nil); n > 0 {
		t.Error("lib/xattr kept the app's extended attribute")
	}

	// The restage's own writes are not the next app's: an untouched
	// sandbox keeps everything at the next reset.
	b.restore(s.keep(dir))
	if len(s.kept) != len(first) {
		t.Errorf("after a reset with nothing changed, kept %d of %d entries", len(s.kept), len(first))
	}
	s.restage(dir)
}

// TestStageWatchSeesAMappedWriteBeforeItsClose: a write through a shared
// mapping queues no inotify event, and its descriptor's close (which
// does) may come only after the reset looked — held in a unix socket's
// message, freed by the kernel's collector later. Here the descriptor is
// still open when the reset looks: the file's change time tells, on a
// file system with fine-grained change times and, past the coarse
// clock's tick, on one without; an untouched file is kept by both.
func TestStageWatchSeesAMappedWriteBeforeItsClose(t *testing.T) {
	for _, fine := range []bool{true, false} {
		t.Run(map[bool]string{true: "fine", false: "coarse"}[fine], func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "app")
			os.Mkdir(dir, 0o755)
			b := snapshotFiles([]string{root})
			var s stagedApp
			defer s.w.close()
			for _, name := range []string{"data", "untouched"} {
				req := wire.WriteFileRequest{Path: name, Mode: 0o644}
				s.add(req, []byte("staged data"))
				if err := writeStaged(dir, req, []byte("staged data")); err != nil {
					t.Fatal(err)
				}
				s.wrote(dir, req)
			}
			if fine && !s.w.fine {
				t.Skip("this file system gives no fine-grained change times")
			}
			s.w.fine = fine
			if !fine {
				time.Sleep(20 * time.Millisecond) // past the staging's tick
			}
			s.settle()

			f, err := os.OpenFile(filepath.Join(dir, "data"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close() // after the reset: the close's event comes too late
			m, err := unix.Mmap(int(f.Fd()), 0, 6, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			copy(m, "STAGED")
			unix.Munmap(m)

			b.restore(s.keep(dir))
			if s.kept["data"] {
				t.Error("a file written through a mapping, its descriptor still open, was kept")
			}
			if !s.kept["untouched"] {
				t.Error("the untouched file was not kept")
			}
			s.restage(dir)
			if data, _ := os.ReadFile(filepath.Join(dir, "data")); string(data) != "staged data" {
				t.Errorf("data after the restage: %q", data)
			}
		})
	}
}
