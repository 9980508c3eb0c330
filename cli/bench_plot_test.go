package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseConcurrency(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []int
		err  string
	}{
		{"none", nil, ""},
		{"", nil, ""},
		{"1,8, 32,64", []int{1, 8, 32, 64}, ""},
		{"0", nil, `"0": want none`},
		{"1,x", nil, `"x": want none`},
		{"257", nil, `"257": want none or a list of counts from 1 to 256`},
	} {
		got, err := parseConcurrency(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%q: %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestBenchPlot draws a PNG from bench's JSON (one report, or runs side by
// side) and refuses what is not that JSON, exit 2, nothing written.
func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one.json", `{"Machine": {"CPUs": 2}, "Steps": [{"Screen": {"Width": 640, "Height": 480}, "Unchanged": {"N": 3, "P50": 1, "P95": 2}}]}`)
	runs := write("runs.json", `[{"Backend": "docker", "Report": {"Machine": {"CPUs": 2}, "Scale": [{"Envs": 1, "Step": {"N": 3, "P50": 1, "P95": 2}}]}}]`)
	for _, in := range []string{one, runs} {
		out := filepath.Join(dir, filepath.Base(in)+".png")
		res := runCLI(t, "bench", "plot", in, "-o", out)
		if res.code != 0 {
			t.Fatalf("%s: exit %d: %s", in, res.code, res.stderr)
		}
		if data, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
			t.Errorf("%s: %v", out, err)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "plot", write("bad.json", `{"x": 1}`), "-o", filepath.Join(dir, "bad.png")}, "not the figures of agentbox bench --json (no Machine)"},
		{[]string{"bench", "plot", write("broken.json", `[{"Backend": }]`), "-o", filepath.Join(dir, "broken.png")}, "not the figures of agentbox bench --json"},
		{[]string{"bench", "plot", one}, "-o: name the PNG to write"},
		{[]string{"bench", "plot", filepath.Join(dir, "missing.json"), "-o", filepath.Join(dir, "m.png")}, "no such file"},
	} {
		res := runCLI(t, tt.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, res.code, res.stderr, tt.want)
		}
	}
	for _, name := range []string{"bad.png", "broken.png", "m.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s written for bad input", name)
		}
	}
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var so, se bytes.Buffer
	code := Main(args, &so, &se)
	return cliResult{code, so.String(), se.String()}
}
