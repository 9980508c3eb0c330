package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fds looks for descriptors the app was not meant to have: every
// descriptor it inherited above stderr ("inherited fd N": those without
// close-on-exec), read directly (a descriptor is a capability: no
// permission check), and every descriptor of the other
// processes it can see (Xvfb and Openbox run as the same user and are
// dumpable, so pidfd_getfd copies their descriptors, and /proc/PID/fd/N
// reopens their files), each reported with its target and the first bytes
// it reads. Controls: a file the probe opens itself is read back through
// its descriptor, and a descriptor of another process is copied.
func fds() {
	ctl, err := os.Open("/proc/self/status")
	if err != nil {
		report("read own descriptor (control)", err, "")
	} else {
		data, err := preadFD(int(ctl.Fd()))
		report("read own descriptor (control)", err, data)
	}
	skip := map[string]bool{}
	if ctl != nil {
		skip[strconv.Itoa(int(ctl.Fd()))] = true
	}
	stealControl()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range append([]string{"/proc/self"}, procs...) {
		pid := filepath.Base(p)
		if pid == strconv.Itoa(os.Getpid()) {
			continue // it is /proc/self
		}
		comm, _ := os.ReadFile(p + "/comm")
		who := strings.TrimSpace(string(comm))
		if pid == "self" {
			who = "app"
		}
		// Read the list first: the directory's own descriptor is gone by
		// the time the entries are opened.
		names, err := readDirNames(p + "/fd")
		if err != nil {
			report("list "+who+" ("+pid+") fds", err, "")
			continue
		}
		for _, n := range names {
			if pid == "self" && (n == "0" || n == "1" || n == "2" || skip[n]) {
				continue
			}
			target, err := os.Readlink(p + "/fd/" + n)
			if err != nil {
				continue // closed since the listing (the listing's own)
			}
			if pid == "self" {
				// Everything a Go program opens is close-on-exec; a
				// descriptor without the flag came through exec.
				fd, _ := strconv.Atoi(n)
				if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
					continue
				}
				data, err := preadFD(fd)
				report("inherited fd "+n, err, target+" | "+data)
				continue
			}
			if strings.HasPrefix(target, "socket:") || strings.HasPrefix(target, "anon_inode:") || strings.HasPrefix(target, "pipe:") {
				continue // the X server's and Openbox's own plumbing
			}
			data, err := stealFD(pid, n)
			report(fmt.Sprintf("fd %s of %s (%s)", n, who, pid), err, target+" | "+data)
		}
	}
}

// stealControl gives a child of the probe a file on its descriptor 3 and
// copies it back from the child, as the probe does to Xvfb and Openbox.
func stealControl() {
	const probe = "steal a descriptor of another process (control)"
	f, err := os.CreateTemp("", "control")
	if err != nil {
		report(probe, err, "")
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	f.WriteString("control-content")
	cmd := exec.Command("sleep", "60")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		report(probe, err, "")
		return
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	data, err := stealFD(strconv.Itoa(cmd.Process.Pid), "3")
	report(probe, err, data)
}

// preadFD reads the first bytes of a descriptor the probe holds.
func preadFD(fd int) (string, error) {
	buf := make([]byte, 64)
	n, err := unix.Pread(fd, buf, 0)
	if n < 0 {
		n = 0
	}
	if err != nil {
		// Not seekable (a pipe, a socket): read what is there, without
		// waiting.
		if err2 := unix.SetNonblock(fd, true); err2 == nil {
			n, err = unix.Read(fd, buf)
			n = max(n, 0)
		}
	}
	return string(buf[:n]), err
}

// stealFD copies descriptor n of process pid with pidfd_getfd and reads
// it, or else reopens /proc/PID/fd/N.
func stealFD(pid, n string) (string, error) {
	p, _ := strconv.Atoi(pid)
	fd, _ := strconv.Atoi(n)
	if pfd, err := unix.PidfdOpen(p, 0); err == nil {
		dup, err := unix.PidfdGetfd(pfd, fd, 0)
		unix.Close(pfd)
		if err == nil {
			defer unix.Close(dup)
			data, err := preadFD(dup)
			return "[pidfd_getfd] " + data, err
		}
	}
	data, err := readFD("/proc/" + pid + "/fd/" + n)
	return "[reopen] " + data, err
}

func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// readFD opens a /proc/…/fd/N link (a fresh open of the same file) and
// returns its first bytes.
func readFD(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, err := io.ReadFull(f, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return string(buf[:n]), err
}
