// Package guestlimits carries the local backend's fallback resource
// limits to its guest: the host puts them in the guest's environment
// (Env, encoded by Spec), and the guest sets them on itself in this
// package's init — before main, so everything it starts inherits them.
// Package guest imports it, so both binaries that can be the guest
// (agentbox and agentbox-guest) apply them; the local backend checks
// that the guest did before it trusts the sandbox.
package guestlimits

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Env is the guest's environment variable that holds the limits.
const Env = "AGENTBOX_RLIMITS"

// Limit is one resource limit, set as both soft and hard limit.
type Limit struct {
	Resource int // unix.RLIMIT_*
	Value    uint64
}

// Spec encodes limits for Env: "7=256,2=…".
func Spec(list []Limit) string {
	parts := make([]string, len(list))
	for i, l := range list {
		parts[i] = strconv.Itoa(l.Resource) + "=" + strconv.FormatUint(l.Value, 10)
	}
	return strings.Join(parts, ",")
}

// Set applies a spec to this process (soft and hard).
func Set(spec string) error {
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		res, err1 := strconv.Atoi(k)
		val, err2 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad limit %q", kv)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: val, Max: val}); err != nil {
			return fmt.Errorf("setrlimit %d=%d: %w", res, val, err)
		}
	}
	return nil
}

func init() {
	// Inside a sandbox: the guest sets its own limits before main, so
	// everything it starts inherits them; a guest that cannot exits.
	if spec, ok := os.LookupEnv(Env); ok {
		os.Unsetenv(Env)
		if err := Set(spec); err != nil {
			fmt.Fprintf(os.Stderr, "agentbox: %s: %v\n", Env, err)
			os.Exit(111)
		}
	}
}
