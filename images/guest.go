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

// LabelGuest holds the GuestID of the binary a guest image carries.
const LabelGuest = "dev.agentbox.guest"

// RoleGuest is a guest image's LabelImage.
const RoleGuest = "guest"

// GuestDockerfile returns (a copy of) the Dockerfile that layers the guest
// binary onto an image: build arguments BASE and GUEST_ID, the binary as
// "agentbox" in the context.
func GuestDockerfile() []byte { return slices.Clone(guestDockerfile) }

// GuestID is the hash that keys a guest image: the first 16 hex digits of
// the SHA-256 of the binary at path.
func GuestID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("guest binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("guest binary %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
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
