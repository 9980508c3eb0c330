package environment

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Options configure a backend as it is made: settings of the backend
// itself, not of one sandbox (those are Config's: image, OCI runtime,
// screen, limits). Each backend reads the fields that concern it and
// ignores the others; the zero value is every backend's default.
type Options struct {
	// Namespace is the namespace of the kubernetes backend's Pods; empty:
	// the kubeconfig context's (or the Pod's own in a cluster), else
	// "default".
	Namespace string
	// Spread is how the kubernetes backend spreads the Pods of one
	// agentbox process (one eval) over the cluster's nodes: "soft" (the
	// default for ""), "hard" or "none" (kubernetes.SpreadSoft, …).
	Spread string
}

// Factory makes a backend from opts. It should be cheap and must not
// contact a daemon; Create does that.
type Factory func(opts Options) (Backend, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes a backend available by name. It panics if the name is taken,
// like database/sql.Register; call it from an init function.
func Register(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if f == nil {
		panic("environment: Register factory is nil")
	}
	if _, dup := registry[name]; dup {
		panic("environment: Register called twice for backend " + name)
	}
	registry[name] = f
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownBackend is wrapped by Lookup's error for a name nobody
// registered.
var ErrUnknownBackend = errors.New("unknown backend")

// Lookup makes the named backend with opts.
func Lookup(name string, opts Options) (Backend, error) {
	regMu.RLock()
	f, ok := registry[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownBackend, name, strings.Join(append(Backends(), Auto), ", "))
	}
	return f(opts)
}
