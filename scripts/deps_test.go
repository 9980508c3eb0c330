// Package scripts holds the test of deps.sh, the set-up that `make demo`,
// `make test` and `make lint` run first (test files only).
package scripts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// stdPath is where a Debian machine keeps its programs.
var stdPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// world makes a directory everyone may read (nobody cannot enter a
// t.TempDir, which is 0700).
func world(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agentbox-deps-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// shadowPath returns a PATH of one directory that holds a link to every
// program of the standard PATH but the hidden ones.
func shadowPath(t *testing.T, hide ...string) string {
	t.Helper()
	dir := filepath.Join(world(t), "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hidden := map[string]bool{}
	for _, h := range hide {
		hidden[h] = true
	}
	for _, d := range stdPath {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if hidden[e.Name()] {
				continue
			}
			err := os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
			if err != nil && !errors.Is(err, os.ErrExist) { // the first on PATH wins
				t.Fatal(err)
			}
		}
	}
	return dir
}

// script copies deps.sh where any user may run it, as scripts/deps.sh
// beside images/Dockerfile.office (its office package list).
func script(t *testing.T) string {
	t.Helper()
	df, err := os.ReadFile("../images/Dockerfile.office")
	if err != nil {
		t.Fatal(err)
	}
	return scriptWith(t, df)
}

// scriptWith is script with the given images/Dockerfile.office.
func scriptWith(t *testing.T, dockerfile []byte) string {
	t.Helper()
	b, err := os.ReadFile("deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := world(t)
	for _, d := range []string{"scripts", "images"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "images", "Dockerfile.office"), dockerfile, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "scripts", "deps.sh")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOfficePackages: the office profile (and test's) asks for exactly the
// packages of images/Dockerfile.office's apt-get install, each by its
// name, those dpkg has not installed; a Dockerfile without that list is
// an error that names it.
func TestOfficePackages(t *testing.T) {
	testenv.Require(t, testenv.Programs("dpkg-query"))
	df, err := os.ReadFile("../images/Dockerfile.office")
	if err != nil {
		t.Fatal(err)
	}
	bogus := bytes.Replace(df, []byte("        mousepad \\\n"), []byte("        mousepad \\\n        agentbox-no-such-package \\\n"), 1)
	if bytes.Equal(bogus, df) {
		t.Fatal("images/Dockerfile.office: no mousepad line in its apt-get install")
	}
	r := runAs(t, true, strings.Join(stdPath, ":"), scriptWith(t, bogus), "--check", "office")
	if r.code != 1 || !strings.Contains(r.output, "the office image's agentbox-no-such-package (package agentbox-no-such-package)") {
		t.Errorf("exit %d: want 1 naming the package of the Dockerfile's list that is not installed\n%s", r.code, r.output)
	}
	if r := runAs(t, true, strings.Join(stdPath, ":"), scriptWith(t, []byte("FROM x\n")), "--check", "office"); r.code != 1 || !strings.Contains(r.output, "no apt-get install list in it") {
		t.Errorf("exit %d: want 1 saying the Dockerfile has no package list\n%s", r.code, r.output)
	}
}

type result struct {
	code   int
	output string
	took   time.Duration
}

// runAs runs the script with PATH and args, as nobody when the test runs
// as root (so the script takes its not-root branch), else as the user.
func runAs(t *testing.T, nobody bool, path, sh string, args ...string) result {
	t.Helper()
	cmd := exec.Command(sh, args...)
	cmd.Dir = filepath.Dir(sh)
	cmd.Env = []string{"PATH=" + path, "HOME=" + filepath.Dir(sh), "LANG=C.UTF-8"}
	if nobody && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	r := result{output: out.String(), took: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", sh, args, err)
	}
	t.Logf("%s %s: exit %d in %v\n%s", sh, strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.output)
	return r
}

// TestNotRoot: without root the script installs nothing, names what is
// missing with its Debian package, prints the one command that would install
// it, and exits 1 — asking only for what the target needs.
func TestNotRoot(t *testing.T) {
	sh := script(t)
	tests := []struct {
		name    string
		hide    []string
		profile string
		want    []string // in the output
		notWant []string
	}{
		{
			name:    "a test tool",
			hide:    []string{"xdotool"},
			profile: "test",
			want:    []string{"missing for 'test':", "  xdotool (package xdotool)\n", "not root, so nothing was installed", "\n  sudo " + sh + " test\n"},
		},
		{
			name:    "two tools of one package",
			hide:    []string{"ffmpeg", "ffprobe"},
			profile: "test",
			want:    []string{"  ffmpeg (package ffmpeg)\n", "  ffprobe (package ffmpeg)\n", "\n  sudo " + sh + " test\n"},
		},
		{
			name:    "docker",
			hide:    []string{"docker", "dockerd"},
			profile: "demo",
			want:    []string{"missing for 'demo':\n  docker (package docker.io)\n  dockerd (package docker.io)\n", "\n  sudo " + sh + " demo\n"},
		},
		{
			// The demo needs no test tool: a missing one is not asked for.
			name:    "demo without a test tool",
			hide:    []string{"xdotool", "docker", "dockerd"},
			profile: "demo",
			want:    []string{"docker.io", "\n  sudo " + sh + " demo\n"},
			notWant: []string{"xdotool"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAs(t, true, shadowPath(t, tt.hide...), sh, tt.profile)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.output, w) {
					t.Errorf("the output lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(r.output, w) {
					t.Errorf("the output names %q, which %s does not need", w, tt.profile)
				}
			}
			if strings.Contains(r.output, "installing") || strings.Contains(r.output, "starting") {
				t.Errorf("not root, yet it installed or started something")
			}
		})
	}
}

// TestUsage: a bad argument is exit 2 with the usage.
func TestUsage(t *testing.T) {
	sh := script(t)
	for _, args := range [][]string{{}, {"bogus"}, {"demo", "test"}, {"--force", "demo"}} {
		r := runAs(t, true, strings.Join(stdPath, ":"), sh, args...)
		if r.code != 2 || !strings.Contains(r.output, "usage: "+sh+" [--check] demo|images|test|lint|k8s|office|all") {
			t.Errorf("%q: exit %d, want 2 and the usage", args, r.code)
		}
	}
}

// TestReady is the positive control: on a machine set up by `make test`
// (CI), the checks find everything, and as root a second run changes
// nothing — the running dockerd is the one there was.
func TestReady(t *testing.T) {
	sh := script(t)
	path := strings.Join(stdPath, ":")
	if r := runAs(t, false, path, sh, "--check", "test"); r.code != 0 {
		testenv.Require(t, testenv.Condition("a machine set up for make test", fmt.Errorf("%s", strings.TrimSpace(r.output))))
	}
	if os.Geteuid() != 0 {
		return
	}
	before := dockerdPIDs(t)
	r := runAs(t, false, path, sh, "test")
	if r.code != 0 || r.output != "" {
		t.Errorf("as root with everything there: exit %d, output %q; want 0 and nothing", r.code, r.output)
	}
	if after := dockerdPIDs(t); after != before {
		t.Errorf("dockerd was %q, is %q: a daemon that answers must be left alone", before, after)
	}
	t.Logf("a run with everything there took %v", r.took.Round(time.Millisecond))
}

func dockerdPIDs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("pidof", "dockerd").Output()
	if err != nil {
		return "" // a remote daemon, or none here
	}
	return strings.TrimSpace(string(out))
}

// fakeDocker puts a docker client and a dockerd on PATH: dockerd records
// each start in STATE/starts and answers at once, or with DELAY=asked only
// once the client was asked and said no (the client answers once STATE/up
// exists); its process is named dockerd, as pidof sees it.
func fakeDocker(t *testing.T, bin string) {
	t.Helper()
	files := map[string]string{
		"docker": `#!/bin/bash
[ "$1" = version ] || { echo "fake docker: $*: not faked" >&2; exit 3; }
[ -e "$STATE/up" ] && { echo 99.0; exit 0; }
touch "$STATE/asked"
echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2
exit 1
`,
		"dockerd": `#!/bin/bash
echo $$ >>"$STATE/starts"
(
	if [ "$DELAY" = asked ]; then
		until [ -e "$STATE/asked" ]; do sleep 0.05; done
	fi
	touch "$STATE/up"
) &
exec -a dockerd sleep 600
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRootDaemon: as root the script starts a Docker daemon when none runs,
// waits for one that runs but does not answer yet, and never starts a
// second — each case in a PID namespace of its own, so the machine's real
// dockerd is out of sight, with a fake daemon.
func TestRootDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the script starts daemons only as root")
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs here: the script would start the real docker.service")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Require(t, testenv.Programs("unshare"))
	}
	sh := script(t)
	tests := []struct {
		name  string
		pre   string // the daemon already there: its DELAY, or none
		want  string
		empty bool // no output at all
	}{
		{name: "none runs: one is started", want: "starting dockerd"},
		{name: "one starts slowly: waited for", pre: "asked", want: "runs but does not answer yet; waiting"},
		{name: "one answers: left alone", pre: "now", empty: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := shadowPath(t, "docker", "dockerd")
			fakeDocker(t, bin)
			state := world(t)
			run := "exec " + sh + " demo"
			if tt.pre != "" {
				// Started before the script, and seen by pidof before it
				// runs; the answering one has answered.
				run = "DELAY=" + tt.pre + " dockerd & until pidof dockerd >/dev/null; do sleep 0.05; done; "
				if tt.pre == "now" {
					run += "until [ -e $STATE/up ]; do sleep 0.05; done; "
				}
				run += "exec " + sh + " demo"
			}
			cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", run)
			cmd.Env = []string{"PATH=" + bin, "HOME=" + state, "STATE=" + state, "DOCKERD_LOG=" + filepath.Join(state, "dockerd.log")}
			out, err := cmd.CombinedOutput()
			t.Logf("exit %v\n%s", err, out)
			if err != nil {
				t.Fatalf("exit %v, want 0", err)
			}
			starts, _ := os.ReadFile(filepath.Join(state, "starts"))
			if n := len(strings.Fields(string(starts))); n != 1 {
				t.Errorf("dockerd was started %d times, want once", n)
			}
			if tt.empty && len(out) != 0 {
				t.Errorf("with a daemon that answers: output %q, want none", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("the output lacks %q", tt.want)
			}
		})
	}
}
