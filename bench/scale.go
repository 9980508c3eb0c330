package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// ScalePoint is the step with Envs environments on the machine, every
// one of them stepping at once.
type ScalePoint struct {
	Envs   int
	Screen observe.Screen
	// Step is each step's latency (mouse_move → next screenshot, screen
	// unchanged) over every environment's samples.
	Step Stats
	// StepsPerSecond is the machine's throughput: every environment's
	// measured steps over the wall time from the first to the last.
	StepsPerSecond float64
	// Create is the wall time taking the environments up, CreateParallel
	// at a time (not a cold start: the machine is loaded by the others).
	Create float64
}

// createParallel bounds how many sandboxes scaleStep takes up at once:
// more only queue in the runtime on a small machine.
const createParallel = 4

// scaleStep measures the step with n environments stepping at once:
// each takes o.ScaleSteps steps after a short warm-up, all released
// together.
func scaleStep(ctx context.Context, o Options, b *app.Bundle, n int) (ScalePoint, error) {
	pt := ScalePoint{Envs: n, Screen: observe.DefaultScreen}
	envs := make([]environment.Environment, n)
	defer func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, createParallel)
		for _, env := range envs {
			if env == nil {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				closeEnv(ctx, env)
			}()
		}
		wg.Wait()
	}()

	t0 := time.Now()
	if err := forEach(n, createParallel, func(i int) error {
		env, err := newEnv(ctx, o, b, pt.Screen, false)
		if err != nil {
			return fmt.Errorf("environment %d of %d: %w", i+1, n, err)
		}
		envs[i] = env
		return nil
	}); err != nil {
		return pt, err
	}
	pt.Create = msOf(time.Since(t0))

	const warmup = 5
	var (
		mu    sync.Mutex
		all   []time.Duration
		start = make(chan struct{})
		first time.Time
		last  time.Time
	)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]time.Duration, 0, o.ScaleSteps)
			<-start
			began := time.Now()
			for k := 0; k < o.ScaleSteps+warmup; k++ {
				x, y := 10+(k*37+i*11)%(pt.Screen.Width-20), 10+(k*53+i*7)%(pt.Screen.Height-20)
				t := time.Now()
				if _, err := env.Act(ctx, action.Action{Kind: action.MouseMove, X: &x, Y: &y}); err != nil {
					errs[i] = fmt.Errorf("environment %d: %w", i+1, err)
					return
				}
				if _, _, err := env.Observe(ctx); err != nil {
					errs[i] = fmt.Errorf("environment %d: %w", i+1, err)
					return
				}
				if k == warmup-1 {
					began = time.Now()
				}
				if k >= warmup {
					ds = append(ds, time.Since(t))
				}
			}
			end := time.Now()
			mu.Lock()
			all = append(all, ds...)
			if first.IsZero() || began.Before(first) {
				first = began
			}
			if end.After(last) {
				last = end
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return pt, err
	}
	pt.Step = summarize(all)
	if wall := last.Sub(first); wall > 0 {
		pt.StepsPerSecond = float64(len(all)) / wall.Seconds()
	}
	return pt, nil
}

// forEach runs f(0) … f(n-1), at most par at once, and returns the
// first error (the others still finish).
func forEach(n, par int, f func(int) error) error {
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, par)
		errs = make([]error, n)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func printScale(w io.Writer, pts []ScalePoint) {
	if len(pts) == 0 {
		return
	}
	fmt.Fprintf(w, "step at %dx%d with N environments stepping at once (mouse_move → next screenshot, unchanged):\n", pts[0].Screen.Width, pts[0].Screen.Height)
	for _, p := range pts {
		fmt.Fprintf(w, "  %3d at once:  %s  %.0f steps/s in all  (taken up in %s)\n", p.Envs, p.Step, p.StepsPerSecond, FormatMS(p.Create))
	}
}
