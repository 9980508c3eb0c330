package guestenv

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/codegirl-games/agentbox/environment"
)

// Binary resolves the agentbox binary a backend runs as the guest: path, or
// $AGENTBOX_GUEST_BINARY, or agentbox-guest beside the running executable
// when it is of the same build (Sibling), or the running executable
// itself (which is a guest too: `agentbox guest`). The result is absolute
// with symlinks resolved, and an executable ELF file built for this
// machine's architecture; check, if not nil, adds a backend's own demand
// (Docker's: statically linked) on the opened file. Errors wrap
// environment.ErrGuest.
func Binary(path string, check func(*elf.File) error) (string, error) {
	return resolve(path, true, check)
}

// WholeBinary is Binary without the small guest: path, or
// $AGENTBOX_GUEST_BINARY, or the running executable. A guest image
// (Kubernetes) carries the whole agentbox, since `agentbox serve` in the
// cluster runs from that same image and asks for it by its binaries'
// hashes; ImageBinaries adds the small guest beside it.
func WholeBinary(path string, check func(*elf.File) error) (string, error) {
	return resolve(path, false, check)
}

func resolve(path string, sibling bool, check func(*elf.File) error) (string, error) {
	if path == "" {
		path = os.Getenv("AGENTBOX_GUEST_BINARY")
	}
	if path == "" {
		exe, err := executable()
		if err != nil {
			return "", fmt.Errorf("%w: cannot find the agentbox binary to use as the guest: %w", environment.ErrGuest, err)
		}
		path = exe
		if sibling {
			if sib, ok := Sibling(exe); ok {
				path = sib
			}
		}
	}
	abs, err := filepath.EvalSymlinks(path)
	if err == nil {
		abs, err = filepath.Abs(abs)
	}
	if err != nil {
		return "", fmt.Errorf("%w: guest binary: %w", environment.ErrGuest, err)
	}
	if err := checkELF(abs, check); err != nil {
		return "", fmt.Errorf("%w: guest binary %s: %v", environment.ErrGuest, abs, err)
	}
	return abs, nil
}

// Static is the check of backends whose sandbox does not share the host's
// libc (Docker, Kubernetes): the guest binary must be statically linked.
func Static(f *elf.File) error {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("it is dynamically linked; build agentbox with CGO_ENABLED=0 (as `make` does) or set AGENTBOX_GUEST_BINARY to a static build")
		}
	}
	return nil
}

// executable is os.Executable, replaced by tests.
var executable = os.Executable

func checkELF(path string, check func(*elf.File) error) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if want != elf.EM_NONE && f.Machine != want {
		return fmt.Errorf("built for %v, this machine is %s", f.Machine, runtime.GOARCH)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable")
	}
	if check != nil {
		return check(f)
	}
	return nil
}
