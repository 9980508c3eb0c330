package cli

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// hostile is what an app or a model can put in text agentbox prints: erase
// the line above and print a verdict of its own, set the window title
// (OSC 0), write the clipboard (OSC 52), clear the screen with a C1 CSI.
const hostile = "\x1b[1A\x1b[2K\rsuccess: all good\n\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u009b2J\x9b2J\u202e"

// noControls fails on any byte a terminal would obey.
func noControls(t *testing.T, what, s string) {
	t.Helper()
	for i, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffd && s[i] == 0x9b || r == '\u202e' {
			t.Errorf("%s holds %U at byte %d: %q", what, r, i, s)
			return
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "success") {
			t.Errorf("%s has a line that passes for agentbox's verdict: %q", what, s)
		}
	}
}

func TestReportEscapes(t *testing.T) {
	var b bytes.Buffer
	report(&b, session.Result{Outcome: trace.Error, Reason: trace.ReasonAppStart,
		Message:  "could not launch the app: app exited; the app's last output:\n  stderr: " + hostile + "\n  stdout: " + hostile,
		TraceDir: "runs/x\x1b]0;t\x07", Duration: time.Second})
	out := b.String()
	noControls(t, "run's report", out)
	if !strings.HasPrefix(out, "error: could not launch the app") || !strings.Contains(out, `\x1b]52;c;`) || !strings.Contains(out, "\n  stderr: ") {
		t.Errorf("report:\n%s", out)
	}
}

func TestMainEscapesErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trace"+hostile)
	var so, se bytes.Buffer
	if code := Main([]string{"view", dir}, &so, &se); code != ExitUsage {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitUsage, se.String())
	}
	noControls(t, "stderr", se.String())
	if !strings.HasPrefix(se.String(), "agentbox: ") || !strings.Contains(se.String(), `\x1b]0;pwned\x07`) {
		t.Errorf("stderr: %q", se.String())
	}
}

func TestRecordedEnv(t *testing.T) {
	base := func() trace.Run {
		return trace.Run{
			Env: trace.EnvInfo{Image: "img", WM: true, Screen: observe.Screen{Width: 640, Height: 480, Depth: 24},
				Limits: map[string]any{"cpus": 1.0, "memory_mb": 1024.0, "pids": 256.0, "tmpfs_mb": 256.0, "shm_mb": 64.0}},
			Settings: &trace.Settings{TimeoutMS: 300000, LogCap: 8 << 20}, DurationMS: 2000,
		}
	}
	env, err := recordedEnv(base())
	if err != nil {
		t.Fatalf("a recorded run's own values (the control): %v", err)
	}
	if got := describeSandbox(env, 8<<20); got != "screen 640x480, 1 CPU, 1024 MiB memory, 256 processes, 256 MiB /tmp, 64 MiB /dev/shm, log cap 8 MiB, image img" {
		t.Errorf("described as %q", got)
	}
	old := base()
	old.Env.Limits, old.Env.Screen, old.Settings = nil, observe.Screen{}, nil
	if env, err := recordedEnv(old); err != nil || env.Resources != (environment.Resources{}).WithDefaults() || env.Screen != observe.DefaultScreen {
		t.Errorf("a trace without limits takes the defaults: %+v %v", env, err)
	}
	for _, c := range []struct {
		name string
		mod  func(*trace.Run)
		want string
	}{
		{"a million processes", func(r *trace.Run) { r.Env.Limits["pids"] = 1e6 }, "run.json environment.limits.pids is 1000000: want 40 to 65536"},
		{"8 TB of memory", func(r *trace.Run) { r.Env.Limits["memory_mb"] = 8.0 * (1 << 20) }, "run.json environment.limits.memory_mb is 8388608 MiB: want 16 to 1048576 MiB"},
		{"a petabyte", func(r *trace.Run) { r.Env.Limits["memory_mb"] = 1e18 }, "run.json environment.limits.memory_mb is 1000000000000000000: out of range"},
		{"negative /tmp", func(r *trace.Run) { r.Env.Limits["tmpfs_mb"] = -1.0 }, "run.json environment.limits.tmpfs_mb is -1: out of range"},
		{"fractional processes", func(r *trace.Run) { r.Env.Limits["pids"] = 1.5 }, "run.json environment.limits.pids is 1.5: not a whole number"},
		{"not a number", func(r *trace.Run) { r.Env.Limits["cpus"] = "all" }, "run.json environment.limits.cpus is all: not a number"},
		{"a million CPUs", func(r *trace.Run) { r.Env.Limits["cpus"] = 1e6 }, "run.json environment.limits.cpus is 1000000: want 0.01 to 1024"},
		{"a huge screen", func(r *trace.Run) { r.Env.Screen = observe.Screen{Width: 100000, Height: 100000, Depth: 24} }, "run.json environment.screen 100000x100000"},
		{"depth 8", func(r *trace.Run) { r.Env.Screen.Depth = 8 }, "run.json environment.screen 640x480x8: only depth 24 is supported"},
		{"a huge log cap", func(r *trace.Run) { r.Settings.LogCap = 1 << 50 }, "run.json settings.log_cap is 1125899906842624 bytes"},
		{"a negative timeout", func(r *trace.Run) { r.Settings.TimeoutMS = -5 }, "run.json settings.timeout_ms is -5"},
		{"an endless run", func(r *trace.Run) { r.DurationMS = 1e300 }, "run.json duration_ms is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := base()
			c.mod(&r)
			_, err := recordedEnv(r)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want a usage error containing %q", err, c.want)
			}
		})
	}
}

// TestFlagLimits: the flags follow the same rules.
func TestFlagLimits(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pids", "1000000"}, "--pids is 1000000: want 40 to 65536"},
		{[]string{"--memory", "8388608m"}, "--memory is 8388608 MiB"},
		{[]string{"--memory", "512k"}, "--memory is 0 MiB"},
		{[]string{"--cpus", "NaN"}, "--cpus is NaN"},
		{[]string{"--log-cap", "1000g"}, "--log-cap is"},
	} {
		var so, se bytes.Buffer
		code := Main(append([]string{"run", "/nonexistent", "--agent", "idle"}, c.args...), &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, code, se.String(), c.want)
		}
	}
}

// TestReportHandler: view --serve answers only requests that name it by a
// loopback name or its address, serves the page and the files it links to
// and nothing else, and never through a link.
func TestReportHandler(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("TOP-SECRET"), 0o600)
	os.MkdirAll(filepath.Join(dir, "screenshots"), 0o755)
	os.WriteFile(filepath.Join(dir, "screenshots", "000001.png"), []byte("\x89PNG-one"), 0o644)
	os.WriteFile(filepath.Join(dir, trace.StdoutFile), []byte("<script>alert(1)</script>"), 0o644)
	os.WriteFile(filepath.Join(dir, trace.RunFile), []byte("{}"), 0o644)
	os.Symlink(secret, filepath.Join(dir, trace.StderrFile))
	os.Symlink(secret, filepath.Join(dir, "screenshots", "000002.png"))
	files := servedFiles(dir, dir, []string{"screenshots/000001.png", "screenshots/000002.png", trace.StdoutFile, trace.StderrFile, "../outside.png"})
	if len(files) != 4 {
		t.Errorf("served %v: a file outside the page's folder is not servable", files)
	}
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8123}
	h := reportHandler(bound, dir, "/report.html", []byte("<!DOCTYPE html>page"), files)
	get := func(host, path string) *http.Response {
		r := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	body := func(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }
	for _, c := range []struct {
		host, path string
		code       int
		ctype      string
	}{
		{"127.0.0.1:8123", "/report.html", 200, "text/html; charset=utf-8"},
		{"localhost:8123", "/report.html", 200, "text/html; charset=utf-8"},
		{"LOCALHOST:8123", "/screenshots/000001.png", 200, "image/png"},
		{"127.0.0.1:8123", "/stdout.log", 200, "text/plain; charset=utf-8"},
		{"127.0.0.1:8123", "/", 302, ""},
		// DNS rebinding: another name, or another port.
		{"evil.example:8123", "/report.html", 421, ""},
		{"evil.example", "/report.html", 421, ""},
		{"127.0.0.1:80", "/report.html", 421, ""},
		{"127.0.0.2:8123", "/report.html", 421, ""},
		{"[::1]:8123", "/report.html", 421, ""},
		// Links, listings, files the page does not need.
		{"127.0.0.1:8123", "/screenshots/000002.png", 404, ""},
		{"127.0.0.1:8123", "/stderr.log", 404, ""},
		{"127.0.0.1:8123", "/screenshots/", 404, ""},
		{"127.0.0.1:8123", "/run.json", 404, ""},
		{"127.0.0.1:8123", "/../secret", 404, ""},
	} {
		r := get(c.host, c.path)
		b := body(r)
		if r.StatusCode != c.code || c.ctype != "" && r.Header.Get("Content-Type") != c.ctype || strings.Contains(b, "TOP-SECRET") {
			t.Errorf("GET %s%s: %d %q %q; want %d %q", c.host, c.path, r.StatusCode, r.Header.Get("Content-Type"), b, c.code, c.ctype)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s%s: no nosniff", c.host, c.path)
		}
	}
	if r := get("127.0.0.1:8123", "/stdout.log"); !strings.Contains(r.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("a log is served without a sandboxing policy: %q", r.Header.Get("Content-Security-Policy"))
	}
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8123/report.html", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}
}
