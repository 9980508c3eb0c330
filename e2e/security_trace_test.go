package e2e

// Red team, round two, item 5: traces are input too. A trace may come from
// someone else or have been edited: view, view --embed, view --serve and
// replay read only plain files inside the trace directory, link only inside
// it, run no script but the report's own, answer only loopback names, and
// hold run.json's sandbox limits to the rules of the flags.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// craftedTrace is a real trace, tampered with: stderr.log is a link to a
// secret, screenshots/000002.png a link to a secret image, and step 3's
// screenshot a path out of the trace to it. It returns the trace, the
// secret image's bytes and the secret text.
func craftedTrace(t *testing.T) (dir string, secretPNG []byte, secretText string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "trace")
	synthTrace(t, dir, 4, 64, 64, true)
	secretText = "root:TOP-SECRET-SHADOW:19000:0:99999:7:::"
	shadow := filepath.Join(base, "shadow")
	must(t, os.WriteFile(shadow, []byte(secretText+"\n"), 0o600))
	// A valid PNG (a frame no step shows), so only confinement keeps it out.
	png, err := os.ReadFile(filepath.Join(dir, "screenshots", "000004.png"))
	must(t, err)
	secretPNG = append(png, []byte("TOP-SECRET-IMAGE")...)
	secretImg := filepath.Join(base, "secret.png")
	must(t, os.WriteFile(secretImg, secretPNG, 0o600))

	must(t, os.WriteFile(filepath.Join(dir, trace.StdoutFile), []byte("CONTROL-STDOUT\n"), 0o644))
	must(t, os.Remove(filepath.Join(dir, trace.StderrFile)))
	must(t, os.Symlink(shadow, filepath.Join(dir, trace.StderrFile)))
	must(t, os.Remove(filepath.Join(dir, "screenshots", "000002.png")))
	must(t, os.Symlink(secretImg, filepath.Join(dir, "screenshots", "000002.png")))
	steps, err := os.ReadFile(filepath.Join(dir, trace.StepsFile))
	must(t, err)
	steps = []byte(strings.Replace(string(steps), `"screenshots/000003.png"`, `"../../../../../../../..`+secretImg+`"`, 1))
	must(t, os.WriteFile(filepath.Join(dir, trace.StepsFile), steps, 0o644))
	return dir, secretPNG, secretText
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type reportData struct {
	Images []string `json:"images"`
	Logs   []struct {
		Name, URL, Tail string
	} `json:"logs"`
	Replay *struct {
		Diff, Compare string
	} `json:"replay"`
}

func readReportData(t *testing.T, path string) (string, reportData) {
	t.Helper()
	page, err := os.ReadFile(path)
	must(t, err)
	m := regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("%s: no data", path)
	}
	var d reportData
	must(t, json.Unmarshal(m[1], &d))
	return string(page), d
}

// TestSecurityTraceView: `stderr.log -> shadow` does not end up in
// report.html, nor a linked or out-of-trace screenshot, with or without
// --embed.
func TestSecurityTraceView(t *testing.T) {
	dir, secretPNG, secretText := craftedTrace(t)
	shot1, err := os.ReadFile(filepath.Join(dir, "screenshots", "000001.png"))
	must(t, err)
	for _, c := range []struct {
		name string
		args []string
		out  string
	}{
		{"linked", nil, filepath.Join(dir, "report.html")},
		{"embedded", []string{"--embed", "--out", filepath.Join(t.TempDir(), "r.html")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == "" {
				out = c.args[len(c.args)-1]
			}
			r := run0(t, append([]string{"view", dir}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("view: %s", r)
			}
			page, d := readReportData(t, out)
			for _, leak := range []string{secretText, "TOP-SECRET", base64.StdEncoding.EncodeToString(secretPNG)} {
				if strings.Contains(page, leak) {
					t.Errorf("report.html holds %.40q…", leak)
				}
			}
			for _, u := range d.Images {
				if strings.Contains(u, "..") || strings.HasSuffix(u, "000002.png") || strings.Contains(u, "secret") {
					t.Errorf("the report shows an image from outside the trace or through a link: %.80q", u)
				}
			}
			// Controls: the plain screenshot and stdout.log are there.
			want := "screenshots/000001.png"
			if len(c.args) > 0 {
				want = "data:image/png;base64," + base64.StdEncoding.EncodeToString(shot1)
			}
			if len(d.Images) == 0 || d.Images[0] != want || len(d.Logs) == 0 || !strings.Contains(d.Logs[0].Tail, "CONTROL-STDOUT") {
				t.Errorf("controls missing: images %.60q, logs %+v", d.Images, d.Logs)
			}
			if !strings.Contains(r.stderr, "not read") {
				t.Errorf("view does not say what it refused:\n%s", r)
			}
			if _, err := exec.LookPath("chromium"); err != nil {
				return
			}
			// The page works and says what it did not read.
			b := newBrowser(t, 1200, 800)
			b.open(t, "file://"+out)
			if text := jsEval[string](t, b, `document.getElementById("refused").innerText`); !strings.Contains(text, "stderr.log") || !strings.Contains(text, "symbolic link") {
				t.Errorf("refused banner: %q", text)
			}
		})
	}
}

// TestSecurityTraceServe: --serve answers only its own loopback names
// (DNS rebinding), lists no directory, serves only what the report needs,
// and never a file through a link.
func TestSecurityTraceServe(t *testing.T) {
	dir, secretPNG, secretText := craftedTrace(t)
	bin := testenv.Build(t, "./cmd/agentbox")
	cmd := exec.Command(bin, "view", dir, "--serve", "--addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // the server we started, by its pid
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(out)
	var base string
	for sc.Scan() {
		if m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/report\.html`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
			break
		}
	}
	if base == "" {
		t.Fatal("view --serve printed no URL")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	get := func(host, path string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+base+path, nil)
		must(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	// Controls: the page and a plain screenshot, to the bound address.
	if code, h, _ := get(base, "/report.html"); code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Errorf("GET /report.html: %d, CSP %q", code, h.Get("Content-Security-Policy"))
	}
	if code, h, _ := get(base, "/screenshots/000001.png"); code != 200 || h.Get("Content-Type") != "image/png" {
		t.Errorf("GET a plain screenshot: %d %s", code, h.Get("Content-Type"))
	}
	if code, _, _ := get("localhost:"+strings.Split(base, ":")[1], "/report.html"); code != 200 {
		t.Errorf("GET by localhost: %d", code)
	}
	for _, c := range []struct{ what, host, path string }{
		{"a linked screenshot", base, "/screenshots/000002.png"},
		{"a linked log", base, "/stderr.log"},
		{"a directory listing", base, "/screenshots/"},
		{"a file the report does not need", base, "/run.json"},
		{"a path out of the trace", base, "/../shadow"},
		{"another name (DNS rebinding)", "attacker.example:" + strings.Split(base, ":")[1], "/report.html"},
		{"another name, a plain file", "attacker.example", "/screenshots/000001.png"},
	} {
		code, _, body := get(c.host, c.path)
		if code == 200 || strings.Contains(body, secretText) || strings.Contains(body, string(secretPNG)) || strings.Contains(body, "000001.png") {
			t.Errorf("GET %s (%s, Host %s): %d %.80q", c.path, c.what, c.host, code, body)
		}
	}
}

// TestSecurityTraceReplayLink: a `compare` value "javascript:…" in
// replay.json does not become a link, and the report's policy would not run
// it anyway (no 'unsafe-inline' for script); the page still works.
func TestSecurityTraceReplayLink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "replayed")
	synthTrace(t, dir, 3, 64, 64, true)
	must(t, os.MkdirAll(filepath.Join(dir, "replay"), 0o755))
	png, err := os.ReadFile(filepath.Join(dir, "screenshots", "000001.png"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "replay", "diff-000001.png"), png, 0o644))
	rj, _ := json.Marshal(map[string]any{
		"verdict": "diverged", "message": "crafted",
		"divergence": map[string]any{"step": 1, "compare": "javascript:void(document.title='PWNED')", "diff": "replay/diff-000001.png"},
	})
	must(t, os.WriteFile(filepath.Join(dir, "replay.json"), rj, 0o644))
	if r := run0(t, "view", dir); r.code != 0 {
		t.Fatalf("view: %s", r)
	}
	page, d := readReportData(t, filepath.Join(dir, "report.html"))
	if d.Replay == nil || strings.Contains(strings.ToLower(d.Replay.Compare), "javascript") || d.Replay.Diff != "replay/diff-000001.png" {
		t.Errorf("replay links: %+v (want no compare link, the diff as control)", d.Replay)
	}
	csp := regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]*)"`).FindStringSubmatch(page)
	if csp == nil || strings.Contains(csp[1], "unsafe-inline") {
		t.Errorf("the report's policy: %q", csp)
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		return // the data and the policy are checked above
	}
	b := newBrowser(t, 1200, 800)
	b.open(t, "file://"+filepath.Join(dir, "report.html"))
	hrefs := jsEval[[]string](t, b, `Array.from(document.querySelectorAll("a")).map(a => a.protocol + " " + a.getAttribute("href"))`)
	sawDiff := false
	for _, h := range hrefs {
		if !strings.HasPrefix(h, "file: ") {
			t.Errorf("a link leaves the trace: %q", h)
		}
		sawDiff = sawDiff || h == "file: replay/diff-000001.png"
	}
	if !sawDiff {
		t.Errorf("the replay banner does not link the diff image (the control): %q", hrefs)
	}
	// The policy itself: a javascript: URL does not run on this page. The
	// browser either runs it (the title changes) or reports the policy
	// violation; wait for one of the two.
	b.do(t, "javascript: URL", chromedp.Evaluate[chromedp.Void](`(() => {
		document.addEventListener("securitypolicyviolation", () => { window.blockedByPolicy = true; });
		const a = document.createElement("a");
		a.href = "javascript:void(document.title='PWNED')";
		document.body.appendChild(a);
		a.click();
	})()`))
	b.waitFor(t, `window.blockedByPolicy === true || document.title === "PWNED"`)
	if title := jsEval[string](t, b, `document.title`); title == "PWNED" {
		t.Errorf("a javascript: link ran script on the report")
	}
}

// TestSecurityTraceReplayLimits: replay holds run.json's sandbox limits to
// the flags' rules before anything starts: out of range is a usage error
// naming run.json and the field; in range, replay says what it will use
// (in-process: nothing starts).
func TestSecurityTraceReplayLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "recorded")
	synthTrace(t, dir, 2, 64, 64, true)
	limits := func(mod func(l, run map[string]any)) {
		rewriteRun(t, dir, func(m map[string]any) {
			env := m["environment"].(map[string]any)
			l := map[string]any{"cpus": 1, "memory_mb": 1024, "pids": 256, "tmpfs_mb": 256, "shm_mb": 64}
			env["limits"] = l
			env["screen"] = map[string]any{"width": 640, "height": 480, "depth": 24}
			mod(l, m)
		})
	}
	// Control: the recorded limits are used and said; the replay then stops
	// at the app, which is not here.
	limits(func(map[string]any, map[string]any) {})
	r := cliMain(t, "replay", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "replay sandbox: screen 640x480, 1 CPU, 1024 MiB memory, 256 processes, 256 MiB /tmp, 64 MiB /dev/shm") || !strings.Contains(r.stderr, "the recorded app /nonexistent/synthetic-app") {
		t.Errorf("control: want the sandbox said, then exit 2 for the missing app:\n%s", r)
	}
	for _, c := range []struct {
		name string
		mod  func(l, run map[string]any)
		want string
	}{
		{"a million processes", func(l, _ map[string]any) { l["pids"] = 1000000 }, "run.json environment.limits.pids is 1000000"},
		{"8 TB of memory", func(l, _ map[string]any) { l["memory_mb"] = 8 << 20 }, "run.json environment.limits.memory_mb is 8388608 MiB"},
		{"a hundred thousand CPUs", func(l, _ map[string]any) { l["cpus"] = 100000 }, "run.json environment.limits.cpus is 100000"},
		{"a huge /tmp", func(l, _ map[string]any) { l["tmpfs_mb"] = 1 << 30 }, "run.json environment.limits.tmpfs_mb is 1073741824 MiB"},
		{"a huge screen", func(_, m map[string]any) {
			m["environment"].(map[string]any)["screen"] = map[string]any{"width": 100000, "height": 100000, "depth": 24}
		}, "run.json environment.screen 100000x100000"},
		{"unbounded logs", func(_, m map[string]any) { m["settings"].(map[string]any)["log_cap"] = 1 << 50 }, "run.json settings.log_cap is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			limits(c.mod)
			r := cliMain(t, "replay", dir)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "replay sandbox:") {
				t.Errorf("want exit 2 naming %q before anything starts:\n%s", c.want, r)
			}
		})
	}
}
