package docker

import (
	"debug/elf"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/codegirl-games/agentbox/environment/guestenv"
)

// GuestBinary resolves the agentbox binary to mount as the guest (see
// guestenv.Binary). It must be statically linked (CGO_ENABLED=0), since
// the image's libc is not the host's.
func GuestBinary(path string) (string, error) {
	return guestenv.Binary(path, func(f *elf.File) error {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("it is dynamically linked; build agentbox with CGO_ENABLED=0 (as `make` does) or set AGENTBOX_GUEST_BINARY to a static build")
			}
		}
		return nil
	})
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
