// Command dirty is the app of the relaunch tests (e2e/relaunch_test.go):
// it first reports what an earlier instance left that it can see, then
// leaves all it can — files in the home, /tmp and /dev/shm, its input
// overwritten, a property on the root window, the CLIPBOARD selection
// owned, a key held down (XTEST), a window kept after its client's
// end (close-down mode RetainPermanent), a daemon (setsid) that keeps
// writing, in the home directory itself an extended attribute and
// times of its choosing, and in its own staged files (its app directory
// as the host staged it) a changed mode, an extended attribute, and
// bytes written through a shared mapping — and prints "dirty: ready". A relaunch must leave the next
// instance nothing: it prints "dirty: clean".
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// marked is the time an instance sets on the home directory.
var marked = time.Unix(1234567890, 0)

var leftovers = []string{
	"~/dirty-home.txt", "/tmp/dirty-tmp.txt", "/dev/shm/dirty-shm", "/tmp/dirty-daemon.txt", "~/.config/dirty/state",
	"dirty-appdir.txt", // in the app directory, its working directory
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "daemon" {
		daemon()
		return
	}
	home := os.Getenv("HOME")
	xc, err := xgb.NewConn()
	if err != nil {
		fail("connect: %v", err)
	}
	if err := xtest.Init(xc); err != nil {
		fail("xtest: %v", err)
	}
	setup := xproto.Setup(xc)
	root := setup.DefaultScreen(xc).Root
	atom := func(name string) xproto.Atom {
		r, err := xproto.InternAtom(xc, false, uint16(len(name)), name).Reply()
		if err != nil {
			fail("intern %s: %v", name, err)
		}
		return r.Atom
	}
	prop, clipboard := atom("DIRTY_PROP"), atom("CLIPBOARD")

	// What an earlier instance left.
	var found []string
	for _, p := range leftovers {
		p = strings.Replace(p, "~", home, 1)
		if _, err := os.Lstat(p); err == nil {
			found = append(found, "file "+p)
		}
	}
	if self, err := os.Executable(); err == nil {
		if fi, err := os.Stat(self); err == nil && fi.Mode().Perm() != 0o755 {
			found = append(found, fmt.Sprintf("the app's own mode %v", fi.Mode().Perm()))
		}
	}
	if self, err := os.Executable(); err == nil {
		if n, err := unix.Getxattr(self, "user.dirty", nil); err == nil && n > 0 {
			found = append(found, "the app's own extended attribute user.dirty")
		}
	}
	if b, err := os.ReadFile("data.txt"); err != nil || string(b) != "staged\n" {
		found = append(found, fmt.Sprintf("staged data.txt %q (%v)", b, err))
	}
	if b, err := os.ReadFile(filepath.Join(home, "input.txt")); err != nil || string(b) != "staged\n" {
		found = append(found, fmt.Sprintf("input %q (%v)", b, err))
	}
	if r, err := xproto.GetProperty(xc, false, root, prop, xproto.AtomAny, 0, 16).Reply(); err == nil && r.Format != 0 {
		found = append(found, "root property DIRTY_PROP="+string(r.Value))
	}
	if r, err := xproto.GetSelectionOwner(xc, clipboard).Reply(); err == nil && r.Owner != xproto.WindowNone {
		found = append(found, fmt.Sprintf("CLIPBOARD owned by %#x", r.Owner))
	}
	if r, err := xproto.QueryKeymap(xc).Reply(); err == nil {
		for i, b := range r.Keys {
			if b != 0 {
				found = append(found, fmt.Sprintf("keys down in byte %d: %08b", i, b))
			}
		}
	}
	if tree, err := xproto.QueryTree(xc, root).Reply(); err == nil {
		for _, w := range tree.Children {
			if r, err := xproto.GetProperty(xc, false, w, xproto.AtomWmName, xproto.AtomString, 0, 64).Reply(); err == nil && string(r.Value) == "dirty-ghost" {
				found = append(found, fmt.Sprintf("window dirty-ghost %#x", w))
			}
		}
	}
	if n, err := unix.Getxattr(home, "user.dirty", nil); err == nil && n > 0 {
		found = append(found, "the home's extended attribute user.dirty")
	}
	if fi, err := os.Stat(home); err == nil && fi.ModTime().Equal(marked) {
		found = append(found, "the home's time set to "+marked.UTC().Format(time.RFC3339))
	}
	if pids := daemons(); len(pids) > 0 {
		found = append(found, fmt.Sprintf("daemons %v", pids))
	}
	if len(found) == 0 {
		fmt.Println("dirty: clean")
	} else {
		fmt.Println("dirty: leftover: " + strings.Join(found, "; "))
	}

	// Leave everything.
	os.MkdirAll(filepath.Join(home, ".config", "dirty"), 0o755)
	for _, p := range leftovers[:3] {
		must(os.WriteFile(strings.Replace(p, "~", home, 1), []byte("dirt\n"), 0o644))
	}
	must(os.WriteFile(filepath.Join(home, ".config", "dirty", "state"), []byte("dirt\n"), 0o644))
	must(os.WriteFile("dirty-appdir.txt", []byte("dirt\n"), 0o644))
	if self, err := os.Executable(); err == nil { // the staged app itself, changed
		must(os.Chmod(self, 0o700))
		_ = unix.Setxattr(self, "user.dirty", []byte("dirt"), 0)
	}
	// A staged file changed in place through a shared mapping, its size
	// and times as they were: only the kernel's word tells of it.
	if f, err := os.OpenFile("data.txt", os.O_RDWR, 0); err == nil {
		fi, _ := f.Stat()
		if m, err := unix.Mmap(int(f.Fd()), 0, 6, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
			copy(m, "DIRTY!")
			_ = unix.Munmap(m)
		}
		f.Close()
		if fi != nil {
			_ = os.Chtimes("data.txt", fi.ModTime(), fi.ModTime())
		}
	}
	must(os.WriteFile(filepath.Join(home, "input.txt"), []byte("overwritten\n"), 0o644))
	must(xproto.ChangePropertyChecked(xc, xproto.PropModeReplace, root, prop, xproto.AtomString, 8, 4, []byte("dirt")).Check())
	win := window(xc, root, "dirty", true)
	must(xproto.SetSelectionOwnerChecked(xc, win, clipboard, xproto.TimeCurrentTime).Check())
	must(xtest.FakeInputChecked(xc, xproto.KeyPress, byte(setup.MinKeycode)+30, 0, root, 0, 0, 0).Check())
	ghost()
	self, _ := os.Executable()
	d := exec.Command(self, "daemon")
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must(d.Start())
	_ = d.Process.Release()
	time.Sleep(100 * time.Millisecond)
	// Last, since what is written in the home moves its times: a mark
	// in the home itself (the extended attribute where the file system
	// takes one).
	_ = unix.Setxattr(home, "user.dirty", []byte("dirt"), 0)
	must(os.Chtimes(home, marked, marked))
	fmt.Println("dirty: ready")
	for {
		ev, err := xc.WaitForEvent()
		if ev == nil && err == nil {
			return
		}
		if r, ok := ev.(xproto.SelectionRequestEvent); ok {
			_ = r // the clipboard's content is not served: owning it is enough
		}
	}
}

// window makes a top-level window titled title (mapped when mapped).
func window(xc *xgb.Conn, root xproto.Window, title string, mapped bool) xproto.Window {
	id, err := xproto.NewWindowId(xc)
	must(err)
	must(xproto.CreateWindowChecked(xc, 0, id, root, 10, 10, 200, 100, 0, xproto.WindowClassInputOutput, 0, 0, nil).Check())
	must(xproto.ChangePropertyChecked(xc, xproto.PropModeReplace, id, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(title)), []byte(title)).Check())
	if mapped {
		must(xproto.MapWindowChecked(xc, id).Check())
	}
	return id
}

// ghost leaves a window whose client has ended: its close-down mode
// RetainPermanent keeps it.
func ghost() {
	xc, err := xgb.NewConn()
	must(err)
	root := xproto.Setup(xc).DefaultScreen(xc).Root
	window(xc, root, "dirty-ghost", false)
	must(xproto.SetCloseDownModeChecked(xc, xproto.CloseDownRetainPermanent).Check())
	xc.Close()
}

// daemon keeps writing a file until killed.
func daemon() {
	for {
		os.WriteFile("/tmp/dirty-daemon.txt", []byte(time.Now().String()), 0o644)
		time.Sleep(50 * time.Millisecond)
	}
}

// daemons are the PIDs of running "dirty daemon" processes.
func daemons() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 2 && filepath.Base(args[0]) == "dirty" && args[1] == "daemon" {
			out = append(out, pid)
		}
	}
	return out
}

func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "dirty: "+format+"\n", a...)
	os.Exit(1)
}
