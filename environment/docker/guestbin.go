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

// imageBinaries resolves the binaries a guest image carries (see
// guestenv.ImageBinaries): the whole agentbox and agentbox-guest of its
// build beside it, if there is one; both statically linked.
func imageBinaries(path string) (guestenv.ImageGuest, error) {
	return guestenv.ImageBinaries(path, static)
}

func static(f *elf.File) error {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("it is dynamically linked; build agentbox with CGO_ENABLED=0 (as `make` does) or set AGENTBOX_GUEST_BINARY to a static build")
		}
	}
	return nil
}
