package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	at "github.com/codegirl-games/agentbox/agent/anthropic/anthropictest"
	"github.com/codegirl-games/agentbox/observe"
)

// checkRequest asserts what every request must carry: the key, the beta
// header, the computer tool with the display size, the system prompt, and
// images of exactly the display size.
func checkRequest(t *testing.T, r *at.Request, w, h int) {
	t.Helper()
	if got := r.Header.Get("X-Api-Key"); got != testKey {
		t.Errorf("request %d: x-api-key %q", r.N, got)
	}
	if got := r.Header.Get("Anthropic-Beta"); !strings.Contains(got, "computer-use-2025-01-24") {
		t.Errorf("request %d: anthropic-beta %q", r.N, got)
	}
	if r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("request %d: no anthropic-version header", r.N)
	}
	tool := r.Tool()
	if tool == nil || tool["type"] != "computer_20250124" || tool["display_width_px"] != float64(w) ||
		tool["display_height_px"] != float64(h) || tool["display_number"] != float64(1) {
		t.Errorf("request %d: tool %v, want computer_20250124 %dx%d display 1", r.N, tool, w, h)
	}
	if len(r.Params.Tools) != 1 {
		t.Errorf("request %d: %d tools", r.N, len(r.Params.Tools))
	}
	if !strings.Contains(r.System(), fmt.Sprintf("(%dx%d pixels)", w, h)) || !strings.Contains(r.System(), "<untrusted>") {
		t.Errorf("request %d: system prompt lacks the display size or the untrusted-data rules:\n%s", r.N, r.System())
	}
	for _, im := range r.Images() {
		if im.Err != nil || im.MediaType != "image/png" {
			t.Errorf("request %d: image %s: %v", r.N, im.MediaType, im.Err)
			continue
		}
		if b := im.Img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Errorf("request %d: image is %dx%d, want the display's %dx%d", r.N, b.Dx(), b.Dy(), w, h)
		}
	}
}

// TestMoverConversation plays the mover task against the fake desk: the
// model finds the square, holds Right for a second (one tool call, three
// agentbox actions, one tool_result), sees it moved and ends its turn.
func TestMoverConversation(t *testing.T) {
	d := newDesk(640, 480)
	var start float64
	srv := at.New(t, func(r *at.Request) at.Reply {
		checkRequest(t, r, 640, 480)
		sq := at.Find(r.LastImage(), at.Green)
		switch r.N {
		case 1:
			if len(r.Params.Messages) != 1 || len(r.Images()) != 1 {
				t.Errorf("first request: %d messages, %d images", len(r.Params.Messages), len(r.Images()))
			}
			if !strings.Contains(r.System(), "Move the character right.") {
				t.Errorf("no task in the system prompt")
			}
			start = sq.CX
			return at.Answer("tool_use", at.TextBlock("Holding Right."),
				at.ToolUse("toolu_01", map[string]any{"action": "hold_key", "text": "Right", "duration": 1}))
		case 2:
			res := r.ToolResults()
			if len(res) != 1 || res[0].ToolUseID != "toolu_01" || res[0].IsError {
				t.Fatalf("second request: tool results %+v", res)
			}
			if txt := at.Text(res[0].Content); !strings.Contains(txt, `<untrusted source="application output">`) || !strings.Contains(txt, "mover: key Right down") {
				t.Errorf("tool_result text lacks the app's output, marked untrusted:\n%s", txt)
			}
			if moved := sq.CX - start; moved < 100 {
				return at.Answer("end_turn", at.TextBlock(fmt.Sprintf("FAILED: moved %.0f px", moved)))
			}
			return at.Answer("end_turn", at.TextBlock(fmt.Sprintf("The square moved %+.0f px.", sq.CX-start)))
		}
		t.Errorf("unexpected request %d", r.N)
		return at.APIError(500, "api_error", "unexpected")
	})
	ag := newAgent(t, srv, nil)
	ds, err := drive(t, ag, d, "Move the character right.", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(ds); got != "key_down Right, wait 1000ms, key_up Right, done" {
		t.Fatalf("decisions: %s", got)
	}
	last := ds[len(ds)-1]
	if !last.Action.Succeeded() || last.Action.Message != "The square moved +200 px." {
		t.Errorf("done: %+v", last.Action)
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("%d requests, want 2", len(srv.Requests()))
	}
	// The first and last decisions made requests and carry their exchanges;
	// the queued ones say which tool_use they belong to.
	for i, dec := range ds {
		made := i == 0 || i == 3
		if (dec.Files["exchange.json"] != nil) != made {
			t.Errorf("decision %d: exchange.json present = %v", i, !made)
		}
		if dec.Meta["model"] != DefaultModel {
			t.Errorf("decision %d: meta %v", i, dec.Meta)
		}
		if i == 1 || i == 2 {
			if dec.Meta["tool_use_id"] != "toolu_01" || dec.Meta["queued"] != true {
				t.Errorf("decision %d: meta %v", i, dec.Meta)
			}
		}
	}
	if u := ds[0].Meta["usage"]; fmt.Sprint(u) != "{1000 50}" || ds[0].Meta["attempts"] != 1 || ds[0].Message != "Holding Right." {
		t.Errorf("first decision: meta %v message %q", ds[0].Meta, ds[0].Message)
	}
	ex := string(ds[0].Files["exchange.json"])
	if !strings.Contains(ex, "<screenshot screenshots/000001.png>") || strings.Contains(ex, "<image:") || strings.Contains(ex, testKey) {
		t.Errorf("exchange.json: the screenshot is not a reference, or the key leaked:\n%.2000s", ex)
	}
	ex = string(ds[3].Files["exchange.json"])
	if !strings.Contains(ex, "<screenshot screenshots/000004.png>") || !strings.Contains(ex, `"end_turn"`) {
		t.Errorf("exchange.json of the last turn:\n%.3000s", ex)
	}
}

// TestScaledClick: at 1920x1080 the model sees 1366x768; it clicks the
// square where it sees it and the click lands on the square on the screen,
// at exactly the view's mapping; cursor_position reports the model's own
// coordinates back.
func TestScaledClick(t *testing.T) {
	d := newDesk(1920, 1080)
	d.sq = image.Pt(1501, 977) // near the bottom-right corner
	var mx, my int
	srv := at.New(t, func(r *at.Request) at.Reply {
		checkRequest(t, r, 1366, 768)
		switch r.N {
		case 1:
			sq := at.Find(r.LastImage(), at.Green)
			mx, my = int(sq.CX+0.5), int(sq.CY+0.5)
			return at.Answer("tool_use", at.ToolUse("toolu_click", map[string]any{"action": "left_click", "coordinate": []int{mx, my}}))
		case 2:
			return at.Answer("tool_use", at.ToolUse("toolu_pos", map[string]any{"action": "cursor_position"}))
		case 3:
			res := r.ToolResults()
			if len(res) != 1 || res[0].ToolUseID != "toolu_pos" {
				t.Fatalf("results %+v", res)
			}
			if want := fmt.Sprintf("X=%d,Y=%d\n", mx, my); !strings.HasPrefix(at.Text(res[0].Content), want) {
				t.Errorf("cursor_position answered %q, want %q first", at.Text(res[0].Content), want)
			}
			if len(res[0].Content) != 1 {
				t.Errorf("cursor_position result has %d blocks, want text only", len(res[0].Content))
			}
			return at.Answer("end_turn", at.TextBlock("Clicked the square."))
		}
		return at.APIError(500, "api_error", "unexpected")
	})
	ag := newAgent(t, srv, nil)
	if _, err := drive(t, ag, d, "Click the green square.", 10); err != nil {
		t.Fatal(err)
	}
	if len(d.clicks) != 1 {
		t.Fatalf("clicks %v", d.clicks)
	}
	c := d.clicks[0]
	if c.X < d.sq.X || c.X >= d.sq.X+40 || c.Y < d.sq.Y || c.Y >= d.sq.Y+40 {
		t.Errorf("click at (%d,%d) missed the square at (%d,%d)+40", c.X, c.Y, d.sq.X, d.sq.Y)
	}
	// Exactly the view's mapping: the screen pixel at the centre of the
	// area model pixel (mx,my) shows.
	wx, wy := (2*mx+1)*1920/(2*1366), (2*my+1)*1080/(2*768)
	if c.X != wx || c.Y != wy {
		t.Errorf("click at (%d,%d), want (%d,%d) for model (%d,%d)", c.X, c.Y, wx, wy, mx, my)
	}
	t.Logf("model (%d,%d) in 1366x768 → screen (%d,%d); square at (%d..%d, %d..%d)", mx, my, c.X, c.Y, d.sq.X, d.sq.X+39, d.sq.Y, d.sq.Y+39)
}

// TestScreenshotsKept: as the history grows, only the latest
// max_screenshots images are sent; older ones become a note, and every
// tool_use keeps its tool_result.
func TestScreenshotsKept(t *testing.T) {
	const turns, keep = 8, 2
	srv := at.New(t, func(r *at.Request) at.Reply {
		imgs := r.Images()
		if want := min(r.N, keep); len(imgs) != want {
			t.Errorf("request %d: %d images, want %d", r.N, len(imgs), want)
		}
		if want := max(r.N-keep, 0); strings.Count(string(r.Raw), "[screenshot omitted: only the latest 2 are kept]") != want {
			t.Errorf("request %d: %d notes, want %d", r.N, strings.Count(string(r.Raw), "screenshot omitted"), want)
		}
		if r.N > 1 && imgs[len(imgs)-1].ToolUseID != fmt.Sprintf("toolu_%d", r.N-1) {
			t.Errorf("request %d: the newest image is not in the last tool_result", r.N)
		}
		// Every tool_use is answered in the next message.
		for i, m := range r.Params.Messages {
			for _, b := range m.Content {
				if b.Type != "tool_use" {
					continue
				}
				found := false
				for _, nb := range r.Params.Messages[i+1].Content {
					found = found || nb.ToolUseID == b.ID
				}
				if !found {
					t.Errorf("request %d: tool_use %s has no tool_result", r.N, b.ID)
				}
			}
		}
		if want := 2*r.N - 1; len(r.Params.Messages) != want {
			t.Errorf("request %d: %d messages, want %d", r.N, len(r.Params.Messages), want)
		}
		if r.N > turns {
			return at.Answer("end_turn", at.TextBlock("done looking"))
		}
		return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "mouse_move", "coordinate": []int{r.N * 10, 20}}))
	})
	ag := newAgent(t, srv, agent.Options{"max_screenshots": fmt.Sprint(keep)})
	if _, err := drive(t, ag, newDesk(640, 480), "Look around.", 20); err != nil {
		t.Fatal(err)
	}
	if len(srv.Requests()) != turns+1 {
		t.Errorf("%d requests", len(srv.Requests()))
	}
}

// TestMaxHistory drops whole turns beyond max_history and says so.
func TestMaxHistory(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		if n := len(r.Params.Messages); n > 1+2*3 {
			t.Errorf("request %d: %d messages, want at most 7", r.N, n)
		}
		if r.N > 5 && !strings.Contains(string(r.Raw), "earlier turns omitted") {
			t.Errorf("request %d: no note about omitted turns", r.N)
		}
		if r.Params.Messages[0].Role != "user" || (len(r.Params.Messages) > 1 && r.Params.Messages[1].Role != "assistant") {
			t.Errorf("request %d: roles broken", r.N)
		}
		if r.N > 8 {
			return at.Answer("end_turn", at.TextBlock("ok"))
		}
		return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "screenshot"}))
	})
	ag := newAgent(t, srv, agent.Options{"max_history": "3"})
	if _, err := drive(t, ag, newDesk(640, 480), "Look.", 20); err != nil {
		t.Fatal(err)
	}
}

// TestMalformedToldBack: each kind of bad input is told back as an error
// tool_result saying what was wrong, and a good second answer is performed.
func TestMalformedToldBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		bad  at.Block
		want string
	}{
		{"off the display", at.ToolUse("toolu_bad", map[string]any{"action": "left_click", "coordinate": []int{700, 10}}), "coordinate [700, 10] is outside the 640x480 display"},
		{"unknown action", at.ToolUse("toolu_bad", map[string]any{"action": "teleport"}), `unknown action "teleport"`},
		{"unknown key", at.ToolUse("toolu_bad", map[string]any{"action": "key", "text": "ctrl+Retrun"}), `did you mean "Return"`},
		{"unknown tool", at.RawToolUse("toolu_bad", "bash", `{"command":"ls"}`), `unknown tool "bash"`},
		{"not an object", at.RawToolUse("toolu_bad", "computer", `"left_click"`), "must be a JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := at.New(t, func(r *at.Request) at.Reply {
				switch r.N {
				case 1:
					return at.Answer("tool_use", tt.bad)
				case 2:
					res := r.ToolResults()
					if len(res) != 1 || res[0].ToolUseID != "toolu_bad" || !res[0].IsError || !strings.Contains(at.Text(res[0].Content), tt.want) {
						t.Errorf("told back %+v, want an error result saying %q", res, tt.want)
					}
					if len(r.Images()) != 1 {
						t.Errorf("%d images after a malformed answer, want the first only", len(r.Images()))
					}
					return at.Answer("tool_use", at.ToolUse("toolu_good", map[string]any{"action": "left_click", "coordinate": []int{60, 260}}))
				}
				return at.Answer("end_turn", at.TextBlock("clicked"))
			})
			ag := newAgent(t, srv, nil)
			d := newDesk(640, 480)
			ds, err := drive(t, ag, d, "Click.", 5)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(ds); got != "click 60,260, done" {
				t.Errorf("decisions %s", got)
			}
			if ds[0].Meta["attempts"] != 2 {
				t.Errorf("attempts %v, want 2", ds[0].Meta["attempts"])
			}
			ex := string(ds[0].Files["exchange.json"])
			if strings.Count(ex, `"toolu_bad"`) < 2 || !strings.Contains(ex, `"is_error": true`) && !strings.Contains(ex, `"is_error":true`) {
				t.Errorf("the malformed answer and its error result are not recorded:\n%.3000s", ex)
			}
		})
	}
}

// TestMalformedGivesUp: after max_malformed tell-backs the decision fails
// with agent.ErrMalformed.
func TestMalformedGivesUp(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "mouse_move", "coordinate": []int{9999, 1}}))
	})
	ag := newAgent(t, srv, agent.Options{"max_malformed": "2"})
	_, err := drive(t, ag, newDesk(640, 480), "Move.", 5)
	if !errors.Is(err, agent.ErrMalformed) || !strings.Contains(err.Error(), "outside the 640x480 display") {
		t.Fatalf("err = %v, want ErrMalformed naming the problem", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (the answer, then 2 tell-backs)", n)
	}
}

// TestParallelToolUse: two tool calls in one answer run in order and are
// answered together, each with the screenshot after it.
func TestParallelToolUse(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		if r.N == 1 {
			return at.Answer("tool_use",
				at.ToolUse("toolu_a", map[string]any{"action": "mouse_move", "coordinate": []int{10, 10}}),
				at.ToolUse("toolu_b", map[string]any{"action": "left_click", "coordinate": []int{60, 260}}))
		}
		res := r.ToolResults()
		if len(res) != 2 || res[0].ToolUseID != "toolu_a" || res[1].ToolUseID != "toolu_b" || len(r.Images()) != 3 {
			t.Errorf("results %+v, %d images", res, len(r.Images()))
		}
		return at.Answer("end_turn", at.TextBlock("ok"))
	})
	ds, err := drive(t, newAgent(t, srv, nil), newDesk(640, 480), "Click.", 5)
	if err != nil || kinds(ds) != "mouse_move 10,10, click 60,260, done" {
		t.Fatalf("%s: %v", kinds(ds), err)
	}
}

// TestFailedActionReleases: when key_down fails, the rest of hold_key is
// dropped except the release, and the model is told the error.
func TestFailedActionReleases(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		if r.N == 1 {
			return at.Answer("tool_use", at.ToolUse("toolu_h", map[string]any{"action": "hold_key", "text": "shift+Right", "duration": 1}))
		}
		res := r.ToolResults()
		if len(res) != 1 || !res[0].IsError || !strings.Contains(at.Text(res[0].Content), "Error: the key is stuck") {
			t.Errorf("results %+v", res)
		}
		return at.Answer("end_turn", at.TextBlock("FAILED: the keyboard does not work"))
	})
	d := newDesk(640, 480)
	d.fail = map[action.Kind]string{action.KeyDown: "the key is stuck"}
	ds, err := drive(t, newAgent(t, srv, nil), d, "Hold.", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(ds); got != "key_down shift, key_up Right, key_up shift, done (gave up)" {
		t.Errorf("decisions %s", got)
	}
	if last := ds[len(ds)-1].Action; last.Succeeded() || !strings.HasPrefix(last.Message, "FAILED") {
		t.Errorf("done %+v", last)
	}
}

// TestRetries: 429 (Retry-After-Ms honoured) and 529 overloaded are retried
// until the answer comes; every attempt is recorded.
func TestRetries(t *testing.T) {
	var times []time.Time
	srv := at.New(t, func(r *at.Request) at.Reply {
		times = append(times, time.Now())
		switch r.N {
		case 1:
			rep := at.APIError(429, "rate_limit_error", "slow down")
			rep.Header = map[string]string{"Retry-After-Ms": "400"}
			return rep
		case 2:
			return at.APIError(529, "overloaded_error", "Overloaded")
		}
		return at.Answer("end_turn", at.TextBlock("fine"))
	})
	ds, err := drive(t, newAgent(t, srv, nil), newDesk(640, 480), "x", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 3 {
		t.Fatalf("%d requests", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 400*time.Millisecond {
		t.Errorf("retried after %v, Retry-After-Ms said 400ms", gap)
	}
	var ex []struct{ Status int }
	if err := json.Unmarshal(ds[0].Files["exchange.json"], &ex); err != nil {
		t.Fatal(err)
	}
	if len(ex) != 3 || ex[0].Status != 429 || ex[1].Status != 529 || ex[2].Status != 200 {
		t.Errorf("recorded %+v", ex)
	}
}

// TestPersistent5xx: the decision fails with the status in the message
// after max_retries retries.
func TestPersistent5xx(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		rep := at.APIError(500, "api_error", "Internal server error")
		rep.Header = map[string]string{"Retry-After-Ms": "1"}
		return rep
	})
	_, err := drive(t, newAgent(t, srv, agent.Options{"max_retries": "2"}), newDesk(640, 480), "x", 3)
	if err == nil || !strings.Contains(err.Error(), "HTTP 500 Internal Server Error after 3 attempts (max_retries 2): api_error: Internal server error") {
		t.Fatalf("err = %v", err)
	}
	if errors.Is(err, agent.ErrMalformed) {
		t.Error("a server error is not a malformed answer")
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// TestStalledServer: a server that never answers is retried after the
// request timeout, then the decision fails; nothing hangs.
func TestStalledServer(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply { return at.Reply{Stall: true} })
	start := time.Now()
	_, err := drive(t, newAgent(t, srv, agent.Options{"timeout": "300ms", "max_retries": "1"}), newDesk(640, 480), "x", 3)
	if err == nil || !strings.Contains(err.Error(), "no answer within the 300ms timeout, 2 attempts") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 30*time.Second { // a hang, not a busy machine's late answer
		t.Errorf("took %v", el)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestCancelled: the run's context ends a request at once.
func TestCancelled(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply { return at.Reply{Stall: true} })
	ag := newAgent(t, srv, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	d := newDesk(640, 480)
	start := time.Now()
	_, err := ag.Decide(ctx, &observe.Observation{Step: 1, Screen: d.frame(), Running: true})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second { // the server stalls forever
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

// TestEndings: a turn without tool_use is done; FAILED and refusals are not
// successes; max_tokens is told back.
func TestEndings(t *testing.T) {
	for _, tt := range []struct {
		name    string
		replies []at.Reply
		ok      bool
		msg     string
	}{
		{"summary", []at.Reply{at.Answer("end_turn", at.TextBlock("All done."))}, true, "All done."},
		{"failed", []at.Reply{at.Answer("end_turn", at.TextBlock("FAILED: no square"))}, false, "FAILED: no square"},
		{"refusal", []at.Reply{at.Answer("refusal", at.TextBlock("I cannot help with that."))}, false, "the model refused: I cannot help with that."},
		{"empty", []at.Reply{at.Answer("end_turn")}, true, "the model ended its turn"},
		{"max_tokens", []at.Reply{at.Answer("max_tokens", at.TextBlock("Let me think about this at great len")), at.Answer("end_turn", at.TextBlock("Done."))}, true, "Done."},
		{"pause_turn", []at.Reply{at.Answer("pause_turn"), at.Answer("end_turn", at.TextBlock("Done."))}, true, "Done."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := at.New(t, func(r *at.Request) at.Reply {
				if tt.name == "max_tokens" && r.N == 2 && !strings.Contains(at.Text(r.Last().Content), "cut off") {
					t.Errorf("max_tokens not told back: %+v", r.Last())
				}
				return tt.replies[r.N-1]
			})
			ds, err := drive(t, newAgent(t, srv, nil), newDesk(640, 480), "x", 3)
			if err != nil {
				t.Fatal(err)
			}
			a := ds[len(ds)-1].Action
			if a.Kind != action.Done || a.Succeeded() != tt.ok || a.Message != tt.msg {
				t.Errorf("got %+v", a)
			}
		})
	}
}

// TestMaxTokensGivesUp: answers cut off at max_tokens are told back, then
// the decision fails as malformed.
func TestMaxTokensGivesUp(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		return at.Answer("max_tokens", at.TextBlock("I will now explain at length"))
	})
	_, err := drive(t, newAgent(t, srv, agent.Options{"max_malformed": "1", "max_tokens": "64"}), newDesk(640, 480), "x", 3)
	if !errors.Is(err, agent.ErrMalformed) || !strings.Contains(err.Error(), "cut off at max_tokens 64, 2 times") {
		t.Fatalf("err = %v", err)
	}
}

// TestKeyNeverRecorded: the key goes to the server and nowhere else.
func TestKeyNeverRecorded(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		if r.N == 1 {
			return at.APIError(401, "authentication_error", "invalid x-api-key")
		}
		return at.Answer("end_turn")
	})
	ag := newAgent(t, srv, agent.Options{"max_retries": "0"})
	d := newDesk(640, 480)
	dec, err := ag.Decide(context.Background(), &observe.Observation{Step: 1, Screen: d.frame(), Running: true})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("err = %v", err)
	}
	if got := dec.Files["exchange.json"]; strings.Contains(string(got), testKey) || !strings.Contains(string(got), "authentication_error") {
		t.Errorf("recorded %s", got)
	}
	if _, err := New(agent.Options{"api_key": "x"}); err == nil {
		t.Error("a key as an option was accepted")
	}
}

// TestOptions covers settings from options and the environment.
func TestOptions(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_MODEL", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	if _, err := New(nil); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	t.Setenv("MY_KEY", "k")
	t.Setenv("ANTHROPIC_MODEL", "claude-from-env")
	a, err := New(agent.Options{"api_key_env": "MY_KEY"})
	if err != nil || a.cfg.Model != "claude-from-env" || a.cfg.APIKey != "k" || a.cfg.MaxHistory != DefaultMaxHistory {
		t.Errorf("New: %v %+v", err, a)
	}
	for _, tt := range []struct {
		opts agent.Options
		want string
	}{
		{agent.Options{"api_key_env": "MY_KEY", "tool": "computer_2024"}, "option tool"},
		{agent.Options{"api_key_env": "MY_KEY", "colour": "red"}, `unknown option "colour"`},
	} {
		if _, err := New(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v", tt.opts, err)
		}
	}
}

// TestTool20251124 declares the newer tool with its beta header.
func TestTool20251124(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		if tool := r.Tool(); tool["type"] != "computer_20251124" || r.Header.Get("Anthropic-Beta") != "computer-use-2025-11-24" || r.Params.Model != "claude-opus-4-5" {
			t.Errorf("tool %v beta %q model %q", tool, r.Header.Get("Anthropic-Beta"), r.Params.Model)
		}
		return at.Answer("end_turn")
	})
	if _, err := drive(t, newAgent(t, srv, agent.Options{"tool": Tool20251124, "model": "claude-opus-4-5"}), newDesk(640, 480), "x", 2); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDecide is one model step (observation → request → answer →
// action) against a server that answers at once, for a static screen
// (same frame hash: the scaled PNG is reused) and a changed one (scaled
// and encoded again).
//
//	go test ./agent/anthropic -run '^$' -bench Decide -benchtime 100x
func BenchmarkDecide(b *testing.B) {
	for _, s := range [][2]int{{640, 480}, {1920, 1080}} {
		for _, changing := range []bool{false, true} {
			name := fmt.Sprintf("%dx%d/static", s[0], s[1])
			if changing {
				name = fmt.Sprintf("%dx%d/changing", s[0], s[1])
			}
			b.Run(name, func(b *testing.B) {
				srv := at.New(b, func(r *at.Request) at.Reply {
					return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "mouse_move", "coordinate": []int{10, 10}}))
				})
				b.Setenv("ANTHROPIC_API_KEY", testKey)
				ag, err := New(agent.Options{"base_url": srv.URL})
				if err != nil {
					b.Fatal(err)
				}
				defer ag.Close()
				ctx := b.Context()
				ag.Start(ctx, agent.Task{Text: "x", Width: s[0], Height: s[1]})
				d := newDesk(s[0], s[1])
				frame := d.frame()
				frame.Hash = 1
				var server time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if changing {
						b.StopTimer()
						d.sq.X = 41 + i%500
						frame = d.frame()
						frame.Hash = uint64(i + 2)
						b.StartTimer()
					}
					if _, err := ag.Decide(ctx, &observe.Observation{Step: i + 1, Screen: frame, Running: true, Last: &action.Result{OK: true}, ScreenshotRef: "s.png"}); err != nil {
						b.Fatal(err)
					}
					reqs := srv.Requests()
					server += reqs[len(reqs)-1].Handling
				}
				b.ReportMetric(float64(server.Microseconds())/float64(b.N)/1000, "server-ms/op")
			})
		}
	}
}

// TestClickMark: with marks on the screenshot the model has a click_mark
// tool beside the computer tool (and not without them); a click on a mark
// lands on the mark's centre in screen pixels, on a scaled screen too,
// and is recorded with its mark; an unknown mark is told back.
func TestClickMark(t *testing.T) {
	d := newDesk(1920, 1080)
	d.sq = image.Pt(1501, 977)
	d.marks = true
	srv := at.New(t, func(r *at.Request) at.Reply {
		var names []string
		for _, tool := range r.Params.Tools {
			names = append(names, fmt.Sprint(tool["name"]))
		}
		if strings.Join(names, ",") != "computer,click_mark" {
			t.Errorf("request %d tools %v", r.N, names)
		}
		switch r.N {
		case 1:
			if txt := at.Text(r.Last().Content); !strings.Contains(txt, `[1] push button "square"`) {
				t.Errorf("the marks are not told: %q", txt)
			}
			return at.Answer("tool_use", at.RawToolUse("toolu_bad", "click_mark", `{"mark": 4}`))
		case 2:
			if res := r.ToolResults(); len(res) != 1 || !strings.Contains(at.Text(res[0].Content), "mark 4: the screenshot's marks are 1 to 1") {
				t.Errorf("the unknown mark was not told back: %+v", res)
			}
			return at.Answer("tool_use", at.RawToolUse("toolu_mark", "click_mark", `{"mark": 1}`))
		}
		return at.Answer("end_turn", at.TextBlock("Clicked the square."))
	})
	ag := newAgent(t, srv, nil)
	ds, err := drive(t, ag, d, "Click the green square.", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.clicks) != 1 || d.clicks[0] != (action.Point{X: 1521, Y: 997}) {
		t.Fatalf("clicks %v, want the square's centre (1521,997)", d.clicks)
	}
	if a := ds[0].Action; a.Kind != action.Click || a.Mark != 1 {
		t.Errorf("recorded action %+v", a)
	}
}

// TestTypeSecretTool: with a vault the model has the type_secret tool (its
// names in the schema and the instructions, no value anywhere), and a call
// is the type_secret action; without one there is no such tool.
func TestTypeSecretTool(t *testing.T) {
	d := newDesk(1024, 768)
	d.secrets = []string{"OTP", "PW"}
	srv := at.New(t, func(r *at.Request) at.Reply {
		var names []string
		for _, tool := range r.Params.Tools {
			names = append(names, fmt.Sprint(tool["name"]))
		}
		if strings.Join(names, ",") != "computer,type_secret" {
			t.Errorf("request %d tools %v", r.N, names)
		}
		if !strings.Contains(r.System(), "Secrets you may type with type_secret, by name: OTP, PW.") {
			t.Errorf("the instructions do not name the secrets: %q", r.System())
		}
		if r.N == 1 {
			return at.Answer("tool_use", at.RawToolUse("toolu_s", "type_secret", `{"secret": "PW"}`))
		}
		return at.Answer("end_turn", at.TextBlock("Logged in."))
	})
	ds, err := drive(t, newAgent(t, srv, nil), d, "Log in with the secret PW.", 5)
	if err != nil {
		t.Fatal(err)
	}
	if a := ds[0].Action; a.Kind != action.TypeSecret || a.Secret != "PW" {
		t.Errorf("decided %+v, want type_secret PW", a)
	}

	plain := at.New(t, func(r *at.Request) at.Reply {
		for _, tool := range r.Params.Tools {
			if tool["name"] == "type_secret" {
				t.Errorf("a run without a vault offers type_secret")
			}
		}
		return at.Answer("end_turn", at.TextBlock("Nothing to do."))
	})
	if _, err := drive(t, newAgent(t, plain, nil), newDesk(1024, 768), "Look.", 3); err != nil {
		t.Fatal(err)
	}
}
