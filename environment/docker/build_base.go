package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/images"
)

// pullBuildBase pulls ref. With a reachTimeout, the registry must answer
// (the first progress message) within it, else the pull is abandoned; the
// download itself is bounded by ctx only.
func pullBuildBase(ctx context.Context, cli BuildClient, ref string, reachTimeout time.Duration, p buildProgress) (buildBase, error) {
	start := time.Now()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errNoAnswer := fmt.Errorf("no answer from the registry within %s", reachTimeout)
	var timer *time.Timer
	if reachTimeout > 0 {
		timer = time.AfterFunc(reachTimeout, func() { cancel(errNoAnswer) })
		defer timer.Stop()
	}
	p.printf("pulling %s …", ref)
	fail := func(err error) (buildBase, error) {
		if cause := context.Cause(pctx); errors.Is(cause, errNoAnswer) {
			err = errNoAnswer
		}
		return buildBase{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	resp, err := cli.ImagePull(pctx, ref, client.ImagePullOptions{})
	if err != nil {
		return fail(err)
	}
	defer resp.Close()
	layers := map[string]bool{}
	for m, err := range resp.JSONMessages(pctx) {
		if err != nil {
			return fail(err)
		}
		if timer != nil {
			timer.Stop() // the registry answered
		}
		if m.Error != nil {
			return fail(m.Error)
		}
		if m.ID != "" && m.Status == "Pull complete" {
			layers[m.ID] = true
		}
	}
	img, err := inspectBuildImage(ctx, cli, ref)
	if err != nil {
		return buildBase{}, fmt.Errorf("pull %s: inspect: %w", ref, err)
	}
	p.printf("pulled %s (%s, %d layers) in %s", ref, buildShortID(img.id), len(layers), images.FormatDuration(time.Since(start)))
	return buildBase{ref: ref, id: img.id}, nil
}

// importOfflineBase makes OfflineBaseRef: a debootstrap root (which needs
// root) streamed as a tar into ImageImport. The temporary root is removed on
// every path.
func importOfflineBase(ctx context.Context, cli BuildClient, mirror string, p buildProgress) (_ buildBase, err error) {
	fail := func(err error) (buildBase, error) {
		return buildBase{}, fmt.Errorf("offline base %s: %w", OfflineBaseRef, err)
	}
	p.printf("making %s offline: debootstrap (needs root) + import", OfflineBaseRef)
	rfs, err := images.BuildRootfs(ctx, images.RootfsOptions{Mirror: mirror, Progress: p.w, Prefix: p.prefix})
	if err != nil {
		return fail(err)
	}
	defer func() {
		if rerr := rfs.Remove(); rerr != nil && err == nil {
			err = fmt.Errorf("offline base %s: %w", OfflineBaseRef, rerr)
		}
	}()

	start := time.Now()
	pr, pw := io.Pipe()
	tarDone := make(chan error, 1)
	go func() {
		err := rfs.WriteTar(ctx, pw)
		pw.CloseWithError(err)
		tarDone <- err
	}()
	importErr := func() error {
		res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, OfflineBaseRef, client.ImageImportOptions{
			Message: fmt.Sprintf("agentbox offline base: debootstrap --variant=minbase %s from %s", rfs.Suite, rfs.Mirror),
			Changes: []string{
				"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				`CMD ["bash"]`,
				"LABEL " + images.LabelImage + "=base",
				"LABEL " + LabelMirror + "=" + rfs.Mirror,
			},
		})
		if err != nil {
			return err
		}
		defer res.Close()
		dec := json.NewDecoder(res)
		for {
			var m buildMessage
			if err := dec.Decode(&m); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := m.err(); err != nil {
				return err
			}
		}
	}()
	errImportEnded := errors.New("import ended")
	pr.CloseWithError(errImportEnded) // unblocks the writer if the daemon stopped reading
	tarErr := <-tarDone
	if importErr != nil {
		return fail(fmt.Errorf("import: %w", importErr))
	}
	if tarErr != nil && !errors.Is(tarErr, errImportEnded) {
		return fail(fmt.Errorf("import: %w", tarErr))
	}
	img, err := inspectBuildImage(ctx, cli, OfflineBaseRef)
	if err != nil {
		return fail(fmt.Errorf("inspect: %w", err))
	}
	p.printf("imported %s (%s, %s) in %s", OfflineBaseRef, buildShortID(img.id), images.FormatBytes(img.size), images.FormatDuration(time.Since(start)))
	return buildBase{ref: OfflineBaseRef, id: img.id}, nil
}
