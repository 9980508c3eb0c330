// Command probe is the conformance suite's isolation probe: staged into a
// sandbox as an app, it reports from inside what the sandbox lets it do, as
// one line "KIND {json}" on stdout, or does something a hostile app would
// (flood its output, fork until it cannot, leave daemons behind).
//
//	probe posture HOSTPATH [stay] identity, capabilities, namespaces, writes;
//	                              with stay, keep running afterwards
//	probe egress HOSTIP TCP UDP LOOP   connections out, and to itself
//	probe forkbomb                start sleeps until fork fails, then hold
//	probe daemons TOKEN           leave three detached processes, then exit
//	probe flood BYTES             write BYTES to stdout as fast as it can
//	probe net OP…                 network operations, each reported:
//	                              get=URL (through the proxy variables),
//	                              getk=URL (the same, any TLS certificate),
//	                              rawget=URL (ignoring them), dial=ADDR,
//	                              echo=ADDR (send "ping", read the answer),
//	                              lookup=NAME, pget=URL (through the
//	                              proxy even for loopback names),
//	                              pgetn=N,URL (N of them: "200:3 429:7"),
//	                              sockget=URL (through the proxy's unix
//	                              socket, not the guest's relay),
//	                              write=PATH (create a file), sleep=DURATION;
//	                              stay (last) keeps it running afterwards
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment/envtest/probeout"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe posture|egress|forkbomb|daemons|flood …")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "posture":
		probeout.Print(os.Stdout, probeout.KindPosture, posture(arg(args, 0)))
		if arg(args, 1) == "stay" {
			stay()
		}
	case "egress":
		probeout.Print(os.Stdout, probeout.KindEgress, egress(arg(args, 0), arg(args, 1), arg(args, 2), arg(args, 3)))
	case "forkbomb":
		forkbomb()
	case "daemons":
		daemons(arg(args, 0))
	case "doublefork":
		start(true, "linger", arg(args, 0)+"-orphan")
	case "linger":
		linger()
	case "net":
		// "stay" last: keep running after the report.
		ops, stayAfter := args, len(args) > 0 && args[len(args)-1] == "stay"
		if stayAfter {
			ops = args[:len(args)-1]
		}
		probeout.Print(os.Stdout, probeout.KindNet, netOps(ops))
		if stayAfter {
			stay()
		}
	case "flood":
		n, _ := strconv.ParseInt(arg(args, 0), 10, 64)
		flood(n)
	default:
		fmt.Fprintf(os.Stderr, "probe: unknown probe %q\n", os.Args[1])
		os.Exit(2)
	}
}

func arg(a []string, i int) string {
	if i < len(a) {
		return a[i]
	}
	return ""
}

func posture(hostPath string) probeout.Posture {
	p := probeout.Posture{UID: os.Getuid(), GID: os.Getgid(), Home: os.Getenv("HOME"), Namespaces: map[string]string{}, Writes: map[string]string{}}
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			v = strings.TrimSpace(v)
			switch k {
			case "CapEff":
				p.CapEff = v
			case "CapBnd":
				p.CapBnd = v
			case "NoNewPrivs":
				p.NoNewPrivs = v
			case "Seccomp":
				p.Seccomp = v
			}
		}
		f.Close()
	}
	if m, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		p.UserNS = strings.Join(strings.Fields(string(m)), " ") != "0 0 4294967295"
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		p.Interfaces = append(p.Interfaces, i.Name)
	}
	p.Hostname, _ = os.Hostname()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		p.EnvKeys = append(p.EnvKeys, k)
	}
	for _, ns := range []string{"pid", "net", "ipc", "uts", "mnt", "user", "cgroup"} {
		p.Namespaces[ns], _ = os.Readlink("/proc/self/ns/" + ns)
	}
	for _, dir := range []string{"/", "/usr", "/etc", "/var", "/tmp", "/dev/shm", p.Home} {
		p.Writes[dir] = errString(os.WriteFile(filepath.Join(dir, ".probe-write"), []byte("x"), 0o644))
	}
	var st syscall.Statfs_t
	if syscall.Statfs("/tmp", &st) == nil {
		p.TmpBytes = st.Blocks * uint64(st.Bsize)
	}
	if syscall.Statfs("/dev/shm", &st) == nil {
		p.ShmBytes = st.Blocks * uint64(st.Bsize)
	}
	exe, _ := os.Executable()
	p.ExeOnTmp = strings.HasPrefix(exe, "/tmp/")
	if hostPath != "" {
		if fi, err := os.Stat(hostPath); err == nil {
			p.HostPath = fi.Mode().String()
		}
	}
	c, err := net.DialTimeout("unix", "/run/dbus/system_bus_socket", time.Second)
	if err == nil {
		c.Close()
	}
	p.DBus = errString(err)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			p.Processes++
			comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
			p.ProcessComm = append(p.ProcessComm, strings.TrimSpace(string(comm)))
		}
	}
	return p
}

func egress(hostIP, tcpPort, udpPort, loopPort string) probeout.Egress {
	var e probeout.Egress
	if hostIP != "" {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(hostIP, tcpPort), 2*time.Second)
		if err == nil {
			c.Write([]byte("escaped\n"))
			c.Close()
		}
		e.TCPHost = errString(err)
		u, err := net.Dial("udp", net.JoinHostPort(hostIP, udpPort))
		if err == nil {
			_, err = u.Write([]byte("escaped"))
			u.Close()
		}
		e.UDPHost = errString(err)
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", loopPort), 2*time.Second)
	if err == nil {
		c.Close()
	}
	e.TCPLoop = errString(err)

	// Positive controls: the same calls to itself work.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.TCPSelf = "listen: " + errString(err)
	} else {
		go func() {
			if s, err := l.Accept(); err == nil {
				s.Write([]byte("pong"))
				s.Close()
			}
		}()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
		if err == nil {
			buf := make([]byte, 4)
			c.SetDeadline(time.Now().Add(2 * time.Second))
			n, _ := c.Read(buf)
			e.SelfEcho = string(buf[:n])
			c.Close()
		}
		e.TCPSelf = errString(err)
		l.Close()
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		e.UDPSelf = "listen: " + errString(err)
	} else {
		u, err := net.Dial("udp", pc.LocalAddr().String())
		if err == nil {
			_, err = u.Write([]byte("ping"))
			u.Close()
		}
		if err == nil {
			buf := make([]byte, 8)
			pc.SetDeadline(time.Now().Add(2 * time.Second))
			_, _, err = pc.ReadFrom(buf)
		}
		e.UDPSelf = errString(err)
		pc.Close()
	}
	e.Localhost = localhost()
	return e
}

// localhost says why "localhost" is not a loopback name here: /etc/hosts
// (which C programs read through glibc as Go programs do) must map it to
// 127.0.0.1, and a lookup must give loopback addresses only.
func localhost() string {
	data, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return "read /etc/hosts: " + err.Error()
	}
	mapped := false
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && f[0] == "127.0.0.1" && slices.Contains(f[1:], "localhost") {
			mapped = true
		}
	}
	if !mapped {
		return fmt.Sprintf("/etc/hosts does not map localhost to 127.0.0.1: %q", data)
	}
	addrs, err := net.LookupHost("localhost")
	if err != nil {
		return "look up localhost: " + err.Error()
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return fmt.Sprintf("localhost is %v", addrs)
		}
	}
	return ""
}

// forkbomb starts long sleeps until the sandbox refuses another process,
// reports how many it started and why it stopped, and holds them.
func forkbomb() {
	runtime.GOMAXPROCS(1)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Printf("FORKBOMB {\"Started\":0,\"Err\":%q}\n", err.Error())
		return
	}
	attr := &syscall.ProcAttr{Files: []uintptr{0, 1, 2}}
	n := 0
	var last error
	for n < 100000 {
		_, err := syscall.ForkExec(sleep, []string{"sleep", "120"}, attr)
		if err != nil {
			last = err
			break
		}
		n++
		if n%25 == 0 {
			fmt.Printf("FORKBOMB-PROGRESS %d\n", n)
		}
	}
	probeout.Print(os.Stdout, "FORKBOMB", struct {
		Started int
		Err     string
	}{n, errString(last)})
	time.Sleep(5 * time.Minute)
}

// start runs the probe again with args, detached (setsid) or not.
func start(setsid bool, args ...string) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "probe: start %v: %v\n", args, err)
		os.Exit(1)
	}
}

// daemons leaves behind what a misbehaving app might: a process in a
// session of its own, one orphaned by a double fork, and one in the app's
// own group; all ignore SIGTERM and SIGHUP.
func daemons(token string) {
	start(true, "linger", token+"-setsid")
	exe, _ := os.Executable()
	if err := exec.Command(exe, "doublefork", token).Run(); err != nil {
		fmt.Fprintf(os.Stderr, "probe: doublefork: %v\n", err)
		os.Exit(1)
	}
	start(false, "linger", token+"-group")
	time.Sleep(200 * time.Millisecond)
	fmt.Println("DAEMONS started")
}

// stay keeps the probe running (the app of a run that goes on) until it is
// stopped.
func stay() {
	for {
		time.Sleep(time.Hour)
	}
}

func linger() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	for {
		time.Sleep(time.Hour)
	}
}

// flood writes n bytes to stdout in 1 MiB writes.
func flood(n int64) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 'x'
	}
	var sent int64
	for sent < n {
		m := min(int64(len(buf)), n-sent)
		w, err := os.Stdout.Write(buf[:m])
		sent += int64(w)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FLOOD failed after %d bytes: %v\n", sent, err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "FLOOD done %d\n", sent)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// netOps runs each network operation and reports how it went.
func netOps(ops []string) probeout.Net {
	out := probeout.Net{Proxy: os.Getenv("HTTP_PROXY"), Results: map[string]string{}}
	get := func(u string, c *http.Client) string {
		resp, err := c.Get(u)
		if err != nil {
			return "error: " + err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		r := strconv.Itoa(resp.StatusCode) + " " + string(b)
		// The rest is read too (a download), and counted.
		if n, err := io.Copy(io.Discard, resp.Body); n > 0 || err != nil {
			r = strconv.Itoa(resp.StatusCode) + " [" + strconv.FormatInt(int64(len(b))+n, 10) + " bytes]"
			if err != nil {
				r += " error: " + err.Error()
			}
		}
		return r
	}
	viaProxy := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	insecure := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	direct := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	// Go's own proxy rule sends loopback names direct; pget always asks
	// the proxy, as another app might.
	proxyURL, _ := url.Parse(os.Getenv("HTTP_PROXY"))
	forced := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
	sock := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.sock"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", "/run/agentbox/net/proxy.sock")
		}, DisableKeepAlives: true}}
	for _, op := range ops {
		kind, arg, _ := strings.Cut(op, "=")
		var r string
		switch kind {
		case "get":
			r = get(arg, viaProxy)
		case "getk":
			r = get(arg, insecure)
		case "rawget":
			r = get(arg, direct)
		case "pget":
			r = get(arg, forced)
		case "sockget":
			r = get(arg, sock)
		case "pgetn":
			n, u, _ := strings.Cut(arg, ",")
			count, _ := strconv.Atoi(n)
			byStatus := map[string]int{}
			for i := 0; i < count; i++ {
				code, _, _ := strings.Cut(get(u, forced), " ")
				byStatus[code]++
			}
			var parts []string
			for code, k := range byStatus {
				parts = append(parts, code+":"+strconv.Itoa(k))
			}
			sort.Strings(parts)
			r = strings.Join(parts, " ")
		case "write":
			if err := os.WriteFile(arg, []byte("x"), 0o644); err != nil {
				r = "error: " + err.Error()
			} else {
				r = "written"
			}
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "dial":
			c, err := net.DialTimeout("tcp", arg, 5*time.Second)
			if err != nil {
				r = "error: " + err.Error()
			} else {
				c.Close()
				r = "connected"
			}
		case "echo":
			c, err := net.DialTimeout("tcp", arg, 5*time.Second)
			if err != nil {
				r = "error: " + err.Error()
				break
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			c.Write([]byte("ping"))
			c.(*net.TCPConn).CloseWrite()
			b, err := io.ReadAll(c)
			c.Close()
			r = string(b)
			if err != nil {
				r += " error: " + err.Error()
			}
		case "lookup":
			addrs, err := net.LookupHost(arg)
			if err != nil {
				r = "error: " + err.Error()
			} else {
				r = strings.Join(addrs, ",")
			}
		default:
			r = "error: unknown operation"
		}
		out.Results[op] = r
	}
	return out
}
