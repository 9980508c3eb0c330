package dashboard

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/store"
)

// TestFigures100k times the dashboard's pages over the store that the
// store package's TestFigures100k builds (100,000 synthetic runs) and
// keeps in $AGENTBOX_FIGURES_DIR: the handler's whole answer, in process,
// best of 3. Off unless AGENTBOX_FIGURES=1:
//
//	AGENTBOX_FIGURES=1 AGENTBOX_FIGURES_DIR=/tmp/fig go test -count=1 -run TestFigures100k -v -timeout 60m ./store/
//	AGENTBOX_FIGURES=1 AGENTBOX_FIGURES_DIR=/tmp/fig go test -count=1 -run TestFigures100k -v ./dashboard/
func TestFigures100k(t *testing.T) {
	dir := os.Getenv("AGENTBOX_FIGURES_DIR")
	if os.Getenv("AGENTBOX_FIGURES") != "1" || dir == "" {
		t.Skip("figures: set AGENTBOX_FIGURES=1 and AGENTBOX_FIGURES_DIR (the store package's TestFigures100k fills it)")
	}
	st, err := store.Open(filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Options{Store: st, Roots: []string{filepath.Join(dir, "runs")}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, st: st}
	for _, target := range []string{
		"/",
		"/?app=calc&outcome=failure&since=2026-02-01&until=2026-03-01",
		"/?task=B7+bold",
		"/?page=900",
		"/rates",
		"/replays",
	} {
		best := time.Duration(1 << 62)
		var size int
		for range 3 {
			t0 := time.Now()
			w := f.get(t, target, nil)
			best = min(best, time.Since(t0))
			if w.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", target, w.Code, w.Body)
			}
			size = w.Body.Len()
		}
		t.Logf("%s: %v (%d KiB, best of 3)", target, best.Round(time.Millisecond), size>>10)
	}
}
