package e2e

// Masked screens on a real app, on both backends: a GTK3 form (zenity
// --forms) whose entry is given a card number and whose password field a
// vault secret. Every screenshot the trace keeps after they were typed
// shows both fields painted over, and says why.

import (
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/mask"
	"github.com/codegirl-games/agentbox/trace"
)

const formManifest = `{"command": "zenity", "args": ["--forms", "--title=Pay", "--text=Pay", "--add-entry=Card", "--add-password=PIN"],
 "window_title": "Pay", "ready_timeout": "60s"}`

// formScript types a card number into the first entry (it has the focus)
// and the vault's PIN into the password field.
const formScript = `task: fill the payment form
steps:
  - wait_for: element
    target: {role: password text}
    timeout_ms: 30000
  - {action: wait, until: stable, ms: 10000}
  - {action: click, target: {role: text, index: 0}}
  - {action: type, text: "4111 1111 1111 1111"}
  - {action: click, target: {role: password text}}
  - {action: type_secret, secret: PIN}
  - {action: wait, until: stable, ms: 5000}
  - {action: accessibility_tree}
`

func TestMaskedForm(t *testing.T) {
	for name, flags := range a11yBackends(t) {
		t.Run(name, func(t *testing.T) {
			testenv.Require(t, testenv.Slow("a GTK3 form in a sandbox"))
			vault := filepath.Join(t.TempDir(), "secrets")
			if err := os.WriteFile(vault, []byte("PIN=8675309-pin\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"run", appDir(t, formManifest), "--script", writeScript(t, formScript),
				"--a11y", "--vault", vault, "--timeout", "2m", "--screen", "800x600"}, flags(t)...)
			r := agentbox(t, args...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			tr := openTrace(t, r.dir)
			// The last observation (after everything was typed) masks the
			// card's entry and the password field, and its screenshot
			// shows the mask's colour there.
			var last *trace.Observation
			for _, rec := range tr.Records {
				if rec.Observation != nil {
					last = rec.Observation
				}
			}
			if last == nil {
				t.Fatal("no observation")
			}
			var whys []string
			for _, a := range last.Masked {
				whys = append(whys, a.Why)
			}
			if !slices.Contains(whys, string(mask.WhyCard)) || !slices.Contains(whys, string(mask.WhyPassword)) {
				t.Fatalf("last observation masked %+v: want the card number and the password field", last.Masked)
			}
			f, err := os.Open(filepath.Join(r.dir, last.Screenshot))
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range last.Masked {
				x, y := (a.Rect[0]+a.Rect[2])/2, (a.Rect[1]+a.Rect[3])/2
				cr, cg, cb, _ := img.At(x, y).RGBA()
				if [3]uint32{cr >> 8, cg >> 8, cb >> 8} != [3]uint32{uint32(mask.Colour[0]), uint32(mask.Colour[1]), uint32(mask.Colour[2])} {
					t.Errorf("%s at %v: the screenshot shows %v at its centre", a.Why, a.Rect, img.At(x, y))
				}
			}
			t.Logf("masked: %+v", last.Masked)
		})
	}
}
