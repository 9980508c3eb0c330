package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/images"
)

// LabelApps lists the X11 apps an agentbox image carries, separated by
// spaces; the image's build fails when one of them is not on its PATH.
const LabelApps = "dev.agentbox.apps"

// Image statuses.
const (
	// StatusCurrent: built by `agentbox image build` from this agentbox's
	// Dockerfile, on its base as that base is now.
	StatusCurrent = "current"
	// StatusOutdated: built from another Dockerfile (another agentbox), or
	// its base was rebuilt since; `agentbox image build` makes it anew.
	StatusOutdated = "outdated"
	// StatusBase: the offline base, imported rather than built.
	StatusBase = "base"
	// StatusForeign: not built by agentbox.
	StatusForeign = "not agentbox's"
)

// ImageInfo describes an image for `agentbox image ls` and `image inspect`.
type ImageInfo struct {
	Ref     string    `json:"ref"`            // the tag (or the reference asked for)
	Tags    []string  `json:"tags,omitempty"` // every tag of the image
	ID      string    `json:"id"`
	Role    string    `json:"role,omitempty"` // images.LabelImage: base, runtime, test, guest
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
	// Apps are the X11 apps it carries (LabelApps); nil when the image does
	// not say (not agentbox's, or built before the label existed).
	Apps      []string `json:"apps"`
	Base      string   `json:"base,omitempty"`
	BaseID    string   `json:"base_id,omitempty"`
	BuildHash string   `json:"build_hash,omitempty"`
	Status    string   `json:"status"`
	// Why says what makes it outdated.
	Why      string `json:"why,omitempty"`
	Platform string `json:"platform,omitempty"`
}

// ImageClient is the part of the Engine API client ListImages and
// InspectImage use; *client.Client satisfies it.
type ImageClient interface {
	ImageList(ctx context.Context, options client.ImageListOptions) (client.ImageListResult, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
}

// ErrNoImage says an image is not present.
var ErrNoImage = errors.New("no such image")

// ListImages lists the images agentbox built (those labelled
// images.LabelImage), one entry per tag: the base first, then the runtime,
// test and office images, each sorted by tag. Untagged ones (replaced by a
// rebuild) are left out.
func ListImages(ctx context.Context, cli ImageClient) ([]ImageInfo, error) {
	res, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", images.LabelImage)})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	ids := map[string]string{} // tag → ID, to tell whether a base was rebuilt
	for _, s := range res.Items {
		for _, t := range s.RepoTags {
			ids[t] = s.ID
		}
	}
	st := statusOf{ctx: ctx, cli: cli, ids: ids}
	var out []ImageInfo
	for _, s := range res.Items {
		tags := slices.DeleteFunc(slices.Clone(s.RepoTags), func(t string) bool { return t == "<none>:<none>" })
		for _, t := range tags {
			info := ImageInfo{Ref: t, Tags: tags, ID: s.ID, Size: s.Size, Created: time.Unix(s.Created, 0).UTC()}
			info.fromLabels(s.Labels)
			info.Status, info.Why = st.of(info)
			out = append(out, info)
		}
	}
	rank := map[string]int{"base": 0, images.VariantRuntime: 1, images.VariantTest: 2, images.VariantOffice: 3, images.RoleGuest: 4}
	sort.SliceStable(out, func(i, j int) bool {
		ri, oki := rank[out[i].Role]
		rj, okj := rank[out[j].Role]
		if !oki {
			ri = len(rank)
		}
		if !okj {
			rj = len(rank)
		}
		if ri != rj {
			return ri < rj
		}
		return out[i].Ref < out[j].Ref
	})
	return out, nil
}

// InspectImage describes one image, agentbox's or not. A missing image is
// ErrNoImage.
func InspectImage(ctx context.Context, cli ImageClient, ref string) (ImageInfo, error) {
	res, err := cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return ImageInfo{}, fmt.Errorf("%w: %s", ErrNoImage, ref)
	}
	if err != nil {
		return ImageInfo{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	info := ImageInfo{Ref: ref, Tags: res.RepoTags, ID: res.ID, Size: res.Size}
	if t, err := time.Parse(time.RFC3339Nano, res.Created); err == nil {
		info.Created = t.UTC()
	}
	if res.Os != "" {
		info.Platform = res.Os + "/" + res.Architecture
	}
	if res.Config != nil {
		info.fromLabels(res.Config.Labels)
	}
	info.Status, info.Why = statusOf{ctx: ctx, cli: cli}.of(info)
	return info, nil
}

func (i *ImageInfo) fromLabels(l map[string]string) {
	i.Role = l[images.LabelImage]
	i.Base, i.BaseID, i.BuildHash = l[LabelBase], l[LabelBaseID], l[LabelBuildHash]
	if apps, ok := l[LabelApps]; ok {
		i.Apps = strings.Fields(apps)
		if i.Apps == nil {
			i.Apps = []string{}
		}
	}
}

// statusOf tells whether an image is what `agentbox image build` would
// build now.
type statusOf struct {
	ctx context.Context
	cli ImageClient
	ids map[string]string // known tags' IDs; others are inspected
}

func (s statusOf) of(i ImageInfo) (status, why string) {
	switch i.Role {
	case "":
		return StatusForeign, ""
	case "base":
		return StatusBase, ""
	case images.RoleGuest:
		// Current while its base is the image it was layered onto.
		if id, ok := s.baseID(i.Base); ok && id != i.BaseID {
			return StatusOutdated, "its base " + i.Base + " was rebuilt since"
		}
		return StatusCurrent, ""
	}
	dockerfile, err := images.Dockerfile(i.Role)
	if err != nil || i.BuildHash == "" {
		return StatusForeign, ""
	}
	if i.BuildHash != BuildHash(dockerfile, i.BaseID, i.Role) {
		return StatusOutdated, "built from another " + dockerfileName(i.Role)
	}
	if id, ok := s.baseID(i.Base); ok && id != i.BaseID {
		return StatusOutdated, "its base " + i.Base + " was rebuilt since"
	}
	return StatusCurrent, ""
}

// baseID is the current ID of an image's base, if it has one here.
func (s statusOf) baseID(base string) (string, bool) {
	if base == "" {
		return "", false
	}
	id, ok := s.ids[base]
	if !ok {
		if res, err := s.cli.ImageInspect(s.ctx, base); err == nil {
			id, ok = res.ID, true
		}
	}
	return id, ok
}

func dockerfileName(role string) string {
	if images.Layered(role) {
		return "images/Dockerfile." + role
	}
	return "images/Dockerfile"
}

// RebuildCommand is the command that makes an image anew.
func RebuildCommand(i ImageInfo) string {
	cmd := "agentbox image build"
	if i.Role == images.RoleGuest {
		return cmd + " --guest --from " + i.Base
	}
	if images.Layered(i.Role) {
		cmd += " --" + i.Role
	}
	if def := map[string]string{images.VariantRuntime: RuntimeImageRef, images.VariantTest: TestImageRef, images.VariantOffice: OfficeImageRef}[i.Role]; i.Ref != def {
		cmd += " --tag " + i.Ref
	}
	return cmd
}

// ImagesWithApp lists the tags of the agentbox images that carry app.
func ImagesWithApp(ctx context.Context, cli ImageClient, app string) ([]string, error) {
	list, err := ListImages(ctx, cli)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, i := range list {
		if i.Role != images.RoleGuest && slices.Contains(i.Apps, app) { // a guest image is its base and the binary
			refs = append(refs, i.Ref)
		}
	}
	return refs, nil
}

// whereIsApp adds to the error of a program missing from the image which
// agentbox images carry it.
func (c *sandbox) whereIsApp(ctx context.Context, app string, err error) error {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	refs, lerr := ImagesWithApp(hctx, c.cli, app)
	if lerr != nil {
		return err
	}
	refs = slices.DeleteFunc(refs, func(r string) bool { return r == c.image })
	if len(refs) == 0 {
		return fmt.Errorf("%w; the image is %s, and no agentbox image here lists %s among its apps (agentbox image ls)", err, c.image, app)
	}
	return fmt.Errorf("%w; the image is %s; %s is in %s: add --image %s", err, c.image, app, strings.Join(refs, ", "), refs[0])
}
