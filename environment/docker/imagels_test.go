package docker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/images"
)

// fakeImages is fakeBuildClient with an image list: every image with
// images.LabelImage, its tags gathered by ID (the only filter ListImages
// uses), plus untagged ones.
type fakeImages struct {
	*fakeBuildClient
	untagged []image.Summary
}

func (f fakeImages) ImageList(_ context.Context, o client.ImageListOptions) (client.ImageListResult, error) {
	byID := map[string]*image.Summary{}
	var order []string
	for ref, r := range f.images {
		if _, ok := r.Config.Labels[images.LabelImage]; !ok {
			continue
		}
		s, ok := byID[r.ID]
		if !ok {
			s = &image.Summary{ID: r.ID, Size: r.Size, Labels: r.Config.Labels, Created: 1764586000}
			byID[r.ID] = s
			order = append(order, r.ID)
		}
		s.RepoTags = append(s.RepoTags, ref)
	}
	var res client.ImageListResult
	for _, id := range order {
		slices.Sort(byID[id].RepoTags)
		res.Items = append(res.Items, *byID[id])
	}
	res.Items = append(res.Items, f.untagged...)
	return res, nil
}

// builtLabels are the labels BuildImage gives an image of role built from
// this tree's Dockerfile on base (ID baseID).
func builtLabels(t *testing.T, role, base, baseID, apps string) map[string]string {
	t.Helper()
	df, err := images.Dockerfile(role)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		images.LabelImage: role, LabelBase: base, LabelBaseID: baseID,
		LabelBuildHash: BuildHash(df, baseID, role), LabelApps: apps,
	}
}

func TestListImages(t *testing.T) {
	f := fakeImages{fakeBuildClient: newFakeBuildClient()}
	baseID := f.add(OfflineBaseRef, map[string]string{images.LabelImage: "base"})
	rtID := f.add(RuntimeImageRef, builtLabels(t, images.VariantRuntime, OfflineBaseRef, baseID, "xterm"))
	f.add(TestImageRef, builtLabels(t, images.VariantTest, RuntimeImageRef, rtID, "xterm xcalc"))
	f.add(OfficeImageRef, builtLabels(t, images.VariantOffice, RuntimeImageRef, rtID, "localc gimp"))
	// Built on a runtime image that was rebuilt since.
	f.add("agentbox/test:old-base", builtLabels(t, images.VariantTest, RuntimeImageRef, "sha256:gone", "xterm xcalc"))
	// Built by an older agentbox: another Dockerfile, no apps label.
	old := builtLabels(t, images.VariantRuntime, OfflineBaseRef, baseID, "")
	old[LabelBuildHash] = "sha256:older"
	delete(old, LabelApps)
	f.add("agentbox/runtime:old", old)
	f.add("debian:bookworm-slim", map[string]string{}) // not agentbox's: not listed
	// Guest images: the test image and the binary (labels as BuildGuestImage
	// and images/Dockerfile.guest set them), one on a base rebuilt since.
	guest := func(baseID string) map[string]string {
		return map[string]string{images.LabelImage: images.RoleGuest, LabelBase: TestImageRef, LabelBaseID: baseID,
			LabelBuildHash: "", LabelApps: "xterm xcalc", images.LabelGuest: "0123456789abcdef"}
	}
	testID := f.images[TestImageRef].ID
	f.add("agentbox/test:bookworm-guest-0123456789abcdef", guest(testID))
	f.add("agentbox/test:bookworm-guest-fedcba9876543210", guest("sha256:gone"))
	f.untagged = []image.Summary{{ID: "sha256:dangling", RepoTags: []string{"<none>:<none>"}, Labels: map[string]string{images.LabelImage: "runtime"}}}

	list, err := ListImages(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ ref, role, status, why, apps string }
	var got []row
	for _, i := range list {
		apps := "nil"
		if i.Apps != nil {
			apps = "[" + strings.Join(i.Apps, " ") + "]"
		}
		got = append(got, row{i.Ref, i.Role, i.Status, i.Why, apps})
	}
	want := []row{
		{OfflineBaseRef, "base", StatusBase, "", "nil"},
		{"agentbox/runtime:bookworm", "runtime", StatusCurrent, "", "[xterm]"},
		{"agentbox/runtime:old", "runtime", StatusOutdated, "built from another images/Dockerfile", "nil"},
		{"agentbox/test:bookworm", "test", StatusCurrent, "", "[xterm xcalc]"},
		{"agentbox/test:old-base", "test", StatusOutdated, "its base agentbox/runtime:bookworm was rebuilt since", "[xterm xcalc]"},
		{"agentbox/office:bookworm", "office", StatusCurrent, "", "[localc gimp]"},
		{"agentbox/test:bookworm-guest-0123456789abcdef", "guest", StatusCurrent, "", "[xterm xcalc]"},
		{"agentbox/test:bookworm-guest-fedcba9876543210", "guest", StatusOutdated, "its base agentbox/test:bookworm was rebuilt since", "[xterm xcalc]"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListImages:\n got %q\nwant %q", got, want)
	}

	refs, err := ImagesWithApp(context.Background(), f, "xcalc")
	if err != nil || !slices.Equal(refs, []string{"agentbox/test:bookworm", "agentbox/test:old-base"}) {
		t.Errorf("ImagesWithApp(xcalc) = %q, %v", refs, err)
	}
	if refs, _ := ImagesWithApp(context.Background(), f, "gimp"); !slices.Equal(refs, []string{OfficeImageRef}) {
		t.Errorf("ImagesWithApp(gimp) = %q", refs)
	}
	if refs, _ := ImagesWithApp(context.Background(), f, "inkscape"); len(refs) != 0 {
		t.Errorf("ImagesWithApp(inkscape) = %q", refs)
	}

	for _, c := range []struct{ ref, want string }{
		{RuntimeImageRef, "agentbox image build"},
		{TestImageRef, "agentbox image build --test"},
		{"agentbox/test:old-base", "agentbox image build --test --tag agentbox/test:old-base"},
		{OfficeImageRef, "agentbox image build --office"},
		{"agentbox/test:bookworm-guest-fedcba9876543210", "agentbox image build --guest --from agentbox/test:bookworm"},
	} {
		i, err := InspectImage(context.Background(), f, c.ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := RebuildCommand(i); got != c.want {
			t.Errorf("RebuildCommand(%s) = %q, want %q", c.ref, got, c.want)
		}
	}
}

func TestInspectImage(t *testing.T) {
	f := fakeImages{fakeBuildClient: newFakeBuildClient()}
	baseID := f.add(OfflineBaseRef, map[string]string{images.LabelImage: "base"})
	f.add(RuntimeImageRef, builtLabels(t, images.VariantRuntime, OfflineBaseRef, baseID, "xterm"))
	f.add("debian:bookworm-slim", map[string]string{})

	i, err := InspectImage(context.Background(), f, RuntimeImageRef)
	if err != nil {
		t.Fatal(err)
	}
	if i.Role != "runtime" || i.Status != StatusCurrent || !slices.Equal(i.Apps, []string{"xterm"}) || i.Base != OfflineBaseRef || i.BaseID != baseID || i.BuildHash == "" {
		t.Errorf("runtime image: %+v", i)
	}
	i, err = InspectImage(context.Background(), f, "debian:bookworm-slim")
	if err != nil || i.Role != "" || i.Status != StatusForeign || i.Apps != nil {
		t.Errorf("a foreign image: %+v, %v", i, err)
	}
	if _, err := InspectImage(context.Background(), f, "nope:1"); !errors.Is(err, ErrNoImage) {
		t.Errorf("a missing image: %v, want ErrNoImage", err)
	}
}
