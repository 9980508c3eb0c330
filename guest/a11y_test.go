package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// TestGuestA11yOverPipe: without the bus, a tree is an invalid request and
// an action on a target is the agent's error; with it, zenity's tree is
// read over the protocol, a target it does not have names the near
// misses, and a click on its OK button ends the dialog with exit 0.
func TestGuestA11yOverPipe(t *testing.T) {
	_, lerr := os.Stat("/usr/libexec/at-spi-bus-launcher")
	testenv.Require(t, testenv.Programs("Xvfb", "openbox", "zenity", "dbus-daemon"), testenv.Condition("at-spi2-core", lerr))
	for _, a11y := range []bool{false, true} {
		h := startGuest(t)
		dir := t.TempDir()
		h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: 640, Height: 480, Depth: 24}, Home: filepath.Join(dir, "home"),
			AppDir: filepath.Join(dir, "app"), TimeoutMS: 30000, A11y: a11y}, nil, nil)
		ok := action.Selector{Role: "push button", Name: "OK"}
		click := action.Action{Kind: action.Click, Target: &ok}
		if !a11y {
			if _, err := h.call(wire.MethodA11yTree, wire.A11yTreeRequest{}, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
				t.Errorf("a tree without the bus: %v, want %s", err, wire.CodeInvalid)
			}
			var res action.Result
			h.must(wire.MethodAct, wire.ActRequest{Action: click}, &res, nil)
			if res.OK || !strings.Contains(res.Error, "no accessibility bus") {
				t.Errorf("a click on a target without the bus: %+v", res)
			}
			continue
		}
		h.must(wire.MethodLaunch, wire.LaunchRequest{Command: "zenity", InImage: true, Args: []string{"--question", "--title=Sure?", "--text=Really?", "--ok-label=OK"},
			WindowTitle: "Sure?", ReadyMS: 30000}, nil, nil)
		var tree observe.Tree
		for range 100 {
			h.must(wire.MethodA11yTree, wire.A11yTreeRequest{}, &tree, nil)
			if _, err := tree.Find(ok); err == nil {
				break
			}
			h.must(wire.MethodAct, wire.ActRequest{Action: action.Action{Kind: action.Wait, MS: 100}}, nil, nil)
		}
		if _, err := tree.Find(ok); err != nil {
			t.Fatalf("no OK button in the tree: %v", err)
		}
		var res action.Result
		h.must(wire.MethodAct, wire.ActRequest{Action: action.Action{Kind: action.Click, Target: &action.Selector{Role: "push button", Name: "Ok"}}}, &res, nil)
		if res.OK || !strings.Contains(res.Error, "no element matches") || !strings.Contains(res.Error, `push button "OK"`) {
			t.Errorf("a target that is not there: %+v", res)
		}
		h.must(wire.MethodAct, wire.ActRequest{Action: click}, &res, nil)
		if !res.OK || res.Target == nil || res.Target.Name != "OK" || res.Target.Point == nil || *res.Cursor != *res.Target.Point {
			t.Fatalf("click on OK: %+v (target %+v)", res, res.Target)
		}
		h.waitFor("zenity's exit", func(events []*wire.Message, _ string) bool {
			for _, m := range events {
				var e observe.Exit
				if m.Method == wire.EventExit && decodeBody(m, &e) == nil {
					if e.Code != 0 {
						t.Errorf("zenity exited %s, want 0 (OK)", e.String())
					}
					return true
				}
			}
			return false
		})
	}
}
