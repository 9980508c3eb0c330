package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// secretFD is the descriptor the tests leave open on a secret file when
// they start agentbox, as `agentbox run … 9</root/secret` in a shell would.
const secretFD = 9

// withSecretFD returns ExtraFiles that put f on secretFD.
func withSecretFD(f *os.File) []*os.File {
	files := make([]*os.File, secretFD-2)
	files[secretFD-3] = f
	return files
}

// 17. Inherited descriptors. agentbox started with descriptor 9 open on a
// root-only file (and whatever else the test's own parents left open):
// nothing in the sandbox holds any of it — the app inherits no descriptor
// above stderr (it reads every one it has), and no descriptor of Xvfb or
// Openbox (which the app copies with pidfd_getfd or reopens through
// /proc) reaches the file. Controls: the probe reads a file through its
// own descriptor and copies one from a child of its own inside the
// sandbox; on the host, given the same descriptor, it finds and reads it.
func TestSecurityInheritedDescriptors(t *testing.T) {
	secret := "agentbox-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	path := filepath.Join(t.TempDir(), "agentbox-secret-file")
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T) *os.File {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	leaked := func(p probeResult) bool {
		return strings.Contains(p.Info, secret) || strings.Contains(p.Info, "agentbox-secret-file")
	}
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			args := []string{"run", hostileApp(t, "fds"), "--script", writeScript(t, probeScript)}
			if backend == "local" {
				requireLocal(t)
				args = append(args, "--backend", "local")
			} else {
				testenv.Require(t, testenv.Image(testenv.TestImage))
				args = append(args, "--backend", "docker", "--image", testenv.TestImage)
			}
			r := agentboxFiles(t, withSecretFD(open(t)), args...)
			if r.code != 0 {
				t.Fatalf("the probe run failed:\n%s", r)
			}
			out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
			res := parseResults(t, string(out))
			expect(t, res, true, "", "read own descriptor (control)", "steal a descriptor of another process (control)")
			if !strings.Contains(res["read own descriptor (control)"].Info, "Name:") {
				t.Errorf("control: reading its own descriptor gave %q", res["read own descriptor (control)"].Info)
			}
			if !strings.Contains(res["steal a descriptor of another process (control)"].Info, "control-content") {
				t.Errorf("control: copying a child's descriptor gave %q", res["steal a descriptor of another process (control)"].Info)
			}
			for name, p := range res {
				switch {
				case leaked(p):
					t.Errorf("%s reaches the secret: %+v", name, p)
				case strings.HasPrefix(name, "inherited fd "):
					t.Errorf("the app has %s: %s", name, p.Info)
				case strings.HasPrefix(name, "fd "):
					t.Logf("%s: %.100s", name, p.Info)
				}
			}
			if backend == "local" {
				assertNoSandboxes(t, openTrace(t, r.dir).Run.ID)
			} else {
				assertNoContainers(t, openTrace(t, r.dir).Run.ID)
			}
		})
	}
	t.Run("host control", func(t *testing.T) {
		bin := testenv.Build(t, "./e2e/testdata/hostile")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "fds")
		cmd.ExtraFiles = withSecretFD(open(t))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		var b strings.Builder
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() && sc.Text() != "PROBES DONE" {
			b.WriteString(sc.Text() + "\n")
		}
		res := parseResults(t, b.String())
		p := res["inherited fd "+strconv.Itoa(secretFD)]
		if !p.OK || !leaked(p) {
			t.Errorf("control: on the host the probe did not read the secret through descriptor %d: %+v", secretFD, p)
		}
	})
}

// agentboxFiles is agentbox with extra descriptors (ExtraFiles[i] is
// descriptor 3+i).
func agentboxFiles(t *testing.T, files []*os.File, args ...string) result {
	t.Helper()
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	args = append(args[:2:2], append([]string{"--out", dir}, args[2:]...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.ExtraFiles = files
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), dir: dir}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentbox %v: %v", args, err)
	}
	return r
}
