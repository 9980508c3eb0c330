package guest

import (
	"context"
	"errors"
	"time"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

type windowInfo = observe.Window

// watchWindows keeps the window cache current and tells the host about
// windows appearing, retitling and going away. A refresh that fails (the
// server too slow to answer within refreshTimeout on a loaded machine) is
// tried again until one succeeds: the notification that asked for it will
// not come again, and a window mapped then would stay missing from the
// cache (a launch then waits its whole ready timeout for a window that is
// up; e2e TestEvalSuite saw it once in CI, 2026-12-04).
func (g *Guest) watchWindows() {
	changed := g.x.WindowsChanged()
	failing := false
	for {
		err := g.refreshWindows()
		switch {
		case err == nil && failing:
			g.logf("info", "window list read again")
			failing = false
		case err != nil && errors.Is(err, x11.ErrClosed):
			return
		case err != nil:
			if !failing {
				g.logf("warn", "reading the window list: %v (trying again)", err)
			}
			failing = true
			select {
			case _, ok := <-changed:
				if !ok {
					return
				}
			case <-time.After(refreshRetry):
			}
			continue
		}
		if _, ok := <-changed; !ok {
			return
		}
	}
}

// refreshTimeout bounds one read of the window list (Guest.refreshLimit
// replaces it in tests); refreshRetry is the pause before a failed one is
// tried again.
const (
	refreshTimeout = 2 * time.Second
	refreshRetry   = 50 * time.Millisecond
)

// refreshWindows reads the window list into the cache and notifies the
// host of what changed; on an error the cache is left as it was.
func (g *Guest) refreshWindows() error {
	limit := refreshTimeout
	if d := g.refreshLimit.Load(); d != 0 {
		limit = time.Duration(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ws, err := g.x.Windows(ctx)
	if err != nil {
		return err
	}
	list := make([]observe.Window, 0, len(ws))
	for _, w := range ws {
		if !w.Mapped {
			continue
		}
		list = append(list, observe.Window{ID: w.ID, Title: w.Title, X: w.X, Y: w.Y, Width: w.Width, Height: w.Height, Focused: w.Focused})
	}

	g.winMu.Lock()
	old := g.windows
	g.windows = list
	ch := g.winCh
	g.winCh = make(chan struct{})
	g.winMu.Unlock()
	close(ch)

	byID := map[uint32]observe.Window{}
	for _, w := range old {
		byID[w.ID] = w
	}
	for _, w := range list {
		prev, ok := byID[w.ID]
		switch {
		case !ok:
			_ = g.conn.Notify(wire.EventWindow, wire.WindowEvent{Kind: "mapped", Window: w}, nil)
		case prev.Title != w.Title:
			_ = g.conn.Notify(wire.EventWindow, wire.WindowEvent{Kind: "title", Window: w}, nil)
		}
		delete(byID, w.ID)
	}
	for _, w := range byID {
		_ = g.conn.Notify(wire.EventWindow, wire.WindowEvent{Kind: "unmapped", Window: w}, nil)
	}
	return nil
}

// windowList returns the cached windows.
func (g *Guest) windowList() []observe.Window {
	g.winMu.Lock()
	defer g.winMu.Unlock()
	return append([]observe.Window(nil), g.windows...)
}

// waitWindow waits until a mapped window's title satisfies match, the app
// exits (appDone), or ctx ends.
func (g *Guest) waitWindow(ctx context.Context, match func(string) bool, appDone <-chan struct{}) (*observe.Window, error) {
	for {
		g.winMu.Lock()
		for _, w := range g.windows {
			if match(w.Title) {
				w := w
				g.winMu.Unlock()
				return &w, nil
			}
		}
		ch := g.winCh
		g.winMu.Unlock()
		select {
		case <-ch:
		case <-appDone:
			return nil, errAppExited
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
