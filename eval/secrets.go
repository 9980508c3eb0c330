package eval

import "fmt"

// CheckSecrets makes sure every scripted task's type_secret names a secret
// the eval's vault holds (has; nil: no --vault), before anything starts.
func (s *Suite) CheckSecrets(has func(name string) bool) error {
	for _, t := range s.Tasks {
		if t.script == nil {
			continue
		}
		if err := t.script.CheckSecrets(has); err != nil {
			return fmt.Errorf("task %s: %w", t.Name, err)
		}
	}
	return nil
}
