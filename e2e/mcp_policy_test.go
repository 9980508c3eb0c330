package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestMCPPolicyAsks: agentbox mcp --policy on Docker with the test
// image's zenity dialog, driven by the SDK's client over stdio (the
// latest protocol: multi round-trip requests). The rule asks before
// Delete is pressed: the client's first answer declines, and the dialog
// stays up; its second allows, and zenity exits 0 (Delete pressed).
func TestMCPPolicyAsks(t *testing.T) {
	testenv.Require(t, testenv.Image(a11yImage()), testenv.Slow("a GTK3 dialog in a sandbox"))
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(deletePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testenv.Build(t, "./cmd/agentbox")
	out := t.TempDir()
	cmd := exec.Command(bin, "mcp", appDir(t, deleteManifest), "--backend", "docker", "--image", a11yImage(),
		"--a11y", "--policy", pol, "--screen", "800x600", "--out", out)
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	var mu sync.Mutex
	var asked []string
	elicit := func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params.Message)
		if len(asked) == 1 {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, &sdk.ClientOptions{ElicitationHandler: elicit})
	cs, err := c.Connect(t.Context(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Minute}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("protocol %s, want 2026-07-28 (multi round-trip requests)", v)
	}
	var ep mcpEpisode
	mcpTool(t, cs, "launch", nil, &ep)
	mcpTool(t, cs, "wait", map[string]any{"until": "stable", "ms": 10000}, nil)
	press := map[string]any{"target": map[string]any{"role": "push button", "name": "Delete"}}
	click := func() *sdk.CallToolResult {
		t.Helper()
		// The tree may not hold the button yet: tried until it does.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "click", Arguments: press})
			if err != nil {
				t.Fatalf("click: %v\n%s", err, stderr.String())
			}
			if !res.IsError || strings.Contains(mcpText(res), "policy rule") || time.Now().After(deadline) {
				return res
			}
			t.Logf("click: %s; again", mcpText(res))
			mcpTool(t, cs, "wait", map[string]any{"ms": 1000}, nil)
		}
	}
	res := click()
	if want := `policy rule "deleting asks" asks, and it was denied by mcp: declined`; !res.IsError || !strings.Contains(mcpText(res), want) {
		t.Fatalf("the declined click: %s; want %q\n%s", mcpText(res), want, stderr.String())
	}
	var st struct {
		Running bool `json:"running"`
	}
	mcpTool(t, cs, "state", nil, &st)
	if !st.Running {
		t.Fatalf("the dialog ended after a declined press:\n%s", stderr.String())
	}
	res = click()
	if res.IsError {
		t.Fatalf("the allowed click: %s\n%s", mcpText(res), stderr.String())
	}
	mu.Lock()
	if len(asked) != 2 || !strings.Contains(asked[0], `"deleting asks"`) || !strings.Contains(asked[0], `push button "Delete"`) {
		t.Errorf("asked %d times: %q", len(asked), asked)
	}
	mu.Unlock()
	// zenity exits 0 when Delete is pressed: the episode ends.
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "wait", Arguments: map[string]any{"ms": 500}})
		if err != nil {
			t.Fatal(err)
		}
		if r.IsError || strings.Contains(mcpText(r), `"ended"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zenity still runs after Delete was allowed:\n%s", stderr.String())
		}
	}
	cs.Close()
	tr := openTrace(t, ep.Trace)
	if e := tr.Run.AppExit; e == nil || e.Crashed() || e.Stopped != "" {
		t.Errorf("the app's exit %+v, want 0 (Delete pressed)", tr.Run.AppExit)
	}
	var by []string
	for _, s := range tr.Steps {
		if pd := s.Policy; pd != nil && pd.Ask != "" {
			by = append(by, pd.By+":"+map[bool]string{true: "allowed", false: "denied"}[pd.Allowed])
		}
	}
	if strings.Join(by, " ") != "mcp:denied mcp:allowed" {
		t.Errorf("the trace's asks: %q", by)
	}
	assertNoContainers(t, ep.RunID)
}
