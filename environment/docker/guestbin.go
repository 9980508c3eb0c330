package docker

import (
	"debug/elf"
	"fmt"

	"github.com/codegirl-games/agentbox/environment/guestenv"
)

// GuestBinary resolves the agentbox binary to mount as the guest (see
// guestenv.Binary). It must be statically linked (CGO_ENABLED=0), since
// the image's libc is not the host's.
func GuestBinary(path string) (string, error) {
	return guestenv.Binary(path, static)
}

// imageBinary resolves the agentbox binary a guest image carries (see
// guestenv.WholeBinary): the whole agentbox, statically linked.
func imageBinary(path string) (string, error) {
	return guestenv.WholeBinary(path, static)
}

func static(f *elf.File) error {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("it is dynamically linked; build agentbox with CGO_ENABLED=0 (as `make` does) or set AGENTBOX_GUEST_BINARY to a static build")
		}
	}
	return nil
}
