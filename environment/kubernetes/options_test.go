package kubernetes

import (
	"testing"

	"github.com/codegirl-games/agentbox/environment"
)

// TestFactoryOptions: the registered factory makes the backend from the
// options it is given, and from nothing else: $AGENTBOX_K8S_NAMESPACE is
// the CLI's default for --namespace, never read behind the caller's back.
func TestFactoryOptions(t *testing.T) {
	t.Setenv(NamespaceEnv, "from-the-environment")
	for _, c := range []struct {
		name string
		opts environment.Options
		want string
	}{
		{"namespace given", environment.Options{Namespace: "given"}, "given"},
		{"none given", environment.Options{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := environment.Lookup(Name, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.(*Backend).Namespace; got != c.want {
				t.Errorf("Namespace %q, want %q", got, c.want)
			}
		})
	}
}
