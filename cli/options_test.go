package cli

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// verbArgs are the arguments that bring each verb that takes the sandbox
// flags to their checks with nothing else wrong before them, and a mistake
// after them (the target, suite and trace are looked at only after them;
// serve's half a TLS pair is refused before it listens), so that a verb
// that lets a bad value through fails the test at once instead of
// starting anything.
var verbArgs = map[string][]string{
	"run":    {"run", "no-such-target", "--agent", "idle"},
	"eval":   {"eval", "no-such-suite.yaml"},
	"replay": {"replay", "no-such-trace"},
	"mcp":    {"mcp", "no-such-target"},
	"serve":  {"serve", "--listen", "127.0.0.1:0", "--tls-cert", "no-such-cert.pem"},
}

// TestSandboxFlagsOneError: a bad value of a sandbox flag is the same
// usage error from every verb that takes the flag, and with two bad
// values each verb names the same one first (the checks run in one
// order: the run's bounds, then the sandbox, then --env).
func TestSandboxFlagsOneError(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		want  string
		// own is a verb's own error where the flag means something else
		// there (replay's --timeout 0 is the recording's).
		own map[string]string
	}{
		{name: "no steps", flags: []string{"--max-steps", "0"}, want: "--max-steps must be positive, got 0"},
		{name: "a negative rate", flags: []string{"--max-rate", "-1"}, want: "--max-rate must not be negative, got -1"},
		{name: "a negative timeout", flags: []string{"--timeout", "-1s"}, want: "--timeout must be positive, got -1s",
			own: map[string]string{"replay": "--timeout must not be negative (0: the recording's), got -1s"}},
		{name: "a start timeout too short", flags: []string{"--start-timeout", "10ms"}, want: "--start-timeout 10ms is too short"},
		{name: "a bad screen", flags: []string{"--screen", "10"}, want: "--screen "},
		{name: "no CPU", flags: []string{"--cpus", "0"}, want: "--cpus is 0: want 0.01 to 1024"},
		{name: "a bad memory size", flags: []string{"--memory", "lots"}, want: `--memory "lots": want a size like 512m or 2g`},
		{name: "a bad --env", flags: []string{"--env", "NOEQUALS"}, want: `--env "NOEQUALS": want KEY=VALUE`},
		{name: "bounds before the sandbox", flags: []string{"--screen", "10", "--memory", "lots", "--max-steps", "0"}, want: "--max-steps must be positive, got 0"},
		{name: "the sandbox before --env", flags: []string{"--env", "NOEQUALS", "--memory", "lots"}, want: `--memory "lots"`},
		{name: "a negative ready timeout", flags: []string{"--ready-timeout", "-1s"}, want: "--ready-timeout must not be negative, got -1s"},
		{name: "a bad log cap", flags: []string{"--log-cap", "lots"}, want: `--log-cap "lots": want a size like 512m or 2g`},
		{name: "a log cap too large", flags: []string{"--log-cap", "2t"}, want: "--log-cap is "},
		{name: "a bad settle", flags: []string{"--settle", "soon"}, want: "--settle: "},
		{name: "the launch before the sandbox", flags: []string{"--memory", "lots", "--settle", "soon"}, want: "--settle: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			var first, firstVerb string
			ran := 0
			for _, verb := range []string{"run", "eval", "replay", "mcp", "serve"} {
				if !takesFlags(t, verb, c.flags) {
					continue
				}
				ran++
				var se bytes.Buffer
				args := append(append([]string(nil), verbArgs[verb]...), c.flags...)
				if verb == "serve" {
					args = append(args, "--write-token", filepath.Join(t.TempDir(), "token"))
				}
				code := Main(args, io.Discard, &se)
				line, _, _ := strings.Cut(se.String(), "\n")
				want, own := c.own[verb]
				if !own {
					want = c.want
				}
				if code != ExitUsage || !strings.Contains(line, want) {
					t.Errorf("%s: exit %d, %q; want exit %d saying %q", verb, code, se.String(), ExitUsage, want)
					continue
				}
				if own {
					continue
				}
				if first == "" {
					first, firstVerb = line, verb
				} else if line != first {
					t.Errorf("%s says %q, %s says %q", verb, line, firstVerb, first)
				}
			}
			if ran < 2 {
				t.Fatalf("only %d verbs take %v", ran, c.flags)
			}
		})
	}
}

// takesFlags reports whether verb has every flag of args.
func takesFlags(t *testing.T, verb string, args []string) bool {
	t.Helper()
	cmd, _, err := newRoot(io.Discard, io.Discard).Find([]string{verb})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--") && cmd.Flags().Lookup(strings.TrimPrefix(a, "--")) == nil {
			return false
		}
	}
	return true
}

// TestAgentFlagOneError: --agent with a name nobody registered is the same
// usage error from run and eval — with its "did you mean", before anything
// else is looked at (eval named a task of the suite and its line, though
// the name came from the flag) — and so is a bad --agent-opt.
func TestAgentFlagOneError(t *testing.T) {
	for _, c := range []struct {
		name        string
		flags       []string
		want        string
		notFromEval string
	}{
		{name: "a misspelt agent", flags: []string{"--agent", "dmeo"}, want: `unknown agent "dmeo" (did you mean demo?) (known: anthropic, demo, exec, `, notFromEval: "task"},
		{name: "a bad option", flags: []string{"--agent", "demo", "--agent-opt", "ab"}, want: `--agent-opt "ab": want KEY=VALUE`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"run", "no-such-target"},
				{"eval", "examples/no-such-suite.yaml"},
			} {
				var se bytes.Buffer
				code := Main(append(args, c.flags...), io.Discard, &se)
				if code != ExitUsage || !strings.Contains(se.String(), c.want) || c.notFromEval != "" && strings.Contains(se.String(), c.notFromEval) {
					t.Errorf("%s %v: exit %d, %q; want exit %d saying %q", args[0], c.flags, code, se.String(), ExitUsage, c.want)
				}
			}
		})
	}
}
