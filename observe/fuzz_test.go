package observe

import (
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// FuzzFind: a target that parses and checks never makes a tree's Find
// panic, whatever the selector.
func FuzzFind(f *testing.F) {
	for _, s := range []string{
		`{"action":"click","target":{"role":"push button","name":"O*","index":0,"ancestor":{"role":"dialog","name":"/^A/"}}}`,
		`{"action":"type","text":"x","target":{"id":"1.2/8"}}`,
		`{"action":"click","target":{"name":"/(?i)ok/","index":1}}`,
	} {
		f.Add([]byte(s))
	}
	tree := dialogTree()
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := action.Parse(data)
		if err == nil && a.Target != nil && a.Target.Check() == nil {
			_, _ = tree.Find(*a.Target)
		}
	})
}
