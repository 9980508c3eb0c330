package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment/docker"
)

// TestImageUsage: an unknown image subcommand is a usage error (exit 2)
// that names it and the valid ones; it once printed the help and exited 0.
func TestImageUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want []string // in stderr, or stdout for exit 0
	}{
		{[]string{"image", "biuld"}, ExitUsage, []string{`unknown subcommand "biuld" (did you mean build?)`, "want one of build, inspect, ls"}},
		{[]string{"image", "rm", "x"}, ExitUsage, []string{`unknown subcommand "rm"`, "build, inspect, ls"}},
		{[]string{"image", "\x1b]0;x\x07"}, ExitUsage, []string{`unknown subcommand "\x1b]0;x\a"`}},
		{[]string{"image", "ls", "extra"}, ExitUsage, []string{"unknown command \"extra\""}},
		{[]string{"image", "inspect", "a", "b"}, ExitUsage, []string{"accepts at most 1 arg"}},
		{[]string{"image", "ls", "--bogus"}, ExitUsage, []string{"unknown flag: --bogus"}},
		{[]string{"image", "build", "--test", "--office"}, ExitUsage, []string{"--test and --office build two different images"}},
		{[]string{"image", "build", "--office", "--guest", "--from", "x"}, ExitUsage, []string{"does not go with --test, --office"}},
		{[]string{"image"}, ExitSuccess, []string{"Available Commands:", "build", "inspect", "ls"}},
	}
	for _, tt := range tests {
		var so, se bytes.Buffer
		code := Main(tt.args, &so, &se)
		out := se.String()
		if tt.code == ExitSuccess {
			out = so.String()
		}
		if code != tt.code {
			t.Errorf("%q: exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.code, so.String(), se.String())
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: output lacks %q:\n%s", tt.args, w, out)
			}
		}
		noControls(t, "image's error", se.String())
	}
}

var imagesForOutput = []docker.ImageInfo{
	{Ref: "agentbox/base:bookworm", ID: "sha256:8518e623acb8fb6002b14d96007542ceca59fe598c9b1fba66f8de54f9235ad6", Role: "base",
		Size: 74822468, Created: time.Date(2026, 12, 1, 10, 45, 35, 0, time.UTC), Status: docker.StatusBase},
	{Ref: "agentbox/runtime:bookworm", ID: "sha256:ffeb91672552fc49167a25952b9965fc39b1141726ca94c1ca418418067a673f", Role: "runtime",
		Size: 534935821, Created: time.Date(2026, 12, 1, 11, 53, 0, 0, time.UTC), Apps: []string{"xterm"},
		Base: "agentbox/base:bookworm", BaseID: "sha256:8518e623acb8fb6002b14d96007542ceca59fe598c9b1fba66f8de54f9235ad6",
		BuildHash: "sha256:ac65f8cef9bcf6c12d57a18772428c1405ac160cbe827a698db915ea00663d8e", Status: docker.StatusCurrent, Platform: "linux/amd64"},
	{Ref: "agentbox/test:bookworm", ID: "sha256:43a7937b5de5aaaa", Role: "test",
		Size: 548456395, Created: time.Date(2026, 12, 1, 10, 46, 33, 0, time.UTC),
		Base: "agentbox/runtime:bookworm", BaseID: "sha256:9c4e4f97ccea", Status: docker.StatusOutdated, Why: "built from another images/Dockerfile.test"},
	{Ref: "agentbox/test:mine", ID: "sha256:6441dc7e00fc", Role: "test", Size: 548466412, Created: time.Date(2026, 12, 1, 11, 55, 0, 0, time.UTC),
		Apps: []string{"xterm", "xcalc", "xeyes"}, Status: docker.StatusOutdated, Why: "its base agentbox/runtime:bookworm was rebuilt since"},
}

// TestImageLsOutput: the table, and what makes an outdated image anew.
func TestImageLsOutput(t *testing.T) {
	var b bytes.Buffer
	writeImageLs(&b, imagesForOutput, time.UTC)
	golden(t, "image-ls.golden", b.Bytes())
}

// TestImageInspectOutput: an image of agentbox's, and one that is not.
func TestImageInspectOutput(t *testing.T) {
	var b bytes.Buffer
	writeImageInspect(&b, imagesForOutput[1], time.UTC)
	b.WriteString("--\n")
	writeImageInspect(&b, imagesForOutput[2], time.UTC)
	b.WriteString("--\n")
	writeImageInspect(&b, docker.ImageInfo{Ref: "debian:bookworm-slim", Tags: []string{"debian:bookworm-slim"}, ID: "sha256:0123", Size: 74 << 20,
		Status: docker.StatusForeign, Platform: "linux/amd64"}, time.UTC)
	golden(t, "image-inspect.golden", b.Bytes())
}

// TestImageOutputEscapes: an image's labels and tags are anyone's text (a
// local image can claim to be agentbox's); ls and inspect show them escaped.
func TestImageOutputEscapes(t *testing.T) {
	evil := docker.ImageInfo{Ref: "evil:latest", Tags: []string{"evil:latest"}, ID: "sha256:0123", Role: "runtime" + hostile,
		Apps: []string{"xterm", hostile}, Base: "base" + hostile, BaseID: "sha256:" + hostile, BuildHash: hostile,
		Status: docker.StatusOutdated, Why: "built from another images/Dockerfile"}
	var b bytes.Buffer
	writeImageLs(&b, []docker.ImageInfo{evil}, time.UTC)
	writeImageInspect(&b, evil, time.UTC)
	noControls(t, "image ls and inspect", b.String())
	if !strings.Contains(b.String(), `\x1b]52;c;`) {
		t.Errorf("the label's escapes are not shown:\n%s", b.String())
	}
}

// TestNamesSuggested: run's agent list names human too, and a mistyped
// agent or flag gets a "did you mean", as a mistyped subcommand does.
// Nothing is started: each is exit 2 before a backend is looked for.
func TestNamesSuggested(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "/nonexistent"}, "choose an agent with --agent (anthropic, demo, exec, human, idle, openai, openai-chat) or a script"},
		{[]string{"run", "/nonexistent", "--agent", "humna"}, `unknown agent "humna" (did you mean human?) (known: anthropic, demo, exec, human, idle, openai, openai-chat)`},
		{[]string{"run", "/nonexistent", "--agent", "antropic"}, `unknown agent "antropic" (did you mean anthropic?)`},
		{[]string{"run", "/nonexistent", "--agent", "zzzzzzzz"}, `unknown agent "zzzzzzzz" (known: anthropic,`},
		{[]string{"run", "/nonexistent", "--agnet", "demo"}, "unknown flag: --agnet (did you mean --agent?) (see `agentbox run --help`)"},
		{[]string{"eval", "/nonexistent", "--paralel", "2"}, "unknown flag: --paralel (did you mean --parallel?)"},
		{[]string{"run", "/nonexistent", "--zzzzzzzz"}, "unknown flag: --zzzzzzzz (see `agentbox run --help`)"},
	} {
		var so, se bytes.Buffer
		if code := Main(tt.args, &so, &se); code != ExitUsage || !strings.Contains(se.String(), tt.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tt.args, code, se.String(), tt.want)
		}
	}
}

// TestBuiltLine: image build's last line gives the size as the build's
// progress and image ls do (534.9MB), not in MiB beside them.
func TestBuiltLine(t *testing.T) {
	got := builtLine("agentbox/runtime:bookworm", "built", "ffeb91672552", 534_900_000, 1500*time.Millisecond)
	if !strings.Contains(got, "(ffeb91672552, 534.9MB) in ") || strings.Contains(got, "MiB") {
		t.Errorf("%q", got)
	}
}
