package local

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

// TestKeymapScript runs the script bound over xkbcomp against a stand-in
// for the real xkbcomp that says what it was given: the cached keymap only
// for exactly the recorded arguments and keymap names with nothing newer
// than the cache, the real xkbcomp with the same arguments and input
// otherwise.
func TestKeymapScript(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	recorded := []string{"-w", "1", "-R/usr/share/X11/xkb", "-xkm", "-", "-em1", "it's \"quoted\" $HOME `x`", "-emp", "> ", "-eml", "a\\b", "-x"}
	names := "xkb_keymap \"default\" {\n    xkb_keycodes { include \"evdev\" };\n};\n"
	for _, tc := range []struct {
		name   string
		args   []string // without the output file
		stdin  string
		newer  string // "real" or "data": made newer than the cache
		cached bool
	}{
		{name: "recorded", args: recorded, stdin: names, cached: true},
		{name: "no final newline", args: recorded, stdin: strings.TrimSuffix(names, "\n"), cached: true},
		{name: "other keymap", args: recorded, stdin: strings.Replace(names, "evdev", "xfree86", 1)},
		{name: "keymap with more", args: recorded, stdin: names + "x\n"},
		{name: "empty stdin", args: recorded, stdin: ""},
		{name: "an argument more", args: append(slices.Clone(recorded), "-v"), stdin: names},
		{name: "an argument fewer", args: recorded[:len(recorded)-1], stdin: names},
		{name: "an argument differs", args: append(slices.Clone(recorded[:2]), append([]string{"-R/usr/share/X11/xkb/"}, recorded[3:]...)...), stdin: names},
		{name: "client dump", args: []string{":1"}, stdin: names},
		{name: "real xkbcomp newer", args: recorded, stdin: names, newer: "real"},
		{name: "keymap data newer", args: recorded, stdin: names, newer: "data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cache := filepath.Join(dir, "cache")
			data := filepath.Join(dir, "symbols")
			for _, d := range []string{cache, data} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			real := filepath.Join(dir, "real")
			// The stand-in writes its arguments and its stdin to the output
			// file (its last argument).
			stand := "#!/bin/sh\nfor a; do out=$a; done\n{ printf 'REAL'; printf ' [%s]' \"$@\"; printf '\\n'; cat; } >\"$out\"\n"
			if err := os.WriteFile(real, []byte(stand), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cache, "keymap.xkm"), []byte("CACHED\x00\x01"), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{real, data} {
				if err := os.Chtimes(p, old, old); err != nil {
					t.Fatal(err)
				}
			}
			switch tc.newer {
			case "real":
				future := time.Now().Add(time.Hour)
				os.Chtimes(real, future, future)
			case "data":
				future := time.Now().Add(time.Hour)
				os.Chtimes(data, future, future)
			}
			script := filepath.Join(dir, "xkbcomp")
			if err := os.WriteFile(script, []byte(keymapScript(cache, real, []string{data}, recorded, names)), 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "server-3.xkm")
			cmd := exec.Command(script, append(slices.Clone(tc.args), out)...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if tc.cached {
				if string(got) != "CACHED\x00\x01" {
					t.Fatalf("got %q, want the cached keymap", got)
				}
				return
			}
			var want bytes.Buffer
			want.WriteString("REAL")
			for _, a := range append(slices.Clone(tc.args), out) {
				want.WriteString(" [" + a + "]")
			}
			want.WriteString("\n")
			// What the script read and passed on ends in a newline.
			if tc.stdin != "" && slices.Equal(tc.args, recorded) {
				want.WriteString(normLines(tc.stdin))
			} else {
				want.WriteString(tc.stdin)
			}
			if string(got) != want.String() {
				t.Fatalf("the real xkbcomp got\n%q\nwant\n%q", got, want.String())
			}
		})
	}
}

// TestXstartKey: the cache's name follows the identity of what it is made
// from, and the uid sandboxes run as.
func TestXstartKey(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("one"), 0o644)
	os.WriteFile(b, []byte("two"), 0o644)
	in := []string{a, b, filepath.Join(dir, "missing")}
	k := xstartKey(1000, in)
	if len(k) != 20 || k != xstartKey(1000, in) {
		t.Fatalf("key %q not stable", k)
	}
	for _, tc := range []struct {
		name   string
		change func()
		uid    int
	}{
		{"uid", func() {}, 65534},
		{"mtime", func() { t1 := time.Now().Add(time.Minute); os.Chtimes(a, t1, t1) }, 1000},
		{"size", func() { os.WriteFile(b, []byte("three"), 0o644) }, 1000},
		{"replaced", func() { os.Remove(b); os.WriteFile(b, []byte("three"), 0o644) }, 1000},
		{"appears", func() { os.WriteFile(in[2], nil, 0o644) }, 1000},
		{"removed", func() { os.Remove(a) }, 1000},
	} {
		tc.change()
		k2 := xstartKey(tc.uid, in)
		if k2 == k {
			t.Errorf("%s: key unchanged", tc.name)
		}
		k = xstartKey(1000, in)
	}
}

// TestXstartArgs: the caches are read-only binds before the root turns
// read-only; a named sandbox's home (bound later) gets no compose cache;
// without a cache there is nothing.
func TestXstartArgs(t *testing.T) {
	if a := (&xstart{why: "no"}).args(false); a != nil {
		t.Errorf("no cache, args %q", a)
	}
	if a := (*xstart)(nil).args(false); a != nil {
		t.Errorf("nil cache, args %q", a)
	}
	x := &xstart{dir: "/c/xstart-1", compose: "/c/xstart-1/compose"}
	b := &bwrapInfo{path: "/usr/bin/bwrap", version: "0.8.0", size: true, disableUserns: true}
	res := environment.Resources{}.WithDefaults()
	args := withHome(sandboxArgs(b, environment.Config{}, res, "/g", nil, x.args(false), nil), "")
	line := strings.Join(args, " ")
	for _, want := range []string{
		"--ro-bind /usr/bin/xkbcomp " + xkbcompReal,
		"--ro-bind /c/xstart-1/keymap " + xkbCacheDir,
		"--ro-bind /c/xstart-1/xkbcomp /usr/bin/xkbcomp",
		"--perms 0755 --dir /tmp/home --ro-bind /c/xstart-1/compose /tmp/home/.compose-cache",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("argv lacks %q:\n%s", want, line)
		}
	}
	ro := slices.Index(args, "--remount-ro")
	if i := slices.Index(args, "/c/xstart-1/xkbcomp"); i < 0 || i > ro || args[i-1] != "--ro-bind" {
		t.Errorf("the script is not bound read-only before --remount-ro: %s", line)
	}
	named := withHome(sandboxArgs(b, environment.Config{Name: "n"}, res, "/g", nil, x.args(true), nil), "/home/n")
	if l := strings.Join(named, " "); strings.Contains(l, ".compose-cache") || !strings.Contains(l, "/c/xstart-1/xkbcomp") {
		t.Errorf("named sandbox: %s", l)
	}
}

// TestXstartFallback: where no cache can be had, sandboxes start as before
// (no arguments) and doctor is told why.
func TestXstartFallback(t *testing.T) {
	dir := t.TempDir()
	uid, gid, _ := hostIdentity()
	// The cache directory cannot be made: a file is in the way.
	blocked := filepath.Join(dir, "file")
	os.WriteFile(blocked, nil, 0o644)
	x := loadOrBuild(context.Background(), nil, filepath.Join(blocked, "cache"), "k", "/usr/bin/Xvfb", "", uid, gid)
	if x.dir != "" || x.args(false) != nil || !strings.Contains(x.describe(), "not cached") || !strings.Contains(x.why, "cannot make") {
		t.Errorf("blocked: %+v %q", x, x.describe())
	}
	// Others may write to it.
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if x := loadOrBuild(context.Background(), nil, open, "k", "/usr/bin/Xvfb", "", uid, gid); x.dir != "" || !strings.Contains(x.why, "only it may write") {
		t.Errorf("writable by others: %+v", x)
	}
	// A recent failed build is not retried.
	ok := filepath.Join(dir, "ok")
	os.Mkdir(ok, 0o700)
	os.WriteFile(filepath.Join(ok, "xstart-k.failed"), []byte("Xvfb: no screens\n"), 0o644)
	if x := loadOrBuild(context.Background(), nil, ok, "k", "/usr/bin/Xvfb", "", uid, gid); x.dir != "" || !strings.Contains(x.why, "Xvfb: no screens") {
		t.Errorf("failed before: %+v", x)
	}
	// No bubblewrap to build with.
	if x := loadOrBuild(context.Background(), nil, ok, "k2", "/usr/bin/Xvfb", "", uid, gid); x.dir != "" || x.why == "" {
		t.Errorf("no bubblewrap: %+v", x)
	}
	// An incomplete cache is not used.
	half := filepath.Join(ok, "xstart-k3")
	os.MkdirAll(filepath.Join(half, "keymap"), 0o755)
	os.WriteFile(filepath.Join(half, "xkbcomp"), []byte("#!/bin/sh\n"), 0o755)
	if loadXstart(half, uid) != nil {
		t.Error("a cache without its keymap is used")
	}
	os.WriteFile(filepath.Join(half, "keymap", "keymap.xkm"), []byte("x"), 0o644)
	if x := loadXstart(half, uid); x == nil || x.compose != "" {
		t.Errorf("a whole cache without a compose cache: %+v", x)
	}
	os.Chmod(filepath.Join(half, "xkbcomp"), 0o777)
	if loadXstart(half, uid) != nil {
		t.Error("a script others may change is used")
	}
}

// TestXstartBuild builds the caches in a sandbox on this host and checks
// them: the script serves the keymap Xvfb loaded for its recorded request.
func TestXstartBuild(t *testing.T) {
	bw := findBwrap()
	if bw.err != nil {
		t.Skip(bw.err)
	}
	xvfb, err := hostProgram("Xvfb")
	if err != nil {
		t.Skip(err)
	}
	if err := smokeTest(context.Background(), bw); err != nil {
		t.Skip(err)
	}
	openbox, _ := hostProgram("openbox")
	// Sandboxes (as root: another uid) must reach the cache.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	uid, gid, _ := hostIdentity()
	// Two builders at once (two agentbox processes): both end with the
	// one cache that won the rename.
	var wg sync.WaitGroup
	got := make([]*xstart, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = loadOrBuild(context.Background(), bw, filepath.Join(dir, "c"), "test", xvfb, openbox, uid, gid)
		}()
	}
	wg.Wait()
	x := got[0]
	if x.dir == "" {
		t.Fatalf("no cache: %s", x.why)
	}
	if got[1].dir != x.dir {
		t.Fatalf("concurrent builds: %+v and %+v", got[0], got[1])
	}
	switch {
	case openbox != "" && uid == os.Geteuid() && x.compose == "":
		t.Errorf("no compose cache: %s", x.why)
	case uid != os.Geteuid() && (x.compose != "" || !strings.Contains(x.why, "not agentbox's")):
		// As root the sandbox's host uid is nobody's: a compose cache would
		// be nobody's to change, so there is none.
		t.Errorf("sandbox uid %d, agentbox's %d: compose %q (%s)", uid, os.Geteuid(), x.compose, x.why)
	}
	script, err := os.ReadFile(filepath.Join(x.dir, "xkbcomp"))
	if err != nil || !strings.Contains(string(script), "exec /bin/cat \"$d/keymap.xkm\"") {
		t.Fatalf("script: %v\n%s", err, script)
	}
	// Built again: the one there is used.
	if y := loadOrBuild(context.Background(), nil, filepath.Join(dir, "c"), "test", xvfb, openbox, uid, gid); y.dir != x.dir {
		t.Errorf("second load: %+v", y)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "c", ".xstart-*")); len(ents) != 0 {
		t.Errorf("build leftovers: %q", ents)
	}
}
