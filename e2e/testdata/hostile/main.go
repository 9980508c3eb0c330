// Command hostile is the red-team suite's app: each mode tries something a
// hostile or broken program would, prints one "RESULT {json}" line per
// probe on stdout, prints "PROBES DONE" when finished, and then stays alive
// (so the run, not the probe, decides when it ends). Every negative probe
// comes with a positive control proving the probe itself works.
//
//	hostile egress HOST_TCP_PORT HOST_UDP_PORT GATEWAY
//	hostile writes | secrets | privesc | forkbomb | fill | flood BYTES | daemons MARK | grab | fds
//	hostile terminal exit|window
//	hostile channel | signals | stop-guest | host-view | orphans
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"golang.org/x/sys/unix"
)

type result struct {
	Probe string `json:"probe"`
	OK    bool   `json:"ok"` // the operation succeeded
	Err   string `json:"err,omitempty"`
	Errno string `json:"errno,omitempty"`
	Info  string `json:"info,omitempty"`
}

func report(probe string, err error, info string) {
	r := result{Probe: probe, OK: err == nil, Info: info}
	if err != nil {
		r.Err = err.Error()
		var en syscall.Errno
		if errors.As(err, &en) {
			r.Errno = unix.ErrnoName(en)
		}
	}
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hostile MODE …")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "egress":
		egress(args)
	case "writes":
		writes()
	case "secrets":
		secrets()
	case "privesc":
		privesc()
	case "privesc-control":
		privescControl()
	case "forkbomb":
		forkbomb()
	case "fill":
		fill()
	case "flood":
		n, _ := strconv.ParseInt(args[0], 10, 64)
		flood(n)
	case "daemons":
		daemons(args[0])
	case "sleeper":
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
		time.Sleep(time.Hour)
		return
	case "grab":
		grab()
	case "terminal":
		terminal(args[0])
	case "fds":
		fds()
	case "channel":
		channel()
	case "signals":
		signals()
	case "stop-guest":
		stopGuest()
	case "host-view":
		hostView()
	case "orphans":
		orphans()
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
	fmt.Println("PROBES DONE")
	for {
		time.Sleep(time.Hour)
	}
}

func dial(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

func egress(args []string) {
	tcpPort, udpPort, gw := args[0], args[1], args[2]
	// Positive controls: loopback works, so the probes can connect at all.
	if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		report("tcp loopback (control)", dial("tcp", l.Addr().String()), "")
		l.Close()
	} else {
		report("tcp loopback (control)", err, "")
	}
	if pc, err := net.ListenPacket("udp", "127.0.0.1:0"); err == nil {
		c, err := net.Dial("udp", pc.LocalAddr().String())
		if err == nil {
			_, err = c.Write([]byte("x"))
			if err == nil {
				pc.SetReadDeadline(time.Now().Add(time.Second))
				_, _, err = pc.ReadFrom(make([]byte, 8))
			}
			c.Close()
		}
		report("udp loopback (control)", err, "")
		pc.Close()
	}
	for _, a := range []string{"1.1.1.1:53", "8.8.8.8:443", net.JoinHostPort(gw, tcpPort), "169.254.169.254:80", "[2001:4860:4860::8888]:53"} {
		report("tcp "+a, dial("tcp", a), "")
	}
	for _, a := range []string{"8.8.8.8:53", net.JoinHostPort(gw, udpPort), "[2001:4860:4860::8888]:53"} {
		c, err := net.Dial("udp", a)
		if err == nil {
			_, err = c.Write([]byte("probe"))
			c.Close()
		}
		report("udp "+a, err, "")
	}
	_, err := net.LookupHost("example.com")
	report("dns example.com", err, "")
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	if err == nil {
		syscall.Close(fd)
	}
	report("icmp raw socket", err, "")
	fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, syscall.IPPROTO_ICMP)
	if err == nil {
		sa := &syscall.SockaddrInet4{Addr: [4]byte{8, 8, 8, 8}}
		err = syscall.Sendto(fd, []byte{8, 0, 0, 0, 0, 0, 0, 0}, 0, sa)
		syscall.Close(fd)
	}
	report("icmp ping 8.8.8.8", err, "")
	ifs, _ := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	report("interfaces", nil, strings.Join(names, ","))
}

func writes() {
	report("write /tmp (control)", os.WriteFile("/tmp/probe", []byte("x"), 0o644), "")
	home, _ := os.UserHomeDir()
	report("write $HOME (tmpfs, control)", os.WriteFile(home+"/probe", []byte("x"), 0o644), home)
	for _, p := range []string{"/probe", "/usr/probe", "/etc/probe", "/home/agentbox/probe", "/opt/agentbox/probe", "/opt/agentbox/agentbox", "/etc/hosts"} {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.Write([]byte("x"))
			f.Close()
		}
		report("write "+p, err, "")
	}
	report("write /proc/sys/kernel/hostname", os.WriteFile("/proc/sys/kernel/hostname", []byte("pwned"), 0), "")
	report("write /sys/kernel/profiling", os.WriteFile("/sys/kernel/profiling", []byte("1"), 0), "")
}

func secrets() {
	for _, p := range []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"} {
		_, err := os.Stat(p)
		report("stat "+p, err, "")
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	report("read mountinfo (control)", err, "")
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 {
			report("mount", nil, f[4]+" "+f[5]+" "+f[3])
		}
	}
	var keys []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	report("env", nil, strings.Join(keys, ","))
}

func privesc() {
	report("uid", nil, fmt.Sprintf("%d/%d", os.Getuid(), os.Geteuid()))
	err := syscall.Mount("none", "/tmp", "tmpfs", 0, "")
	report("mount tmpfs", err, "")
	runtime.LockOSThread()
	report("unshare user namespace", syscall.Unshare(syscall.CLONE_NEWUSER), "")
	report("unshare mount namespace", syscall.Unshare(syscall.CLONE_NEWNS), "")
	report("unshare nothing", syscall.Unshare(0), "")
	runtime.UnlockOSThread()
	// ptrace: the guest (same user, made non-dumpable) must refuse; our own
	// child must not (the control).
	guest := findPID("guest")
	if guest > 0 {
		report("ptrace the guest", ptraceAttach(guest), strconv.Itoa(guest))
	} else {
		report("ptrace the guest", errors.New("guest not found"), "")
	}
	child := exec.Command("/bin/sleep", "30")
	if err := child.Start(); err == nil {
		report("ptrace own child (control)", ptraceAttach(child.Process.Pid), "")
		child.Process.Kill()
		child.Wait()
	}
	_, _, e := syscall.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	report("keyctl", errnoErr(e), "")
	_, _, e = syscall.Syscall(unix.SYS_ADD_KEY, 0, 0, 0)
	report("add_key", errnoErr(e), "")
	for _, argv := range [][]string{{"su", "root", "-c", "id -u"}, {"chage", "-l", "root"}, {"mount", "-t", "tmpfs", "none", "/tmp"}} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		report("run "+strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
}

// privescControl is privesc's positive control, run on the host as root:
// only operations that leave the host as it was. unshare happens on a
// locked thread that is then discarded; nothing is mounted (a mount on the
// host, even in a new namespace, can propagate back).
func privescControl() {
	done := make(chan error, 3)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		done <- syscall.Unshare(syscall.CLONE_NEWNS)
		done <- syscall.Unshare(0)
	}()
	report("unshare mount namespace", <-done, "")
	report("unshare nothing (control)", <-done, "")
	go func() {
		runtime.LockOSThread()
		_, _, e := syscall.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xffffffff), 1) // KEY_SPEC_THREAD_KEYRING (-1)
		done <- errnoErr(e)
	}()
	report("keyctl", <-done, "")
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func ptraceAttach(pid int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		return err
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WALL, nil)
	return syscall.PtraceDetach(pid)
}

func findPID(word string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		parts := strings.Split(string(cmd), "\x00")
		if len(parts) > 1 && strings.HasSuffix(parts[0], "agentbox") && parts[1] == word && !strings.Contains(string(cmd), "--exec-app") {
			return pid
		}
	}
	return 0
}

func forkbomb() {
	n := 0
	var err error
	for i := 0; i < 100000; i++ {
		var pid int
		pid, err = syscall.ForkExec("/bin/sleep", []string{"sleep", "600"}, &syscall.ProcAttr{})
		if err != nil {
			break
		}
		_ = pid
		n++
	}
	report("fork until refused", err, strconv.Itoa(n))
}

func fill() {
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		f, err := os.Create(dir + "/fill")
		if err != nil {
			report("fill "+dir, err, "")
			continue
		}
		buf := make([]byte, 1<<20)
		var total int64
		for {
			n, werr := f.Write(buf)
			total += int64(n)
			if werr != nil {
				err = werr
				break
			}
		}
		f.Close()
		report("fill "+dir, err, strconv.FormatInt(total, 10))
		os.Remove(dir + "/fill")
	}
	report("write after fill (control)", os.WriteFile("/tmp/after", []byte("x"), 0o644), "")
}

func flood(n int64) {
	buf := []byte(strings.Repeat("flood flood flood flood flood flood flood flood flood flood!\n", 1<<14))
	var sent int64
	for sent < n {
		w, err := os.Stdout.Write(buf)
		sent += int64(w)
		if err != nil {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "flood done: %d bytes\n", sent)
}

// daemons leaves processes behind the way daemons do — a double fork and a
// new session — all ignoring SIGTERM, then ignores SIGTERM itself.
func daemons(mark string) {
	self, _ := os.Executable()
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	sess := exec.Command(self, "sleeper", mark+"-setsid")
	sess.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	report("setsid daemon", sess.Start(), "")
	// Double fork: a shell starts the sleeper in the background and exits,
	// so the sleeper is reparented to the sandbox's init.
	err := exec.Command("/bin/sh", "-c", "'"+self+"' sleeper "+mark+"-double </dev/null >/dev/null 2>&1 &").Run()
	report("double-fork daemon", err, "")
	time.Sleep(200 * time.Millisecond)
}

// grab takes the X server for itself and never lets go.
func grab() {
	c, err := xgb.NewConn()
	if err != nil {
		report("connect to X", err, "")
		return
	}
	err = xproto.GrabServerChecked(c).Check()
	report("grab the X server", err, "")
	fmt.Println("GRABBED")
	for {
		time.Sleep(time.Hour)
	}
}
