package main

// Attacks on the guest and its protocol channel (the guest's stdin and
// stdout): issue 12, items 1, 7 and 8.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// Forged is the mark every forged frame carries; the test looks for it
// in the trace.
const Forged = "FORGED-BY-THE-APP"

// targets are the processes that hold, or held, the guest's stdio: the
// sandbox's init and the guest.
func targets() []int {
	out := []int{1}
	if g := findPID("guest"); g > 0 && g != 1 {
		out = append(out, g)
	}
	return out
}

// forge writes a forged conversation to w, as the guest would: app output,
// a window, answers to every request ID the host is likely waiting on
// (hello, start, staging, launch, the first screenshots and actions), and
// finally the app's exit, OOM-killed.
func forge(w io.Writer) error {
	var buf bytes.Buffer
	write := func(h *wire.Header, payload []byte) {
		_ = wire.WriteFrame(&buf, h, payload)
	}
	body := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	write(&wire.Header{Type: wire.Event, Method: wire.EventOutput, Body: body(wire.OutputEvent{Stream: observe.Stdout})}, []byte(Forged+" output\n"))
	write(&wire.Header{Type: wire.Event, Method: wire.EventWindow, Body: body(wire.WindowEvent{Kind: "mapped", Window: observe.Window{ID: 4242, Title: Forged + " window", Width: 10, Height: 10}})}, nil)
	for id := uint32(1); id <= 200; id++ {
		write(&wire.Header{Type: wire.Response, ID: id, Error: &wire.RemoteError{Code: wire.CodeInternal, Message: Forged + " response"}}, nil)
	}
	write(&wire.Header{Type: wire.Event, Method: wire.EventExit, Body: body(observe.Exit{Code: -1, Signal: "SIGKILL", OOM: true, Stopped: Forged + " exit"})}, nil)
	_, err := w.Write(buf.Bytes())
	return err
}

// channel tries every way in to the guest's stdio and, where one opens,
// forges frames through it. Controls: the same operations on the app's
// own descriptors and on its own child succeed.
func channel() {
	// Controls.
	f, err := os.OpenFile("/proc/self/fd/1", os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	report("open /proc/self/fd/1 (control)", err, "")
	child := exec.Command("/bin/sleep", "60")
	var sink bytes.Buffer
	child.Stdout = &sink // a pipe the child holds as fd 1
	if err := child.Start(); err != nil {
		report("start a child (control)", err, "")
	} else {
		defer func() { child.Process.Kill(); child.Wait() }()
		p := strconv.Itoa(child.Process.Pid)
		f, err := os.OpenFile("/proc/"+p+"/fd/1", os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		report("open a child's /proc/PID/fd/1 (control)", err, "")
		report("pidfd_getfd a child's fd 1 (control)", pidfdGetfd(child.Process.Pid, 1, nil), "")
	}

	guest := findPID("guest")
	report("the guest's pid", nil, strconv.Itoa(guest))
	for _, pid := range targets() {
		who := "pid " + strconv.Itoa(pid)
		if pid == guest {
			who += " (the guest)"
		}
		p := strconv.Itoa(pid)
		f, err := os.OpenFile("/proc/"+p+"/fd/1", os.O_WRONLY, 0)
		if err == nil {
			err = forge(f)
			f.Close()
			if err == nil {
				err = errors.New("opened and forged frames")
			}
			report("write frames to /proc/"+p+"/fd/1 of "+who, nil, err.Error())
		} else {
			report("write frames to /proc/"+p+"/fd/1 of "+who, err, "")
		}
		f, err = os.OpenFile("/proc/"+p+"/fd/0", os.O_RDONLY, 0)
		if err == nil {
			f.Close()
		}
		report("read the host's requests from /proc/"+p+"/fd/0 of "+who, err, "")
		report("pidfd_getfd fd 1 of "+who, pidfdGetfd(pid, 1, forge), "")
		f, err = os.OpenFile("/proc/"+p+"/mem", os.O_RDWR, 0)
		if err == nil {
			f.Close()
		}
		report("open /proc/"+p+"/mem of "+who, err, "")
		report("ptrace "+who, ptraceAttach(pid), "")
	}
}

// pidfdGetfd duplicates fd of pid into this process and, if then is not
// nil, uses it.
func pidfdGetfd(pid, fd int, then func(io.Writer) error) error {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pfd)
	got, err := unix.PidfdGetfd(pfd, fd, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(got), "stolen")
	defer f.Close()
	if then != nil {
		return then(f)
	}
	return nil
}

// signals sends the guest (and the sandbox's init) every signal that
// could stop, kill or crash it, and reports after each whether the guest
// is still running. Control: the same signals do stop and kill the app's
// own child.
func signals() {
	child := exec.Command("/bin/sleep", "60")
	if err := child.Start(); err == nil {
		pid := child.Process.Pid
		syscall.Kill(pid, syscall.SIGSTOP)
		st := waitState(pid, "T")
		report("SIGSTOP stops the app's own child (control)", boolErr(st == "T", st), st)
		syscall.Kill(pid, syscall.SIGCONT)
		syscall.Kill(pid, syscall.SIGKILL)
		child.Wait()
	}
	// A Go program takes a queued SIGSEGV for a fault of its own and dies.
	self, _ := os.Executable()
	goChild := exec.Command(self, "sleeper", "queued-segv")
	if err := goChild.Start(); err == nil {
		waitState(goChild.Process.Pid, "S")
		time.Sleep(100 * time.Millisecond) // past the Go runtime's start
		serr := sigqueue(goChild.Process.Pid, syscall.SIGSEGV)
		died := make(chan error, 1)
		go func() { died <- goChild.Wait() }()
		select {
		case werr := <-died:
			report("a queued SIGSEGV kills a Go process (control)", serr, fmt.Sprint(werr))
		case <-time.After(5 * time.Second):
			goChild.Process.Kill()
			<-died
			report("a queued SIGSEGV kills a Go process (control)", errors.New("it survived"), "")
		}
	}
	guest := findPID("guest")
	report("the guest's pid", nil, strconv.Itoa(guest))
	if guest == 0 {
		return
	}
	type attempt struct {
		name string
		send func(pid int) error
	}
	kill := func(s syscall.Signal) attempt {
		return attempt{unix.SignalName(s), func(pid int) error { return syscall.Kill(pid, s) }}
	}
	queue := func(s syscall.Signal) attempt {
		return attempt{unix.SignalName(s) + " queued (SI_QUEUE)", func(pid int) error { return sigqueue(pid, s) }}
	}
	attempts := []attempt{
		kill(syscall.SIGSTOP), kill(syscall.SIGTSTP), kill(syscall.SIGTERM), kill(syscall.SIGINT), kill(syscall.SIGHUP),
		kill(syscall.SIGQUIT), kill(syscall.SIGABRT), kill(syscall.SIGUSR1), kill(syscall.SIGPIPE), kill(syscall.SIGSEGV),
		queue(syscall.SIGSEGV), queue(syscall.SIGBUS), queue(syscall.SIGFPE), queue(syscall.SIGILL), queue(syscall.SIGSYS),
		kill(syscall.SIGKILL),
	}
	for _, pid := range targets() {
		who := "pid " + strconv.Itoa(pid)
		if pid == guest {
			who = "the guest"
		}
		for _, a := range attempts {
			serr := a.send(pid)
			time.Sleep(200 * time.Millisecond)
			st := state(guest)
			note := "sent"
			if serr != nil {
				note = "not sent: " + serr.Error()
			}
			report(a.name+" to "+who+": the guest runs on", boolErr(st != "" && st != "T" && st != "t" && st != "Z" && st != "X", st), note+"; guest state "+st)
			if st == "T" || st == "t" {
				syscall.Kill(guest, syscall.SIGCONT) // let the next probe run
			}
		}
	}
}

// stopGuest SIGSTOPs the guest and leaves it stopped.
func stopGuest() {
	guest := findPID("guest")
	err := syscall.Kill(guest, syscall.SIGSTOP)
	report("SIGSTOP the guest", err, strconv.Itoa(guest)+" "+waitState(guest, "T"))
}

func boolErr(ok bool, what string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("state %q", what)
}

// state is the one-letter state of pid, "" if it is gone.
func state(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return ""
	}
	return string(data[i+2])
}

// waitState waits briefly for pid to reach state want and returns the
// state it is in.
func waitState(pid int, want string) string {
	for i := 0; i < 50; i++ {
		if s := state(pid); s == want {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	return state(pid)
}

// sigqueue sends sig to pid with si_code SI_QUEUE, as sigqueue(3) does.
func sigqueue(pid int, sig syscall.Signal) error {
	var info [128]byte // siginfo_t: signo, errno, code, then pid and uid
	*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
	*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
	*(*uint32)(unsafe.Pointer(&info[20])) = uint32(os.Getuid())
	_, _, e := syscall.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])))
	runtime.KeepAlive(&info)
	if e != 0 {
		return e
	}
	return nil
}

// hostView reports what the sandbox shows of the host: the mount table in
// full, and the kernel's view of the machine.
func hostView() {
	for _, p := range []string{
		"/proc/self/mountinfo", "/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/loadavg", "/proc/uptime",
		"/proc/sys/kernel/osrelease", "/proc/sys/kernel/hostname", "/etc/hostname", "/etc/machine-id", "/proc/self/cgroup",
		"/sys/class/dmi/id/product_name", "/sys/class/dmi/id/product_uuid", "/proc/modules", "/proc/kallsyms",
	} {
		data, err := os.ReadFile(p)
		info := string(data)
		if len(info) > 8192 {
			info = info[:8192]
		}
		report("read "+p, err, strings.TrimSpace(info))
	}
	for _, p := range []string{"/proc/cpuinfo", "/proc/meminfo", "/proc/stat"} {
		data, err := os.ReadFile(p)
		var keep []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") || strings.HasPrefix(l, "MemTotal") || strings.HasPrefix(l, "btime") || strings.HasPrefix(l, "processes") {
				keep = append(keep, strings.Join(strings.Fields(l), " "))
			}
		}
		report("read "+p, err, strings.Join(keep, "; "))
	}
	for _, d := range []string{"/sys/class/net", "/sys/block", "/dev"} {
		entries, err := os.ReadDir(d)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		report("list "+d, err, strings.Join(names, ","))
	}
	data, err := os.ReadFile("/etc/passwd")
	report("read /etc/passwd", err, strconv.Itoa(strings.Count(string(data), "\n"))+" lines")
}

// orphans leaves 50 processes to the sandbox's init, which exit at once,
// and counts the zombies left after a while. Control: a child of its own
// that it has not waited for yet is a zombie, and is counted.
func orphans() {
	own := exec.Command("/bin/true")
	if err := own.Start(); err != nil {
		report("start a child (control)", err, "")
		return
	}
	for i := 0; i < 50; i++ {
		// The subshell exits at once; its sleep goes to the init and ends
		// 0.2 s later.
		exec.Command("/bin/sh", "-c", "(sleep 0.2 &)").Run()
	}
	time.Sleep(3 * time.Second)
	var zombies []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && state(pid) == "Z" {
			zombies = append(zombies, e.Name())
		}
	}
	ownZombie := state(own.Process.Pid) == "Z"
	report("the app's own unwaited child is a zombie (control)", boolErr(ownZombie, state(own.Process.Pid)), "")
	n := len(zombies)
	if ownZombie {
		n--
	}
	report("orphans left as zombies", nil, strconv.Itoa(n))
	own.Wait()
}
