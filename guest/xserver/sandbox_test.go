package xserver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

const sandboxEnv = "AGENTBOX_XSERVER_SANDBOX_INNER"

// TestSandboxed re-runs TestSandboxInner inside bubblewrap with the guest's
// constraints: read-only root, a non-root uid, HOME and /tmp on fresh tmpfs,
// no network (own network namespace).
func TestSandboxed(t *testing.T) {
	if os.Getenv(sandboxEnv) != "" {
		t.Skip("already inside the sandbox")
	}
	testenv.Require(t, testenv.Programs("Xvfb", "openbox", "bwrap"), testenv.Probe("bubblewrap able to make a user namespace here", canSandbox))
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--tmpfs", "/home", "--dir", "/home/sandbox",
		"--ro-bind", self, "/tmp/xserver.test",
		"--unshare-net", "--unshare-pid", "--unshare-ipc",
		"--unshare-user", "--uid", "65534", "--gid", "65534",
		"--die-with-parent",
		"--clearenv",
		"--setenv", "HOME", "/home/sandbox",
		"--setenv", "PATH", os.Getenv("PATH"),
		"--setenv", sandboxEnv, "1",
		"/tmp/xserver.test", "-test.run", "^TestSandboxInner$", "-test.v",
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bwrap, args...).CombinedOutput()
	t.Logf("inner run:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSandboxInner") {
		t.Fatalf("sandboxed run failed: %v", err)
	}
}

// canSandbox makes the smallest sandbox TestSandboxed needs: bubblewrap
// refuses when unprivileged user namespaces are off.
func canSandbox(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc",
		"--uid", "65534", "--gid", "65534", "--die-with-parent", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// TestSandboxInner is the body of TestSandboxed; it runs only inside the
// sandbox.
func TestSandboxInner(t *testing.T) {
	if os.Getenv(sandboxEnv) == "" {
		t.Skip("runs only inside TestSandboxed's sandbox")
	}
	if os.Getuid() == 0 {
		t.Fatal("expected a non-root uid inside the sandbox")
	}
	if err := os.WriteFile("/usr/agentbox-probe", nil, 0o600); err == nil {
		t.Fatal("root file system is writable")
	}
	if _, err := os.Stat(xserver.SocketDir); err == nil {
		t.Fatal("fresh /tmp already has .X11-unix")
	}
	s := xservertest.Start(t, xserver.Config{})
	fi, err := os.Stat(xserver.SocketDir)
	if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("%s: %v %v, want drwxrwxrwt", xserver.SocketDir, fi.Mode(), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	wm, err := xserver.StartWM(ctx, s.Display(), xserver.WMConfig{Dir: os.Getenv("HOME") + "/.config/openbox"})
	if err != nil {
		t.Fatal(err)
	}
	defer wm.Stop(context.Background())
	xc := connect(t, s.Display())
	if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
		t.Fatal(err)
	}
	// The guest's connection: MIT-SHM capture (SysV IPC in the sandbox's own
	// IPC namespace, non-root) and XTEST input.
	c, err := x11.Open(ctx, s.Display())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Capture(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !c.SHM() {
		t.Errorf("MIT-SHM not usable in the sandbox: %v", c.SHMFailure())
	}
	if err := c.TypeText(ctx, "é", 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("uid %d: Xvfb %s ready after %v, openbox after %v, SHM %v", os.Getuid(), s.Display(), s.ReadyAfter(), wm.ReadyAfter(), c.SHM())
}
