// Command probe reports the sandbox's posture from inside as one JSON line
// on stdout, then stays alive (so the run sees a running app). It is staged
// as an app by the end-to-end tests.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

type posture struct {
	UID, GID        int
	CapEff          string
	NoNewPrivs      string
	Seccomp         string
	Interfaces      []string
	RootWriteErr    string
	UsrWriteErr     string
	TmpWriteErr     string
	TmpSizeBytes    uint64
	TmpExecOK       bool
	ShmSizeBytes    uint64
	Home            string
	HomeWritableErr string
	EnvKeys         []string
	Hostname        string
}

func main() {
	p := posture{UID: os.Getuid(), GID: os.Getgid(), Home: os.Getenv("HOME")}
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			v = strings.TrimSpace(v)
			switch k {
			case "CapEff":
				p.CapEff = v
			case "NoNewPrivs":
				p.NoNewPrivs = v
			case "Seccomp":
				p.Seccomp = v
			}
		}
		f.Close()
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		p.Interfaces = append(p.Interfaces, i.Name)
	}
	p.RootWriteErr = errString(os.WriteFile("/probe-root", []byte("x"), 0o644))
	p.UsrWriteErr = errString(os.WriteFile("/usr/probe", []byte("x"), 0o644))
	p.TmpWriteErr = errString(os.WriteFile("/tmp/probe", []byte("x"), 0o644))
	p.HomeWritableErr = errString(os.WriteFile(p.Home+"/probe", []byte("x"), 0o644))
	var st syscall.Statfs_t
	if syscall.Statfs("/tmp", &st) == nil {
		p.TmpSizeBytes = st.Blocks * uint64(st.Bsize)
	}
	if syscall.Statfs("/dev/shm", &st) == nil {
		p.ShmSizeBytes = st.Blocks * uint64(st.Bsize)
	}
	// The staged app itself runs from tmpfs, so exec there works.
	exe, _ := os.Executable()
	p.TmpExecOK = strings.HasPrefix(exe, "/tmp/")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		p.EnvKeys = append(p.EnvKeys, k)
	}
	p.Hostname, _ = os.Hostname()
	b, _ := json.Marshal(p)
	fmt.Printf("POSTURE %s\n", b)
	for {
		time.Sleep(time.Hour)
	}
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
