package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

var buildUpdateGolden = flag.Bool("update-build-golden", false, "rewrite the build stream golden files in testdata")

func TestBuildHash(t *testing.T) {
	df := []byte("FROM x\nRUN true\n")
	h := BuildHash(df, "sha256:aaaa", "runtime")
	// Computed independently: sha256 of "agentbox-image-build/1\nvariant runtime\nbase sha256:aaaa\ndockerfile 16\n" + df.
	// Stable across runs and releases: changing it rebuilds every user's
	// image, so it must be deliberate (bump buildHashVersion).
	const want = "sha256:db0e1d77720413e1f4d306186d93f8d2220d32dc76c316ac18e036eb80a5f48f"
	if len(h) != len("sha256:")+64 || !strings.HasPrefix(h, "sha256:") {
		t.Fatalf("BuildHash = %q", h)
	}
	if h != BuildHash(df, "sha256:aaaa", "runtime") {
		t.Error("BuildHash not deterministic")
	}
	if h != want {
		t.Errorf("BuildHash = %s, want %s (changed? bump buildHashVersion and update this)", h, want)
	}
	for _, other := range []string{
		BuildHash([]byte("FROM x\nRUN false\n"), "sha256:aaaa", "runtime"),
		BuildHash(df, "sha256:aaab", "runtime"),
		BuildHash(df, "sha256:aaaa", "test"),
		// no ambiguity between the fields
		BuildHash([]byte("sha256:aaaa\nFROM x\nRUN true\n"), "", "runtime"),
	} {
		if other == h {
			t.Errorf("different inputs, same hash %s", h)
		}
	}
}

func TestParseOfflineMode(t *testing.T) {
	for s, want := range map[string]OfflineMode{"": OfflineAuto, "auto": OfflineAuto, "Always": OfflineAlways, "never": OfflineNever} {
		got, err := ParseOfflineMode(s)
		if err != nil || got != want {
			t.Errorf("ParseOfflineMode(%q) = %v, %v", s, got, err)
		}
		if s != "" && !strings.EqualFold(got.String(), s) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if _, err := ParseOfflineMode("sometimes"); err == nil {
		t.Error("bad mode: no error")
	}
}

func TestBuildContextTar(t *testing.T) {
	df := []byte("FROM scratch\n")
	b, err := buildContextTar(df)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	h, err := tr.Next()
	if err != nil || h.Name != "Dockerfile" || h.Size != int64(len(df)) {
		t.Fatalf("entry %+v, %v", h, err)
	}
	got, _ := io.ReadAll(tr)
	if !bytes.Equal(got, df) {
		t.Errorf("content %q", got)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more entries: %v", err)
	}
}

// buildGoldenClock advances a quarter second per reading, so the durations in the
// decoder's output are deterministic.
func buildGoldenClock() func() time.Time {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	return func() time.Time {
		n++
		return t0.Add(time.Duration(n) * 250 * time.Millisecond)
	}
}

// TestBuildStreamGolden decodes streams recorded from real builds on Docker
// 20.10 (the runtime and test images, and a failing RUN) and compares the
// progress lines and the result with golden files. Run with -update-build-golden after a
// deliberate change of the output.
func TestBuildStreamGolden(t *testing.T) {
	for _, name := range []string{"runtime", "test", "fail"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "build_stream_"+name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			id, err := newBuildStreamDecoder(&out, "[x]", buildGoldenClock()).decode(bytes.NewReader(in))
			fmt.Fprintf(&out, "--- id: %s\n--- error: %v\n", id, err)
			golden := filepath.Join("testdata", "build_stream_"+name+".golden")
			if *buildUpdateGolden {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-build-golden to create it)", err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("output differs from %s (run with -update-build-golden to accept):\n%s", golden, got)
			}
			if lines := strings.Count(out.String(), "\n"); name != "fail" && lines > 60 {
				t.Errorf("%d progress lines: not compact", lines)
			}
		})
	}
}

func TestBuildStreamError(t *testing.T) {
	in, err := os.ReadFile("testdata/build_stream_fail.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	_, err = newBuildStreamDecoder(nil, "[x]", time.Now).decode(bytes.NewReader(in))
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("err = %#v, want *BuildError", err)
	}
	if len(be.Tail) != buildTailLines {
		t.Errorf("tail has %d lines, want %d", len(be.Tail), buildTailLines)
	}
	if last := be.Tail[len(be.Tail)-1]; last != "E: Unable to locate package agentbox-no-such-package" {
		t.Errorf("last line %q", last)
	}
	if !strings.HasPrefix(be.Step, "Step 3/4 : RUN") || !strings.Contains(be.Message, "returned a non-zero code: 100") {
		t.Errorf("step %q, message %q", be.Step, be.Message)
	}
	// stdout and stderr are not spliced into one line
	for _, l := range be.Tail {
		if strings.Contains(l, "line") && strings.Contains(l, "+ echo") && strings.Count(l, "line") > 1 {
			t.Errorf("spliced line %q", l)
		}
	}

	// A stream that ends without an image ID is an error too.
	_, err = newBuildStreamDecoder(nil, "[x]", time.Now).decode(strings.NewReader(`{"stream":"Step 1/1 : FROM x\n"}`))
	if err == nil || !strings.Contains(err.Error(), "without an image ID") {
		t.Errorf("truncated stream: err = %v", err)
	}
	_, err = newBuildStreamDecoder(nil, "[x]", time.Now).decode(strings.NewReader(`{"stream":"Step 1/1 : FROM x\n"}{"str`))
	if err == nil || !strings.Contains(err.Error(), "read build output") {
		t.Errorf("broken stream: err = %v", err)
	}
}

// fakeBuildClient is an in-memory daemon for the resolution and
// up-to-date logic.
type fakeBuildClient struct {
	mu      sync.Mutex
	images  map[string]client.ImageInspectResult
	nextID  int
	builds  []client.ImageBuildOptions
	pulls   []string
	pullErr error
	failRun bool // builds fail with a RUN error
}

func newFakeBuildClient() *fakeBuildClient {
	return &fakeBuildClient{images: map[string]client.ImageInspectResult{}}
}

func (f *fakeBuildClient) add(ref string, labels map[string]string) string {
	f.nextID++
	id := fmt.Sprintf("sha256:%064x", f.nextID)
	f.images[ref] = client.ImageInspectResult{}
	r := f.images[ref]
	r.ID = id
	r.Size = 1000
	r.Config = &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: labels}}
	f.images[ref] = r
	return id
}

func (f *fakeBuildClient) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.images[ref]; ok {
		return r, nil
	}
	return client.ImageInspectResult{}, fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
}

func (f *fakeBuildClient) ImagePull(_ context.Context, ref string, _ client.ImagePullOptions) (client.ImagePullResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls = append(f.pulls, ref)
	if f.pullErr != nil {
		return nil, f.pullErr
	}
	f.add(ref, nil)
	return fakeBuildPull{io.NopCloser(strings.NewReader(""))}, nil
}

func (f *fakeBuildClient) ImageImport(context.Context, client.ImageImportSource, string, client.ImageImportOptions) (client.ImageImportResult, error) {
	return nil, errors.New("fake: no import")
}

func (f *fakeBuildClient) ImageBuild(_ context.Context, _ io.Reader, o client.ImageBuildOptions) (client.ImageBuildResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, o)
	if f.failRun {
		body := `{"stream":"Step 1/2 : FROM x\n"}{"stream":"Step 2/2 : RUN false\n"}{"stream":"oops\n"}` +
			`{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"},"error":"The command '/bin/sh -c false' returned a non-zero code: 1"}`
		return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(body))}, nil
	}
	id := f.add(o.Tags[0], o.Labels)
	body := fmt.Sprintf(`{"stream":"Step 1/1 : FROM %s\n"}{"aux":{"ID":%q}}{"stream":"Successfully built x\n"}`, *o.BuildArgs["BASE"], id)
	return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(body))}, nil
}

type fakeBuildPull struct{ io.ReadCloser }

func (fakeBuildPull) JSONMessages(context.Context) iter.Seq2[jsonstream.Message, error] {
	return func(func(jsonstream.Message, error) bool) {}
}
func (fakeBuildPull) Wait(context.Context) error { return nil }

func TestBuildImageFake(t *testing.T) {
	ctx := t.Context()
	var out bytes.Buffer
	f := newFakeBuildClient()
	baseID := f.add(OfflineBaseRef, nil)

	res, err := BuildImage(ctx, f, BuildOptions{Progress: &out})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.builds) != 1 || len(f.pulls) != 0 {
		t.Fatalf("builds %d, pulls %q", len(f.builds), f.pulls)
	}
	o := f.builds[0]
	df, _ := images.Dockerfile(images.VariantRuntime)
	hash := BuildHash(df, baseID, images.VariantRuntime)
	if *o.BuildArgs["BASE"] != OfflineBaseRef || o.PullParent || !o.Remove || !o.ForceRemove || o.Version != build.BuilderV1 ||
		o.Tags[0] != RuntimeImageRef || o.Labels[LabelBuildHash] != hash || o.Labels[LabelBaseID] != baseID {
		t.Errorf("build options %+v", o)
	}
	if res.UpToDate || res.Ref != RuntimeImageRef || res.Base != OfflineBaseRef || res.BaseID != baseID || res.ID != f.images[RuntimeImageRef].ID {
		t.Errorf("result %+v", res)
	}

	// Nothing changed: up to date, the builder untouched.
	res, err = BuildImage(ctx, f, BuildOptions{Progress: &out})
	if err != nil || !res.UpToDate || len(f.builds) != 1 {
		t.Fatalf("second call: %+v, %v, %d builds", res, err, len(f.builds))
	}
	if ok, err := ImageUpToDate(ctx, f, BuildOptions{}); !ok || err != nil {
		t.Errorf("ImageUpToDate = %v, %v", ok, err)
	}
	if !strings.Contains(out.String(), "[runtime] agentbox/runtime:bookworm is up to date") {
		t.Errorf("progress:\n%s", out.String())
	}
	// Force rebuilds.
	if res, err = BuildImage(ctx, f, BuildOptions{Force: true}); err != nil || res.UpToDate || len(f.builds) != 2 {
		t.Errorf("forced: %+v, %v", res, err)
	}
	// A changed input (here: the base) rebuilds.
	f.add(OfflineBaseRef, nil)
	if ok, _ := ImageUpToDate(ctx, f, BuildOptions{}); ok {
		t.Error("new base: still up to date")
	}
	if res, err = BuildImage(ctx, f, BuildOptions{}); err != nil || res.UpToDate || len(f.builds) != 3 {
		t.Errorf("new base: %+v, %v", res, err)
	}

	// A local debian:bookworm-slim is preferred in auto mode, ignored in always.
	slimID := f.add(images.DefaultBase, nil)
	if res, _ = BuildImage(ctx, f, BuildOptions{}); res.BaseID != slimID {
		t.Errorf("auto with slim: base %s", res.Base)
	}
	if res, _ = BuildImage(ctx, f, BuildOptions{Offline: OfflineAlways}); res.Base != OfflineBaseRef {
		t.Errorf("always: base %s", res.Base)
	}
}

func TestBuildImageFakeLayeredVariants(t *testing.T) {
	for _, c := range []struct{ variant, tag string }{
		{images.VariantTest, TestImageRef},
		{images.VariantOffice, OfficeImageRef},
	} {
		t.Run(c.variant, func(t *testing.T) {
			ctx := t.Context()
			f := newFakeBuildClient()
			f.add(OfflineBaseRef, nil)
			if ok, err := ImageUpToDate(ctx, f, BuildOptions{Variant: c.variant}); ok || err != nil {
				t.Errorf("ImageUpToDate without runtime = %v, %v", ok, err)
			}
			res, err := BuildImage(ctx, f, BuildOptions{Variant: c.variant})
			if err != nil {
				t.Fatal(err)
			}
			if len(f.builds) != 2 || f.builds[0].Tags[0] != RuntimeImageRef || f.builds[1].Tags[0] != c.tag {
				t.Fatalf("builds %+v", f.builds)
			}
			rtID := f.images[RuntimeImageRef].ID
			df, _ := images.Dockerfile(c.variant)
			if *f.builds[1].BuildArgs["BASE"] != RuntimeImageRef || res.BaseID != rtID || res.Ref != c.tag ||
				f.builds[1].Labels[LabelBuildHash] != BuildHash(df, rtID, c.variant) {
				t.Errorf("%s build %+v, result %+v", c.variant, f.builds[1], res)
			}
			if res, err = BuildImage(ctx, f, BuildOptions{Variant: c.variant}); err != nil || !res.UpToDate || len(f.builds) != 2 {
				t.Errorf("second call: %+v, %v", res, err)
			}
		})
	}
}

func TestBuildImageFakeErrors(t *testing.T) {
	ctx := t.Context()

	f := newFakeBuildClient()
	f.pullErr = errors.New("dial tcp: lookup registry-1.docker.io: no such host")
	_, err := BuildImage(ctx, f, BuildOptions{Offline: OfflineNever})
	if err == nil || !strings.Contains(err.Error(), "pull debian:bookworm-slim") || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("never, no registry: %v", err)
	}
	_, err = BuildImage(ctx, f, BuildOptions{Base: "example/base:1", Offline: OfflineAlways})
	if err == nil || !strings.Contains(err.Error(), "not present locally") || len(f.pulls) != 1 {
		t.Errorf("always, missing explicit base: %v (pulls %q)", err, f.pulls)
	}
	if _, err := BuildImage(ctx, f, BuildOptions{Variant: "debug"}); err == nil {
		t.Error("unknown variant: no error")
	}

	f = newFakeBuildClient()
	f.add(OfflineBaseRef, nil)
	f.failRun = true
	_, err = BuildImage(ctx, f, BuildOptions{})
	var be *BuildError
	if !errors.As(err, &be) || be.Ref != RuntimeImageRef || be.Step != "Step 2/2 : RUN false" || len(be.Tail) == 0 || be.Tail[len(be.Tail)-1] != "oops" {
		t.Errorf("failed RUN: %#v", err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "build image agentbox/runtime:bookworm: The command") {
		t.Errorf("error text %q", err)
	}
}

// buildTestClient connects to the local daemon (testenv.Require: skipped
// under -short, and without a daemon locally; failed under CI=true).
func buildTestClient(t *testing.T) *client.Client {
	t.Helper()
	testenv.Require(t, testenv.Docker())
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestBuildImageIntegration builds the runtime image for real (minutes the
// first time: debootstrap where no registry answers, then apt), checks a
// second call is up to date (nothing built), and runs Xvfb and openbox in a
// hardened container from it.
func TestBuildImageIntegration(t *testing.T) {
	testenv.Require(t, testenv.Slow("builds the runtime image (minutes the first time)"))
	cli := buildTestClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()

	res, err := BuildImage(ctx, cli, BuildOptions{Progress: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first call: %s %s up-to-date=%v in %s", res.Ref, buildShortID(res.ID), res.UpToDate, res.Duration)

	start := time.Now()
	again, err := BuildImage(ctx, cli, BuildOptions{Progress: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	// Up to date and the same image: nothing was built. How long the
	// check takes is logged, not bounded (a busy machine is no defect).
	d := time.Since(start)
	if !again.UpToDate || again.ID != res.ID {
		t.Errorf("second call: up-to-date=%v id=%s in %s; want up to date, %s", again.UpToDate, again.ID, d, res.ID)
	}
	t.Logf("second call: up to date in %s", d)

	for _, cmd := range [][]string{{"Xvfb", "-help"}, {"openbox", "--version"}} {
		code, out := runBuildTestContainer(ctx, t, cli, res.Ref, cmd)
		if code != 0 {
			t.Errorf("%q in %s: exit %d\n%s", cmd, res.Ref, code, out)
		}
	}
}

// runBuildTestContainer runs cmd in a hardened container (no network,
// read-only root, user 1000, no capabilities) and returns its exit code and
// output. The container is removed on every path.
func runBuildTestContainer(ctx context.Context, t *testing.T, cli *client.Client, ref string, cmd []string) (int64, string) {
	t.Helper()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:  ref,
			Cmd:    cmd,
			User:   "1000:1000",
			Env:    []string{"HOME=/tmp/home"},
			Tty:    true, // one raw output stream
			Labels: map[string]string{"dev.agentbox.test": t.Name()},
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    network.NetworkNone,
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			Tmpfs:          map[string]string{"/tmp": "rw,size=16m"},
		},
	})
	if err != nil {
		t.Fatalf("create %q: %v", cmd, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container: %v", err)
		}
	}()
	wait := cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start %q: %v", cmd, err)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err := <-wait.Error:
		t.Fatalf("wait %q: %v", cmd, err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs %q: %v", cmd, err)
	}
	defer logs.Close()
	out, _ := io.ReadAll(io.LimitReader(logs, 64<<10))
	return code, string(out)
}
