package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/kubernetes"
)

// TestBackendCapabilities: each built-in backend declares what it can do,
// and what it declares about its optional interfaces is what it
// implements. (Freeze and the refusals of Config.Image and Config.Runtime
// need a sandbox: the conformance suite, envtest, holds each backend to
// those.)
func TestBackendCapabilities(t *testing.T) {
	for _, name := range builtin {
		t.Run(name, func(t *testing.T) {
			b, err := environment.Lookup(name, environment.Options{})
			if err != nil {
				t.Fatal(err)
			}
			capable, ok := b.(environment.Capable)
			if !ok {
				t.Fatal("declares no capabilities (environment.Capable)")
			}
			c := capable.Capabilities()
			_, reaper := b.(environment.Reaper)
			_, stepper := b.(environment.SeedStepper)
			for _, k := range []struct {
				name           string
				declared, does bool
			}{
				{"Reap / environment.Reaper", c.Reap, reaper},
				{"SeedStep / environment.SeedStepper", c.SeedStep, stepper},
			} {
				if k.declared != k.does {
					t.Errorf("%s: declared %v, implemented %v", k.name, k.declared, k.does)
				}
			}
		})
	}
}

// fakeCapable is a backend that declares capabilities and can create
// nothing.
type fakeCapable struct {
	name string
	caps environment.Capabilities
}

func (f *fakeCapable) Name() string                           { return f.name }
func (f *fakeCapable) Capabilities() environment.Capabilities { return f.caps }
func (f *fakeCapable) Create(context.Context, environment.Config) (environment.Environment, error) {
	return nil, errors.New("fakeCapable creates nothing")
}

var registerFakes sync.Once

// registerFakeCapable registers the fake backends (once per test binary).
func registerFakeCapable() {
	registerFakes.Do(func() {
		for _, f := range []*fakeCapable{
			{name: "test-plain"},
			{name: "test-images", caps: environment.Capabilities{Images: true}},
			{name: "test-oci", caps: environment.Capabilities{Images: true, OCIRuntime: true}},
		} {
			environment.Register(f.name, func(environment.Options) (environment.Backend, error) { return f, nil })
		}
	})
}

// TestResolveBackendCapabilities: --image and --runtime are honoured by
// what a backend declares, never by its name: auto means the first backend
// of its order that has what they need (without probing it), and a named
// backend without it is a usage error.
func TestResolveBackendCapabilities(t *testing.T) {
	registerFakeCapable()
	order := []string{"test-plain", "test-images", "test-oci"}
	for _, c := range []struct {
		name, backend, image, runtime string
		want                          string // the backend chosen
		stderr                        string
		usage                         string // the usage error, if any
	}{
		{name: "auto with --image", backend: "auto", image: "img", want: "test-images",
			stderr: "agentbox: --backend auto: using test-images (--image needs custom images)\n"},
		{name: "auto with --runtime", backend: "auto", runtime: "runsc", want: "test-oci",
			stderr: "agentbox: --backend auto: using test-oci (--runtime needs OCI runtimes)\n"},
		{name: "auto with both", backend: "auto", image: "img", runtime: "runsc", want: "test-oci",
			stderr: "agentbox: --backend auto: using test-oci (--image needs custom images, --runtime needs OCI runtimes)\n"},
		{name: "auto without them", backend: "auto", want: "test-plain", stderr: "agentbox: --backend auto: using test-plain\n"},
		{name: "named, with what it needs", backend: "test-images", image: "img", want: "test-images"},
		{name: "named, without images", backend: "test-plain", image: "img", usage: "--image: the test-plain backend has no custom images"},
		{name: "named, without OCI runtimes", backend: "test-images", image: "img", runtime: "runsc", usage: "--runtime: the test-images backend has no OCI runtimes"},
		{name: "the local backend", backend: "local", image: "agentbox/runtime:bookworm", usage: "--image: the local backend has no custom images"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, note, err := resolveBackend(context.Background(), backendChoice{name: c.backend, auto: order}, c.image, c.runtime)
			if c.usage != "" {
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(err.Error(), c.usage) {
					t.Fatalf("err = %v, want a usage error containing %q", err, c.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Name() != c.want {
				t.Errorf("backend %s, want %s", b.Name(), c.want)
			}
			if note != c.stderr {
				t.Errorf("note %q, want %q", note, c.stderr)
			}
		})
	}
}

// parsed is the command args name, its flags parsed from the rest of args.
func parsed(t *testing.T, args ...string) *cobra.Command {
	t.Helper()
	cmd, rest, err := newRoot(io.Discard, io.Discard).Find(args)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cmd
}

// TestSpreadFlag: --spread reaches the backend's options for the commands
// that take it, $AGENTBOX_K8S_SPREAD being its default; a mode it does not
// know is refused when the flags are parsed, naming the flag.
func TestSpreadFlag(t *testing.T) {
	t.Setenv(kubernetes.SpreadEnv, "none")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--spread", "hard"}, "hard"},
		{[]string{"run", "--spread", "soft"}, "soft"},
		{[]string{"bench", "--spread", "none"}, "none"},
		{[]string{"eval"}, "none"},
		{[]string{"serve"}, "none"},
	} {
		if got := backendOptions(parsed(t, c.args...)).Spread; got != c.want {
			t.Errorf("%v: Spread %q, want %q", c.args, got, c.want)
		}
	}
	root := newRoot(io.Discard, io.Discard)
	cmd, rest, _ := root.Find([]string{"eval", "--spread", "wide"})
	if err := cmd.ParseFlags(rest); err == nil || !strings.Contains(err.Error(), "--spread") || !strings.Contains(err.Error(), `"wide"`) {
		t.Errorf("--spread wide: %v", err)
	}
}

// TestBackendOptions: --namespace reaches the backend as a value of its
// options, $AGENTBOX_K8S_NAMESPACE being only its default, and giving it
// changes no environment variable.
func TestBackendOptions(t *testing.T) {
	t.Setenv(kubernetes.NamespaceEnv, "from-env")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--namespace", "given"}, "given"},
		{[]string{"eval", "--namespace", "given"}, "given"},
		{[]string{"bench", "--namespace", "given"}, "given"},
		{[]string{"gc", "--namespace", "given"}, "given"},
		{[]string{"doctor", "--namespace", "given"}, "given"},
		{[]string{"run", "--namespace", ""}, ""},
		{[]string{"run"}, "from-env"},
		{[]string{"mcp"}, "from-env"}, // no --namespace: the default
		{[]string{"serve"}, "from-env"},
		{[]string{"replay"}, "from-env"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cmd := parsed(t, c.args...)
			if got := backendOptions(cmd).Namespace; got != c.want {
				t.Errorf("Namespace %q, want %q", got, c.want)
			}
			if got := chooseBackend(cmd, "auto"); got.opts.Namespace != c.want || !slices.Equal(got.auto, builtin) {
				t.Errorf("chooseBackend = %+v", got)
			}
			if v := os.Getenv(kubernetes.NamespaceEnv); v != "from-env" {
				t.Errorf("$%s became %q", kubernetes.NamespaceEnv, v)
			}
		})
	}
}
