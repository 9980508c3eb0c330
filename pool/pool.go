// Package pool is the warm pool of agentbox serve --pool and agentbox
// eval --pool: sandboxes created ahead, display and window manager up and
// no app, kept per key (backend, image, runtime, screen, limits, window
// manager, accessibility bus, network) and refilled in the background.
// Claiming one hands it to session.Open as a session.Prepared, which only
// stages and launches the app.
//
// A pooled sandbox serves one episode: Take removes it from the pool, and
// the session that takes it over ends it when the episode ends. The pool
// never hands a sandbox out twice. A sandbox that died while it waited is
// noticed (environment.Liveness) and replaced, never handed out.
//
// Ending one is handed back to the pool (session.Prepared.Release): while
// the pool serves a loop of takes from idle sandboxes (a burst of short
// episodes), the ended sandbox's app is stopped at once and its removal
// waits, like the refills, until the loop pauses, so that the removals do
// not compete for the CPU with the loop's episodes (on Docker a removal
// is 100 ms and more of the daemon's work). Otherwise it is removed at
// once, as before. Close removes the ones waiting.
//
// A key that only one app's episodes ask for (every Warm and Take names
// the same app.Bundle, or copies of one Load) has that app staged into
// its sandboxes as they are created, where the environment can stage
// ahead (guestenv's Stage): taking one then sends nothing, the launch
// starts the app at once. A sandbox staged with an app is only handed to
// that app's episodes; a key asked for by a second app stages nothing
// from then on and its staged sandboxes are replaced.
//
// With Options.Launch (serve, eval and bench --pool-launch), such a key
// also has its app launched in its sandboxes as they are created: the
// app starts and runs idle until an episode takes the sandbox, which
// then launches nothing, its first observation its first look at the
// running app. This changes what a fresh episode is (its app has run,
// with no input, since the sandbox was made; the trace records how
// long: run.json's app.launched_ahead), so it is opt-in. A sandbox with
// its app running is handed only to an episode that would launch the
// same app the same way (session.SameLaunch: the same files, manifest,
// log cap and task inputs, no virtual clock); a claim that would launch
// otherwise takes a plain sandbox or is created cold, its trace says
// why, and the key launches nothing ahead from then on. An app that ends
// while its sandbox is idle (its exit reaches the sandbox's held events)
// has the sandbox replaced, never handed out.
//
// TakeWait, when the key has no idle sandbox but one being created that
// no one waits for yet, waits for that create instead of letting the
// caller create another cold: on a busy machine the create under way
// ends sooner than a new one would, and two creates would compete for
// the CPU.
//
// Bounds: at least Size idle sandboxes per key, more while the key's
// demand needs them (its takes per second times a create's time, so that
// a loop of short episodes does not drain the key), at most Max held
// (idle or being created) over all keys, at most MaxKeys keys, at most
// Parallel created at once. When a key has no idle sandbox, Take says so and the caller
// creates one cold, as without a pool; the pool counts it (Stats.Cold)
// and starts keeping that key warm. A key nobody asked for in KeyIdle is
// dropped, unless Warm pinned it.
//
// The pool's sandboxes are created with the pool's RunID and labelled by
// their backend like any other, so `agentbox gc` and the next start reap
// what a killed process left; Close removes them all.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
)

// Options configure a Pool. Zero fields take the defaults.
type Options struct {
	// Size is the number of idle sandboxes kept per key (at least 1).
	Size int
	// Max bounds the sandboxes the pool holds at once, idle or being
	// created, over all keys (default 4×Size; at least Size).
	Max int
	// MaxKeys bounds the keys kept warm at once (default 8).
	MaxKeys int
	// Parallel bounds the sandboxes created at once (default 2, and 4
	// while a key of the docker backend has no idle sandbox or a claim
	// waiting: its creates are bound by the daemon's round trips more
	// than by the CPU, so more at once make more a second — measured 2.2,
	// 3.7 and 4.3 a second at 1, 2 and 4 on 2 cores, while the local
	// backend's peak at 2; see docs/measurements.md, "The warm pool").
	Parallel int
	// RunID names the pool's sandboxes: each gets RunID-N (their
	// backend's name and label); default "pool".
	RunID string
	// CreateTimeout bounds creating one sandbox (default 60s).
	CreateTimeout time.Duration
	// CloseTimeout bounds removing one (default 30s).
	CloseTimeout time.Duration
	// CheckEvery is how often each idle sandbox is pinged (default 10s);
	// a sandbox that ends is noticed at once where its environment says
	// so (environment.Liveness's Done).
	CheckEvery time.Duration
	// RefillDelay holds back refilling a key for this long after a take
	// while the key still has an idle sandbox (default 500ms), so that
	// creating the replacement does not compete for the CPU with the
	// episode that just took one (its staging and launch); a key with
	// none left, or taken from twice within the delay (a loop of short
	// episodes, which would otherwise hold the refill back until the key
	// is empty), is refilled at once — unless it still holds more idle
	// sandboxes than the loop takes while one is created: a deep pool
	// serves a burst first and refills when it pauses.
	RefillDelay time.Duration
	// ReleasedWait bounds how long a sandbox released inside a loop of
	// takes waits for the loop to pause before it is removed (default
	// 30s): a loop that never pauses (a training run's resets, back to
	// back for hours) has its ended sandboxes removed after this delay,
	// at the rate it ends them, rather than keep Max of them alive.
	ReleasedWait time.Duration
	// Launch launches the app ahead in the sandboxes of a key that one
	// app asks for (see the package's doc): an opt-in, since the app then
	// runs idle before its episode begins.
	Launch bool
	// KeyIdle drops a key (and closes its idle sandboxes) nobody asked
	// for in this long (default 10m); keys given to Warm stay.
	KeyIdle time.Duration
	// Log receives a line when a sandbox is replaced or a create fails;
	// nil discards.
	Log func(format string, args ...any)
}

// Defaults of Options.
const (
	DefaultMaxKeys  = 8
	DefaultParallel = 2
	// DefaultParallelDocker is the default Parallel while a key of the
	// docker backend, drained, is the one being filled.
	DefaultParallelDocker = 4
	DefaultCreateTimeout  = 60 * time.Second
	DefaultCloseTimeout   = 30 * time.Second
	DefaultCheckEvery     = 10 * time.Second
	DefaultKeyIdle        = 10 * time.Minute
	DefaultRefillDelay    = 500 * time.Millisecond
	DefaultReleasedWait   = 30 * time.Second
	// DefaultMaxPerSize is the default Max: this many times Size (at
	// most MaxSize).
	DefaultMaxPerSize = 4
	// MaxSize is the largest Size and Max accepted.
	MaxSize = 4096
)

func (o *Options) defaults() error {
	if o.Size < 1 || o.Size > MaxSize {
		return fmt.Errorf("pool: a size of %d: want 1 to %d sandboxes per key", o.Size, MaxSize)
	}
	if o.Max == 0 {
		o.Max = min(DefaultMaxPerSize*o.Size, MaxSize)
	}
	if o.Max < o.Size || o.Max > MaxSize {
		return fmt.Errorf("pool: a total of %d: want %d (the size) to %d", o.Max, o.Size, MaxSize)
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Parallel < 0 {
		o.Parallel = 0 // by backend: parallelFor
	}
	if o.RunID == "" {
		o.RunID = "pool"
	}
	if o.CreateTimeout <= 0 {
		o.CreateTimeout = DefaultCreateTimeout
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultCheckEvery
	}
	if o.KeyIdle <= 0 {
		o.KeyIdle = DefaultKeyIdle
	}
	if o.RefillDelay == 0 {
		o.RefillDelay = DefaultRefillDelay
	}
	if o.ReleasedWait <= 0 {
		o.ReleasedWait = DefaultReleasedWait
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return nil
}

// Key is what a pooled sandbox must match to serve an episode: everything
// that changes what is created. The app is not in it: it is staged after
// the claim.
type Key struct {
	Backend     string                `json:"backend"`
	Image       string                `json:"image,omitempty"`
	Runtime     string                `json:"runtime,omitempty"`
	GuestBinary string                `json:"guest_binary,omitempty"`
	Screen      observe.Screen        `json:"screen"`
	Resources   environment.Resources `json:"limits"`
	NoWM        bool                  `json:"no_wm,omitempty"`
	A11y        bool                  `json:"a11y,omitempty"`
	NoGLX       bool                  `json:"no_glx,omitempty"`
	Observe     bool                  `json:"observe,omitempty"`
	FullFrames  bool                  `json:"full_frames,omitempty"`
	// Network is the sandbox's network policy as JSON; "" for none.
	Network string `json:"network,omitempty"`
}

func (k Key) String() string {
	s := fmt.Sprintf("%s %s %v", k.Backend, k.Image, k.Screen)
	if k.A11y {
		s += " a11y"
	}
	if k.NoGLX {
		s += " no-glx"
	}
	if k.Observe {
		s += " observe"
	}
	if k.NoWM {
		s += " no-wm"
	}
	if k.Network != "" {
		s += " network"
	}
	return s
}

// KeyOf is the key of the sandbox session.Open would create for cfg.
func KeyOf(cfg session.Config) (Key, environment.Config, error) {
	if cfg.Backend == nil {
		return Key{}, environment.Config{}, errors.New("pool: no backend")
	}
	env := session.EnvConfig(cfg)
	k := Key{
		Backend: cfg.Backend.Name(), Image: env.Image, Runtime: env.Runtime, GuestBinary: env.GuestBinary,
		Screen: env.Screen, Resources: env.Resources.WithDefaults(), NoWM: env.NoWM, A11y: env.A11y, NoGLX: env.NoGLX, Observe: env.Observe, FullFrames: env.FullFrames,
	}
	if env.Network.Enabled() {
		data, err := json.Marshal(env.Network)
		if err != nil {
			return Key{}, environment.Config{}, fmt.Errorf("pool: the network policy: %w", err)
		}
		k.Network = string(data)
	}
	return k, env, nil
}

// Pool keeps sandboxes warm. Its methods may be called from any goroutine.
type Pool struct {
	o      Options
	ctx    context.Context // cancelled by Close: creates in flight stop
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{} // the filler has returned

	seq atomic.Int64 // numbers the sandboxes' run IDs

	mu       sync.Mutex
	closed   bool
	keys     map[Key]*keyState
	creating int            // creates in flight, over all keys
	closing  sync.WaitGroup // sandboxes being removed, creates in flight
	warm     int64
	cold     int64
	replaced int64
	failed   int64
	dropped  int64 // claims that found no room for their key (MaxKeys)
	launched int64 // warm claims handed a sandbox with their app running (Launch)
	waited   int64 // warm claims that waited for a create under way (TakeWait)
	// waits: how long those claims waited (the newest).
	waits []time.Duration
	// refills: from a take to the create that made it up (the newest
	// latencies); creates: a create's time.
	refills, creates []time.Duration
	// released: sandboxes whose episode ended inside a loop of takes,
	// their apps stopped, waiting for the loop to pause to be removed
	// (release), oldest first; removing: how many of them are being
	// removed.
	released []releasedEnv
	removing int
	// deferred counts the removals that waited for a loop to pause.
	deferred int64
}

func appendBounded(ds []time.Duration, d time.Duration) []time.Duration {
	if len(ds) >= latencies {
		ds = append(ds[:0], ds[len(ds)-latencies+1:]...)
	}
	return append(ds, d)
}

// percentile is the p-th percentile (0..1) of ds, nearest rank; 0 when
// empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

type keyState struct {
	key      Key
	backend  environment.Backend
	cfg      environment.Config // what its sandboxes are created with (Events set per sandbox)
	idle     []*member          // oldest first
	creating int
	pinned   bool
	wanted   time.Time // the last Take or Warm
	taken    time.Time // the last Take that got a sandbox
	// prevTaken is the Take before taken: two within RefillDelay are a
	// loop, refilled at once.
	prevTaken time.Time

	warm, cold, replaced, failed int64
	failStreak                   int
	// demand: the times of the recent takes (warm or cold), oldest first;
	// waiting: the takes not yet made up by a create, oldest first.
	takes   []time.Time
	waiting []time.Time
	// createAvg is a moving average of a create's time.
	createAvg time.Duration
	retryAt   time.Time
	lastErr   string

	// first is the app of the first Warm or Take that named one; mixed
	// says another app asked for the key since. stage is what new
	// sandboxes of the key are staged with: first, while not mixed and
	// where it has files.
	first *app.Bundle
	mixed bool
	// launch is what new sandboxes of the key launch ahead (Launch): the
	// first asker's launch, while the key is not mixed and no claim has
	// asked for another (launchOff says why it stopped).
	launch           *environment.LaunchSpec
	launchOff        string
	creatingLaunched int // creates under way that launch the app
	// waiters are TakeWait's claims waiting for a create under way,
	// oldest first; each is handed the next sandbox created (nil: none
	// will come, create one cold).
	waiters []*waiter
	// expected is the most claims still to come that the caller knows of
	// (Expect), beside those waiting, when bounded.
	expected int
	bounded  bool
}

// waiter is a claim waiting for a create (TakeWait).
type waiter struct {
	ch    chan *member // buffered: written once, under the pool's lock
	since time.Time
}

// stageLocked is the app new sandboxes of ks are staged with; nil for
// none.
func (ks *keyState) stageLocked() *app.Bundle {
	if ks.mixed || ks.first == nil || len(ks.first.Files) == 0 {
		return nil
	}
	return ks.first
}

// launchLocked is what new sandboxes of ks launch ahead; nil for none.
func (p *Pool) launchLocked(ks *keyState) *environment.LaunchSpec {
	if !p.o.Launch || ks.mixed || ks.launchOff != "" {
		return nil
	}
	return ks.launch
}

// stager is an environment that can stage an app ahead of its launch
// (guestenv.Env).
type stager interface {
	Stage(ctx context.Context, b *app.Bundle) error
}

// demandWindow is how far back takes count towards a key's demand, and
// demandTakes the most of them remembered.
const (
	demandWindow = time.Minute
	demandTakes  = 32
	latencies    = 256 // refill and create times kept for Stats
)

// noteTakeLocked records a take (warm or cold) of ks at now.
func (ks *keyState) noteTakeLocked(now time.Time) {
	ks.takes = append(ks.takes, now)
	if len(ks.takes) > demandTakes {
		ks.takes = ks.takes[len(ks.takes)-demandTakes:]
	}
	ks.waiting = append(ks.waiting, now)
	if len(ks.waiting) > demandTakes {
		ks.waiting = ks.waiting[len(ks.waiting)-demandTakes:]
	}
}

// targetLocked is how many idle sandboxes ks should have: Size, or more
// when its recent takes come faster than creates make them up (demand),
// within most; never more than the claims still expected (Expect).
func (ks *keyState) targetLocked(size, most int, now time.Time) int {
	t := max(size, min(most, size+ks.demandLocked(now)))
	if ks.bounded {
		t = min(t, ks.expected)
	}
	return t
}

// demandLocked is how many takes of ks are to be expected while one
// sandbox is created: the takes per second over the demand window times
// the average create time, with half again as margin; 0 until two takes
// and a create were seen. The rate is the n takes' n−1 intervals over the
// time from the first to now: right after a take that is the loop's own
// rate (n over it read twice the rate from two takes, so a burst's first
// resets looked like a loop that drains a deep pool, and its refills ran
// beside the whole burst), and it falls while no take comes.
func (ks *keyState) demandLocked(now time.Time) int {
	n := 0
	for _, t := range ks.takes {
		if now.Sub(t) <= demandWindow {
			n++
		}
	}
	if n < 2 || ks.createAvg <= 0 {
		return 0
	}
	first := ks.takes[len(ks.takes)-n]
	span := now.Sub(first)
	if span <= 0 {
		return 0
	}
	rate := float64(n-1) / span.Seconds()
	return int(math.Ceil(rate * ks.createAvg.Seconds() * 1.5))
}

// needLocked is how many idle sandboxes a loop of takes needs kept while
// one is created (at least one): below it, a refill starts at once.
func (ks *keyState) needLocked(now time.Time) int {
	return max(1, ks.demandLocked(now))
}

type member struct {
	env    environment.Environment
	staged *app.Bundle // the app staged in it ahead; nil for none
	// launched is the app launched in it ahead (Launch); appDone is
	// closed when that app's exit arrives while the sandbox is idle.
	launched *session.Launched
	appDone  <-chan struct{}
	ks       *keyState
	relay    *session.Relay
	created  time.Duration
	since    time.Time
	done     <-chan struct{} // nil when the environment cannot tell
	checking bool            // a ping is in flight
	misses   int             // pings in a row that failed
}

// New starts a pool; nothing is created until Warm or Take names a key.
func New(o Options) (*Pool, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p := &Pool{o: o, wake: make(chan struct{}, 1), done: make(chan struct{}), keys: map[Key]*keyState{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.fill()
	return p, nil
}

// Size is the number of idle sandboxes kept per key.
func (p *Pool) Size() int { return p.o.Size }

// Warm keeps cfg's key warm from now on (it is never dropped) and starts
// filling it.
func (p *Pool) Warm(cfg session.Config) error {
	return p.withKey(cfg, true, func(ks *keyState) {
		p.noteAppLocked(ks, cfg.App)
		p.noteLaunchLocked(ks, cfg)
	})
}

// Expect tells the pool that at most n more claims of cfg's key will
// come, beside those waiting now (TakeWait): from then on it makes no more
// of the key's sandboxes than those can take, so that a caller that knows
// its work (an eval's episodes not yet started, less the sandboxes it
// reset in place for them) does not pay for sandboxes nobody takes. The
// caller keeps n current as its work goes; n < 0 forgets the bound (the
// default: the key's demand alone sizes it). Sandboxes already idle or
// being made stay. A key the pool does not hold yet is added (as a Take
// would add it), so that Expect before Warm bounds the first fill too.
func (p *Pool) Expect(cfg session.Config, n int) error {
	return p.withKey(cfg, false, func(ks *keyState) {
		ks.expected, ks.bounded = n, n >= 0
	})
}

// withKey calls f, under the lock, with cfg's key (added if new, pinned
// when pin), and wakes the filler.
func (p *Pool) withKey(cfg session.Config, pin bool, f func(*keyState)) error {
	k, env, err := KeyOf(cfg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("pool: closed")
	}
	ks := p.keyLocked(k, cfg.Backend, env, pin)
	if ks == nil {
		return fmt.Errorf("pool: already %d keys (the most)", p.o.MaxKeys)
	}
	f(ks)
	p.kick()
	return nil
}

// noteLaunchLocked records the launch cfg's episode would make: the
// key's first launches ahead (Launch), and one that differs stops that
// for the key. It returns why cfg may not take a sandbox with its app
// running ("" when it may).
func (p *Pool) noteLaunchLocked(ks *keyState, cfg session.Config) string {
	if !p.o.Launch {
		return ""
	}
	spec, err := session.LaunchAheadSpec(cfg)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case ks.mixed:
		why = "more than one app asks for its sandboxes"
	case ks.launch == nil && ks.launchOff == "":
		ks.launch = &spec
		return ""
	case ks.launch != nil:
		why = session.LaunchMismatch(*ks.launch, spec)
	}
	if why != "" && ks.launchOff == "" {
		ks.launchOff = why
		p.o.Log("pool: %s: no longer launching the app ahead: %s", ks.key, why)
	}
	return why
}

// noteAppLocked records that b asked for ks: a second app makes the key
// mixed, and its sandboxes staged with the first are replaced by plain
// ones.
func (p *Pool) noteAppLocked(ks *keyState, b *app.Bundle) {
	if ks.mixed || b == nil {
		return
	}
	if ks.first == nil {
		ks.first = b
		return
	}
	if ks.first.SameFiles(b) {
		return
	}
	ks.mixed = true
	for _, m := range append([]*member(nil), ks.idle...) {
		if m.staged != nil || m.launched != nil {
			ks.removeLocked(m)
			p.replaceLocked(ks, m, "the key is asked for by more than one app: its sandboxes are no longer staged ahead")
		}
	}
}

// fits reports whether m may serve an episode of b that would launch with
// spec (nil: one that may not take an app launched ahead): it has no app
// staged, or b's, and no app launched, or the same launch.
func (m *member) fits(b *app.Bundle, spec *environment.LaunchSpec) bool {
	if m.staged != nil && !m.staged.SameFiles(b) {
		return false
	}
	return m.launched == nil || spec != nil && session.SameLaunch(m.launched.Spec, *spec)
}

// prepared is m handed to an episode.
func (m *member) prepared(p *Pool) *session.Prepared {
	return &session.Prepared{Env: m.env, Events: m.relay, Created: m.created, Launched: m.launched, Release: p.release}
}

// Take hands cfg a warm sandbox of its key as cfg.Prepared and reports
// true; session.Open then owns it. It reports false when the key has no
// idle sandbox that fits cfg's app (or the pool is closed): cfg is
// unchanged and the caller creates one cold, as without a pool. Either
// way the key is kept warm from now on (within MaxKeys).
func (p *Pool) Take(cfg *session.Config) bool {
	ok, _ := p.take(cfg, false)
	return ok
}

// TakeWait is Take, except that when the key has no idle sandbox but a
// create under way that no other claim waits for, it waits for that
// create (until it ends, or ctx does) rather than report false at once.
// A create that fails, a Close or ctx's end report false: create one
// cold.
func (p *Pool) TakeWait(ctx context.Context, cfg *session.Config) (ok bool) {
	ok, w := p.take(cfg, true)
	if ok || w == nil {
		return ok
	}
	defer func() {
		if !ok && p.o.Launch && cfg.NotLaunchedAhead == "" {
			cfg.NotLaunchedAhead = "no idle sandbox had the app running, and none came: created cold"
		}
	}()
	var m *member
	select {
	case m = <-w.ch:
	case <-ctx.Done():
		p.mu.Lock()
		if ks := p.keyOfWaiterLocked(w); ks != nil {
			ks.removeWaiterLocked(w)
			p.cold++
			ks.cold++
			p.mu.Unlock()
			return false
		}
		p.mu.Unlock()
		m = <-w.ch // handed one meanwhile: give it back
		if m != nil {
			p.mu.Lock()
			p.giveBackLocked(m)
			p.mu.Unlock()
		}
		return false
	}
	if m == nil {
		return false // counted cold where it was decided
	}
	cfg.Prepared = m.prepared(p)
	if m.launched == nil && p.o.Launch && cfg.NotLaunchedAhead == "" {
		cfg.NotLaunchedAhead = "the sandbox it waited for was made without the app"
	}
	return true
}

// take is Take; with wait, a claim that can wait for a create under way
// is registered and returned instead (ok false, w set).
func (p *Pool) take(cfg *session.Config, wait bool) (ok bool, w *waiter) {
	if cfg.Prepared != nil {
		return false, nil
	}
	k, env, err := KeyOf(*cfg)
	if err != nil {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, nil
	}
	ks := p.keyLocked(k, cfg.Backend, env, false)
	if ks == nil {
		p.cold++
		p.dropped++
		return false, nil
	}
	defer p.kick()
	p.noteAppLocked(ks, cfg.App)
	why := p.noteLaunchLocked(ks, *cfg)
	var spec *environment.LaunchSpec // the claim's launch, when it may take one launched ahead
	if p.o.Launch && why == "" {
		if sp, err := session.LaunchAheadSpec(*cfg); err == nil {
			spec = &sp
		}
	}
	ks.noteTakeLocked(time.Now())
	for {
		// One whose liveness check is in flight is handed out too (the
		// check's answer is then dropped): a ping that a busy machine
		// answers slowly must not turn a warm sandbox into a cold start.
		// Ones with cfg's app launched go first, then ones staged with
		// it, then ones not being checked, then the oldest; one staged
		// with another app, or launched otherwise, never.
		i, best := -1, -1
		for j, m := range ks.idle {
			if !m.fits(cfg.App, spec) {
				continue
			}
			score := 0
			if m.launched != nil {
				score += 4
			}
			if m.staged != nil {
				score += 2
			}
			if !m.checking {
				score++
			}
			if score > best {
				i, best = j, score
			}
		}
		if i < 0 {
			break
		}
		m := ks.idle[i]
		ks.idle = append(ks.idle[:i], ks.idle[i+1:]...)
		if m.dead() {
			p.replaceLocked(ks, m, m.deadWhy())
			continue
		}
		ks.warm++
		p.warm++
		ks.prevTaken, ks.taken = ks.taken, time.Now()
		cfg.Prepared = m.prepared(p)
		if m.launched != nil {
			p.launched++
		} else if p.o.Launch {
			cfg.NotLaunchedAhead = notLaunched(why, "no idle sandbox had the app running")
		}
		return true, nil
	}
	if p.o.Launch {
		cfg.NotLaunchedAhead = notLaunched(why, "no idle sandbox had the app running: created cold")
	}
	// A claim that may not take an app launched ahead waits only when no
	// create under way launches one (it would be handed one it cannot
	// use).
	if wait && ks.creating > len(ks.waiters) && (spec != nil || ks.creatingLaunched == 0) {
		if p.o.Launch && spec != nil {
			cfg.NotLaunchedAhead = "" // the sandbox it waits for says
		}
		w := &waiter{ch: make(chan *member, 1), since: time.Now()}
		ks.waiters = append(ks.waiters, w)
		return false, w
	}
	ks.cold++
	p.cold++
	return false, nil
}

// notLaunched is why a claim was not handed an app launched ahead: its
// own launch's reason, else the pool's.
func notLaunched(why, pools string) string {
	if why != "" {
		return "the episode's launch differs from the one launched ahead: " + why
	}
	return pools
}

// keyOfWaiterLocked is the key w still waits on; nil once it was answered.
func (p *Pool) keyOfWaiterLocked(w *waiter) *keyState {
	for _, ks := range p.keys {
		for _, x := range ks.waiters {
			if x == w {
				return ks
			}
		}
	}
	return nil
}

func (ks *keyState) removeWaiterLocked(w *waiter) {
	for i, x := range ks.waiters {
		if x == w {
			ks.waiters = append(ks.waiters[:i], ks.waiters[i+1:]...)
			return
		}
	}
}

// answerLocked hands m (nil: none) to ks's oldest waiter and counts the
// claim; false when none waits.
func (p *Pool) answerLocked(ks *keyState, m *member) bool {
	if len(ks.waiters) == 0 {
		return false
	}
	w := ks.waiters[0]
	ks.waiters = ks.waiters[1:]
	if m == nil {
		ks.cold++
		p.cold++
	} else {
		ks.warm++
		p.warm++
		p.waited++
		if m.launched != nil {
			p.launched++
		}
		p.waits = appendBounded(p.waits, time.Since(w.since))
		ks.prevTaken, ks.taken = ks.taken, time.Now()
	}
	w.ch <- m
	return true
}

// giveBackLocked returns a member handed to a claim that gave up to its
// key's idle sandboxes (or removes it when the key is gone).
func (p *Pool) giveBackLocked(m *member) {
	ks := m.ks
	if p.closed || p.keys[ks.key] != ks {
		p.closeLocked(m)
		return
	}
	ks.warm--
	p.warm--
	p.waited--
	if m.launched != nil {
		p.launched--
	}
	ks.cold++
	p.cold++
	ks.idle = append([]*member{m}, ks.idle...)
	if m.done != nil || m.appDone != nil {
		p.closing.Add(1)
		go p.watch(ks, m)
	}
}

// dead reports whether the member's sandbox, or the app launched in it,
// has ended, without waiting.
func (m *member) dead() bool {
	return closedNow(m.done) || closedNow(m.appDone)
}

// deadWhy says how a dead member ended.
func (m *member) deadWhy() string {
	if closedNow(m.appDone) && !closedNow(m.done) {
		return "its app, launched ahead, ended while idle"
	}
	return "it ended while idle"
}

// closedNow reports whether ch (nil: never) is closed, without waiting.
func closedNow(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// keyLocked is k's state, made when new (nil when MaxKeys are taken).
func (p *Pool) keyLocked(k Key, b environment.Backend, env environment.Config, pin bool) *keyState {
	ks := p.keys[k]
	if ks == nil {
		if len(p.keys) >= p.o.MaxKeys {
			p.expireLocked(time.Now())
			if len(p.keys) >= p.o.MaxKeys {
				return nil
			}
		}
		env.RunID = p.o.RunID
		env.Events = nil
		ks = &keyState{key: k, backend: b, cfg: env}
		p.keys[k] = ks
	}
	ks.pinned = ks.pinned || pin
	ks.wanted = time.Now()
	return ks
}

// kick wakes the filler.
func (p *Pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// replaceLocked drops a member that cannot serve (it ended, or did not
// answer) and removes its sandbox in the background; the filler makes
// another.
func (p *Pool) replaceLocked(ks *keyState, m *member, why string) {
	ks.replaced++
	p.replaced++
	p.o.Log("pool: replacing a sandbox of %s: %s", ks.key, why)
	p.closeLocked(m)
	p.kick()
}

// closeLocked removes a member's sandbox in the background (Close waits
// for it).
func (p *Pool) closeLocked(m *member) { p.removeEnvLocked(m.env, false) }

// removeEnvLocked removes env in the background (Close waits for it); a
// released one counts in removing until it is gone, and its end wakes
// the filler for the next.
func (p *Pool) removeEnvLocked(env environment.Environment, released bool) {
	if released {
		p.removing++
	}
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), p.o.CloseTimeout)
		defer cancel()
		if err := env.Close(ctx); err != nil {
			p.o.Log("pool: removing a sandbox: %v", err)
		}
		if released {
			p.mu.Lock()
			p.removing--
			p.mu.Unlock()
			p.kick()
		}
	}()
}

// release ends a sandbox the pool handed out, at the end of its episode
// (session.Prepared.Release). While the pool serves a loop of takes from
// idle sandboxes (loopingLocked) it stops the app (environment.AppHolder)
// and leaves the sandbox to the filler, which removes it once the loop
// pauses or it has waited ReleasedWait (startRemovalsLocked); at most
// Max wait, the oldest removed first. Otherwise, or where the app cannot
// be stopped, it removes the sandbox now. It reports whether the removal
// was deferred.
func (p *Pool) release(ctx context.Context, env environment.Environment) (deferred bool, err error) {
	h, ok := env.(environment.AppHolder)
	p.mu.Lock()
	defer_ := ok && !p.closed && p.loopingLocked(time.Now())
	p.mu.Unlock()
	if !defer_ {
		return false, env.Close(ctx)
	}
	if _, err := h.HoldApp(ctx, true); err != nil {
		p.o.Log("pool: stopping an ended episode's app (its sandbox is removed now): %v", err)
		return false, env.Close(ctx)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false, env.Close(ctx)
	}
	if len(p.released) >= p.o.Max { // at most Max wait: the oldest goes now
		p.removeEnvLocked(p.released[0].env, true)
		p.released = p.released[1:]
	}
	p.released = append(p.released, releasedEnv{env, time.Now()})
	p.deferred++
	p.mu.Unlock()
	p.kick()
	return true, nil
}

// loopingLocked reports whether a key serves a loop of takes now: its
// last two warm takes came within RefillDelay of each other, the last
// within RefillDelay of now, and it has an idle sandbox left for the
// next (a drained key's episodes wait for creates, which removals then
// share the CPU with either way).
func (p *Pool) loopingLocked(now time.Time) bool {
	for _, ks := range p.keys {
		if len(ks.idle) > 0 && now.Sub(ks.taken) < p.o.RefillDelay && ks.taken.Sub(ks.prevTaken) < p.o.RefillDelay {
			return true
		}
	}
	return false
}

// releasedEnv is a sandbox released inside a loop, and when.
type releasedEnv struct {
	env environment.Environment
	at  time.Time
}

// startRemovalsLocked starts removing the released sandboxes once no key
// was taken from for RefillDelay (the loop paused), and those that waited
// ReleasedWait either way, as many at once as creates may run; it
// returns how long until one of those may be due (0: none waits). Close
// removes the rest.
func (p *Pool) startRemovalsLocked(now time.Time) (retry time.Duration) {
	if len(p.released) == 0 || p.closed {
		return 0
	}
	var last time.Time
	for _, ks := range p.keys {
		if ks.taken.After(last) {
			last = ks.taken
		}
	}
	paused := !now.Before(last.Add(p.o.RefillDelay))
	for len(p.released) > 0 && p.removing < p.parallelMost() {
		r := p.released[0]
		if !paused && now.Before(r.at.Add(p.o.ReleasedWait)) {
			break
		}
		p.released = p.released[1:]
		p.removeEnvLocked(r.env, true)
	}
	if len(p.released) == 0 || p.removing >= p.parallelMost() {
		return 0 // a removal's end kicks the filler
	}
	due := p.released[0].at.Add(p.o.ReleasedWait)
	if !paused {
		due = minTime(due, last.Add(p.o.RefillDelay))
	}
	return max(due.Sub(now), time.Millisecond)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// held is the sandboxes the pool holds: idle and being created.
func (p *Pool) heldLocked() int {
	n := p.creating
	for _, ks := range p.keys {
		n += len(ks.idle)
	}
	return n
}

// fill creates what the keys lack, checks the idle sandboxes and drops
// keys nobody wants, until Close.
func (p *Pool) fill() {
	defer close(p.done)
	check := time.NewTicker(min(p.o.CheckEvery, time.Second))
	defer check.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case now := <-check.C:
			p.mu.Lock()
			p.expireLocked(now)
			p.mu.Unlock()
			if now.Sub(lastCheck) >= p.o.CheckEvery {
				lastCheck = now
				p.check()
			}
		}
		p.startCreates()
	}
}

// startCreates starts the creates the keys lack, within the bounds.
func (p *Pool) startCreates() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var retry time.Duration
	for !p.closed && p.creating < p.parallelMost() && p.heldLocked() < p.o.Max {
		// The key furthest below Size goes first; ties by key order, so
		// the choice is the same every time.
		var best *keyState
		bestLack := 0
		for _, ks := range p.sortedKeysLocked() {
			lack := ks.targetLocked(p.o.Size, p.o.Max, now) - len(ks.idle) - ks.creating + len(ks.waiters)
			if lack <= 0 {
				continue
			}
			if p.creating >= p.parallelFor(ks) {
				continue
			}
			if wait := p.refillAtLocked(ks, now); now.Before(wait) {
				if d := wait.Sub(now); retry == 0 || d < retry {
					retry = d
				}
				continue
			}
			if lack > bestLack {
				best, bestLack = ks, lack
			}
		}
		if best == nil {
			break
		}
		best.creating++
		p.creating++
		launch := p.launchLocked(best)
		if launch != nil {
			best.creatingLaunched++
		}
		p.closing.Add(1)
		go p.create(best, best.stageLocked(), launch)
	}
	if d := p.startRemovalsLocked(now); d > 0 && (retry == 0 || d < retry) {
		retry = d
	}
	if retry > 0 {
		time.AfterFunc(retry, p.kick)
	}
}

// refillAtLocked is when ks may be refilled: after a failed create's
// retry time, and after a take by RefillDelay (so that the episode's start
// goes first) unless the key is drained or a claim waits. A loop's takes
// (two within RefillDelay) are refilled at once, unless the key still
// holds more idle sandboxes than the loop takes while one is created
// (needLocked): then the refill waits until the loop pauses or takes the
// key down to that many, and its creates do not compete for the CPU with
// the loop's episodes (a deep pool serving a burst of resets).
func (p *Pool) refillAtLocked(ks *keyState, now time.Time) time.Time {
	wait := ks.retryAt
	loop := ks.taken.Sub(ks.prevTaken) < p.o.RefillDelay
	if len(ks.idle) > 0 && len(ks.waiters) == 0 && (!loop || len(ks.idle) > ks.needLocked(now)) && ks.taken.Add(p.o.RefillDelay).After(wait) {
		wait = ks.taken.Add(p.o.RefillDelay)
	}
	return wait
}

// parallelFor bounds the creates under way (over all keys) while ks's
// is started: Options.Parallel, else by ks's backend.
func (p *Pool) parallelFor(ks *keyState) int {
	if p.o.Parallel > 0 {
		return p.o.Parallel
	}
	// Only while the key is drained (no idle sandbox, or a claim
	// waiting): the daemon's work for more creates at once is CPU the
	// episodes running do not get (a filled pool of 16 refilling four at
	// once slowed the episodes taking from it).
	if ks.key.Backend == "docker" && (len(ks.idle) == 0 || len(ks.waiters) > 0) {
		return DefaultParallelDocker
	}
	return DefaultParallel
}

// parallelMost is the largest bound parallelFor may give.
func (p *Pool) parallelMost() int {
	if p.o.Parallel > 0 {
		return p.o.Parallel
	}
	return max(DefaultParallel, DefaultParallelDocker)
}

func (p *Pool) sortedKeysLocked() []*keyState {
	out := make([]*keyState, 0, len(p.keys))
	for _, ks := range p.keys {
		out = append(out, ks)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].key.String()+out[i].key.Network < out[j].key.String()+out[j].key.Network
	})
	return out
}

// create makes one sandbox for ks, with stage staged in it (nil: none)
// and launch's app launched in it (nil: none).
func (p *Pool) create(ks *keyState, stage *app.Bundle, launch *environment.LaunchSpec) {
	defer p.closing.Done()
	relay := session.NewRelay()
	cfg := ks.cfg
	cfg.Events = relay
	cfg.RunID = fmt.Sprintf("%s-%d", p.o.RunID, p.seq.Add(1)) // backends name sandboxes by it
	ctx, cancel := context.WithTimeout(p.ctx, p.o.CreateTimeout)
	t := time.Now()
	env, err := ks.backend.Create(ctx, cfg)
	if err == nil && stage != nil {
		if st, ok := env.(stager); ok {
			if err = st.Stage(ctx, stage); err != nil {
				err = fmt.Errorf("staging %s ahead: %w", stage.Target, err)
				cctx, ccancel := context.WithTimeout(context.Background(), p.o.CloseTimeout)
				_ = env.Close(cctx)
				ccancel()
			}
		} else {
			stage = nil
		}
	}
	created := time.Since(t)
	var launched *session.Launched
	var appDone <-chan struct{}
	if err == nil && launch != nil {
		// The app's events (its output, its exit) are held for the
		// episode that takes the sandbox; an exit meanwhile closes
		// appDone, and the sandbox is replaced.
		appDone = relay.Hold()
		lt := time.Now()
		var lr environment.LaunchResult
		if lr, err = env.Launch(ctx, *launch); err != nil {
			err = fmt.Errorf("launching %s ahead: %w", launch.App.Target, err)
			cctx, ccancel := context.WithTimeout(context.Background(), p.o.CloseTimeout)
			_ = env.Close(cctx)
			ccancel()
		} else {
			launched = &session.Launched{Spec: *launch, Result: lr, Started: lt, Took: time.Since(lt)}
			p.hold(ctx, env, launched)
		}
	}
	cancel()

	p.mu.Lock()
	defer p.mu.Unlock()
	ks.creating--
	p.creating--
	if launch != nil {
		ks.creatingLaunched--
	}
	defer p.kick()
	if err != nil {
		if p.closed {
			return
		}
		ks.failed++
		p.failed++
		ks.failStreak++
		ks.lastErr = err.Error()
		backoff := min(time.Second<<min(ks.failStreak-1, 6), time.Minute)
		ks.retryAt = time.Now().Add(backoff)
		p.o.Log("pool: creating a sandbox of %s failed (trying again in %v): %v", ks.key, backoff, err)
		for len(ks.waiters) > ks.creating { // more claims wait than creates are under way
			w := ks.waiters[len(ks.waiters)-1]
			ks.waiters = ks.waiters[:len(ks.waiters)-1]
			ks.cold++
			p.cold++
			w.ch <- nil
		}
		return
	}
	ks.failStreak, ks.lastErr = 0, ""
	now := time.Now()
	if ks.createAvg == 0 {
		ks.createAvg = created
	} else {
		ks.createAvg = (3*ks.createAvg + created) / 4
	}
	p.creates = appendBounded(p.creates, created)
	if len(ks.waiting) > 0 {
		p.refills = appendBounded(p.refills, now.Sub(ks.waiting[0]))
		ks.waiting = ks.waiting[1:]
	}
	m := &member{env: env, relay: relay, created: created, since: now, staged: stage, launched: launched, appDone: appDone, ks: ks}
	if l, ok := env.(environment.Liveness); ok {
		m.done = l.Done()
	}
	if p.closed || p.keys[ks.key] != ks || (stage != nil || launched != nil) && ks.mixed {
		p.closeLocked(m) // closed or dropped meanwhile, or staged with an app the key no longer stages
		return
	}
	if m.dead() {
		p.replaceLocked(ks, m, m.deadWhy())
		for len(ks.waiters) > ks.creating {
			p.answerLocked(ks, nil)
		}
		return
	}
	if p.answerLocked(ks, m) {
		return // a claim waited for it (TakeWait)
	}
	ks.idle = append(ks.idle, m)
	if m.done != nil || m.appDone != nil {
		p.closing.Add(1)
		go p.watch(ks, m)
	}
}

// hold stops the app just launched ahead in env while the sandbox waits
// for an episode (environment.AppHolder), so that an idle app (the mover
// draws at 60 Hz) takes no CPU from the episodes running; the episode
// that takes the sandbox lets it go (session.Open). Where env cannot, or
// the hold fails, the app runs idle as before.
func (p *Pool) hold(ctx context.Context, env environment.Environment, l *session.Launched) {
	h, ok := env.(environment.AppHolder)
	if !ok {
		return
	}
	at := time.Now()
	held, err := h.HoldApp(ctx, true)
	if err != nil {
		p.o.Log("pool: holding the app launched ahead (it runs idle instead): %v", err)
		return
	}
	if held.Processes > 0 {
		l.Held = at
	}
}

// watch replaces m the moment its sandbox ends while it is idle.
func (p *Pool) watch(ks *keyState, m *member) {
	defer p.closing.Done()
	select {
	case <-m.done: // a nil channel never fires
	case <-m.appDone:
	case <-p.ctx.Done():
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if ks.holdsLocked(m) { // else taken (its session owns it) or removed already
		ks.removeLocked(m)
		p.replaceLocked(ks, m, m.deadWhy())
	}
}

// check pings every idle sandbox that can be pinged, one at a time; one
// that failed MaxMisses pings in a row is replaced (a single slow answer on
// a busy machine is not a dead sandbox: a sandbox that ended is noticed at
// once through Done). Only the sandbox being pinged is marked, and Take
// may hand it out meanwhile: then its answer is dropped.
func (p *Pool) check() {
	type job struct {
		ks *keyState
		m  *member
	}
	var jobs []job
	p.mu.Lock()
	for _, ks := range p.keys {
		for _, m := range ks.idle {
			if _, ok := m.env.(environment.Liveness); ok && !m.checking {
				jobs = append(jobs, job{ks, m})
			}
		}
	}
	p.mu.Unlock()
	for _, j := range jobs {
		p.mu.Lock()
		if p.closed || !j.ks.holdsLocked(j.m) || j.m.checking {
			p.mu.Unlock()
			continue // taken, replaced or dropped meanwhile
		}
		j.m.checking = true
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(p.ctx, pingTimeout)
		err := j.m.env.(environment.Liveness).Ping(ctx)
		cancel()
		p.mu.Lock()
		j.m.checking = false
		switch {
		case p.closed || !j.ks.holdsLocked(j.m):
			// Taken (its session owns it now) or removed meanwhile.
		case err == nil:
			j.m.misses = 0
		default:
			j.m.misses++
			if j.m.misses >= maxMisses {
				j.ks.removeLocked(j.m)
				p.replaceLocked(j.ks, j.m, fmt.Sprintf("it did not answer %d pings in a row: %v", j.m.misses, err))
			} else {
				p.o.Log("pool: a sandbox of %s did not answer a ping (%d of %d before it is replaced): %v", j.ks.key, j.m.misses, maxMisses, err)
			}
		}
		p.mu.Unlock()
	}
}

const (
	pingTimeout = 5 * time.Second
	maxMisses   = 2
)

// holdsLocked reports whether m is one of ks's idle sandboxes.
func (ks *keyState) holdsLocked(m *member) bool {
	for _, x := range ks.idle {
		if x == m {
			return true
		}
	}
	return false
}

// removeLocked takes m out of ks's idle sandboxes.
func (ks *keyState) removeLocked(m *member) {
	for i, x := range ks.idle {
		if x == m {
			ks.idle = append(ks.idle[:i], ks.idle[i+1:]...)
			return
		}
	}
}

// expireLocked drops the keys nobody asked for in KeyIdle (not pinned).
func (p *Pool) expireLocked(now time.Time) {
	for k, ks := range p.keys {
		if ks.pinned || now.Sub(ks.wanted) < p.o.KeyIdle {
			continue
		}
		for _, m := range ks.idle {
			p.closeLocked(m) // one being pinged too: Close aborts the ping
		}
		ks.idle = nil
		for p.answerLocked(ks, nil) {
		}
		delete(p.keys, k)
	}
}

// Close stops filling and removes every sandbox the pool holds (those
// being created are stopped and removed by their backend) and the
// released ones waiting for a loop to pause, waiting for all of it up to
// ctx's deadline. Sandboxes already taken belong to their sessions until
// they release them. Close is idempotent.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for _, ks := range p.keys {
			for _, m := range ks.idle {
				p.closeLocked(m)
			}
			ks.idle = nil
			for p.answerLocked(ks, nil) {
			}
		}
		for _, r := range p.released {
			p.removeEnvLocked(r.env, true)
		}
		p.released = nil
	}
	p.mu.Unlock()
	p.cancel()
	<-p.done
	waited := make(chan struct{})
	go func() {
		p.closing.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pool: removing the pooled sandboxes: %w", ctx.Err())
	}
}

// Stats are the pool's counts.
type Stats struct {
	Size     int `json:"size"`
	Max      int `json:"max"`
	Idle     int `json:"idle"`
	Creating int `json:"creating"`
	// Warm counts claims served from the pool; Cold, claims that found
	// their key empty (the caller created a sandbox cold).
	Warm int64 `json:"warm"`
	Cold int64 `json:"cold"`
	// Replaced counts idle sandboxes that ended or stopped answering and
	// were replaced; Failed, creates that failed.
	Replaced int64 `json:"replaced"`
	Failed   int64 `json:"failed"`
	// Waited counts the warm claims that waited for a create under way
	// (TakeWait); WaitP50 and WaitP95 are how long, over the newest.
	Waited int64 `json:"waited"`
	// Launched counts the warm claims handed a sandbox with their app
	// running (Options.Launch).
	Launched int64         `json:"launched"`
	WaitP50  time.Duration `json:"wait_p50_ns"`
	WaitP95  time.Duration `json:"wait_p95_ns"`
	// HitRate is Warm / (Warm + Cold): the share of claims served warm
	// (those that waited included).
	HitRate float64 `json:"hit_rate"`
	// RefillP50 and RefillP95 are the times from a take to the create
	// that made it up (a take that emptied the key waits that long for
	// the next warm one), over the newest takes; CreateP50 a create's.
	RefillP50 time.Duration `json:"refill_p50_ns"`
	RefillP95 time.Duration `json:"refill_p95_ns"`
	CreateP50 time.Duration `json:"create_p50_ns"`
	// Released is how many sandboxes whose episode ended inside a loop of
	// takes wait for it to pause to be removed, their apps stopped;
	// Deferred counts those ever deferred so.
	Released int        `json:"released"`
	Deferred int64      `json:"deferred"`
	Keys     []KeyStats `json:"keys,omitempty"`
}

// KeyStats are one key's counts.
type KeyStats struct {
	Key  Key `json:"key"`
	Idle int `json:"idle"`
	// Target is how many idle sandboxes the key is kept at now: Size, or
	// more while its demand needs them.
	Target    int    `json:"target"`
	Creating  int    `json:"creating"`
	Warm      int64  `json:"warm"`
	Cold      int64  `json:"cold"`
	Replaced  int64  `json:"replaced"`
	Failed    int64  `json:"failed"`
	LastError string `json:"last_error,omitempty"`
}

// Stats reports the pool's counts now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Size: p.o.Size, Max: p.o.Max, Creating: p.creating, Warm: p.warm, Cold: p.cold, Replaced: p.replaced, Failed: p.failed,
		Waited: p.waited, Launched: p.launched, WaitP50: percentile(p.waits, 0.5), WaitP95: percentile(p.waits, 0.95),
		RefillP50: percentile(p.refills, 0.5), RefillP95: percentile(p.refills, 0.95), CreateP50: percentile(p.creates, 0.5),
		Released: len(p.released), Deferred: p.deferred}
	if n := p.warm + p.cold; n > 0 {
		st.HitRate = float64(p.warm) / float64(n)
	}
	now := time.Now()
	for _, ks := range p.sortedKeysLocked() {
		st.Idle += len(ks.idle)
		st.Keys = append(st.Keys, KeyStats{Key: ks.key, Idle: len(ks.idle), Target: ks.targetLocked(p.o.Size, p.o.Max, now), Creating: ks.creating,
			Warm: ks.warm, Cold: ks.cold, Replaced: ks.replaced, Failed: ks.failed, LastError: ks.lastErr})
	}
	return st
}

// Idle describes the idle sandboxes, every key's.
func (p *Pool) Idle() []environment.Info {
	p.mu.Lock()
	var ms []*member
	for _, ks := range p.sortedKeysLocked() {
		ms = append(ms, ks.idle...)
	}
	p.mu.Unlock()
	out := make([]environment.Info, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.env.Info())
	}
	return out
}

// Wait waits until every key has Size idle sandboxes, or as many as the
// claims it expects (Expect), or the pool holds Max, or ctx ends. For
// benchmarks and tests.
func (p *Pool) Wait(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		p.mu.Lock()
		full := p.heldLocked() >= p.o.Max && p.creating == 0
		if !full {
			full = true
			for _, ks := range p.keys {
				if len(ks.idle) < p.o.Size && (!ks.bounded || len(ks.idle) < ks.expected) {
					full = false
				}
			}
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return errors.New("pool: closed")
		}
		if full {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool: waiting for the pool to fill: %w (%+v)", ctx.Err(), p.Stats())
		case <-t.C:
		}
	}
}
