package guestenv

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
)

// ImageGuest is what a guest image carries (images.GuestDockerfile,
// images.GuestKey): the whole agentbox, which `agentbox serve` in a
// cluster runs from that image, and beside it agentbox-guest, which the
// image's Pods run as their guest, when one of the same build is there.
type ImageGuest struct {
	// Whole is the agentbox binary (images.GuestPath in the image).
	Whole string
	// Small is agentbox-guest beside Whole, of Whole's build
	// (images.GuestSmallPath in the image); "" when there is none.
	Small string
	// Why says why Small is "": no agentbox-guest beside Whole, or one
	// of another build, or one that fails the backend's check.
	Why string
}

// ImageBinaries resolves what a guest image carries for path (see
// WholeBinary: path, or $AGENTBOX_GUEST_BINARY, or the running
// executable): that agentbox, and agentbox-guest beside it (symlinks
// resolved) when it is of the same build as that agentbox — compared, as
// Sibling does, from both files' build information — and passes check.
// The same pair of files gives the same answer on the host and in the
// image (serve in a cluster, whose executable is images.GuestPath).
func ImageBinaries(path string, check func(*elf.File) error) (ImageGuest, error) {
	whole, err := WholeBinary(path, check)
	if err != nil {
		return ImageGuest{}, err
	}
	g := ImageGuest{Whole: whole}
	sib := filepath.Join(filepath.Dir(whole), GuestName)
	fi, err := os.Stat(sib)
	if err != nil || !fi.Mode().IsRegular() {
		g.Why = "no " + GuestName + " beside " + whole + " (make build builds both)"
		return g, nil
	}
	if !sameBuildFiles(whole, sib) {
		g.Why = sib + " is not of the build of " + whole + " (rebuild both: make build)"
		return g, nil
	}
	if err := checkELF(sib, check); err != nil {
		g.Why = sib + ": " + err.Error()
		return g, nil
	}
	g.Small = sib
	return g, nil
}

// sameBuildFiles says whether the Go binary guest was built from the same
// source and settings as the Go binary host (sameBuild), from their files;
// the verdict is remembered per pair of files (path, size, mtime).
func sameBuildFiles(host, guest string) bool {
	key := fileKey(host) + "|" + fileKey(guest)
	if v, ok := siblings.Load(key); ok {
		return v.(bool)
	}
	h, err := buildinfo.ReadFile(host)
	same := err == nil
	if same {
		g, err := buildinfo.ReadFile(guest)
		same = err == nil && sameBuild(h, g)
	}
	siblings.Store(key, same)
	return same
}

func fileKey(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return path
	}
	return path + "|" + strconv.FormatInt(fi.Size(), 10) + "|" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}
