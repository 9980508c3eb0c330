package envtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// moverDir stages the mover binary with a manifest.
func (s *suite) moverDir(t *testing.T, args string) string {
	t.Helper()
	if s.o.Mover == "" {
		t.Fatal("Options.Mover is not set")
	}
	data, err := os.ReadFile(s.o.Mover)
	if err != nil {
		t.Fatal(err)
	}
	return writeApp(t, `{"command":"mover","window_title":"mover","args":[`+args+`]}`, map[string]string{"mover": string(data)})
}

func greenCentroid(f *observe.Frame) (float64, int) {
	x, _, n := f.Centroid(func(r, g, b uint8) bool { return g > 180 && r < 80 && b < 80 })
	return x, n
}

func (s *suite) testLifecycle(t *testing.T) {
	b := s.newBox(t)
	info := b.env.Info()
	if info.Backend != s.o.Backend.Name() || info.ID == "" || info.Display == "" {
		t.Errorf("Info = %+v", info)
	}
	lr, err := b.staged(s.moverDir(t, ""), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lr.PID <= 0 || lr.Window == nil || lr.Window.Title != "mover" {
		t.Errorf("launch = %+v", lr)
	}
	// Openbox may still be drawing the frame's focus colours.
	b.do(action.Action{Kind: action.Wait, Until: action.UntilStable, StableMS: 200, MS: 5000})
	f, st := b.observe()
	if f.Width != 640 || f.Height != 480 || len(f.Pix) != 4*640*480 {
		t.Fatalf("frame %dx%d, %d bytes", f.Width, f.Height, len(f.Pix))
	}
	x0, n := greenCentroid(f)
	if n != 40*40 {
		t.Errorf("%d green pixels, want the 40×40 square", n)
	}
	if !st.Running || st.Exit != nil {
		t.Errorf("state = %+v, want running", st)
	}
	if len(st.Windows) != 1 || st.Windows[0].Title != "mover" || !st.Windows[0].Focused {
		t.Errorf("windows = %+v", st.Windows)
	}
	f2, _ := b.observe()
	if f2.Hash != f.Hash {
		t.Errorf("an unchanged screen changed hash")
	}
	b.do(action.Action{Kind: action.KeyDown, Key: "Right"}, action.Action{Kind: action.Wait, MS: 500}, action.Action{Kind: action.KeyUp, Key: "Right"})
	f3, _ := b.observe()
	x1, _ := greenCentroid(f3)
	if f3.Hash == f.Hash || x1-x0 < 60 {
		t.Errorf("after holding Right for 0.5 s the square moved %.0f px", x1-x0)
	}
	if !b.sink.waitFor(deliverWithin, func() bool { return strings.Contains(b.sink.stdout(), "mover: key Right up") }) {
		t.Errorf("stdout = %q", b.sink.stdout())
	}
	// Close is idempotent and ends everything.
	if err := b.env.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.env.Close(b.ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := b.env.Observe(b.ctx); err == nil {
		t.Error("Observe after Close succeeded")
	}
}

func (s *suite) testStagingAndOutput(t *testing.T) {
	big := make([]byte, 3<<20+12345) // more than one staging chunk
	rand.Read(big)
	sum := sha256.Sum256(big)
	script := `#!/bin/sh
echo "hello from $(basename "$0")"
cat data/msg.txt
readlink data/link
stat -c '%a %s' data/sub/deep.txt
sha256sum data/big.bin | cut -d' ' -f1
echo "to stderr" >&2
echo "cwd=$(pwd) home=$HOME display=$DISPLAY"
exit 7
`
	dir := writeApp(t, `{"command":"run.sh","wait_for_window":false}`, map[string]string{
		"run.sh":            script,
		"data/msg.txt":      "the message\n",
		"data/sub/deep.txt": "deep",
		"data/big.bin":      string(big),
	})
	if err := os.Symlink("msg.txt", filepath.Join(dir, "data", "link")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "data", "sub", "deep.txt"), 0o640)
	b := s.newBox(t)
	if _, err := b.staged(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !b.sink.waitFor(10*time.Second, func() bool { return b.sink.exited() != nil }) {
		t.Fatal("the app's exit was not reported")
	}
	if e := b.sink.exited(); e.Code != 7 || e.Signal != "" {
		t.Errorf("exit = %+v, want code 7", e)
	}
	want := []string{"hello from run.sh", "the message", "msg.txt", "640 4", hex.EncodeToString(sum[:])}
	lines := strings.Split(b.sink.stdout(), "\n")
	for i, w := range want {
		if i >= len(lines) || lines[i] != w {
			t.Errorf("stdout line %d = %q, want %q\nstdout:\n%s", i, at(lines, i), w, b.sink.stdout())
		}
	}
	if !strings.Contains(b.sink.stdout(), "home=/tmp/home display=:") {
		t.Errorf("environment line missing: %q", b.sink.stdout())
	}
	if b.sink.stderr() != "to stderr\n" {
		t.Errorf("stderr = %q", b.sink.stderr())
	}
	_, st := b.observe()
	if st.Running || st.Exit == nil || st.Exit.Code != 7 {
		t.Errorf("state after exit = %+v", st)
	}

	// A signal is reported by name.
	b2 := s.newBox(t)
	if _, err := b2.staged(writeApp(t, `{"command":"die.sh","wait_for_window":false}`, map[string]string{"die.sh": "#!/bin/sh\nkill -SEGV $$\n"}), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !b2.sink.waitFor(10*time.Second, func() bool { return b2.sink.exited() != nil }) {
		t.Fatal("the app's death was not reported")
	}
	if e := b2.sink.exited(); e.Signal != "SIGSEGV" {
		t.Errorf("exit = %+v, want SIGSEGV", e)
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<missing>"
}

func (s *suite) testLaunchErrors(t *testing.T) {
	t.Run("command not in image", func(t *testing.T) {
		b := s.newBox(t)
		_, err := b.staged(writeApp(t, `{"command":"no-such-program-here"}`, nil), 5*time.Second)
		if !errors.Is(err, environment.ErrAppStart) {
			t.Errorf("err = %v, want ErrAppStart", err)
		}
	})
	t.Run("window never appears", func(t *testing.T) {
		b := s.newBox(t)
		start := time.Now()
		_, err := b.staged(s.moverDir(t, `"-no-window"`), time.Second)
		if !errors.Is(err, environment.ErrNoWindow) {
			t.Errorf("err = %v, want ErrNoWindow", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the 1 s ready deadline took %v", d)
		}
	})
	t.Run("exits before its window", func(t *testing.T) {
		b := s.newBox(t)
		_, err := b.staged(writeApp(t, `{"command":"x.sh"}`, map[string]string{"x.sh": "#!/bin/sh\necho bye >&2\nexit 3\n"}), 10*time.Second)
		if !errors.Is(err, environment.ErrAppExited) {
			t.Errorf("err = %v, want ErrAppExited", err)
		}
		if e := b.sink.exited(); e == nil || e.Code != 3 {
			t.Errorf("exit = %+v", e)
		}
	})
}

func (s *suite) testWaits(t *testing.T) {
	b := s.newBox(t)
	if _, err := b.staged(s.moverDir(t, ""), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	met := func(r action.Result) bool { return r.Met != nil && *r.Met }

	r := b.do(action.Action{Kind: action.Wait, Until: action.UntilWindow, Title: "mov*", MS: 2000})[0]
	if !met(r) {
		t.Errorf("wait until window mov*: %+v", r)
	}
	start := time.Now()
	r, err := b.env.Act(b.ctx, action.Action{Kind: action.Wait, Until: action.UntilWindow, Title: "nope", MS: 300})
	if err != nil || met(r) || r.OK || !strings.Contains(r.Error, "not met") {
		t.Errorf("wait for a missing window: %+v %v", r, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("a 300 ms wait took %v", d)
	}
	r = b.do(action.Action{Kind: action.Wait, Until: action.UntilStable, StableMS: 200, MS: 3000})[0]
	if !met(r) {
		t.Errorf("wait until stable on a still screen: %+v", r)
	}
	b.do(action.Action{Kind: action.KeyDown, Key: "Right"})
	r = b.do(action.Action{Kind: action.Wait, Until: action.UntilChange, MS: 2000})[0]
	b.do(action.Action{Kind: action.KeyUp, Key: "Right"})
	if !met(r) {
		t.Errorf("wait until change while the square moves: %+v", r)
	}
	start = time.Now()
	b.do(action.Action{Kind: action.Wait, MS: 150})
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("wait 150 ms returned after %v", d)
	}
}

// testFreezeThaw: an environment that can freeze survives an agent that
// decides in no time (--freeze-while-thinking with a scripted or local
// agent): freeze and thaw back to back, many times, and the app still runs
// and answers after them.
func (s *suite) testFreezeThaw(t *testing.T) {
	b := s.newBox(t)
	f, ok := b.env.(environment.Freezer)
	if declared := environment.CapabilitiesOf(s.o.Backend).Freeze; ok != declared {
		t.Fatalf("the environment implements environment.Freezer: %v; the backend's Capabilities().Freeze: %v", ok, declared)
	}
	if !ok {
		t.Log("this backend does not freeze on this host (Capabilities().Freeze is false)")
		return
	}
	if _, err := b.staged(s.moverDir(t, ""), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	const cycles = 60
	t0 := time.Now()
	for i := range cycles {
		if err := f.Freeze(b.ctx); err != nil {
			t.Fatalf("cycle %d: Freeze: %v", i, err)
		}
		if err := f.Thaw(b.ctx); err != nil {
			t.Fatalf("cycle %d: Thaw: %v", i, err)
		}
	}
	t.Logf("%d freeze/thaw cycles in %v", cycles, time.Since(t0).Round(time.Millisecond))
	f0, _ := b.observe()
	x0, _ := greenCentroid(f0)
	b.do(action.Action{Kind: action.KeyDown, Key: "Right"}, action.Action{Kind: action.Wait, MS: 300}, action.Action{Kind: action.KeyUp, Key: "Right"})
	f1, st := b.observe()
	if x1, _ := greenCentroid(f1); x1-x0 < 30 || !st.Running {
		t.Errorf("after the cycles, holding Right for 0.3 s moved the square %.0f px (running: %v)", x1-x0, st.Running)
	}
}

// testGLX: the X server offers GLX by default, and not with Config.NoGLX
// (an app whose manifest says "opengl": false); xdpyinfo, run as the app,
// lists the server's extensions either way.
func (s *suite) testGLX(t *testing.T) {
	script := "#!/bin/sh\nxdpyinfo -queryExtensions | sed -n 's/^ *\\(GLX\\|XTEST\\|MIT-SHM\\)  *(.*/ext \\1/p'\n"
	for _, c := range []struct {
		name  string
		noGLX bool
	}{{"default", false}, {"no GLX", true}} {
		t.Run(c.name, func(t *testing.T) {
			b := s.newBox(t, func(cfg *environment.Config) { cfg.NoGLX = c.noGLX })
			if _, err := b.staged(writeApp(t, `{"command":"ext.sh","wait_for_window":false}`, map[string]string{"ext.sh": script}), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if !b.sink.waitFor(20*time.Second, func() bool { return b.sink.exited() != nil }) {
				t.Fatalf("xdpyinfo did not end\nstdout: %s\nstderr: %s", b.sink.stdout(), b.sink.stderr())
			}
			out := b.sink.stdout()
			if e := b.sink.exited(); e.Code != 0 || !strings.Contains(out, "ext XTEST") || !strings.Contains(out, "ext MIT-SHM") {
				// The positive control: xdpyinfo ran and listed the
				// extensions the guest needs.
				t.Fatalf("xdpyinfo: exit %+v\nstdout: %s\nstderr: %s", e, out, b.sink.stderr())
			}
			if got := strings.Contains(out, "ext GLX"); got == c.noGLX {
				t.Errorf("GLX listed: %v, want %v (NoGLX %v)\nstdout: %s", got, !c.noGLX, c.noGLX, out)
			}
		})
	}
}
