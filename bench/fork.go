package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/serve/api"
)

// ForkStats are the fork's figures: a Steps-step mover episode forked
// into Count through serve's API (the Go client's Env.Fork), the time
// until all are ready, on a server whose pool keeps Pool warm.
type ForkStats struct {
	Steps, Count, Pool int
	Mode               string // the server's fork capability (replay)
	Ready              Stats
}

// forkMoverStep is how far the bench's mover moves per key press: it
// runs with --step, its picture a function of the keys alone, so a fork
// on the wall clock reproduces it (the mover is a Go program: no
// virtual clock; by time × speed it would diverge).
const forkMoverStep = "7"

// forkBench forks a ForkSteps-step mover episode into ForkCount, Forks
// times, each on a fresh episode.
func forkBench(ctx context.Context, o Options) (*ForkStats, error) {
	if o.ForkCount < 1 || o.ForkSteps < 0 {
		return nil, fmt.Errorf("a fork into %d of %d steps: want at least 1 fork and 0 or more steps", o.ForkCount, o.ForkSteps)
	}
	dir, err := owner.TempDir("bench-fork")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	appDir := filepath.Join(dir, "mover")
	if err := stepMover(o.App, appDir); err != nil {
		return nil, err
	}
	fs := &ForkStats{Steps: o.ForkSteps, Count: o.ForkCount, Pool: o.ForkCount}
	s, stop, err := startServerOf(ctx, o, appDir, filepath.Join(dir, "server"), o.ForkCount, 0, o.ForkCount+1)
	if err != nil {
		return nil, err
	}
	defer stop()
	info, err := s.c.Server(ctx)
	if err != nil {
		return nil, err
	}
	fs.Mode = info.Capabilities.Fork
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	keys := []string{"Right", "Right", "Down", "Right", "Down"}
	var ready []time.Duration
	for range o.Forks {
		if err := s.srv.WaitPool(wctx); err != nil {
			return nil, err
		}
		env, err := s.c.Create(ctx, api.CreateRequest{App: "mover"})
		if err != nil {
			return nil, fmt.Errorf("create an environment: %w", err)
		}
		env.Image = api.ImageNone
		for i := range o.ForkSteps {
			if _, err := env.Act(ctx, action.Action{Kind: action.Key, Keys: keys[i%len(keys)]}); err != nil {
				env.Close(context.WithoutCancel(ctx))
				return nil, fmt.Errorf("step %d: %w", i+1, err)
			}
		}
		if err := s.srv.WaitPool(wctx); err != nil {
			return nil, err
		}
		t := time.Now()
		forks, err := env.Fork(ctx, o.ForkCount)
		d := time.Since(t)
		for _, f := range forks {
			f.Close(context.WithoutCancel(ctx))
		}
		env.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		ready = append(ready, d)
	}
	fs.Ready = summarize(ready)
	return fs, nil
}

// stepMover copies the mover app of src into dst with --step in its
// manifest's arguments.
func stepMover(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if e.Name() == "agentbox.json" {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(src, e.Name()), err)
			}
			args, _ := m["args"].([]any)
			m["args"] = append(args, "--step", forkMoverStep)
			if data, err = json.MarshalIndent(m, "", "  "); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
