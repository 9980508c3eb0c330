package images

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

//go:embed Dockerfile.guest
var guestDockerfile []byte

// GuestPath is where a guest image carries the agentbox binary.
const GuestPath = "/opt/agentbox/agentbox"

// GuestSmallPath is where a guest image carries agentbox-guest (the guest
// alone, cmd/agentbox-guest) beside agentbox, when it carries it: the
// command of the Pods that run the image.
const GuestSmallPath = "/opt/agentbox/agentbox-guest"

// LabelGuest holds the GuestKey of the binaries a guest image carries.
const LabelGuest = "dev.agentbox.guest"

// LabelGuestSmall holds the GuestID of the agentbox-guest a guest image
// carries beside agentbox; empty when it carries agentbox alone.
const LabelGuestSmall = "dev.agentbox.guest-small"

// RoleGuest is a guest image's LabelImage.
const RoleGuest = "guest"

// GuestDockerfile returns (a copy of) the Dockerfile that layers the guest
// binaries onto an image: build arguments BASE, GUEST_ID (the GuestKey) and
// GUEST_SMALL (agentbox-guest's GuestID, or empty), the binaries in the
// context's directory "opt": "agentbox" and, when carried,
// "agentbox-guest".
func GuestDockerfile() []byte { return slices.Clone(guestDockerfile) }

// GuestID is the hash of one binary: the first 16 hex digits of the
// SHA-256 of the file at path. It keys a guest image that carries the
// agentbox binary alone (GuestKey).
func GuestID(path string) (string, error) {
	sum, err := fileSHA256(path)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum)[:16], nil
}

// GuestKey is the hash that keys a guest image (its tag, GuestRef, and
// LabelGuest): GuestID(whole) for an image that carries the agentbox
// binary alone (small empty); for one that also carries agentbox-guest
// (small, of whole's build), the first 16 hex digits of the SHA-256 of
// both binaries' SHA-256s, named. A host agentbox and the agentbox in an
// image (serve in a cluster) that have the same pair of binaries beside
// them compute the same key, and only they: another agentbox, another
// agentbox-guest, or none, is another key.
func GuestKey(whole, small string) (string, error) {
	if small == "" {
		return GuestID(whole)
	}
	w, err := fileSHA256(whole)
	if err != nil {
		return "", err
	}
	g, err := fileSHA256(small)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "agentbox %x\nagentbox-guest %x\n", w, g)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("guest binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("guest binary %s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// GuestRef is the reference of the image that carries the guest id on
// base: base's repository, with "-guest-ID" added to its tag (latest when
// it has none). A base named by digest gets the tag "guest-ID-DIGEST12".
//
//	GuestRef("agentbox/runtime:bookworm", id) = "agentbox/runtime:bookworm-guest-" + id
//	GuestRef("registry:5000/team/app", id)   = "registry:5000/team/app:latest-guest-" + id
//
// A base that already carries this id — the reference `image build
// --guest` printed, given back as --image — is returned as it is.
func GuestRef(base, id string) string {
	if _, tag := splitTag(base); !strings.Contains(base, "@") && (strings.HasSuffix(tag, "-guest-"+id) || tag == "guest-"+id) {
		return base
	}
	repo, digest, byDigest := strings.Cut(base, "@")
	if byDigest {
		_, hexd, _ := strings.Cut(digest, ":")
		if len(hexd) > 12 {
			hexd = hexd[:12]
		}
		repo, _ = splitTag(repo)
		return repo + ":guest-" + id + "-" + hexd
	}
	repo, tag := splitTag(base)
	if tag == "" {
		tag = "latest"
	}
	// A tag holds at most 128 characters.
	if max := 128 - len("-guest-") - len(id); len(tag) > max {
		tag = tag[:max]
	}
	return repo + ":" + tag + "-guest-" + id
}

// splitTag splits "repo:tag" (the colon after the last slash; a registry's
// port is not a tag).
func splitTag(ref string) (repo, tag string) {
	slash := strings.LastIndexByte(ref, '/')
	if i := strings.LastIndexByte(ref, ':'); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}
