package pool_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
)

// TestRealFillRate is a measurement, not a check: how many mover
// sandboxes per second a pool makes from empty on each real backend, for
// each Options.Parallel in AGENTBOX_FILL_PARALLEL (default "1 2 3 4"),
// AGENTBOX_FILL_ROUNDS times in turn, AGENTBOX_FILL_SIZE sandboxes each
// (default 8), with the app launched ahead when AGENTBOX_FILL_LAUNCH=1.
// It runs only when AGENTBOX_FILL_RATE=1.
func TestRealFillRate(t *testing.T) {
	if os.Getenv("AGENTBOX_FILL_RATE") != "1" {
		t.Skip("a measurement: set AGENTBOX_FILL_RATE=1")
	}
	size := envInt("AGENTBOX_FILL_SIZE", 8)
	rounds := envInt("AGENTBOX_FILL_ROUNDS", 2)
	pars := []int{1, 2, 3, 4}
	if s := os.Getenv("AGENTBOX_FILL_PARALLEL"); s != "" {
		pars = nil
		for _, f := range splitFields(s) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			pars = append(pars, n)
		}
	}
	launch := os.Getenv("AGENTBOX_FILL_LAUNCH") == "1"
	only := os.Getenv("AGENTBOX_FILL_BACKEND")
	for _, rb := range realBackends() {
		if only != "" && only != rb.name {
			continue
		}
		t.Run(rb.name, func(t *testing.T) {
			rb.require(t)
			testenv.Require(t, testenv.Slow("creates real sandboxes"))
			guest := testenv.Build(t, "./cmd/agentbox")
			bundle := moverBundle(t)
			for r := 1; r <= rounds; r++ {
				for _, par := range pars {
					ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
					p, err := pool.New(pool.Options{Size: size, Max: size, Parallel: par, Launch: launch, RunID: fmt.Sprintf("pool-fill-%d", os.Getpid())})
					if err != nil {
						t.Fatal(err)
					}
					base := session.Config{Backend: rb.backend, App: bundle, Env: environment.Config{Image: rb.image, GuestBinary: guest}}
					start := time.Now()
					if err := p.Warm(base); err != nil {
						t.Fatal(err)
					}
					if err := p.Wait(ctx); err != nil {
						t.Fatal(err)
					}
					took := time.Since(start)
					st := p.Stats()
					load, _ := os.ReadFile("/proc/loadavg")
					t.Logf("round %d %s parallel %d: %d sandboxes in %v = %.2f/s (create p50 %v; launch ahead %v; load %.14s)",
						r, rb.name, par, size, took.Round(time.Millisecond), float64(size)/took.Seconds(), st.CreateP50.Round(time.Millisecond), launch, load)
					if err := p.Close(ctx); err != nil {
						t.Fatal(err)
					}
					cancel()
				}
			}
		})
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func splitFields(s string) []string {
	var out []string
	cur := ""
	for _, c := range s + " " {
		if c == ' ' || c == ',' {
			if cur != "" {
				out = append(out, cur)
			}
			cur = ""
			continue
		}
		cur += string(c)
	}
	return out
}
