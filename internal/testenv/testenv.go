// Package testenv holds what tests share about the machine they run on:
// one rule for what a test needs (Require) and static builds of this
// module's commands (Build).
//
// The rule has two tiers. `go test -short` (make test-short) runs unit
// tests only: a test that needs anything beyond Go — a Docker daemon, an
// image, Xvfb, Openbox, xev, bubblewrap, Chromium, a built agentbox binary,
// or minutes of CPU — is skipped before anything is checked, so the tier
// is fast and passes on a machine with Go alone, CI=true or not. Without
// -short every test runs; a missing requirement skips the test with the
// fix locally and fails it under CI=true, so a broken CI machine can never
// turn into a green run.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/moby/moby/client"
)

// CI reports whether the tests run under CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// A Need is something a test needs from the machine.
type Need struct {
	what string // what is needed, and how to get it
	// heavy: a test that needs it is not a unit test, and -short skips it.
	heavy bool
	check func(ctx context.Context) error // nil when present
}

// checkTimeout bounds each check (a Docker ping on a loaded machine).
const checkTimeout = 10 * time.Second

// Require states what the test needs. Under -short a test with any heavy
// need is skipped at once (nothing is checked); otherwise every need is
// checked, and a missing one skips the test locally and fails it under
// CI=true.
func Require(t testing.TB, needs ...Need) {
	t.Helper()
	if testing.Short() {
		var heavy []string
		for _, n := range needs {
			if n.heavy {
				heavy = append(heavy, n.what)
			}
		}
		if len(heavy) > 0 {
			t.Skipf("-short (unit tests only): needs %s", strings.Join(heavy, "; "))
		}
	}
	for _, n := range needs {
		if n.check == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		err := n.check(ctx)
		cancel()
		if err != nil {
			missing(t, n.what, err)
		}
	}
}

// missing skips the test locally and fails it under CI.
func missing(t testing.TB, what string, err error) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true and a requirement is missing: %s: %v", what, err)
	}
	t.Skipf("skipping: needs %s: %v (CI=true would fail here)", what, err)
}

// Docker needs a Docker daemon that answers.
func Docker() Need {
	return Need{what: "a Docker daemon (start dockerd)", heavy: true, check: pingDocker}
}

func pingDocker(ctx context.Context) error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

// Images used by tests.
const RuntimeImage = "agentbox/runtime:bookworm"

// TestImage is the test image, or $AGENTBOX_TEST_IMAGE: a build of it
// under another tag, tried before it replaces the shared one.
var TestImage = envOr("AGENTBOX_TEST_IMAGE", "agentbox/test:bookworm")

// OfficeImage is the office image (LibreOffice, Mousepad, GIMP, Chromium):
// agentbox image build --office.
const OfficeImage = "agentbox/office:bookworm"

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Image needs a Docker daemon with the image present.
func Image(ref string) Need {
	return Need{what: "the image " + ref + " (make images)", heavy: true, check: func(ctx context.Context) error {
		if err := pingDocker(ctx); err != nil {
			return fmt.Errorf("no Docker daemon: %w", err)
		}
		cli, err := client.New(client.FromEnv)
		if err != nil {
			return err
		}
		defer cli.Close()
		_, err = cli.ImageInspect(ctx, ref)
		return err
	}}
}

// debian names the Debian package of each program tests run.
var debian = map[string]string{
	"Xvfb": "xvfb", "openbox": "openbox", "xev": "x11-utils", "xterm": "xterm",
	"xcalc": "x11-apps", "xdotool": "xdotool", "bwrap": "bubblewrap",
	"ffmpeg": "ffmpeg", "ffprobe": "ffmpeg", "python3": "python3", "chromium": "chromium",
	"dbus-daemon": "dbus-daemon", "zenity": "zenity", "speedcrunch": "speedcrunch",
	"localc": "libreoffice-calc", "lowriter": "libreoffice-writer", "loimpress": "libreoffice-impress",
	"mousepad": "mousepad", "gimp": "gimp",
}

// Programs needs executables in PATH: X servers, window managers, apps,
// bubblewrap, ffmpeg.
func Programs(names ...string) Need {
	var pkgs []string
	for _, n := range names {
		if p := debian[n]; p != "" && !strings.Contains(strings.Join(pkgs, " "), p) {
			pkgs = append(pkgs, p)
		}
	}
	what := strings.Join(names, ", ") + " in PATH"
	if len(pkgs) > 0 {
		what += " (apt-get install " + strings.Join(pkgs, " ") + ")"
	}
	return Need{what: what, heavy: true, check: func(context.Context) error {
		var errs []error
		for _, n := range names {
			if _, err := exec.LookPath(n); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}}
}

// Probe needs what check finds: something beyond Go that Programs cannot
// tell by a name in PATH (a backend that can make a sandbox here, a
// browser). what names it and the fix.
func Probe(what string, check func(ctx context.Context) error) Need {
	return Need{what: what, heavy: true, check: check}
}

// Slow marks a test that needs minutes or every CPU (a load test, a
// measurement, a flood): it is skipped under -short.
func Slow(why string) Need { return Need{what: why, heavy: true} }

// Condition needs a property of the machine that costs nothing to check
// (root, a kernel feature, a header file): err is why it does not hold, nil
// when it does. It is checked under -short too.
func Condition(what string, err error) Need {
	return Need{what: what, check: func(context.Context) error { return err }}
}

// Root needs the tests to run as root.
func Root(why string) Need {
	var err error
	if os.Geteuid() != 0 {
		err = fmt.Errorf("running as uid %d", os.Geteuid())
	}
	return Condition("root ("+why+")", err)
}

// RepoRoot is the module's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// Build compiles a main package of this module (e.g. "./cmd/agentbox")
// statically into a directory that lives as long as the test process, once
// per process. Static, because the binary may run inside a container. A
// test that builds a binary runs it: it is end to end, so -short skips it.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	Require(t, Slow("builds and runs "+pkg+" (end to end)"))
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	dir, err := owner.TempDir("test-bin")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	pkgs := []string{pkg}
	if pkg == "./cmd/agentbox" {
		// As make builds it: with the small guest beside it, which the
		// backends then run as the guest (guestenv.Sibling).
		pkgs = append(pkgs, "./cmd/agentbox-guest")
	}
	for _, p := range pkgs {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, filepath.Base(p)), p)
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", p, err, b)
		}
	}
	built[pkg] = out
	return out
}

// CleanupBuilds removes what Build made; call it from TestMain after m.Run.
func CleanupBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	for _, p := range built {
		os.RemoveAll(filepath.Dir(p))
	}
	built = map[string]string{}
}

// Artifacts is where tests keep files for people to look at (CI keeps
// them): $AGENTBOX_ARTIFACTS, else ./artifacts at the repository root
// (ignored by git).
func Artifacts(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("AGENTBOX_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
