package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/internal/suggest"
	"github.com/codegirl-games/agentbox/policy"
)

// gateOptions are --policy and --approve, checked.
type gateOptions struct {
	policy   *policy.Policy  // nil: no gate
	approver policy.Approver // who answers its asks
	// approve is --approve as given ("" when not): given without any
	// policy to ask it is a mistake (complete).
	approve string
}

// approvers are the names --approve takes.
var approvers = []string{policy.ApproveTTY, policy.ApproveDeny, policy.ApproveLive}

// gate reads --policy (a file that does not parse is a usage error naming
// file:line: nothing starts) and picks who answers its asks, or those of
// the policy the target names (complete): --approve, or by default tty on
// a terminal and deny without one or under CI.
func (f *sandboxFlags) gate() (gateOptions, error) {
	var g gateOptions
	if !f.takes("policy") {
		return g, nil
	}
	a := strings.TrimSpace(f.approve)
	if a != "" && !slices.Contains(approvers, a) {
		return g, usageErrorf("--approve %q: not a way of answering%s (tty, deny, live)", a, suggest.Hint(a, approvers))
	}
	if a == policy.ApproveLive && f.cmd != "run" && f.cmd != "eval" {
		return g, usageErrorf("--approve live: %s has no live page to ask on; use tty or deny", f.cmd)
	}
	g.approve = a
	if f.policyFile != "" {
		p, err := policy.Load(f.policyFile)
		if err != nil {
			return g, usageErrorf("--policy: %v", err)
		}
		g.policy = p
	}
	if a == "" && !f.takes("approve") { // mcp: stdin is the protocol's
		g.approver = mcpClient{} // the client's asker, once it connects
		return g, nil
	}
	if a == "" {
		a = policy.ApproveDeny
		if os.Getenv("CI") == "" && isTerminal(os.Stdin) && isTerminal(os.Stderr) {
			a = policy.ApproveTTY
		}
	}
	switch a {
	case policy.ApproveLive:
		g.approver = liveApprover{} // each view's, once watch has made it
	case policy.ApproveTTY:
		if !isTerminal(os.Stdin) {
			return g, usageErrorf("--approve tty needs a terminal on stdin to ask on")
		}
		g.approver = policy.NewTTY(os.Stdin, os.Stderr)
	default:
		g.approver = policy.DenyAll{}
	}
	return g, nil
}

// complete takes the app manifest's policy (its field policy) when the
// command line names none, and refuses --approve when no policy at all
// will ask (others: a suite's tasks name their own).
func (g *gateOptions) complete(b *app.Bundle, others bool) error {
	if g.policy == nil && b != nil && b.PolicyPath() != "" {
		p, err := policy.Load(b.PolicyPath())
		if err != nil {
			return usageErrorf("the manifest's policy: %v", err)
		}
		g.policy = p
	}
	if g.policy == nil && !others && g.approve != "" {
		return usageErrorf("--approve %s without a policy (--policy, or a manifest's policy): there is nothing to ask", g.approve)
	}
	return nil
}

// note tells, before anything starts, what the gate can hold: a policy
// that names elements needs the accessibility tree (--a11y), without
// which only its kind, region and text rules apply.
func (g gateOptions) note(w io.Writer, a11y bool) {
	if g.policy == nil {
		return
	}
	fmt.Fprintf(w, "agentbox: %s; asks answered by %s\n", g.policy.Describe(), approverName(g.approver))
	if g.policy.NeedsTree() && !a11y {
		fmt.Fprintln(w, "agentbox: warning: the policy names elements (target), but without --a11y there is no accessibility tree: only its kind, region and text rules apply")
	}
}

// liveApprover stands for the live page's approver (--approve live)
// until watch puts each view's in its place; one left is a run without a
// live page, which the flags refuse.
type liveApprover struct{}

func (liveApprover) Approve(context.Context, policy.Request) (policy.Answer, error) {
	return policy.Answer{By: policy.ApproveLive, Note: "no live page to ask on"}, nil
}

// mcpClient stands for the MCP client as who answers asks (agentbox
// mcp): each session's episodes take the client's own asker instead.
type mcpClient struct{}

func (mcpClient) Approve(context.Context, policy.Request) (policy.Answer, error) {
	return policy.Answer{By: "mcp", Note: "no MCP client to ask"}, nil
}

// liveCheck refuses --approve live without --live.
func (g gateOptions) liveCheck(live liveFlag) error {
	if _, ok := g.approver.(liveApprover); ok && live.addr == "" {
		return usageErrorf("--approve live needs --live: the asks are answered on the live page")
	}
	return nil
}

func approverName(a policy.Approver) string {
	switch a.(type) {
	case *policy.TTY:
		return "the terminal (--approve tty)"
	case liveApprover:
		return "the person in control at the live page (--approve live)"
	case mcpClient:
		return "the MCP client, by elicitation (denied when it declared none)"
	}
	return "nobody: every ask is denied (--approve deny)"
}
