package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/agent"
)

// TestEveryAgentIsRegistered: every agent a package under agent/
// registers (agent.Register("name", …)) is one the command offers — its
// package is imported, for its registration, in root.go — and README.md's
// row of --agent names it.
func TestEveryAgentIsRegistered(t *testing.T) {
	files, err := filepath.Glob("../agent/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	reg := regexp.MustCompile(`agent\.Register\("([^"]+)"`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reg.FindAllStringSubmatch(string(b), -1) {
			found++
			if !slices.Contains(agent.Names(), m[1]) {
				t.Errorf("%s registers the agent %s, which agentbox does not offer: import its package in cli/root.go (_ \"github.com/codegirl-games/agentbox/agent/%s\")",
					strings.TrimPrefix(f, "../"), m[1], filepath.Base(filepath.Dir(f)))
			}
		}
	}
	if found == 0 {
		t.Fatal("no agent.Register call found under agent/")
	}
	// README.md's flag table lists each in the row of --agent.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `--agent NAME` |") {
			row = line
		}
	}
	for _, name := range agent.Names() {
		if !strings.Contains(row, "`"+name+"`") {
			t.Errorf("README.md: the row of --agent NAME does not name the agent %s", name)
		}
	}
}
