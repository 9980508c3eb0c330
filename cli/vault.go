package cli

import (
	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/internal/vault"
)

// vaultFlag is --vault FILE (run, eval): the secrets type_secret types.
type vaultFlag string

func (v *vaultFlag) register(fl *pflag.FlagSet) {
	fl.StringVar((*string)(v), "vault", "", "secrets type_secret types: a file of NAME=VALUE lines only its owner may read (mode 0600); the values are replaced with [secret:NAME] in everything recorded or shown (SECURITY.md)")
}

// load reads the vault (nil without --vault); a file others may read, or
// one that does not parse, is a usage error: nothing has started.
func (v vaultFlag) load() (*vault.Vault, error) {
	if v == "" {
		return nil, nil
	}
	vt, err := vault.Load(string(v))
	if err != nil {
		return nil, usageErrorf("--vault: %v", err)
	}
	return vt, nil
}

// checkScriptSecrets refuses a script that types a secret the vault does
// not hold (or any secret, without a vault).
func checkScriptSecrets(sc *script.Script, vt *vault.Vault) error {
	if sc == nil {
		return nil
	}
	var has func(string) bool
	if vt != nil {
		has = vt.Has
	}
	if err := sc.CheckSecrets(has); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}
