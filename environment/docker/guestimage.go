package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/images"
)

// GuestImageOptions configure BuildGuestImage.
type GuestImageOptions struct {
	// Base is the image the guest is layered onto; default
	// RuntimeImageRef. It must be present.
	Base string
	// Binary is the agentbox binary to carry; empty means the running
	// executable — the whole agentbox (guestenv.WholeBinary): serve in a
	// cluster runs from this image. agentbox-guest beside it is carried
	// too when it is of the same build (guestenv.ImageBinaries): the
	// image's Pods run it as their guest.
	Binary string
	// Force rebuilds even when the image is up to date.
	Force bool
	// Save, if set, is a file the image is written to as a `docker save`
	// archive, for a cluster without a registry (`ctr -n k8s.io images
	// import FILE`, `kind load image-archive FILE`).
	Save string
	// Push, if set, is a repository (REGISTRY/NAME[:TAG]) the image is
	// tagged into (images.GuestRef(Push, id)) and pushed to: give the same
	// name as --image to the kubernetes backend. The daemon pushes with
	// its own credentials for the registry (an anonymous push otherwise).
	Push string
	// Progress receives human progress lines; nil discards them.
	Progress io.Writer
}

// GuestImageResult describes the guest image.
type GuestImageResult struct {
	Ref      string // images.GuestRef(Base, GuestID)
	ID       string // image ID
	GuestID  string // images.GuestKey of the binaries carried
	Binary   string // the agentbox binary carried
	Small    string // the agentbox-guest carried beside it; "" when none
	Why      string // why no agentbox-guest is carried, when none is
	UpToDate bool   // nothing was built
	Pushed   string // the reference pushed, if any
	Saved    string // the archive written, if any
	Size     int64
}

// BuildGuestImage layers the guest binaries onto an image
// (images.GuestDockerfile: agentbox, and agentbox-guest of its build when
// it is beside it) and tags it images.GuestRef(base, id), keyed by both
// binaries' hashes (images.GuestKey): the image a backend that cannot
// bind-mount the host's binary (Kubernetes) runs. An image with that tag built from the same base
// image ID is up to date. It then writes the image to Save and pushes it
// to Push, where they are set.
func BuildGuestImage(ctx context.Context, cli *client.Client, o GuestImageOptions) (GuestImageResult, error) {
	if o.Base == "" {
		o.Base = RuntimeImageRef
	}
	p := buildProgress{w: o.Progress, prefix: "[guest]"}
	if o.Progress == nil {
		p.w = io.Discard
	}
	bins, err := imageBinaries(o.Binary)
	if err != nil {
		return GuestImageResult{}, err
	}
	id, err := images.GuestKey(bins.Whole, bins.Small)
	if err != nil {
		return GuestImageResult{}, err
	}
	small := ""
	if bins.Small != "" {
		if small, err = images.GuestID(bins.Small); err != nil {
			return GuestImageResult{}, err
		}
	}
	res := GuestImageResult{Ref: images.GuestRef(o.Base, id), GuestID: id, Binary: bins.Whole, Small: bins.Small, Why: bins.Why}
	fail := func(what string, err error) (GuestImageResult, error) {
		return GuestImageResult{}, fmt.Errorf("guest image %s: %s: %w", res.Ref, what, err)
	}
	base, err := inspectBuildImage(ctx, cli, o.Base)
	if cerrdefs.IsNotFound(err) {
		hint := "build or load it"
		switch o.Base {
		case RuntimeImageRef:
			hint = "run `agentbox image build`"
		case TestImageRef:
			hint = "run `agentbox image build --test`"
		case OfficeImageRef:
			hint = "run `agentbox image build --office`"
		}
		return fail("base", fmt.Errorf("%s is not present: %s", o.Base, hint))
	}
	if err != nil {
		return fail("base", err)
	}
	if res.Ref == o.Base {
		// The base is this guest's image already (the reference an earlier
		// build printed): nothing to layer.
		if base.labels[images.LabelGuest] != id {
			return fail("base", fmt.Errorf("%s is named for guest %s but carries guest %q: rebuild it with `agentbox image build --guest`", o.Base, id, base.labels[images.LabelGuest]))
		}
		res.ID, res.Size, res.UpToDate = base.id, base.size, true
		p.printf("%s is up to date (%s)", res.Ref, buildShortID(base.id))
		if err := finishGuestImage(ctx, cli, o, &res, p); err != nil {
			return GuestImageResult{}, err
		}
		return res, nil
	}
	cur, err := inspectBuildImage(ctx, cli, res.Ref)
	switch {
	case err != nil && !cerrdefs.IsNotFound(err):
		return fail("inspect", err)
	case err == nil && !o.Force && cur.labels[images.LabelGuest] == id && cur.labels[LabelBaseID] == base.id:
		res.ID, res.Size, res.UpToDate = cur.id, cur.size, true
		p.printf("%s is up to date (%s)", res.Ref, buildShortID(cur.id))
	default:
		t := time.Now()
		if bins.Small != "" {
			p.printf("building %s: %s and %s (guest %s) on %s", res.Ref, bins.Whole, bins.Small, id, o.Base)
		} else {
			p.printf("building %s: %s alone (guest %s; %s) on %s", res.Ref, bins.Whole, id, bins.Why, o.Base)
		}
		ctxTar, err := guestContextTar(images.GuestDockerfile(), bins.Whole, bins.Small)
		if err != nil {
			return fail("context", err)
		}
		baseRef := o.Base
		resp, err := cli.ImageBuild(ctx, bytes.NewReader(ctxTar), client.ImageBuildOptions{
			Tags:        []string{res.Ref},
			Dockerfile:  "Dockerfile",
			BuildArgs:   map[string]*string{"BASE": &baseRef, "GUEST_ID": &id, "GUEST_SMALL": &small},
			Labels:      map[string]string{LabelBase: o.Base, LabelBaseID: base.id},
			Remove:      true,
			ForceRemove: true,
			Version:     build.BuilderV1,
		})
		if err != nil {
			return fail("start", err)
		}
		dec := newBuildStreamDecoder(p.w, p.prefix, time.Now)
		_, err = dec.decode(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fail("build", err)
		}
		if cur, err = inspectBuildImage(ctx, cli, res.Ref); err != nil {
			return fail("inspect the result", err)
		}
		res.ID, res.Size = cur.id, cur.size
		p.printf("built %s (%s) in %s", res.Ref, buildShortID(cur.id), images.FormatDuration(time.Since(t)))
	}
	if err := finishGuestImage(ctx, cli, o, &res, p); err != nil {
		return GuestImageResult{}, err
	}
	return res, nil
}

// finishGuestImage writes the built image to o.Save and pushes it to
// o.Push, where they are set.
func finishGuestImage(ctx context.Context, cli *client.Client, o GuestImageOptions, res *GuestImageResult, p buildProgress) error {
	if o.Save != "" {
		if err := saveImage(ctx, cli, res.Ref, o.Save); err != nil {
			return fmt.Errorf("guest image %s: save: %w", res.Ref, err)
		}
		res.Saved = o.Save
		p.printf("saved %s to %s", res.Ref, o.Save)
	}
	if o.Push != "" {
		target := images.GuestRef(o.Push, res.GuestID)
		if err := pushImage(ctx, cli, res.Ref, target); err != nil {
			return fmt.Errorf("guest image %s: push %s: %w", res.Ref, target, err)
		}
		res.Pushed = target
		p.printf("pushed %s", target)
	}
	return nil
}

// guestContextTar is the guest image's build context: the Dockerfile, and
// in the directory "opt" the binary whole as "agentbox" and small (if not
// "") as "agentbox-guest" (0555, owned by root).
func guestContextTar(dockerfile []byte, whole, small string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "opt/", Mode: 0o755, ModTime: time.Unix(0, 0), Typeflag: tar.TypeDir}); err != nil {
		return nil, err
	}
	files := []struct{ name, path string }{{"agentbox", whole}}
	if small != "" {
		files = append(files, struct{ name, path string }{guestenv.GuestName, small})
	}
	for _, f := range files {
		if err := addFile(tw, "opt/"+f.name, f.path); err != nil {
			return nil, fmt.Errorf("read the guest binary: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addFile writes the file at path into tw as name (0555, owned by root).
func addFile(tw *tar.Writer, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o555, Size: fi.Size(), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// saveImage writes ref as a `docker save` archive to path (written aside
// and renamed into place).
func saveImage(ctx context.Context, cli *client.Client, ref, path string) (err error) {
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, rc); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// pushImage tags ref as target and pushes it.
func pushImage(ctx context.Context, cli *client.Client, ref, target string) error {
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: target}); err != nil {
		return err
	}
	// The daemon uses the credentials it has for the registry; an empty
	// auth object is an anonymous push.
	resp, err := cli.ImagePush(ctx, target, client.ImagePushOptions{RegistryAuth: base64.URLEncoding.EncodeToString([]byte("{}"))})
	if err != nil {
		return err
	}
	defer resp.Close()
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return err
		}
		if m.Error != nil {
			return errors.New(m.Error.Message)
		}
	}
	return nil
}
