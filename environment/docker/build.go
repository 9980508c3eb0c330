package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/images"
)

// Image references BuildImage produces by default.
const (
	RuntimeImageRef = "agentbox/runtime:bookworm"
	TestImageRef    = "agentbox/test:bookworm"
	OfficeImageRef  = "agentbox/office:bookworm"
	// OfflineBaseRef is the base made without a registry: a debootstrap
	// root imported with ImageImport. It is reused once present.
	OfflineBaseRef = "agentbox/base:bookworm"
)

// Labels BuildImage sets on the images it builds (besides the Dockerfiles'
// own images.LabelImage).
const (
	// LabelBuildHash holds BuildHash of the inputs the image was built from;
	// a tag whose label matches is up to date.
	LabelBuildHash = "dev.agentbox.build-hash"
	// LabelBase and LabelBaseID name the base the image was built on.
	LabelBase   = "dev.agentbox.base"
	LabelBaseID = "dev.agentbox.base-id"
	// LabelMirror is set on the offline base: the Debian mirror it came from.
	LabelMirror = "dev.agentbox.mirror"
)

// buildHashVersion salts BuildHash; bump it when what the hash stands for
// changes (the build arguments, the labels, the context).
const buildHashVersion = "agentbox-image-build/1"

// buildPullTimeout bounds the attempt to reach the registry in OfflineAuto
// mode: without an answer by then the offline path is taken.
const buildPullTimeout = 15 * time.Second

// OfflineMode says whether the runtime image's base comes from a registry or
// is made offline (debootstrap + import).
type OfflineMode int

const (
	// OfflineAuto uses a local debian:bookworm-slim or a local offline base;
	// failing both it tries the registry briefly and falls back to making
	// the offline base.
	OfflineAuto OfflineMode = iota
	// OfflineAlways never contacts a registry: the base is OfflineBaseRef, made
	// with debootstrap when missing.
	OfflineAlways
	// OfflineNever takes the base from the registry (or the local copy of
	// it) and fails if it cannot.
	OfflineNever
)

var offlineModeNames = []string{"auto", "always", "never"}

func (m OfflineMode) String() string {
	if m >= 0 && int(m) < len(offlineModeNames) {
		return offlineModeNames[m]
	}
	return fmt.Sprintf("OfflineMode(%d)", int(m))
}

// ParseOfflineMode parses "auto", "always" or "never" (empty: auto).
func ParseOfflineMode(s string) (OfflineMode, error) {
	if s == "" {
		return OfflineAuto, nil
	}
	for i, n := range offlineModeNames {
		if strings.EqualFold(s, n) {
			return OfflineMode(i), nil
		}
	}
	return 0, fmt.Errorf("offline mode %q: want auto, always or never", s)
}

// BuildOptions configure BuildImage.
type BuildOptions struct {
	// Variant is images.VariantRuntime (default), images.VariantTest or
	// images.VariantOffice.
	Variant string
	// Tag defaults to RuntimeImageRef, TestImageRef or OfficeImageRef.
	Tag string
	// Base is the base image. For the runtime variant, empty means
	// debian:bookworm-slim if it can be had, else the offline base (see
	// Offline). For the test and office variants it is the runtime image
	// (default RuntimeImageRef), built first when missing.
	Base string
	// Offline chooses between the registry and the offline base.
	Offline OfflineMode
	// Mirror is the Debian mirror debootstrap uses for the offline base;
	// empty: the host's apt configuration. (The image's own apt-get runs
	// against the base's sources.)
	Mirror string
	// NoCache builds without the builder's layer cache.
	NoCache bool
	// Force rebuilds even when the tag is up to date.
	Force bool
	// Progress receives human progress lines; nil discards them.
	Progress io.Writer
}

// BuildResult describes the image BuildImage built or found up to date.
type BuildResult struct {
	Ref      string // the tag
	ID       string // image ID, sha256:…
	UpToDate bool   // nothing was built
	Duration time.Duration
	Base     string // base image reference
	BaseID   string
	Size     int64 // bytes, as docker image ls counts them
}

// BuildClient is the part of the Engine API client BuildImage uses;
// *client.Client and client.APIClient satisfy it.
type BuildClient interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImagePull(ctx context.Context, ref string, options client.ImagePullOptions) (client.ImagePullResponse, error)
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, options client.ImageImportOptions) (client.ImageImportResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)
}

// BuildHash is what makes an image up to date: the Dockerfile, the exact
// base image and the variant. BuildImage stores it as LabelBuildHash.
func BuildHash(dockerfile []byte, baseID, variant string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nvariant %s\nbase %s\ndockerfile %d\n", buildHashVersion, variant, baseID, len(dockerfile))
	h.Write(dockerfile)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// BuildImage builds the runtime, test or office image with the Engine API's classic
// builder (BuilderV1), from the Dockerfiles of package image, with the base
// as the build argument BASE. A tag whose LabelBuildHash matches the inputs
// is up to date and returned at once without touching the builder (unless
// Force). The runtime image's base is debian:bookworm-slim or, where no
// registry answers, OfflineBaseRef, made with debootstrap (as root) and
// ImageImport. The test and office images build on the runtime image,
// building it first when missing.
func BuildImage(ctx context.Context, cli BuildClient, opts BuildOptions) (BuildResult, error) {
	start := time.Now()
	o, err := opts.normalized()
	if err != nil {
		return BuildResult{}, fmt.Errorf("build image: %w", err)
	}
	p := buildProgress{w: o.Progress, prefix: "[" + o.Variant + "]"}
	fail := func(what string, err error) (BuildResult, error) {
		return BuildResult{}, fmt.Errorf("build image %s: %s: %w", o.Tag, what, err)
	}
	dockerfile, err := images.Dockerfile(o.Variant)
	if err != nil {
		return fail("dockerfile", err)
	}
	base, err := resolveBuildBase(ctx, cli, o, true)
	if err != nil {
		return fail("base", err)
	}
	hash := BuildHash(dockerfile, base.id, o.Variant)
	res := BuildResult{Ref: o.Tag, Base: base.ref, BaseID: base.id}

	if !o.Force {
		cur, err := inspectBuildImage(ctx, cli, o.Tag)
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fail("inspect", err)
		}
		if err == nil && cur.labels[LabelBuildHash] == hash {
			res.ID, res.Size, res.UpToDate, res.Duration = cur.id, cur.size, true, time.Since(start)
			p.printf("%s is up to date (%s, on %s) — %s", o.Tag, buildShortID(cur.id), base.ref, images.FormatDuration(res.Duration))
			return res, nil
		}
	}

	p.printf("building %s from %s (%s)", o.Tag, base.ref, buildShortID(base.id))
	buildCtx, err := buildContextTar(dockerfile)
	if err != nil {
		return fail("context", err)
	}
	baseRef := base.ref
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), client.ImageBuildOptions{
		Tags:        []string{o.Tag},
		Dockerfile:  "Dockerfile",
		BuildArgs:   map[string]*string{"BASE": &baseRef},
		Labels:      map[string]string{LabelBuildHash: hash, LabelBase: base.ref, LabelBaseID: base.id},
		NoCache:     o.NoCache,
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fail("start", err)
	}
	defer resp.Body.Close()
	dec := newBuildStreamDecoder(o.Progress, p.prefix, time.Now)
	if _, err := dec.decode(resp.Body); err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			be.Ref = o.Tag
		}
		if ctx.Err() != nil {
			return fail("interrupted", context.Cause(ctx))
		}
		return BuildResult{}, fmt.Errorf("build image %s: %w", o.Tag, err)
	}
	cur, err := inspectBuildImage(ctx, cli, o.Tag)
	if err != nil {
		return fail("inspect the result", err)
	}
	if cur.labels[LabelBuildHash] != hash {
		return fail("check", fmt.Errorf("%s has build hash %q, want %q (built concurrently?)", o.Tag, cur.labels[LabelBuildHash], hash))
	}
	res.ID, res.Size, res.Duration = cur.id, cur.size, time.Since(start)
	p.printf("built %s (%s, %s) in %s", o.Tag, buildShortID(cur.id), images.FormatBytes(cur.size), images.FormatDuration(res.Duration))
	return res, nil
}

// ImageUpToDate reports whether the image BuildImage would build for opts
// exists with the same build hash. It builds, pulls and imports nothing: a
// missing base means false.
func ImageUpToDate(ctx context.Context, cli BuildClient, opts BuildOptions) (bool, error) {
	o, err := opts.normalized()
	if err != nil {
		return false, fmt.Errorf("image up to date: %w", err)
	}
	dockerfile, err := images.Dockerfile(o.Variant)
	if err != nil {
		return false, fmt.Errorf("image up to date: %w", err)
	}
	base, err := resolveBuildBase(ctx, cli, o, false)
	if err != nil {
		return false, fmt.Errorf("image up to date %s: base: %w", o.Tag, err)
	}
	if base.id == "" {
		return false, nil
	}
	cur, err := inspectBuildImage(ctx, cli, o.Tag)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("image up to date %s: %w", o.Tag, err)
	}
	return cur.labels[LabelBuildHash] == BuildHash(dockerfile, base.id, o.Variant), nil
}

func (o BuildOptions) normalized() (BuildOptions, error) {
	if o.Variant == "" {
		o.Variant = images.VariantRuntime
	}
	switch o.Variant {
	case images.VariantRuntime:
		if o.Tag == "" {
			o.Tag = RuntimeImageRef
		}
	case images.VariantTest:
		if o.Tag == "" {
			o.Tag = TestImageRef
		}
	case images.VariantOffice:
		if o.Tag == "" {
			o.Tag = OfficeImageRef
		}
	default:
		return o, fmt.Errorf("unknown variant %q (want %q, %q or %q)", o.Variant, images.VariantRuntime, images.VariantTest, images.VariantOffice)
	}
	if o.Offline < OfflineAuto || o.Offline > OfflineNever {
		return o, fmt.Errorf("unknown offline mode %d", int(o.Offline))
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

// buildBase is a resolved base image; id is empty when it is missing and
// was not to be made.
type buildBase struct{ ref, id string }

// resolveBuildBase finds the base image of o; with create it pulls, imports
// or builds it when missing, otherwise it reports a missing base with an
// empty id.
func resolveBuildBase(ctx context.Context, cli BuildClient, o BuildOptions, create bool) (buildBase, error) {
	p := buildProgress{w: o.Progress, prefix: "[base]"}
	local := func(ref string) (buildBase, bool, error) {
		img, err := inspectBuildImage(ctx, cli, ref)
		if cerrdefs.IsNotFound(err) {
			return buildBase{ref: ref}, false, nil
		}
		if err != nil {
			return buildBase{}, false, err
		}
		return buildBase{ref: ref, id: img.id}, true, nil
	}

	if images.Layered(o.Variant) {
		ref := o.Base
		if ref == "" {
			ref = RuntimeImageRef
		}
		b, ok, err := local(ref)
		if err != nil || ok || !create {
			return b, err
		}
		p := buildProgress{w: o.Progress, prefix: "[" + o.Variant + "]"}
		p.printf("runtime image %s is missing; building it first", ref)
		r, err := BuildImage(ctx, cli, BuildOptions{
			Variant: images.VariantRuntime, Tag: ref, Offline: o.Offline,
			Mirror: o.Mirror, NoCache: o.NoCache, Progress: o.Progress,
		})
		if err != nil {
			return buildBase{}, err
		}
		return buildBase{ref: ref, id: r.ID}, nil
	}

	if o.Base != "" {
		b, ok, err := local(o.Base)
		if err != nil || ok || !create {
			return b, err
		}
		if o.Offline == OfflineAlways {
			return buildBase{}, fmt.Errorf("%s is not present locally, and the offline mode is %q", o.Base, o.Offline)
		}
		return pullBuildBase(ctx, cli, o.Base, 0, p)
	}

	switch o.Offline {
	case OfflineAlways:
		b, ok, err := local(OfflineBaseRef)
		if err != nil || ok || !create {
			return b, err
		}
		return importOfflineBase(ctx, cli, o.Mirror, p)
	case OfflineNever:
		b, ok, err := local(images.DefaultBase)
		if err != nil || ok || !create {
			return b, err
		}
		return pullBuildBase(ctx, cli, images.DefaultBase, 0, p)
	}
	// OfflineAuto: what is here already, the registry's, then the offline one.
	for _, ref := range []string{images.DefaultBase, OfflineBaseRef} {
		b, ok, err := local(ref)
		if err != nil || ok {
			return b, err
		}
	}
	if !create {
		return buildBase{ref: images.DefaultBase}, nil
	}
	b, err := pullBuildBase(ctx, cli, images.DefaultBase, buildPullTimeout, p)
	if err == nil {
		return b, nil
	}
	if ctx.Err() != nil {
		return buildBase{}, err
	}
	p.printf("registry unreachable (%v); taking the offline path: %s from debootstrap", err, OfflineBaseRef)
	return importOfflineBase(ctx, cli, o.Mirror, p)
}

// buildImageInfo is what BuildImage needs of an image inspection.
type buildImageInfo struct {
	id     string
	size   int64
	labels map[string]string
}

func inspectBuildImage(ctx context.Context, cli BuildClient, ref string) (buildImageInfo, error) {
	res, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return buildImageInfo{}, err
	}
	info := buildImageInfo{id: res.ID, size: res.Size, labels: map[string]string{}}
	if res.Config != nil && res.Config.Labels != nil {
		info.labels = res.Config.Labels
	}
	return info, nil
}

// buildContextTar is the build context: the Dockerfile alone.
func buildContextTar(dockerfile []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)),
		ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// buildShortID is "sha256:0123456789ab".
func buildShortID(id string) string {
	hex, ok := strings.CutPrefix(id, "sha256:")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	if ok {
		return "sha256:" + hex
	}
	return hex
}

// buildProgress prints prefixed progress lines.
type buildProgress struct {
	w      io.Writer
	prefix string
}

func (p buildProgress) printf(format string, args ...any) {
	fmt.Fprintf(p.w, p.prefix+" "+format+"\n", args...)
}
