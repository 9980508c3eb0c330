package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// PoolStats are the warm pool's figures: reset to the first observation
// from the pool against a cold create, in turn in the same run; how many
// idle pooled environments one server holds and what each takes; and
// eval's episodes per minute with and without the pool.
type PoolStats struct {
	// ResetWarm is client.Env.Reset over serve's WebSocket (the previous
	// episode closed, the next one started, its first observation back)
	// on a server with a warm pool; ResetCold the same on a server
	// without one. The pool is refilled before each warm sample, so each
	// is a claim, not a wait for a create.
	ResetWarm, ResetCold Stats
	// OpenWarm and OpenCold are the new episode's part of the reset (the
	// trace's create + launch, from run.json): what the pool saves,
	// without the previous episode's teardown.
	OpenWarm, OpenCold Stats
	// IdleWarm is how long the app launched ahead had run idle when its
	// episode began (run.json's app_idle; --pool-launch only).
	IdleWarm Stats
	// ResetLoop is the same reset done back to back on the warm server,
	// without waiting for the pool to refill (a training loop of short
	// episodes); Loop is the pool's own account of that loop: the share
	// of resets served warm and how long a take waited to be made up.
	ResetLoop Stats
	// ResetRelaunch is the reset of an environment created with reset
	// mode relaunch, back to back: the same sandbox reset in place and
	// the app launched again (backends with the capability relaunch;
	// none else), on the server without a pool once the pooled one's
	// refills have ended, so that it shares the CPU with no create.
	ResetRelaunch Stats
	// ResetDeep is the back-to-back loop again, on a server whose pool is
	// deeper than the loop (deepPool: the loop's resets and half again,
	// the created episode and a warm-up), filled and quiet before it starts:
	// a burst served from the pool with no create waited for; DeepLoop is
	// that pool's account of it.
	ResetDeep Stats
	DeepLoop  *LoopStats `json:",omitempty"`
	// PyRelaunch and PyDeep are ResetRelaunch's and ResetDeep's loops
	// again from the Python client (python/benchmarks/reset.py, a key
	// step before each reset) on the same servers; empty when skipped.
	PyRelaunch, PyDeep Stats
	// RelaunchFloor is the least a relaunch costs on this machine, in a
	// sandbox of the bench's own, a sample in turn with each relaunch of
	// ResetRelaunch (environment.RelaunchFloorer); nil where the backend
	// cannot time it.
	RelaunchFloor *RelaunchFloorStats `json:",omitempty"`
	Loop          *LoopStats          `json:",omitempty"`
	Fork          *ForkStats          `json:",omitempty"`
	Capacity      *Capacity           `json:",omitempty"`
	Eval          *EvalStats          `json:",omitempty"`
}

// Capacity is a pool of Target idle environments held by one server.
type Capacity struct {
	Target int
	// Filled is how many were idle at once; FillSeconds how long filling
	// took; Limit says what stopped the pool short of Target, if it was.
	Filled      int
	FillSeconds float64
	Limit       string `json:",omitempty"`
	// SandboxMiB is the memory of each idle sandbox as its cgroup counts
	// it (Docker: memory.usage_in_bytes / memory.current; the local
	// backend: the proportional set size of its processes), summarised.
	SandboxMiB Stats
	// SandboxRSSMiB is the resident anonymous memory in each (the cgroup's
	// rss / anon; local: the same as SandboxMiB).
	SandboxRSSMiB Stats
	// Measured says how SandboxMiB was read.
	Measured string
	// ServerRSSMiB is the server's resident memory holding them all
	// (this process, before and after the fill).
	ServerRSSBeforeMiB, ServerRSSMiB float64
	// MachineMiB is how much less memory the machine had available with
	// the pool full than before (MemAvailable), per environment: every
	// cost at once (sandbox, daemon, server), noisy on a shared machine.
	MachineMiBPerEnv float64
	// MemTotalMiB and CPUs describe the machine.
	MemTotalMiB float64
	CPUs        int
}

// LoopStats are the pool's counts over the back-to-back reset loop.
type LoopStats struct {
	Resets, Warm, Cold   int64
	HitRate              float64
	RefillP50, RefillP95 float64 // ms
	CreateP50            float64 // ms
	// Waited counts the warm resets that waited for a create under way
	// (no idle sandbox, one being made); WaitP50 and WaitP95 how long.
	Waited           int64
	WaitP50, WaitP95 float64 // ms
	Target           int     // the key's target at the end of the loop
	// Launched counts the warm resets whose app was launched ahead
	// (--pool-launch).
	Launched int64
}

// EvalStats compare eval without the pool, with it, and with the pool
// and --reset relaunch.
type EvalStats struct {
	Episodes, Parallel, Pool int
	// PerMinute is episodes per minute without the pool; PooledPerMinute
	// with it; RelaunchPerMinute with it and --reset relaunch (each
	// worker's episodes after its first in its own sandbox, reset in
	// place).
	PerMinute, PooledPerMinute, RelaunchPerMinute float64
	Seconds, PooledSeconds, RelaunchSeconds       float64
	// Warm and Cold count the pooled run's episodes by how they started.
	Warm, Cold int64
	Passed     int
	PooledPass int
	// RelaunchPass and Relaunched count the relaunch run's passed
	// episodes and those reset in place.
	RelaunchPass, Relaunched int
}

// poolServer is an in-process server on loopback with its client.
type poolServer struct {
	srv        *serve.Server
	c          *client.Client
	url, token string // for the Python client
}

func startServer(ctx context.Context, o Options, dir string, size, max int) (*poolServer, func(), error) {
	return startServerOf(ctx, o, o.App, dir, size, max, 4)
}

// startServerOf is startServer with the mover of appDir and envs
// environments per token.
func startServerOf(ctx context.Context, o Options, appDir, dir string, size, max, envs int) (*poolServer, func(), error) {
	token := "bench-" + randomHex(16)
	b, err := app.Load(appDir, app.DefaultLimits) // the server closes it
	if err != nil {
		return nil, nil, err
	}
	srv, err := serve.New(serve.Options{
		Backends: []environment.Backend{o.Backend}, Apps: map[string]*app.Bundle{"mover": b}, Tokens: []string{token},
		Env: environment.Config{Image: o.Image, Runtime: o.Runtime, Screen: observe.DefaultScreen, GuestBinary: o.GuestBinary}, Out: filepath.Join(dir, "served"),
		UploadDir: filepath.Join(dir, "uploads"), MaxEnvironments: envs, Log: io.Discard, Pool: size, PoolMax: max, PoolLaunch: o.PoolLaunch && size > 0,
		StartTimeout: 3 * time.Minute,
	})
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Shutdown(ctx)
		return nil, nil, err
	}
	go srv.Serve(ln, "", "")
	var once sync.Once
	stop := func() { // more than once: the first shuts it down
		once.Do(func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			defer cancel()
			srv.Shutdown(sctx)
		})
	}
	c, err := client.New("http://"+ln.Addr().String(), token)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &poolServer{srv: srv, c: c, url: "http://" + ln.Addr().String(), token: token}, stop, nil
}

// poolReset measures reset → first observation from a warm pool and
// from a cold create, in turn.
func poolReset(ctx context.Context, o Options, ps *PoolStats) error {
	dir, err := owner.TempDir("bench-pool")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	warm, stopWarm, err := startServer(ctx, o, filepath.Join(dir, "warm"), 2, 0)
	if err != nil {
		return err
	}
	defer stopWarm()
	cold, stopCold, err := startServer(ctx, o, filepath.Join(dir, "cold"), 0, 0)
	if err != nil {
		return err
	}
	defer stopCold()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := warm.srv.WaitPool(wctx); err != nil {
		return err
	}
	envs := map[*poolServer]*client.Env{}
	for _, s := range []*poolServer{warm, cold} {
		env, err := s.c.Create(ctx, api.CreateRequest{App: "mover"})
		if err != nil {
			return fmt.Errorf("create an environment: %w", err)
		}
		env.Image = api.ImageRGBA
		if _, _, err := env.Reset(ctx); err != nil { // the created episode
			return err
		}
		envs[s] = env
	}
	var rw, rc []time.Duration
	var traces = map[*poolServer][]string{}
	for i := 0; i < o.PoolResets+1; i++ {
		if err := warm.srv.WaitPool(wctx); err != nil {
			return err
		}
		for _, m := range []struct {
			s   *poolServer
			out *[]time.Duration
		}{{warm, &rw}, {cold, &rc}} {
			t := time.Now()
			obs, info, err := envs[m.s].Reset(ctx)
			if err != nil {
				return fmt.Errorf("reset: %w", err)
			}
			if obs.Screen == nil {
				return fmt.Errorf("reset: no screen")
			}
			if i > 0 { // the first is a warm-up
				*m.out = append(*m.out, time.Since(t))
				traces[m.s] = append(traces[m.s], info.Trace)
			}
		}
	}
	before := warm.srv.PoolStats()
	if before.Cold > 0 {
		return fmt.Errorf("the pooled server started %d episodes cold", before.Cold)
	}
	// Back to back: no wait for the pool between resets.
	var rl []time.Duration
	for range o.PoolResets {
		t := time.Now()
		if _, _, err := envs[warm].Reset(ctx); err != nil {
			return fmt.Errorf("reset in a loop: %w", err)
		}
		rl = append(rl, time.Since(t))
	}
	after := warm.srv.PoolStats()
	ps.ResetLoop = summarize(rl)
	ps.Loop = loopStats(before, after, len(rl))
	if environment.CapabilitiesOf(o.Backend).Relaunch {
		// A relaunch takes nothing from a pool: it is measured on the
		// server without one, once the other's refills (its target grown
		// by the loop above) have ended, so that no create shares the
		// CPU with it.
		qctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		err := poolQuiet(qctx, warm.srv)
		cancel()
		if err != nil {
			return err
		}
		r, fl, err := relaunchLoop(ctx, o, cold.c, o.PoolResets)
		if err != nil {
			return err
		}
		ps.ResetRelaunch, ps.RelaunchFloor = r, fl
		if o.PythonClient != "" {
			if ps.PyRelaunch, err = pythonResets(ctx, o, cold, "relaunch"); err != nil {
				return err
			}
		}
	}
	// Close the episodes, so their traces are finalised with timings.
	for _, env := range envs {
		env.Close(ctx)
	}
	stopWarm()
	if err := deepLoop(ctx, o, filepath.Join(dir, "deep"), ps); err != nil {
		return err
	}
	ps.ResetWarm, ps.ResetCold = summarize(rw), summarize(rc)
	opens := func(dirs []string) Stats {
		var ds []time.Duration
		for _, d := range dirs {
			run, err := readTimings(d)
			if err != nil {
				continue
			}
			ms := run["create"] + run["launch"]
			if w, ok := run["ready_output"]; ok {
				ms += w
			}
			ds = append(ds, time.Duration(ms*float64(time.Millisecond)))
		}
		return summarize(ds)
	}
	ps.OpenWarm, ps.OpenCold = opens(traces[warm]), opens(traces[cold])
	var idle []time.Duration
	for _, d := range traces[warm] {
		if run, err := readTimings(d); err == nil {
			if ms, ok := run["app_idle"]; ok {
				idle = append(idle, time.Duration(ms*float64(time.Millisecond)))
			}
		}
	}
	ps.IdleWarm = summarize(idle)
	return nil
}

// deepLoop measures o.PoolResets resets back to back on a server whose
// pool holds half as many idle sandboxes again as the loop takes, filled
// and quiet before the loop starts. Half again: a loop of resets asks the
// pool for what it takes while one sandbox is made, with half again as
// margin (pool's demand), and a pool that holds less than that refills
// at once, its creates sharing the CPU with the burst (a pool of 22 for
// 20 resets did: Docker p95 168–188 ms); one that holds more serves the
// burst and refills when it pauses.
func deepLoop(ctx context.Context, o Options, dir string, ps *PoolStats) error {
	n := deepPool(o.PoolResets)
	s, stop, err := startServer(ctx, o, dir, n, n+2)
	if err != nil {
		return err
	}
	defer stop()
	qctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err = poolQuiet(qctx, s.srv)
	cancel()
	if err != nil {
		return fmt.Errorf("filling a pool of %d: %w", n, err)
	}
	env, err := s.c.Create(ctx, api.CreateRequest{App: "mover"})
	if err != nil {
		return fmt.Errorf("create an environment: %w", err)
	}
	defer env.Close(ctx)
	env.Image = api.ImageRGBA
	if _, _, err := env.Reset(ctx); err != nil { // a warm-up
		return err
	}
	before := s.srv.PoolStats()
	var rl []time.Duration
	for range o.PoolResets {
		t := time.Now()
		obs, _, err := env.Reset(ctx)
		if err != nil {
			return fmt.Errorf("reset in a loop from a deep pool: %w", err)
		}
		if obs.Screen == nil {
			return fmt.Errorf("reset in a loop from a deep pool: no screen")
		}
		rl = append(rl, time.Since(t))
	}
	after := s.srv.PoolStats()
	ps.ResetDeep = summarize(rl)
	ps.DeepLoop = loopStats(before, after, len(rl))
	if o.PythonClient == "" {
		return nil
	}
	// The same loop from Python, once the pool is full and quiet again.
	qctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
	err = poolQuiet(qctx, s.srv)
	cancel()
	if err != nil {
		return fmt.Errorf("filling a pool of %d again: %w", n, err)
	}
	ps.PyDeep, err = pythonResets(ctx, o, s, "fresh")
	return err
}

// lastBytes is the end of s, at most n bytes of it.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// pythonResets runs the Python client's benchmarks/reset.py against s:
// o.PoolResets resets of mode back to back, a key step before each, as
// a Python program sees them (reset() to the first observation in hand,
// RGBA over the WebSocket).
func pythonResets(ctx context.Context, o Options, s *poolServer, mode string) (Stats, error) {
	py := o.Python
	if py == "" {
		py = "python3"
	}
	script := filepath.Join(o.PythonClient, "benchmarks", "reset.py")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, py, script, "--resets", strconv.Itoa(o.PoolResets), "--modes", mode, "--json")
	cmd.Env = append(os.Environ(), "AGENTBOX_URL="+s.url, "AGENTBOX_TOKEN="+s.token, "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Stats{}, fmt.Errorf("%s %s (%s): %w\n%s", py, script, mode, err, lastBytes(stderr.String(), 2000))
	}
	var times map[string][]float64
	if err := json.Unmarshal(out, &times); err != nil || len(times[mode]) == 0 {
		return Stats{}, fmt.Errorf("%s %s (%s): want a JSON object of times, got %q (%v)", py, script, mode, lastBytes(string(out), 500), err)
	}
	d := make([]time.Duration, len(times[mode]))
	for i, ms := range times[mode] {
		d[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return summarize(d), nil
}

// deepPool is the pool deepLoop fills for a loop of resets: half again
// as many, and the created episode and a warm-up.
func deepPool(resets int) int { return resets + (resets+1)/2 + 2 }

// loopStats is the pool's account of a loop of n resets, from its counts
// before and after.
func loopStats(before, after pool.Stats, n int) *LoopStats {
	ls := &LoopStats{Resets: int64(n), Warm: after.Warm - before.Warm, Cold: after.Cold - before.Cold,
		RefillP50: ms(after.RefillP50), RefillP95: ms(after.RefillP95), CreateP50: ms(after.CreateP50),
		Waited: after.Waited - before.Waited, Launched: after.Launched - before.Launched, WaitP50: ms(after.WaitP50), WaitP95: ms(after.WaitP95)}
	if ls.Resets > 0 {
		ls.HitRate = float64(ls.Warm) / float64(ls.Resets)
	}
	for _, k := range after.Keys {
		ls.Target = max(ls.Target, k.Target)
	}
	return ls
}

// poolQuiet waits until srv's pool is full and no create is under way.
func poolQuiet(ctx context.Context, srv *serve.Server) error {
	for {
		if err := srv.WaitPool(ctx); err != nil {
			return err
		}
		if srv.PoolStats().Creating == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the pool's creates to end: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RelaunchFloorStats is the least a relaunch costs (Total) and its parts:
// the app killed until its windows are gone, its command started until
// the window manager lists its window, and one capture
// (environment.RelaunchFloor), as a minimal program in the sandbox
// would do them.
type RelaunchFloorStats struct {
	Total, Kill, Start, Capture Stats
}

// relaunchLoop measures n resets, back to back, of an environment in
// reset mode relaunch, after one to warm up; and, where the backend can
// time it, the relaunch's floor in a sandbox of the bench's own with the
// mover launched, a sample after each relaunch, so that both see the
// same machine.
func relaunchLoop(ctx context.Context, o Options, c *client.Client, n int) (Stats, *RelaunchFloorStats, error) {
	env, err := c.Create(ctx, api.CreateRequest{App: "mover", ResetMode: api.ResetRelaunch})
	if err != nil {
		return Stats{}, nil, fmt.Errorf("create an environment to relaunch: %w", err)
	}
	defer env.Close(context.WithoutCancel(ctx))
	env.Image = api.ImageRGBA
	floorer, closeFloor, err := relaunchFloorer(ctx, o)
	if err != nil {
		return Stats{}, nil, err
	}
	defer closeFloor()
	var d []time.Duration
	var fl []environment.RelaunchFloor
	for i := 0; i < n+2; i++ {
		t := time.Now()
		obs, _, err := env.Reset(ctx)
		if err != nil {
			return Stats{}, nil, fmt.Errorf("relaunch: %w", err)
		}
		if obs.Screen == nil {
			return Stats{}, nil, fmt.Errorf("relaunch: no screen")
		}
		took := time.Since(t)
		var f environment.RelaunchFloor
		if floorer != nil {
			if f, err = floorer.RelaunchFloor(ctx); err != nil {
				return Stats{}, nil, fmt.Errorf("the relaunch's floor: %w", err)
			}
		}
		if i >= 2 { // the created episode, then a warm-up
			d = append(d, took)
			fl = append(fl, f)
		}
	}
	if floorer == nil {
		return summarize(d), nil, nil
	}
	part := func(get func(environment.RelaunchFloor) time.Duration) Stats {
		v := make([]time.Duration, len(fl))
		for i, f := range fl {
			v[i] = get(f)
		}
		return summarize(v)
	}
	return summarize(d), &RelaunchFloorStats{
		Total:   part(environment.RelaunchFloor.Total),
		Kill:    part(func(f environment.RelaunchFloor) time.Duration { return f.Kill }),
		Start:   part(func(f environment.RelaunchFloor) time.Duration { return f.Start }),
		Capture: part(func(f environment.RelaunchFloor) time.Duration { return f.Capture }),
	}, nil
}

// relaunchFloorer is a sandbox of the bench's own with the mover
// launched, where the backend's sandboxes can time a relaunch's floor;
// nil (and a no-op close) where they cannot.
func relaunchFloorer(ctx context.Context, o Options) (environment.RelaunchFloorer, func(), error) {
	none := func() {}
	if !environment.CapabilitiesOf(o.Backend).Relaunch {
		return nil, none, nil
	}
	b, err := app.Load(o.App, app.DefaultLimits)
	if err != nil {
		return nil, none, err
	}
	env, err := newEnv(ctx, o, b, observe.DefaultScreen, false)
	if err != nil {
		b.Close()
		return nil, none, fmt.Errorf("a sandbox for the relaunch's floor: %w", err)
	}
	closeAll := func() { closeEnv(ctx, env); b.Close() }
	f, ok := env.(environment.RelaunchFloorer)
	if !ok {
		closeAll()
		return nil, none, nil
	}
	return f, closeAll, nil
}

// poolCapacity fills a pool of n idle environments in one in-process
// server and measures what each takes.
func poolCapacity(ctx context.Context, o Options, n int) (*Capacity, error) {
	dir, err := owner.TempDir("bench-capacity")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c := &Capacity{Target: n, CPUs: runtime.NumCPU()}
	mem := meminfo()
	c.MemTotalMiB = mem["MemTotal"] / 1024
	availBefore := mem["MemAvailable"]
	runtime.GC()
	c.ServerRSSBeforeMiB = selfRSS()
	s, stop, err := startServer(ctx, o, dir, n, n)
	if err != nil {
		return nil, err
	}
	defer stop()
	t := time.Now()
	// Fill until full, or until the pool stops growing for two minutes
	// (what stops it is then the limit).
	last, lastGrew, lastLine := 0, time.Now(), time.Now()
	for {
		st := s.srv.PoolStats()
		if st.Idle >= n {
			break
		}
		if st.Idle > last {
			last, lastGrew = st.Idle, time.Now()
		}
		if time.Since(lastGrew) > 2*time.Minute {
			c.Limit = fmt.Sprintf("the pool stopped growing at %d idle (%d creates failed", st.Idle, st.Failed)
			for _, k := range st.Keys {
				if k.LastError != "" {
					c.Limit += "; last error: " + k.LastError
				}
			}
			c.Limit += ")"
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(lastLine) > 15*time.Second {
			lastLine = time.Now()
			fmt.Fprintf(o.Progress, "  %d of %d idle after %.0f s (%d creating, %d failed)\n", st.Idle, n, time.Since(t).Seconds(), st.Creating, st.Failed)
		}
	}
	c.FillSeconds = time.Since(t).Seconds()
	// Let the sandboxes settle (their start-up garbage collected), then
	// read.
	time.Sleep(5 * time.Second)
	infos := s.srv.PoolIdle()
	c.Filled = len(infos)
	var usageMiB, rssMiB []float64
	c.Measured = "the memory its cgroup counts"
	for _, info := range infos {
		if strings.HasPrefix(info.ID, "bwrap-") {
			c.Measured = "the proportional set size of its processes"
		}
		u, r, ok := sandboxMemory(info)
		if !ok {
			continue
		}
		usageMiB = append(usageMiB, u)
		rssMiB = append(rssMiB, r)
	}
	c.SandboxMiB, c.SandboxRSSMiB = summarizeFloat(usageMiB), summarizeFloat(rssMiB)
	runtime.GC()
	c.ServerRSSMiB = selfRSS()
	if c.Filled > 0 {
		c.MachineMiBPerEnv = (availBefore - meminfo()["MemAvailable"]) / 1024 / float64(c.Filled)
	}
	return c, nil
}

// summarizeFloat is summarize for plain numbers.
func summarizeFloat(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	ds := make([]time.Duration, len(v))
	for i, x := range v {
		ds[i] = time.Duration(x * float64(time.Millisecond))
	}
	return summarize(ds)
}

// sandboxMemory is a pooled sandbox's memory in MiB: its cgroup's usage
// and resident anonymous memory (Docker), or the proportional set size of
// its processes (the local backend).
func sandboxMemory(info environment.Info) (usage, rss float64, ok bool) {
	if pid, found := strings.CutPrefix(info.ID, "bwrap-"); found {
		p, err := strconv.Atoi(pid)
		if err != nil {
			return 0, 0, false
		}
		pss := treePSS(p)
		return pss, pss, pss > 0
	}
	id := info.ID
	for _, d := range []string{
		"/sys/fs/cgroup/memory/docker/" + id, // v1, cgroupfs
		"/sys/fs/cgroup/memory/system.slice/docker-" + id + ".scope",
	} {
		u, err := readNumber(filepath.Join(d, "memory.usage_in_bytes"))
		if err != nil {
			continue
		}
		st := readKV(filepath.Join(d, "memory.stat"))
		return u / (1 << 20), st["total_rss"] / (1 << 20), true
	}
	for _, d := range []string{
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope", // v2, systemd
		"/sys/fs/cgroup/docker/" + id,                         // v2, cgroupfs
	} {
		u, err := readNumber(filepath.Join(d, "memory.current"))
		if err != nil {
			continue
		}
		st := readKV(filepath.Join(d, "memory.stat"))
		return u / (1 << 20), st["anon"] / (1 << 20), true
	}
	return 0, 0, false
}

// treePSS is the proportional set size, in MiB, of pid and its
// descendants.
func treePSS(pid int) float64 {
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		n, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so cut at the last ')'.
		rest := data[bytes.LastIndexByte(data, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], n)
	}
	var total float64
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		queue = append(queue, children[p]...)
		kv := readKV(filepath.Join("/proc", strconv.Itoa(p), "smaps_rollup"))
		total += kv["Pss:"] * 1024
	}
	return total / (1 << 20)
}

func readNumber(path string) (float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
}

// readKV reads "key value" lines (memory.stat, smaps_rollup's "Key: N kB").
func readKV(path string) map[string]float64 {
	out := map[string]float64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		if v, err := strconv.ParseFloat(fs[1], 64); err == nil {
			out[fs[0]] = v
		}
	}
	return out
}

// meminfo is /proc/meminfo in KiB.
func meminfo() map[string]float64 {
	out := map[string]float64{}
	for k, v := range readKV("/proc/meminfo") {
		out[strings.TrimSuffix(k, ":")] = v
	}
	return out
}

// selfRSS is this process's resident memory in MiB.
func selfRSS() float64 {
	for k, v := range readKV("/proc/self/status") {
		if k == "VmRSS:" {
			return v / 1024
		}
	}
	return 0
}

// poolEval runs the same suite with eval and with eval --pool, and
// compares episodes per minute.
func poolEval(ctx context.Context, o Options) (*EvalStats, error) {
	dir, err := owner.TempDir("bench-eval")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	appDir, err := filepath.Abs(o.App)
	if err != nil {
		return nil, err
	}
	suite := fmt.Sprintf("name: bench\ntasks:\n  - name: mover\n    target: %q\n    script: %q\n    timeout: 60s\n    episodes: %d\n",
		appDir, filepath.Join(appDir, "play.yaml"), o.PoolEvalEpisodes)
	path := filepath.Join(dir, "suite.yaml")
	if err := os.WriteFile(path, []byte(suite), 0o644); err != nil {
		return nil, err
	}
	s, err := eval.Load(path)
	if err != nil {
		return nil, err
	}
	par := max(o.PoolEvalParallel, 1)
	es := &EvalStats{Episodes: o.PoolEvalEpisodes, Parallel: par, Pool: par}
	for _, mode := range []string{"plain", "pool", "relaunch"} {
		eo := eval.Options{Backend: o.Backend, Parallel: par, Out: filepath.Join(dir, "out-"+mode), RunID: benchID("bench-eval-" + mode),
			Env: environment.Config{Image: o.Image, Runtime: o.Runtime, GuestBinary: o.GuestBinary}}
		var pst pool.Stats
		if mode != "plain" {
			eo.Pool = par
			eo.PoolStats = func(st pool.Stats) { pst = st }
		}
		if mode == "relaunch" {
			if !environment.CapabilitiesOf(o.Backend).Relaunch {
				continue
			}
			eo.Relaunch = true
		}
		t := time.Now()
		sum, err := eval.Run(ctx, s, eo)
		if err != nil {
			return nil, err
		}
		secs := time.Since(t).Seconds()
		perMin := float64(sum.Totals.Episodes) / secs * 60
		switch mode {
		case "plain":
			es.Seconds, es.PerMinute, es.Passed = secs, perMin, sum.Totals.Passed
		case "pool":
			es.PooledSeconds, es.PooledPerMinute, es.PooledPass = secs, perMin, sum.Totals.Passed
			es.Warm, es.Cold = pst.Warm, pst.Cold
		case "relaunch":
			es.RelaunchSeconds, es.RelaunchPerMinute, es.RelaunchPass = secs, perMin, sum.Totals.Passed
			es.Relaunched = sum.Totals.Episodes - int(pst.Warm+pst.Cold)
		}
	}
	return es, nil
}

// readTimings reads run.json's timings of a trace.
func readTimings(dir string) (map[string]float64, error) {
	tr, err := trace.Open(dir)
	if err != nil {
		return nil, err
	}
	return tr.Run.Timings, nil
}

// printPool writes the pool's figures.
func (p *PoolStats) print(w io.Writer) {
	if p.ResetWarm.N > 0 {
		fmt.Fprintf(w, "reset → first observation through agentbox serve (WebSocket), warm pool vs cold create, in turn:\n")
		fmt.Fprintf(w, "  from the warm pool:        %s\n", p.ResetWarm)
		fmt.Fprintf(w, "  cold create:               %s\n", p.ResetCold)
		fmt.Fprintf(w, "  of which the new episode's create + launch (run.json): pool p50 %s, cold p50 %s\n", FormatMS(p.OpenWarm.P50), FormatMS(p.OpenCold.P50))
		if p.IdleWarm.N > 0 {
			fmt.Fprintf(w, "  the app launched ahead (--pool-launch) had run idle: %s\n", p.IdleWarm)
		}
	}
	if l := p.Loop; l != nil && p.ResetLoop.N > 0 {
		fmt.Fprintf(w, "  back to back, no wait for the pool: %s\n", p.ResetLoop)
		fmt.Fprintf(w, "  the pool over that loop: %d of %d warm (hit rate %.0f %%), refill p50 %s p95 %s, create p50 %s, the key's target %d\n",
			l.Warm, l.Resets, 100*l.HitRate, FormatMS(l.RefillP50), FormatMS(l.RefillP95), FormatMS(l.CreateP50), l.Target)
		if l.Launched > 0 {
			fmt.Fprintf(w, "  of the warm, %d had the app launched ahead (--pool-launch)\n", l.Launched)
		}
		if l.Waited > 0 {
			fmt.Fprintf(w, "  of the warm, %d waited for a sandbox being made (no idle one): wait p50 %s p95 %s\n", l.Waited, FormatMS(l.WaitP50), FormatMS(l.WaitP95))
		}
	}
	if l := p.DeepLoop; l != nil && p.ResetDeep.N > 0 {
		fmt.Fprintf(w, "  back to back from a pool deeper than the loop (--pool %d, filled first): %s\n", deepPool(int(l.Resets)), p.ResetDeep)
		fmt.Fprintf(w, "  that pool over the loop: %d of %d warm (hit rate %.0f %%), %d waited for a sandbox being made\n", l.Warm, l.Resets, 100*l.HitRate, l.Waited)
	}
	var relaunchFloor float64
	if f := p.RelaunchFloor; f != nil && f.Total.N > 0 {
		relaunchFloor = f.Total.P50
	}
	if p.ResetRelaunch.N > 0 {
		fmt.Fprintf(w, "  relaunch (reset mode relaunch: the same sandbox reset in place), back to back, no create beside it: %s\n", p.ResetRelaunch)
		if f := p.RelaunchFloor; relaunchFloor > 0 {
			fmt.Fprintf(w, "    its floor, in turn with it in a sandbox of the bench's own (the mover killed and started again by a minimal program, until its window is listed, and one capture): %s\n", f.Total)
			fmt.Fprintf(w, "      of which the kill until its windows went %s, the start until its window is listed %s, the capture %s (p50 each)\n",
				FormatMS(f.Kill.P50), FormatMS(f.Start.P50), FormatMS(f.Capture.P50))
			fmt.Fprintf(w, "    against the floor: %s\n", AtFloor(p.ResetRelaunch.P50, relaunchFloor))
		}
	}
	if p.PyRelaunch.N > 0 || p.PyDeep.N > 0 {
		fmt.Fprintf(w, "  from Python (python/benchmarks/reset.py, a key step before each reset, the same servers):\n")
		if p.PyRelaunch.N > 0 {
			fmt.Fprintf(w, "    relaunch, back to back:                     %s\n", p.PyRelaunch)
			if relaunchFloor > 0 {
				fmt.Fprintf(w, "      against the Go loop's floor:              %s\n", AtFloor(p.PyRelaunch.P50, relaunchFloor))
			}
		}
		if p.PyDeep.N > 0 {
			fmt.Fprintf(w, "    fresh, back to back from the deeper pool:   %s\n", p.PyDeep)
		}
	}
	if f := p.Fork; f != nil {
		fmt.Fprintf(w, "fork of a %d-step mover episode into %d (POST /v1/envs/{id}/fork, fork: %s, --pool %d), until all are ready, from the Go client:\n", f.Steps, f.Count, f.Mode, f.Pool)
		fmt.Fprintf(w, "  %s\n", f.Ready)
	}
	if c := p.Capacity; c != nil {
		fmt.Fprintf(w, "idle pooled environments held by one server (%d CPUs, %.1f GiB):\n", c.CPUs, c.MemTotalMiB/1024)
		fmt.Fprintf(w, "  %d of %d idle after %.0f s", c.Filled, c.Target, c.FillSeconds)
		if c.Limit != "" {
			fmt.Fprintf(w, " — %s", c.Limit)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  per sandbox, %s: %.1f MiB p50 (%.1f MiB p95), %.1f MiB of it resident anonymous memory\n",
			c.Measured, c.SandboxMiB.P50, c.SandboxMiB.P95, c.SandboxRSSMiB.P50)
		fmt.Fprintf(w, "  the server: %.0f MiB resident holding them (%.0f MiB before): %.2f MiB per environment\n",
			c.ServerRSSMiB, c.ServerRSSBeforeMiB, (c.ServerRSSMiB-c.ServerRSSBeforeMiB)/float64(max(c.Filled, 1)))
		fmt.Fprintf(w, "  the machine: %.1f MiB less available per environment (everything at once; noisy on a shared machine)\n", c.MachineMiBPerEnv)
	}
	if e := p.Eval; e != nil {
		fmt.Fprintf(w, "agentbox eval, %d mover play-test episodes at --parallel %d:\n", e.Episodes, e.Parallel)
		fmt.Fprintf(w, "  %-28s%.1f episodes/min (%.1f s, %d passed)\n", "without a pool:", e.PerMinute, e.Seconds, e.Passed)
		fmt.Fprintf(w, "  %-28s%.1f episodes/min (%.1f s, %d passed; %d from the pool, %d cold)  (×%.2f)\n",
			fmt.Sprintf("--pool %d:", e.Pool), e.PooledPerMinute, e.PooledSeconds, e.PooledPass, e.Warm, e.Cold, e.PooledPerMinute/e.PerMinute)
		if e.RelaunchSeconds > 0 {
			fmt.Fprintf(w, "  %-28s%.1f episodes/min (%.1f s, %d passed; %d reset in place)  (×%.2f)\n",
				fmt.Sprintf("--pool %d --reset relaunch:", e.Pool), e.RelaunchPerMinute, e.RelaunchSeconds, e.RelaunchPass, e.Relaunched, e.RelaunchPerMinute/e.PerMinute)
		}
	}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
