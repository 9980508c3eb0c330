// Package images holds the definition of agentbox's container images: the
// runtime Dockerfile, the test Dockerfile (runtime + X11 tools and real apps
// used as test oracles), the office Dockerfile (runtime + LibreOffice,
// Mousepad, GIMP, Chromium and fonts, for tasks on real applications), and
// the offline base: a minimal Debian root made
// with debootstrap, streamed as a tar for `docker import` where no registry is
// reachable.
//
// The package is pure data plus the debootstrap step; it does not talk to
// Docker. environment/docker builds the images from it.
package images

import (
	_ "embed"
	"fmt"
	"slices"
)

// Image variants.
const (
	VariantRuntime = "runtime"
	VariantTest    = "test"
	VariantOffice  = "office"
)

// LabelImage names an image's role: "base", "runtime", "test" or "office".
const LabelImage = "dev.agentbox.image"

// DefaultBase is the registry base image of the runtime variant.
const DefaultBase = "debian:bookworm-slim"

// Suite is the Debian release the images are built from.
const Suite = "bookworm"

//go:embed Dockerfile
var runtimeDockerfile []byte

//go:embed Dockerfile.test
var testDockerfile []byte

//go:embed Dockerfile.office
var officeDockerfile []byte

// Variants lists the known variants, the runtime first.
func Variants() []string { return []string{VariantRuntime, VariantTest, VariantOffice} }

// Layered reports whether a variant is built on the runtime image (the
// test and office images) rather than on a Debian base.
func Layered(variant string) bool { return variant == VariantTest || variant == VariantOffice }

// Dockerfile returns (a copy of) the Dockerfile of a variant. All take the
// base image as the build argument BASE.
func Dockerfile(variant string) ([]byte, error) {
	switch variant {
	case VariantRuntime:
		return slices.Clone(runtimeDockerfile), nil
	case VariantTest:
		return slices.Clone(testDockerfile), nil
	case VariantOffice:
		return slices.Clone(officeDockerfile), nil
	}
	return nil, fmt.Errorf("image: unknown variant %q (want %q, %q or %q)", variant, VariantRuntime, VariantTest, VariantOffice)
}
