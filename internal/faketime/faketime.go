// Package faketime is what agentbox knows of libfaketime, the library its
// virtual clock (--clock virtual) preloads into an app: where Debian
// installs it, the clock file's format, and which programs it cannot fake
// (static executables, Go programs). The guest uses it in the sandbox, the
// CLI and the local backend on the host.
package faketime

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Libs are where Debian installs libfaketime (package
// libfaketime), by architecture; the first that exists is used.
var Libs = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
}

// Lib returns the path of libfaketime on this system, or "".
func Lib() string {
	for _, p := range Libs {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// ErrNotFakeable says a program cannot run on a virtual clock.
var ErrNotFakeable = errors.New("cannot run on a virtual clock")

// Check says whether the program at path can be given a virtual
// clock by preloading libfaketime: a dynamically linked ELF executable
// that is not a Go program, or a script whose interpreter (#!) is one.
// The error wraps ErrNotFakeable and names why.
func Check(path string) error {
	return checkFakeable(path, 0)
}

func checkFakeable(path string, depth int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		if depth > 3 {
			return fmt.Errorf("%s: %w: too many levels of #! interpreters", path, ErrNotFakeable)
		}
		line, _, _ := bufio.NewReader(bytes.NewReader(head[2:])).ReadLine()
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			return fmt.Errorf("%s: %w: a #! line without an interpreter", path, ErrNotFakeable)
		}
		interp := fields[0]
		if filepath.Base(interp) == "env" && len(fields) > 1 && !strings.HasPrefix(fields[1], "-") {
			// #!/usr/bin/env NAME: the program found on PATH.
			if p, err := lookPath(fields[1]); err == nil {
				interp = p
			}
		}
		return checkFakeable(interp, depth+1)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("%s: %w: neither an ELF executable nor a #! script", path, ErrNotFakeable)
	}
	defer ef.Close()
	dynamic := false
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			dynamic = true
		}
	}
	if !dynamic {
		return fmt.Errorf("%s: %w: it is a statically linked executable (no dynamic loader, so libfaketime cannot be preloaded into it)", path, ErrNotFakeable)
	}
	if bi, err := buildinfo.ReadFile(path); err == nil {
		return fmt.Errorf("%s: %w: it is a Go program (%s), which reads the time from the kernel's vDSO, not through the C library libfaketime replaces", path, ErrNotFakeable, bi.GoVersion)
	}
	return nil
}

// lookPath finds a program on PATH (exec.LookPath, kept apart for tests).
var lookPath = func(name string) (string, error) {
	for _, dir := range filepath.SplitList(pathOr()) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// Spec is the clock file's content for an instant: seconds and
// nanoseconds since 1970, as libfaketime reads it with FAKETIME_FMT=%s (a
// stopped clock at that instant).
func Spec(ns int64) string {
	return fmt.Sprintf("%d.%09d\n", ns/1e9, ns%1e9)
}

func pathOr() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return "/usr/local/bin:/usr/bin:/bin"
}
