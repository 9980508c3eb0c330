package report

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// TestCSP: the policy allows the page's own script and style by hash and
// nothing inline besides (no 'unsafe-inline': a javascript: URL or an
// injected element would not run), and the hashes are those of the page.
func TestCSP(t *testing.T) {
	if strings.Contains(CSP, "unsafe-inline") || strings.Contains(CSP, "unsafe-eval") || !strings.Contains(CSP, "default-src 'none'") {
		t.Errorf("CSP %q", CSP)
	}
	page := string(mustRender(t, write(t, 1, "", nil)))
	if !strings.Contains(page, `content="`+CSP+`"`) {
		t.Errorf("the page does not carry the policy")
	}
	for _, c := range []struct{ directive, re string }{
		{"script-src", `(?s)<script>(.*?)</script>`},
		{"style-src", `(?s)<style>(.*?)</style>`},
	} {
		m := regexp.MustCompile(c.re).FindAllStringSubmatch(page, -1)
		if len(m) != 1 {
			t.Fatalf("%d inline elements for %s, want 1", len(m), c.directive)
		}
		h := sha256.Sum256([]byte(m[0][1]))
		want := c.directive + " 'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
		if !strings.Contains(CSP, want) {
			t.Errorf("CSP %q lacks %q: the page's %s would not run", CSP, want, c.directive)
		}
	}
}

// crafted is a trace written by the real writer and then tampered with as
// someone handing it over could: links out, paths out, a hostile
// replay.json.
func crafted(t *testing.T) (tr *trace.Trace, secret string) {
	t.Helper()
	base := write(t, 3, "", nil)
	dir := base.Dir
	secret = filepath.Join(filepath.Dir(dir), "secret.png")
	// A valid PNG, so only the confinement keeps it out.
	png, err := os.ReadFile(filepath.Join(dir, "screenshots", "000003.png"))
	if err != nil {
		t.Fatal(err)
	}
	png = append(png, []byte("TOP-SECRET")...)
	if err := os.WriteFile(secret, png, 0o600); err != nil {
		t.Fatal(err)
	}
	secretLog := filepath.Join(filepath.Dir(dir), "shadow")
	os.WriteFile(secretLog, []byte("root:TOP-SECRET-LOG:19000::::::\n"), 0o600)
	os.Remove(filepath.Join(dir, trace.StderrFile))
	if err := os.Symlink(secretLog, filepath.Join(dir, trace.StderrFile)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, trace.StdoutFile), []byte("CONTROL-STDOUT\n"), 0o644)
	// Step 2's screenshot becomes a link out; step 3's names a path out.
	shot2 := filepath.Join(dir, "screenshots", "000002.png")
	os.Remove(shot2)
	if err := os.Symlink(secret, shot2); err != nil {
		t.Fatal(err)
	}
	steps, err := os.ReadFile(filepath.Join(dir, trace.StepsFile))
	if err != nil {
		t.Fatal(err)
	}
	steps = []byte(strings.Replace(string(steps), `"screenshots/000003.png"`, `"../../../../../../..`+secret+`"`, 1))
	os.WriteFile(filepath.Join(dir, trace.StepsFile), steps, 0o644)
	os.MkdirAll(filepath.Join(dir, "replay"), 0o755)
	os.WriteFile(filepath.Join(dir, "replay", "diff-000001.png"), png[:len(png)-10], 0o644)
	rj, _ := json.Marshal(map[string]any{
		"verdict": "diverged", "message": "crafted",
		"divergence": map[string]any{"step": 1, "compare": "javascript:alert(document.domain)", "diff": "replay/diff-000001.png"},
	})
	os.WriteFile(filepath.Join(dir, ReplayFile), rj, 0o644)
	tr, err = trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr, secret
}

func TestCraftedTraceStaysInside(t *testing.T) {
	for _, embed := range []bool{false, true} {
		tr, secret := crafted(t)
		st, err := Write(t.Context(), tr, filepath.Join(tr.Dir, FileName), Options{Embed: embed})
		if err != nil {
			t.Fatal(err)
		}
		page := string(st.Page)
		secretPNG, _ := os.ReadFile(secret)
		for _, leak := range []string{"TOP-SECRET", base64.StdEncoding.EncodeToString(secretPNG), "javascript:"} {
			if strings.Contains(page, leak) {
				t.Errorf("embed=%v: the page holds %q", embed, leak)
			}
		}
		p := pageData(t, st.Page)
		// Controls: the plain screenshot, stdout.log and the replay's
		// plain diff image are there.
		if p.Steps[0].Img < 0 || !strings.Contains(p.Logs[0].Tail, "CONTROL-STDOUT") || p.Replay == nil || p.Replay.Diff != "replay/diff-000001.png" {
			t.Errorf("embed=%v: controls missing: step 1 image %d, stdout tail %q, replay %+v", embed, p.Steps[0].Img, p.Logs[0].Tail, p.Replay)
		}
		if p.Steps[1].Img >= 0 || p.Steps[2].Img >= 0 || p.Logs[1].URL != "" || p.Logs[1].Tail != "" || p.Replay.Compare != "" {
			t.Errorf("embed=%v: refused files shown: images %d %d, stderr %q %q, compare %q", embed, p.Steps[1].Img, p.Steps[2].Img, p.Logs[1].URL, p.Logs[1].Tail, p.Replay.Compare)
		}
		// The link out, the path out, the log link; "javascript:…" names
		// no file of the trace and is dropped as missing.
		if len(p.Refused) != 3 || len(st.Refused) != 3 {
			t.Errorf("embed=%v: refused %q", embed, p.Refused)
		}
		want := []string{"screenshots/000001.png", "replay/diff-000001.png", trace.StdoutFile}
		if embed {
			want = want[1:]
		}
		if strings.Join(st.Files, " ") != strings.Join(want, " ") {
			t.Errorf("embed=%v: files to serve %q, want %q", embed, st.Files, want)
		}
	}
}

// A file in the trace whose name looks like a scheme stays a relative link.
func TestRelURLNeverAScheme(t *testing.T) {
	for in, want := range map[string]string{
		"javascript:alert(1)":     "javascript%3Aalert%281%29",
		"replay/compare-1.png":    "replay/compare-1.png",
		"data:text/html,<b>x</b>": "data%3Atext/html%2C%3Cb%3Ex%3C/b%3E",
	} {
		if got := relURL("/t", "/t", in); got != want {
			t.Errorf("relURL(%q) = %q, want %q", in, got, want)
		}
	}
}
