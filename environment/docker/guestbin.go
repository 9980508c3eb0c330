package docker

import "github.com/codegirl-games/agentbox/environment/guestenv"

// GuestBinary resolves the agentbox binary to mount as the guest (see
// guestenv.Binary). It must be statically linked (CGO_ENABLED=0), since
// the image's libc is not the host's.
func GuestBinary(path string) (string, error) {
	return guestenv.Binary(path, guestenv.Static)
}

// imageBinaries resolves the binaries a guest image carries (see
// guestenv.ImageBinaries): the whole agentbox and agentbox-guest of its
// build beside it, if there is one; both statically linked.
func imageBinaries(path string) (guestenv.ImageGuest, error) {
	return guestenv.ImageBinaries(path, guestenv.Static)
}
