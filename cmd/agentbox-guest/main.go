// Command agentbox-guest is agentbox's in-sandbox supervisor alone: what
// `agentbox guest` runs, without the packages only the host uses (the
// command line, the backends' clients, the agents, the exporters), whose
// initialisers every sandbox's start would otherwise pay. `make build`
// builds it beside bin/agentbox, where the docker and local backends find
// it (environment/guestenv.Binary) and `agentbox image build --guest`
// layers it into the Kubernetes guest image (guestenv.ImageBinaries);
// without it they run the agentbox binary itself as the guest.
//
// It takes agentbox's arguments: `agentbox-guest guest [flags]`, and
// `agentbox-guest version`.
package main

import (
	"fmt"
	"os"

	"github.com/codegirl-games/agentbox/guest"
	"github.com/codegirl-games/agentbox/internal/fds"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/wire"
)

func main() {
	// As agentbox's own main: descriptors inherited beyond stdio reach
	// nothing the guest starts (SECURITY.md).
	if err := fds.CloseOnExec(3); err != nil {
		fmt.Fprintf(os.Stderr, "agentbox: warning: inherited descriptors stay inheritable: %v\n", err)
	}
	args := os.Args[1:]
	switch {
	case len(args) > 0 && args[0] == "guest":
		os.Exit(guest.Command(args[1:], os.Stdin, os.Stdout, os.Stderr))
	case len(args) == 1 && args[0] == "version":
		fmt.Printf("agentbox-guest %s (wire protocol %d)\n", version.Version, wire.Protocol)
	default:
		fmt.Fprintf(os.Stderr, "agentbox-guest: the guest agentbox's backends start in a sandbox (`agentbox-guest guest`), not a command for people; use agentbox\n")
		os.Exit(2)
	}
}
