package docker

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/codegirl-games/agentbox/environment"
)

// GuestBinary resolves the agentbox binary to mount as the guest: path, or
// $AGENTBOX_GUEST_BINARY, or the running executable. It must be a static
// Linux executable (CGO_ENABLED=0), since the image's libc is not the
// host's.
func GuestBinary(path string) (string, error) {
	if path == "" {
		path = os.Getenv("AGENTBOX_GUEST_BINARY")
	}
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("%w: cannot find the agentbox binary to use as the guest: %w", environment.ErrGuest, err)
		}
		path = exe
	}
	abs, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%w: guest binary: %w", environment.ErrGuest, err)
	}
	if err := checkStatic(abs); err != nil {
		return "", fmt.Errorf("%w: guest binary %s: %v", environment.ErrGuest, abs, err)
	}
	return abs, nil
}

func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
		return fmt.Errorf("unsupported architecture %v", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("it is dynamically linked; build agentbox with CGO_ENABLED=0 (as `make` does) or set AGENTBOX_GUEST_BINARY to a static build")
		}
	}
	return nil
}

// processStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), which with the PID identifies a process
// across PID reuse; 0 if unknown.
func processStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}
