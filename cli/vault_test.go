package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVaultFlag: a vault others may read, one that does not parse, and a
// script typing a secret the vault does not hold are usage errors of run
// and eval (exit 2) naming the file, before anything starts.
func TestVaultFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := write("open.vault", "PW=hunter22\n", 0o644)
	bad := write("bad.vault", "PW=hunter22\nnot a secret\n", 0o600)
	good := write("good.vault", "PW=hunter22\n", 0o600)
	sc := write("login.yaml", "steps:\n  - action: type_secret\n    secret: OTP\n", 0o644)
	suite := write("suite.yaml", "tasks:\n  - name: login\n    target: xterm\n    script: login.yaml\n", 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"run: readable by others", []string{"run", "xterm", "--agent", "idle", "--vault", open}, "--vault: vault " + open + ": mode 0644 is readable or writable by group or others"},
		{"eval: readable by others", []string{"eval", suite, "--vault", open}, "mode 0644"},
		{"mcp: readable by others", []string{"mcp", "xterm", "--vault", open}, "mode 0644"},
		{"serve: readable by others", []string{"serve", "--listen", "127.0.0.1:0", "--write-token", filepath.Join(dir, "token"), "--vault", open}, "mode 0644"},
		{"run: does not parse", []string{"run", "xterm", "--agent", "idle", "--vault", bad}, bad + ":2: want NAME=VALUE"},
		{"run: a script's unknown secret", []string{"run", "xterm", "--script", sc, "--vault", good}, sc + ":2: step 1 "},
		{"run: a script's secret without a vault", []string{"run", "xterm", "--script", sc}, "the run has no vault"},
		{"eval: a script's unknown secret", []string{"eval", suite, "--vault", good}, "task login: " + sc + ":2:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var se bytes.Buffer
			code := Main(c.args, io.Discard, &se)
			if code != ExitUsage || !strings.Contains(se.String(), c.want) {
				t.Errorf("exit %d, %q; want exit %d saying %q", code, se.String(), ExitUsage, c.want)
			}
			if strings.Contains(se.String(), "hunter22") {
				t.Errorf("the error shows the value: %s", se.String())
			}
		})
	}
}
