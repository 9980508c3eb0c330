package guest

import (
	"context"
	"time"

	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

type windowInfo = observe.Window

// watchWindows keeps the window cache current and tells the host about
// windows appearing, retitling and going away.
func (g *Guest) watchWindows() {
	g.refreshWindows()
	for range g.x.WindowsChanged() {
		g.refreshWindows()
	}
}

func (g *Guest) refreshWindows() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ws, err := g.x.Windows(ctx)
	if err != nil {
		return
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
