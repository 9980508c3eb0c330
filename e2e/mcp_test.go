package e2e

// agentbox as an MCP server, driven by the official Go SDK's client the
// way an MCP client (a desktop assistant) drives it: over stdio, the real
// binary started as the server; over serve's /v1/mcp with the token. Both
// backends, the real mover.

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// mcpBackends are the backends the MCP tests run on, each with what it
// needs.
var mcpBackends = []struct {
	name    string
	require func(t *testing.T)
}{
	{"docker", func(t *testing.T) { testenv.Require(t, testenv.Image(testenv.RuntimeImage)) }},
	{"local", requireLocal},
}

// mcpText is the text of a tool's result.
func mcpText(r *sdk.CallToolResult) string {
	if r == nil {
		return "(no result)"
	}
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpTool calls a tool that must succeed and decodes its JSON answer.
func mcpTool(t *testing.T, cs *sdk.ClientSession, name string, args any, v any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", name, mcpText(res))
	}
	if v != nil {
		tc := res.Content[len(res.Content)-1].(*sdk.TextContent)
		if err := json.Unmarshal([]byte(tc.Text), v); err != nil {
			t.Fatalf("%s: %q: %v", name, tc.Text, err)
		}
	}
	return res
}

// mcpSquareX takes a screenshot and finds the mover's green square in
// the PNG the client got.
func mcpSquareX(t *testing.T, cs *sdk.ClientSession) float64 {
	t.Helper()
	res := mcpTool(t, cs, "screenshot", nil, nil)
	img, ok := res.Content[0].(*sdk.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("screenshot: no PNG first: %+v", res.Content)
	}
	decoded, err := png.Decode(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	x, n := openaitest.GreenX(decoded)
	if n == 0 {
		t.Fatal("screenshot: no green square")
	}
	return x
}

type mcpEpisode struct {
	Episode int    `json:"episode"`
	RunID   string `json:"run_id"`
	Trace   string `json:"trace"`
}

// mcpPlayMover plays the mover as an MCP client would: a screenshot, Right
// held for a second, the square seen moved in the next screenshot, the
// app's output read back, the desktop's state; bad input of every kind,
// each a clear error after which the server serves on; then launch, a
// fresh episode (the square back at its start, a new trace). It returns
// both episodes.
func mcpPlayMover(t *testing.T, cs *sdk.ClientSession) (first, second mcpEpisode) {
	t.Helper()
	x0 := mcpSquareX(t, cs)
	mcpTool(t, cs, "key_down", map[string]any{"key": "Right"}, nil)
	mcpTool(t, cs, "wait", map[string]any{"ms": 1000}, nil)
	mcpTool(t, cs, "key_up", map[string]any{"key": "Right"}, nil)
	// The mover reads the keyboard at its next tick: until the screen is
	// still, the square may move on a little.
	var waited struct {
		Met *bool `json:"met"`
	}
	mcpTool(t, cs, "wait", map[string]any{"until": "stable", "stable_ms": 300}, &waited)
	if waited.Met == nil || !*waited.Met {
		t.Errorf("wait until stable: met %v", waited.Met)
	}
	x1 := mcpSquareX(t, cs)
	if x1-x0 < 50 {
		t.Errorf("the square moved %.1f px (%.1f → %.1f) while Right was held for a second, want ≥ 50", x1-x0, x0, x1)
	}
	var out struct {
		Next   int64 `json:"next"`
		Output []struct {
			Stream, Text, Started string
		} `json:"output"`
	}
	mcpTool(t, cs, "read_output", map[string]any{"stream": "stdout"}, &out)
	var printed strings.Builder
	for _, o := range out.Output {
		printed.WriteString(o.Text)
	}
	if !strings.Contains(printed.String(), "mover: ready") || !strings.Contains(printed.String(), "mover: key Right down") || len(out.Output) == 0 || out.Output[0].Started == "" {
		t.Errorf("read_output: %+v", out)
	}
	var state struct {
		mcpEpisode
		Running bool `json:"running"`
		Windows []struct {
			Title string `json:"title"`
		} `json:"windows"`
	}
	mcpTool(t, cs, "state", nil, &state)
	first = state.mcpEpisode
	if !state.Running || len(state.Windows) == 0 || state.Windows[0].Title != "mover" || state.Episode != 1 {
		t.Errorf("state: %+v", state)
	}

	for _, tt := range []struct {
		name, tool string
		args       any
		want       string
	}{
		{"off the screen", "click", map[string]any{"x": 5000, "y": 10}, "outside the 640x480 screen"},
		{"a string for a number", "click", map[string]any{"x": "ten", "y": 10}, `field "x": must be an integer`},
		{"megabytes of text", "type", map[string]any{"text": strings.Repeat("x", 3<<20)}, "type: the arguments are"},
		{"an unknown key", "key", map[string]any{"keys": "Retrun"}, `did you mean "Return"`},
	} {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil || !res.IsError || !strings.Contains(mcpText(res), tt.want) {
			t.Errorf("%s: want a tool error saying %q, got %v: %.300s", tt.name, tt.want, err, mcpText(res))
		}
	}
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "teleport", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "teleport"`) {
		t.Errorf("an unknown tool: %v", err)
	}
	// Every other tool, as a client uses it (nothing here moves the
	// square: the mover reads the arrow keys only).
	var cursor struct {
		OK     bool `json:"ok"`
		Met    *bool
		Cursor *struct{ X, Y int } `json:"cursor"`
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"wait", map[string]any{"until": "window", "title": "mov*", "ms": 10000}},
		{"mouse_move", map[string]any{"x": 100, "y": 120}},
		{"click", map[string]any{"x": 110, "y": 130, "button": "right"}},
		{"double_click", map[string]any{"x": 120, "y": 140}},
		{"scroll", map[string]any{"x": 130, "y": 150, "dy": 2}},
		{"drag", map[string]any{"path": [][]int{{140, 160}, {200, 200}, {250, 210}}}},
		{"mouse_down", map[string]any{"button": "left"}},
		{"mouse_up", map[string]any{"button": "left"}},
		{"type", map[string]any{"text": "héllo ✓"}},
		{"key", map[string]any{"keys": "ctrl+shift+t"}},
		{"cursor_position", nil},
	} {
		cursor.OK, cursor.Met, cursor.Cursor = false, nil, nil
		mcpTool(t, cs, c.tool, c.args, &cursor)
		if !cursor.OK || c.tool == "wait" && (cursor.Met == nil || !*cursor.Met) {
			t.Errorf("%s: %+v", c.tool, cursor)
		}
	}
	if cursor.Cursor == nil || cursor.Cursor.X != 250 || cursor.Cursor.Y != 210 {
		t.Errorf("cursor_position after the drag: %+v", cursor.Cursor)
	}
	if x := mcpSquareX(t, cs); math.Abs(x-x1) > 2 {
		t.Errorf("after the bad input and the other tools the square is at %.1f, was %.1f", x, x1)
	}

	mcpTool(t, cs, "launch", nil, &second)
	if second.Episode != 2 || second.Trace == first.Trace || second.RunID == first.RunID {
		t.Errorf("launch: %+v after %+v", second, first)
	}
	if x := mcpSquareX(t, cs); math.Abs(x-x0) > 2 {
		t.Errorf("the fresh episode's square is at %.1f, the first began at %.1f", x, x0)
	}
	return first, second
}

// checkMCPTrace: a finished episode's trace, every step by the actor mcp,
// ended as want.
func checkMCPTrace(t *testing.T, dir, reason string) *trace.Trace {
	t.Helper()
	tr := openTrace(t, dir)
	if tr.Incomplete || tr.Run.Outcome != trace.Interrupted || tr.Run.Reason != reason || len(tr.Missing) > 0 {
		t.Errorf("%s: incomplete %v, %s/%s, missing %v", dir, tr.Incomplete, tr.Run.Outcome, tr.Run.Reason, tr.Missing)
	}
	if len(tr.Steps) == 0 {
		t.Errorf("%s: no steps", dir)
	}
	for _, s := range tr.Steps {
		if s.Actor != trace.ActorMCP {
			t.Errorf("%s step %d: actor %q", dir, s.Step, s.Actor)
		}
	}
	return tr
}

// TestMCPStdio: an MCP client starts `agentbox mcp` on the mover as its
// server and plays it; closing the connection ends the episode, the
// process exits 0, both traces are complete and by the actor mcp, no
// sandbox is left, and the trace works with view and replay like a run's.
func TestMCPStdio(t *testing.T) {
	for _, b := range mcpBackends {
		t.Run(b.name, func(t *testing.T) {
			b.require(t)
			bin := testenv.Build(t, "./cmd/agentbox")
			out := t.TempDir()
			cmd := exec.Command(bin, "mcp", exampleMover(t), "--backend", b.name, "--out", out, "--task", "Move the square right.")
			var stderr testenv.Buffer
			cmd.Stderr = &stderr
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Minute}, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
				}
			})
			first, second := mcpPlayMover(t, cs)
			if err := cs.Close(); err != nil {
				t.Errorf("closing: %v\n%s", err, stderr.String())
			}
			t.Logf("agentbox mcp said:\n%s", stderr.String())
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit %d after the client closed stdin, want 0:\n%s", code, stderr.String())
			}
			tr := checkMCPTrace(t, first.Trace, trace.ReasonClosed)
			checkMCPTrace(t, second.Trace, trace.ReasonClosed)
			if tr.Run.Task != "Move the square right." || tr.Run.Agent.Name != "mcp" || tr.Run.Agent.Options["client"] != "e2e 1" || tr.Run.Env.Backend != b.name {
				t.Errorf("run.json: task %q, agent %+v, backend %s", tr.Run.Task, tr.Run.Agent, tr.Run.Env.Backend)
			}
			for _, ep := range []mcpEpisode{first, second} {
				if filepath.Dir(ep.Trace) != out {
					t.Errorf("trace %s is not under --out %s", ep.Trace, out)
				}
				if b.name == "docker" {
					assertNoContainers(t, ep.RunID)
				} else {
					assertNoSandboxes(t, ep.RunID)
				}
			}
			if r := agentbox(t, "view", first.Trace, "--out", filepath.Join(t.TempDir(), "report.html")); r.code != 0 {
				t.Errorf("view: %s", r)
			}
			if b.name == "docker" {
				// Replay takes it like a run's. Whether the screens match
				// depends on the machine's load (the square moves while
				// Right is held, in real time), so a divergence (exit 1)
				// is a replay that worked; a usage or infrastructure error
				// is not.
				replayed := filepath.Join(t.TempDir(), "replay")
				if r := agentbox(t, "replay", first.Trace, "--out", replayed); r.code != 0 && (r.code != 1 || !strings.Contains(r.stdout, "diverged at step")) {
					t.Errorf("replay of the MCP episode: %s", r)
				}
				rt := openTrace(t, replayed)
				if rt.Incomplete || len(rt.Steps) == 0 {
					t.Errorf("the replay's trace: incomplete %v, %d steps", rt.Incomplete, len(rt.Steps))
				}
				assertNoContainers(t, rt.Run.ID)
			}
		})
	}
}

// TestMCPServe: the same game over agentbox serve's /v1/mcp with the
// token; a request without the token is refused; ending the session
// closes its environment; SIGTERM stops the server cleanly.
func TestMCPServe(t *testing.T) {
	for _, b := range mcpBackends {
		t.Run(b.name, func(t *testing.T) {
			b.require(t)
			s := startServe(t, "--backend", b.name, "--app", "mover="+exampleMover(t), "--out", t.TempDir())
			resp, err := http.Post(s.url+"/v1/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Errorf("an MCP request without the token: %s", resp.Status)
			}
			hc := &http.Client{Transport: bearerTransport{s.token}}
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: s.url + "/v1/mcp", HTTPClient: hc}, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, s.log())
			}
			first, second := mcpPlayMover(t, cs)
			api, err := client.New(s.url, s.token)
			if err != nil {
				t.Fatal(err)
			}
			envs, err := api.Environments(t.Context())
			if err != nil || len(envs) != 1 || envs[0].Episode != 2 || envs[0].RunID != second.RunID {
				t.Errorf("the API's list: %+v %v", envs, err)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("closing the session: %v", err)
			}
			deadline := time.Now().Add(time.Minute)
			for {
				envs, err := api.Environments(t.Context())
				if err == nil && len(envs) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the session's environment is still there: %+v %v", envs, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			checkMCPTrace(t, first.Trace, trace.ReasonClosed)
			checkMCPTrace(t, second.Trace, trace.ReasonClosed)
			if code := s.stop(t); code != 0 {
				t.Errorf("exit %d after SIGTERM:\n%s", code, s.log())
			}
			for _, ep := range []mcpEpisode{first, second} {
				if b.name == "docker" {
					assertNoContainers(t, ep.RunID)
				} else {
					assertNoSandboxes(t, ep.RunID)
				}
			}
		})
	}
}

// bearerTransport adds the token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPRejectedBeforeStart: agentbox mcp holds its flags to run's rules
// before it serves anything (in-process, no daemon asked): exit 2 naming
// the problem, nothing on stdout (the protocol's channel).
func TestMCPRejectedBeforeStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	app := stubApp(t, "")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no target", nil, "requires at least 1 arg"},
		{"two targets", []string{app, app}, "mcp takes one TARGET"},
		{"a screen too small", []string{app, "--screen", "10x10"}, "--screen"},
		{"a timeout of 0", []string{app, "--timeout", "0"}, "--timeout must be positive"},
		{"a start timeout too short", []string{app, "--start-timeout", "10ms"}, "--start-timeout 10ms is too short"},
		{"a bad log cap", []string{app, "--log-cap", "lots"}, "--log-cap"},
		{"a bad settle", []string{app, "--settle", "later"}, "--settle"},
		{"--out a file", []string{app, "--out", file}, "is a file; give a directory"},
		{"an app that is not there", []string{filepath.Join(dir, "nothing")}, "nothing"},
		{"a bad --env", []string{app, "--env", "=x"}, "--env"},
		{"memory below tmpfs", []string{app, "--memory", "64m", "--tmpfs", "128m"}, "--tmpfs"},
		{"run's agent", []string{app, "--agent", "demo"}, "unknown flag: --agent"},
		{"freezing (nothing of agentbox's thinks)", []string{app, "--freeze-while-thinking"}, "unknown flag: --freeze-while-thinking"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cliMain(t, append([]string{"mcp"}, tt.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
				t.Errorf("want exit 2 saying %q and nothing on stdout:\n%s", tt.want, r)
			}
		})
	}
}

// TestMCPSignal: SIGTERM to agentbox mcp in the middle of an episode ends
// it interrupted by a signal, removes the sandbox, finalises the trace and
// exits 130.
func TestMCPSignal(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	cmd := exec.Command(bin, "mcp", exampleMover(t), "--backend", "docker", "--out", t.TempDir())
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(t.Context(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Minute}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var ep mcpEpisode
	mcpTool(t, cs, "key_down", map[string]any{"key": "Right"}, nil)
	mcpTool(t, cs, "state", nil, &ep)
	cmd.Process.Signal(syscall.SIGTERM)
	// It ends by itself; only then does the client close its side (which
	// alone would end the episode as closed, not interrupted).
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(stderr.String(), "agentbox mcp: interrupted") {
		if time.Now().After(deadline) {
			t.Fatalf("agentbox mcp did not stop within 3 minutes of SIGTERM:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cs.Close()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d after SIGTERM, want 130:\n%s", code, stderr.String())
	}
	tr := openTrace(t, ep.Trace)
	if tr.Incomplete || tr.Run.Outcome != trace.Interrupted || tr.Run.Reason != trace.ReasonSignal {
		t.Errorf("the trace: incomplete %v, %s/%s\n%s", tr.Incomplete, tr.Run.Outcome, tr.Run.Reason, stderr.String())
	}
	assertNoContainers(t, ep.RunID)
}
