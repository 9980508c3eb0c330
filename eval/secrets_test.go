package eval

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/internal/vault"
)

// TestSuiteSecrets: every episode gets the eval's vault, and a scripted
// task typing a secret the vault does not hold is refused by name.
func TestSuiteSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	write("login.yaml", "steps:\n  - action: type_secret\n    secret: PW\n")
	path := write("suite.yaml", "tasks:\n  - name: plain\n    target: xterm\n    agent: idle\n  - name: login\n    target: xterm\n    script: login.yaml\n")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(map[string]string{"PW": "hunter22"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSecrets(v.Has); err != nil {
		t.Errorf("a vault holding PW: %v", err)
	}
	other, _ := vault.New(map[string]string{"OTP": "123456"})
	if err := s.CheckSecrets(other.Has); err == nil || !strings.HasPrefix(err.Error(), "task login: ") || !strings.Contains(err.Error(), "secret PW") {
		t.Errorf("a vault without PW: %v", err)
	}
	if err := s.CheckSecrets(nil); err == nil || !strings.Contains(err.Error(), "no vault") {
		t.Errorf("no vault: %v", err)
	}
	cfg, err := episodeConfig(s.Tasks[1], &app.Bundle{}, Options{Vault: v})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Vault.Has("PW") {
		t.Error("the episode did not get the eval's vault")
	}
}
