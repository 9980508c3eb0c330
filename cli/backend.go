package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	// The built-in backends register themselves.
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/environment/kubernetes"
	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/plural"
)

// builtin are the backends built into agentbox, in the order --backend auto
// prefers them: Docker when a daemon answers, else the local backend. This
// file is the one place outside the backends' own packages that names
// them; everything else asks a backend what it can do
// (environment.Capabilities).
var builtin = []string{docker.Name, local.Name}

// named are the built-in backends only --backend NAME chooses: a cluster
// is never taken for auto.
var named = []string{kubernetes.Name}

// backendUsage is the help text of --backend: the built-in backends (a
// test may register more; they are not agentbox's to offer).
func backendUsage() string {
	return "sandbox backend: " + strings.Join(append(slices.Clone(builtin), named...), ", ") + ", or auto (Docker when a daemon answers, else local)"
}

// namespaceCommands take --namespace: those that make, collect or check
// sandboxes.
var namespaceCommands = []string{"run", "eval", "bench", "gc", "doctor"}

// spreadCommands take --spread: those that create sandboxes in numbers.
var spreadCommands = []string{"run", "eval", "bench"}

// addNamespaceFlag adds --namespace, the Kubernetes backend's namespace, to
// root's namespaceCommands, and --spread to its spreadCommands;
// backendOptions reads them.
func addNamespaceFlag(root *cobra.Command) {
	for _, c := range root.Commands() {
		if slices.Contains(namespaceCommands, c.Name()) {
			c.Flags().String("namespace", "", "namespace of the kubernetes backend's Pods (default: $"+kubernetes.NamespaceEnv+", else the kubeconfig context's)")
		}
		if slices.Contains(spreadCommands, c.Name()) {
			c.Flags().Var(new(spreadValue), "spread", "how the kubernetes backend spreads this command's Pods over the nodes: "+
				kubernetes.SpreadSoft+" (prefer the node with the fewest of them), "+kubernetes.SpreadHard+" (at most one more on any Ready node than on another), "+
				kubernetes.SpreadNone+" (the scheduler's choice) (default: $"+kubernetes.SpreadEnv+", else "+kubernetes.SpreadSoft+")")
		}
	}
}

// spreadValue is --spread's value: a mode kubernetes.CheckSpread accepts.
type spreadValue string

func (v *spreadValue) String() string { return string(*v) }
func (v *spreadValue) Type() string   { return "MODE" }
func (v *spreadValue) Set(s string) error {
	if err := kubernetes.CheckSpread(s); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "spread "))
	}
	*v = spreadValue(s)
	return nil
}

// backendOptions are the options cmd's backends are made with: --namespace
// and --spread where cmd takes them and they are given, else
// $AGENTBOX_K8S_NAMESPACE and $AGENTBOX_K8S_SPREAD (their defaults, read
// here and nowhere else).
func backendOptions(cmd *cobra.Command) environment.Options {
	ns := os.Getenv(kubernetes.NamespaceEnv)
	if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
		ns = f.Value.String()
	}
	spread := os.Getenv(kubernetes.SpreadEnv)
	if f := cmd.Flags().Lookup("spread"); f != nil && f.Changed {
		spread = f.Value.String()
	}
	return environment.Options{Namespace: ns, Spread: spread}
}

// backendChoice is what makes a command's backend: --backend (a name or
// auto), the order in which auto considers backends, and the options the
// backend is made with.
type backendChoice struct {
	name string
	auto []string
	opts environment.Options
}

// chooseBackend is cmd's choice of backend: name (--backend) among the
// built-in backends, made with cmd's backend options.
func chooseBackend(cmd *cobra.Command, name string) backendChoice {
	return backendChoice{name: name, auto: builtin, opts: backendOptions(cmd)}
}

// flagNeed is a sandbox flag that only backends with a capability honour.
type flagNeed struct {
	flag  string
	given bool
	need  environment.Capabilities
}

// flagNeeds is what --image and --runtime, where given, ask of a backend.
func flagNeeds(image, ociRuntime string) []flagNeed {
	var out []flagNeed
	for _, f := range []flagNeed{
		{"--image", image != "", environment.Capabilities{Images: true}},
		{"--runtime", ociRuntime != "", environment.Capabilities{OCIRuntime: true}},
	} {
		if f.given {
			out = append(out, f)
		}
	}
	return out
}

// unmet is the first of needs that b lacks, with what it lacks.
func unmet(b environment.Backend, needs []flagNeed) (flagNeed, string, bool) {
	c := environment.CapabilitiesOf(b)
	for _, f := range needs {
		if missing := c.Missing(f.need); len(missing) > 0 {
			return f, missing[0], true
		}
	}
	return flagNeed{}, "", false
}

// autoFor is the backend auto means for flags that need capabilities: the
// first of its order that has them all, and why; "" when no flag needs one
// or no backend has them.
func autoFor(c backendChoice, needs []flagNeed) (name, why string) {
	if len(needs) == 0 {
		return "", ""
	}
	for _, n := range environment.AutoCandidates(c.auto) {
		if b, err := environment.Lookup(n, c.opts); err == nil {
			if _, _, lacks := unmet(b, needs); !lacks {
				var reasons []string
				for _, f := range needs {
					reasons = append(reasons, f.flag+" needs "+f.need.String())
				}
				return n, strings.Join(reasons, ", ")
			}
		}
	}
	return "", ""
}

// resolveBackend turns --backend (c) into a backend. auto picks Docker when a
// daemon answers, else the local backend; note is the line that says which
// ("agentbox: --backend auto: using docker"), for the caller to print when
// a sandbox is about to start (announce), not before a usage error. With
// --image or --runtime, auto means the first backend of its order that has
// what they need (custom images, OCI runtimes), taken as if named: its own
// error says best why it cannot run. A backend without it is a usage error.
func resolveBackend(ctx context.Context, c backendChoice, image, ociRuntime string) (b environment.Backend, note string, err error) {
	needs := flagNeeds(image, ociRuntime)
	why := ""
	name := c.name
	if name == environment.Auto {
		if n, reason := autoFor(c, needs); n != "" {
			name, why = n, " ("+reason+")"
		}
	}
	b, autoNote, err := environment.Resolve(ctx, name, c.auto, c.opts)
	switch {
	case errors.Is(err, environment.ErrUnknownBackend):
		return nil, "", usageErrorf("--backend: %v", err)
	case err != nil:
		return nil, "", failErr(err)
	}
	if f, missing, lacks := unmet(b, needs); lacks {
		return nil, "", usageErrorf("%s: the %s backend has no %s (`agentbox doctor` lists what each backend can do)", f.flag, b.Name(), missing)
	}
	if why != "" {
		note = fmt.Sprintf("agentbox: --backend auto: using %s%s\n", b.Name(), why)
	} else if autoNote != "" {
		note = fmt.Sprintf("agentbox: --backend auto: using %s\n", autoNote)
	}
	return b, note, nil
}

// allowUnboundedFlag is the flag by which the user accepts a sandbox whose
// CPU and total memory the backend cannot bound here.
const allowUnboundedFlag = "--allow-unbounded-limits"

// allowUnboundedUsage is its help.
const allowUnboundedUsage = "run even where the backend cannot bound the sandbox's total memory and CPU on this machine (the local backend without cgroups); without it such limits are refused (exit 2)"

// checkHostLimits holds a sandbox's limits to what the backend can give
// on this host (environment.HostLimiter): beyond them the sandbox is
// certain to fail once created, and limits it cannot hold the sandbox to
// at all would be a promise not kept, so they are usage errors before it
// is — the latter unless allowUnbounded (--allow-unbounded-limits). names
// says where each value came from (flags, run.json).
func checkHostLimits(ctx context.Context, b environment.Backend, r environment.Resources, names limitNames, allowUnbounded bool) error {
	hl, ok := b.(environment.HostLimiter)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := hl.HostLimits(ctx)
	if err != nil {
		return failErr(err)
	}
	r = r.WithDefaults()
	if l.CPUs > 0 && r.CPUs > l.CPUs {
		return usageErrorf("%s is %s: this machine has %s for the %s backend's sandboxes", names.CPUs, num(r.CPUs), plural.Count(int(l.CPUs), "CPU", "CPUs"), b.Name())
	}
	if u := l.Unbounded; !allowUnbounded && (u.Memory || u.CPU || u.PIDs) {
		var which []string
		if u.Memory {
			which = append(which, fmt.Sprintf("%s is %d MiB", names.Memory, r.MemoryMB))
		}
		if u.CPU {
			which = append(which, fmt.Sprintf("%s is %s", names.CPUs, num(r.CPUs)))
		}
		if u.PIDs {
			which = append(which, fmt.Sprintf("%s is %d", names.PIDs, r.PIDs))
		}
		fix := ""
		if l.UnboundedFix != "" {
			fix = "; to have them bounded, " + l.UnboundedFix
		}
		return usageErrorf("%s, but the %s backend cannot hold a sandbox to that on this machine: %s. Give %s to run without those bounds%s",
			strings.Join(which, " and "), b.Name(), l.UnboundedWhy, allowUnboundedFlag, fix)
	}
	if r.MemoryMB < l.MinMemoryMB {
		return usageErrorf("%s is %d MiB: %s; give at least %dm", names.Memory, r.MemoryMB, l.MemoryWhy, l.MinMemoryMB)
	}
	return nil
}
