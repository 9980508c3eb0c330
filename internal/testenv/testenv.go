// Package testenv holds helpers for tests that need real Docker, real Xvfb
// or a built agentbox binary. Locally such tests skip with a clear message
// when a requirement is missing; under CI=true they fail instead, so a
// broken CI machine can never turn into a green run.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// CI reports whether the tests run under CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips the test locally and fails it under CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("CI=true and a requirement is missing: %s", msg)
	}
	t.Skipf("skipping: %s (CI=true would fail here)", msg)
}

// RequireDocker needs a Docker daemon that answers.
func RequireDocker(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err == nil {
		_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cli.Close()
	}
	if err != nil {
		Missing(t, "no Docker daemon: %v", err)
	}
}

// Images used by tests.
const (
	RuntimeImage = "agentbox/runtime:bookworm"
	TestImage    = "agentbox/test:bookworm"
)

// RequireImage needs a Docker daemon with the image present.
func RequireImage(t testing.TB, ref string) {
	t.Helper()
	RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		Missing(t, "docker client: %v", err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		Missing(t, "image %s is missing (make images): %v", ref, err)
	}
}

// RequireXvfb needs Xvfb on the host.
func RequireXvfb(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("Xvfb"); err != nil {
		Missing(t, "Xvfb is not installed (apt-get install xvfb)")
	}
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
// per process. Static, because the binary may run inside a container.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "agentbox-test-bin-")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
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
