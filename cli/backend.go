package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/codegirl-games/agentbox/environment"
)

// backendUsage is the help text of --backend.
func backendUsage() string {
	return "sandbox backend: " + strings.Join(environment.Backends(), ", ") + ", or auto (Docker when a daemon answers, else local)"
}

// resolveBackend turns --backend into a backend. auto picks Docker when a
// daemon answers, else the local backend, and says which on stderr; with
// --image or --runtime, which only Docker has, auto means Docker.
func resolveBackend(ctx context.Context, stderr io.Writer, name, image, ociRuntime string) (environment.Backend, error) {
	why := ""
	if name == environment.Auto && (image != "" || ociRuntime != "") {
		name, why = "docker", " (--image and --runtime are Docker's)"
	}
	b, note, err := environment.Resolve(ctx, name)
	switch {
	case errors.Is(err, environment.ErrUnknownBackend):
		return nil, usageErrorf("--backend: %v", err)
	case err != nil:
		return nil, failErr(err)
	}
	if b.Name() != "docker" && (image != "" || ociRuntime != "") {
		return nil, usageErrorf("--image and --runtime are Docker's; the %s backend runs the host's own system", b.Name())
	}
	if why != "" {
		fmt.Fprintf(stderr, "agentbox: --backend auto: using docker%s\n", why)
	} else if note != "" {
		fmt.Fprintf(stderr, "agentbox: --backend auto: using %s\n", note)
	}
	return b, nil
}
