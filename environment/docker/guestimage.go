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

	"github.com/codegirl-games/agentbox/images"
)

// GuestImageOptions configure BuildGuestImage.
type GuestImageOptions struct {
	// Base is the image the guest is layered onto; default
	// RuntimeImageRef. It must be present.
	Base string
	// Binary is the agentbox binary to carry; empty means the running
	// executable — the whole agentbox, never the small agentbox-guest
	// beside it (guestenv.WholeBinary): serve in a cluster runs from
	// this image.
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
	GuestID  string // images.GuestID of the binary
	UpToDate bool   // nothing was built
	Pushed   string // the reference pushed, if any
	Saved    string // the archive written, if any
	Size     int64
}

// BuildGuestImage layers the guest binary onto an image
// (images.GuestDockerfile) and tags it images.GuestRef(base, id), keyed by
// the binary's hash: the image a backend that cannot bind-mount the host's
// binary (Kubernetes) runs. An image with that tag built from the same base
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
	bin, err := imageBinary(o.Binary)
	if err != nil {
		return GuestImageResult{}, err
	}
	id, err := images.GuestID(bin)
	if err != nil {
		return GuestImageResult{}, err
	}
	res := GuestImageResult{Ref: images.GuestRef(o.Base, id), GuestID: id}
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
		p.printf("building %s: %s (guest %s) on %s", res.Ref, bin, id, o.Base)
		data, err := os.ReadFile(bin)
		if err != nil {
			return fail("read the guest binary", err)
		}
		ctxTar, err := guestContextTar(images.GuestDockerfile(), data)
		if err != nil {
			return fail("context", err)
		}
		baseRef := o.Base
		resp, err := cli.ImageBuild(ctx, bytes.NewReader(ctxTar), client.ImageBuildOptions{
			Tags:        []string{res.Ref},
			Dockerfile:  "Dockerfile",
			BuildArgs:   map[string]*string{"BASE": &baseRef, "GUEST_ID": &id},
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

// guestContextTar is the guest image's build context: the Dockerfile and
// the binary as "agentbox" (0555, owned by root).
func guestContextTar(dockerfile, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, dockerfile}, {"agentbox", 0o555, binary}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
