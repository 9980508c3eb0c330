package environment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

type fakeBackend struct {
	name  string
	probe error
	delay time.Duration
}

func (f *fakeBackend) Name() string { return f.name }
func (f *fakeBackend) Create(context.Context, environment.Config) (environment.Environment, error) {
	return nil, errors.New("fake")
}
func (f *fakeBackend) Probe(ctx context.Context) error {
	select {
	case <-time.After(f.delay):
		return f.probe
	case <-ctx.Done():
		return fmt.Errorf("%w: no answer: %w", environment.ErrUnavailable, ctx.Err())
	}
}

var fakes = map[string]*fakeBackend{
	"fake-down": {name: "fake-down", probe: fmt.Errorf("%w: no daemon answers at unix:///x (dial unix /x: connect: no such file or directory, a long reason); start it", environment.ErrUnavailable)},
	"fake-slow": {name: "fake-slow", delay: time.Minute},
	"fake-up":   {name: "fake-up"},
}

func init() {
	for name, f := range fakes {
		environment.Register(name, func(environment.Options) (environment.Backend, error) { return f, nil })
	}
}

func TestResolveAuto(t *testing.T) {
	ctx := t.Context()

	order := []string{"not-built-in", "fake-down", "fake-slow", "fake-up"}
	start := time.Now()
	b, note, err := environment.Resolve(ctx, environment.Auto, order, environment.Options{})
	if err != nil || b.Name() != "fake-up" {
		t.Fatalf("Resolve(auto) = %v, %q, %v", b, note, err)
	}
	// The slow probe would hold auto for a minute; the bound tells that
	// from a busy machine's late return.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a slow probe held auto for %v", d)
	}
	want := "fake-up (fake-down: no daemon answers at unix:///x; fake-slow: no answer: context deadline exceeded)"
	if note != want {
		t.Errorf("note\n got %q\nwant %q", note, want)
	}

	if _, _, err := environment.Resolve(ctx, environment.Auto, []string{"fake-down"}, environment.Options{}); !errors.Is(err, environment.ErrUnavailable) || !strings.Contains(err.Error(), "agentbox doctor") {
		t.Errorf("nothing available: %v", err)
	}

	// A named backend is taken as it is, probe or not.
	if b, note, err := environment.Resolve(ctx, "fake-down", nil, environment.Options{}); err != nil || b.Name() != "fake-down" || note != "" {
		t.Errorf("Resolve(fake-down) = %v, %q, %v", b, note, err)
	}
	_, _, err = environment.Resolve(ctx, "nope", nil, environment.Options{})
	if !errors.Is(err, environment.ErrUnknownBackend) || errors.Is(err, environment.ErrUnavailable) || !strings.Contains(err.Error(), "auto") {
		t.Errorf("unknown name: %v", err)
	}
}
