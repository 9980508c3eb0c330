package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
)

// requireCurrentImage needs the image built from this tree's Dockerfile
// (make images): an older build lacks what the tests below look for.
func requireCurrentImage(t *testing.T, ref string) {
	t.Helper()
	testenv.Require(t, testenv.Image(ref))
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := docker.InspectImage(ctx, cli, ref)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != docker.StatusCurrent {
		testenv.Require(t, testenv.Condition("image "+ref+" up to date", fmt.Errorf("it is %s (%s): make images", info.Status, info.Why)))
	}
}

// TestImagePrograms: `agentbox run NAME` runs a program of the image, the
// runtime image carries xterm, `agentbox image ls` says which image has
// which apps, and a program the image lacks is an error that names the
// image that has it.
func TestImagePrograms(t *testing.T) {
	requireCurrentImage(t, testenv.RuntimeImage)
	requireCurrentImage(t, testenv.TestImage)

	t.Run("image ls", func(t *testing.T) {
		r := agentbox(t, "image", "ls", "--json")
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		var list []docker.ImageInfo
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("image ls --json: %v\n%s", err, r.stdout)
		}
		apps := map[string][]string{}
		for _, i := range list {
			apps[i.Ref] = i.Apps
		}
		if a := apps[testenv.RuntimeImage]; !slices.Equal(a, []string{"xterm"}) {
			t.Errorf("%s carries %q, want xterm", testenv.RuntimeImage, a)
		}
		if a := apps[testenv.TestImage]; !slices.Contains(a, "xterm") || !slices.Contains(a, "xcalc") || !slices.Contains(a, "xeyes") {
			t.Errorf("%s carries %q, want xterm, xcalc, xeyes among them", testenv.TestImage, a)
		}
		table := agentbox(t, "image", "ls")
		if table.code != 0 || !strings.Contains(table.stdout, "APPS") || !strings.Contains(table.stdout, testenv.RuntimeImage) {
			t.Errorf("image ls:\n%s", table)
		}
	})

	t.Run("run xterm", func(t *testing.T) {
		r := agentbox(t, "run", "xterm", "--agent", "idle", "--agent-opt", "ms=300")
		if r.code != 0 {
			t.Fatalf("agentbox run xterm on %s: %s", testenv.RuntimeImage, r)
		}
		tr := openTrace(t, r.dir)
		if !tr.Run.App.InImage || tr.Run.App.Command != "xterm" || len(tr.Steps) == 0 || tr.Steps[0].Observation == nil {
			t.Fatalf("app %+v, %d steps: want the image's xterm observed", tr.Run.App, len(tr.Steps))
		}
		if !slices.ContainsFunc(tr.Steps[0].Observation.Windows, func(w observe.Window) bool { return w.Title == "xterm" }) {
			t.Errorf("no xterm window on the first screen: %+v", tr.Steps[0].Observation.Windows)
		}
	})

	t.Run("a program of the test image", func(t *testing.T) {
		r := agentbox(t, "run", "xcalc", "--agent", "idle", "--agent-opt", "ms=300")
		if out := r.stdout + r.stderr; r.code != 3 || !strings.Contains(out, `command "xcalc"`) || !strings.Contains(out, "xcalc is in "+testenv.TestImage) || !strings.Contains(out, ": add --image "+testenv.TestImage) {
			t.Errorf("run xcalc on %s: want exit 3 naming %s: %s", testenv.RuntimeImage, testenv.TestImage, r)
		}
		r = agentbox(t, "run", "xcalc", "--image", testenv.TestImage, "--agent", "idle", "--agent-opt", "ms=300")
		if r.code != 0 {
			t.Errorf("run xcalc --image %s: %s", testenv.TestImage, r)
		}
	})

	t.Run("a program no image has", func(t *testing.T) {
		r := agentbox(t, "run", "no-such-program", "--agent", "idle")
		if r.code != 3 || !strings.Contains(r.stdout+r.stderr, "no agentbox image here lists no-such-program") {
			t.Errorf("want exit 3 saying no image has it: %s", r)
		}
	})
}
