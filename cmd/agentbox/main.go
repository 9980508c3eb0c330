// Command agentbox runs a graphical Linux application in a disposable,
// isolated desktop and lets a decision-maker drive it. See README.md.
package main

import (
	"os"

	"github.com/codegirl-games/agentbox/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
