package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fakeGo is a `go` that answers test.sh's calls: `list ./...`, `test
// -list` of ./e2e (the tests named in $FAKE_TESTS), and `test` runs,
// which it records in $FAKE_LOG, one line each, and fails when their
// -run pattern names TestFails.
const fakeGo = `#!/bin/sh
case "$1 $2" in
"list ./...") printf 'example.test/a\nexample.test/b\nexample.test/e2e\n'; exit 0 ;;
esac
if [ "$1" = test ] && [ "$2" = -list ]; then
	for t in $FAKE_TESTS; do echo "$t"; done
	echo "ok  	example.test/e2e	0.01s"
	exit 0
fi
echo "$*" >>"$FAKE_LOG"
case "$*" in *TestFails*) echo "--- FAIL: TestFails"; exit 1 ;; esac
exit 0
`

// runTestSh runs a copy of test.sh in a directory of its own (with
// durations as e2e/testdata/durations.txt, if not empty) against fakeGo.
func runTestSh(t *testing.T, tests, durations string, env ...string) (code int, out string, calls []string) {
	t.Helper()
	root := t.TempDir()
	src, err := os.ReadFile("test.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"scripts", "e2e/testdata", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "scripts/test.sh"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	if durations != "" {
		if err := os.WriteFile(filepath.Join(root, "e2e/testdata/durations.txt"), []byte(durations), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goBin := filepath.Join(root, "bin/go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(root, "calls.log")
	cmd := exec.Command("bash", filepath.Join(root, "scripts/test.sh"), "-short")
	// Not the E2E_SHARDS of the make test that runs this test.
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "E2E_SHARDS=") })
	cmd.Env = append(base, append([]string{"GO=" + goBin, "FAKE_TESTS=" + tests, "FAKE_LOG=" + log}, env...)...)
	b, err := cmd.CombinedOutput()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	logged, _ := os.ReadFile(log)
	if s := strings.TrimSpace(string(logged)); s != "" {
		calls = strings.Split(s, "\n")
	}
	return code, string(b), calls
}

var runPattern = regexp.MustCompile(`-run \^\(([^)]*)\)\$ \./e2e`)

// shardsOf returns the tests of each e2e shard the calls ran.
func shardsOf(t *testing.T, calls []string) (shards [][]string, others int) {
	t.Helper()
	for _, c := range calls {
		if m := runPattern.FindStringSubmatch(c); m != nil {
			if !strings.Contains(c, "-short") {
				t.Errorf("the shard %q did not get the flags test.sh was given", c)
			}
			shards = append(shards, strings.Split(m[1], "|"))
			continue
		}
		if strings.Contains(c, "example.test/e2e") {
			t.Errorf("the other packages' run includes e2e: %q", c)
		}
		others++
	}
	return shards, others
}

// TestShards: every e2e test runs in exactly one shard, the shards split
// the longest tests between them (durations.txt's order), and the other
// packages run once, without e2e.
func TestShards(t *testing.T) {
	tests := "TestA TestB TestC TestD TestE TestLong1 TestLong2"
	// TestGone is no longer a test: ignored.
	durations := "TestLong1 300\nTestLong2 250\nTestGone 100\nTestA 5\n"
	code, out, calls := runTestSh(t, tests, durations)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	shards, others := shardsOf(t, calls)
	if others != 1 || len(shards) != 2 {
		t.Fatalf("want the other packages once and 2 shards, got %d and %d: %q", others, len(shards), calls)
	}
	var all []string
	for _, s := range shards {
		all = append(all, s...)
	}
	slices.Sort(all)
	if want := strings.Fields(tests); !slices.Equal(all, want) {
		t.Errorf("the shards ran %q, want each of %q once", all, want)
	}
	for _, s := range shards {
		if slices.Contains(s, "TestLong1") == slices.Contains(s, "TestLong2") {
			t.Errorf("the two longest tests are in the same shard: %q", shards)
		}
		if slices.Contains(s, "TestGone") {
			t.Errorf("a test durations.txt names but the package lacks was run: %q", s)
		}
	}

	// One shard: go test ./..., one process for every package.
	_, _, calls = runTestSh(t, tests, "", "E2E_SHARDS=1")
	if len(calls) != 1 || calls[0] != "test -count=1 -timeout 45m -short ./..." {
		t.Errorf("E2E_SHARDS=1: calls %q, want go test ./... alone", calls)
	}
}

// TestShardFails: a failing shard fails the whole, by name, and the
// other runs still finish.
func TestShardFails(t *testing.T) {
	code, out, calls := runTestSh(t, "TestA TestFails TestB", "")
	if code != 1 || !strings.Contains(out, "FAILED: e2e shard") {
		t.Fatalf("want exit 1 naming the shard, got %d:\n%s", code, out)
	}
	if !strings.Contains(out, "] --- FAIL: TestFails") {
		t.Errorf("the shard's output is not there, marked with its shard:\n%s", out)
	}
	if shards, others := shardsOf(t, calls); others != 1 || len(shards) != 2 {
		t.Errorf("not every run finished: %q", calls)
	}
}

// TestShardsBadCount: E2E_SHARDS that is not a count is refused before
// anything runs.
func TestShardsBadCount(t *testing.T) {
	for _, n := range []string{"0", "two", "-1", ""} {
		code, out, calls := runTestSh(t, "TestA", "", "E2E_SHARDS="+n)
		if n == "" {
			// Empty is unset: the default.
			if code != 0 {
				t.Errorf("E2E_SHARDS empty: exit %d:\n%s", code, out)
			}
			continue
		}
		if code != 2 || !strings.Contains(out, "E2E_SHARDS="+n) || len(calls) != 0 {
			t.Errorf("E2E_SHARDS=%s: exit %d, calls %q:\n%s", n, code, calls, out)
		}
	}
}

// TestDurations: --durations keeps the top-level tests of a `go test -v`
// log, the longest first.
func TestDurations(t *testing.T) {
	root := t.TempDir()
	src, err := os.ReadFile("test.sh")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "scripts"), 0o755)
	os.MkdirAll(filepath.Join(root, "e2e/testdata"), 0o755)
	os.WriteFile(filepath.Join(root, "scripts/test.sh"), src, 0o755)
	for _, tc := range []struct {
		name, log, want string
	}{
		{"go test -v ./e2e", `=== RUN   TestA
--- PASS: TestA (1.50s)
    --- PASS: TestA/sub (1.00s)
--- FAIL: TestB (20.00s)
--- PASS: TestC (3.25s)
--- SKIP: TestD (0.00s)
ok  	example.test/e2e	25s
`, "TestB 20.00\nTestC 3.25\nTestA 1.50\n"},
		// The other packages' tests in the same log are not e2e's.
		{"scripts/test.sh -v", `--- PASS: TestConformance (99.00s)
[e2e 1/2] --- PASS: TestA (1.50s)
[e2e 1/2]     --- PASS: TestA/sub (1.00s)
[e2e 2/2] --- FAIL: TestB (20.00s)
[e2e 2/2] ok  	example.test/e2e	25s
`, "TestB 20.00\nTestA 1.50\n"},
	} {
		log := filepath.Join(root, "v.log")
		os.WriteFile(log, []byte(tc.log), 0o644)
		out, err := exec.Command("bash", filepath.Join(root, "scripts/test.sh"), "--durations", log).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v:\n%s", tc.name, err, out)
		}
		got, _ := os.ReadFile(filepath.Join(root, "e2e/testdata/durations.txt"))
		if string(got) != tc.want {
			t.Errorf("%s: durations.txt:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
