package eval

import (
	"context"
	"sync"

	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
)

// claims counts, by task, the episodes not started yet and, with
// Options.Relaunch, the sandboxes reset in place for them: kept (idle,
// reset) and being kept (their episodes running).
//
// An episode keeps its sandbox only while the task's sandboxes kept and
// being kept do not cover its episodes not yet started: the last episodes
// of a task end as a run without relaunch does, their sandboxes removed at
// their end, beside the episodes still running, not all at the eval's
// end, and not reset first for nobody.
//
// With a warm pool, claims keeps the pool's expectation of each key
// current (pool.Expect): the sandboxes the episodes not started yet may
// still take, so that the pool makes none that no episode takes.
type claims struct {
	mu       sync.Mutex
	relaunch bool
	parallel int
	byID     map[string][]*session.Prepared
	pending  map[string]int // episodes of each task not started yet
	keeping  map[string]int // episodes of each task running that keep their sandbox
	// told, when set, is told a task's need after each change, under mu
	// (tellPool).
	told func(task string, need int)
}

// newClaims counts eps, about to run, Parallel at a time.
func newClaims(eps []*Episode, relaunch bool, parallel int) *claims {
	c := &claims{relaunch: relaunch, parallel: max(parallel, 1), byID: map[string][]*session.Prepared{}, pending: map[string]int{}, keeping: map[string]int{}}
	for _, ep := range eps {
		c.pending[ep.Task]++
	}
	return c
}

// needLocked is how many new sandboxes the task's episodes not started
// yet may still take: each of them without relaunch; with it, no more
// than can run at once, less the sandboxes kept and being kept for them.
func (c *claims) needLocked(task string) int {
	if !c.relaunch {
		return c.pending[task]
	}
	return max(0, min(c.pending[task], c.parallel)-len(c.byID[task])-c.keeping[task])
}

// start is an episode of task starting: it takes the task's last kept
// sandbox (nil if none) and says whether the episode is to keep its own
// for a later episode (never without relaunch).
func (c *claims) start(task string) (p *session.Prepared, keep bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[task] > 0 {
		c.pending[task]--
	}
	if l := c.byID[task]; len(l) > 0 {
		p, c.byID[task] = l[len(l)-1], l[:len(l)-1]
	}
	keep = c.relaunch && len(c.byID[task])+c.keeping[task] < c.pending[task]
	if keep {
		c.keeping[task]++
	}
	c.tellLocked(task)
	return p, keep
}

// drop is an episode of task that ended before it started a sandbox (its
// agent or configuration would not do): it takes nothing.
func (c *claims) drop(task string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[task] > 0 {
		c.pending[task]--
	}
	c.tellLocked(task)
}

// put is a keeping episode's end: its sandbox, reset in place, or nil when
// it could not be reset (the session removed it).
func (c *claims) put(task string, p *session.Prepared) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keeping[task]--
	if p != nil {
		c.byID[task] = append(c.byID[task], p)
	}
	c.tellLocked(task)
}

func (c *claims) tellLocked(task string) {
	if c.told != nil {
		c.told(task, c.needLocked(task))
	}
}

// tellPool keeps pl's expectation of each task's key current from now on:
// the needs of the tasks that share the key (cfgs: each task's episode
// configuration; a task without one is not pooled), summed. It sets them
// now, before the pool is warmed.
func (c *claims) tellPool(pl *pool.Pool, cfgs map[string]session.Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := map[string]pool.Key{}
	for task, cfg := range cfgs {
		k, _, err := pool.KeyOf(cfg)
		if err != nil {
			return err
		}
		keys[task] = k
	}
	need := map[string]int{}
	expect := func(task string, n int) error {
		k, ok := keys[task]
		if !ok {
			return nil
		}
		need[task] = n
		sum := 0
		for other, ko := range keys {
			if ko == k {
				sum += need[other]
			}
		}
		return pl.Expect(cfgs[task], sum)
	}
	for task := range keys {
		need[task] = c.needLocked(task)
	}
	for task := range keys {
		if err := expect(task, need[task]); err != nil {
			return err
		}
	}
	c.told = func(task string, n int) { _ = expect(task, n) } // the key is held: Expect fails only once the pool is closed
	return nil
}

// close removes every kept sandbox.
func (c *claims) close(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range c.byID {
		for _, p := range l {
			wg.Go(func() { _ = p.Env.Close(ctx) })
		}
	}
	wg.Wait()
	c.byID = nil
}
