package script

import (
	"fmt"

	"github.com/codegirl-games/agentbox/action"
)

// CheckSecrets makes sure every type_secret of the script names a secret
// the run's vault holds (has), before anything starts: the first that does
// not is an error naming the script's file and line. has nil: the run has
// no vault.
func (s *Script) CheckSecrets(has func(name string) bool) error {
	for _, st := range s.Steps {
		if st.Action == nil || st.Action.Kind != action.TypeSecret {
			continue
		}
		if has == nil {
			return fmt.Errorf("%s:%d: %s types secret %s, but the run has no vault (--vault FILE)", s.File, st.Line, st.Describe(), st.Action.Secret)
		}
		if !has(st.Action.Secret) {
			return fmt.Errorf("%s:%d: %s types secret %s, which the vault does not hold", s.File, st.Line, st.Describe(), st.Action.Secret)
		}
	}
	return nil
}
