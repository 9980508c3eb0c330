package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/guest/xserver"
)

// Start-up caches: work the sandbox's X stack would otherwise redo at every
// start, done once per host and bound into every sandbox read-only, as the
// Docker image has it built in (images/Dockerfile, "Start-up caches"):
//
//   - Xvfb's keymap. Xvfb compiles the same default keymap with the xkbcomp
//     compiled into it (/usr/bin/xkbcomp) at every start. The sandbox gets
//     a script of shell builtins bound over /usr/bin/xkbcomp (xkbcompScript)
//     that copies the keymap compiled once here when Xvfb passes exactly
//     the recorded arguments and keymap names, and runs the real xkbcomp
//     (bound at xkbcompReal) for anything else.
//   - libX11's compose table. Every client that opens an input method
//     (Openbox first) parses the locale's 500 KB Compose file. libX11
//     reads a system-wide cache only when root owns it (which no file does
//     in the sandbox's user namespace), else one in ~/.compose-cache owned
//     by the user: that directory, read-only, in the home.
//
// The cache lives in a directory of agentbox's own beside the staged guest
// (guestenv.StageDir), named by the identity (path, size, mtime, inode) of
// what it was made from (xstartKey), so a host upgrade makes a new one. It
// is built in a private directory and renamed into place (concurrent
// builders: one rename wins, the others use it). Without it (no xkbcomp, a
// cache directory that cannot be written, a build that failed) sandboxes
// start as before; `agentbox doctor` says which.

// xstartFormat changes whenever what the cache holds or how it is bound
// changes.
const xstartFormat = "1"

// In the sandbox.
const (
	xkbcompPath = "/usr/bin/xkbcomp" // compiled into Xvfb
	xkbcompReal = "/run/agentbox/xkbcomp.real"
	xkbCacheDir = "/run/agentbox/xkb"
	xbuildDir   = "/run/agentbox/xbuild"
	composeDir  = guestenv.Home + "/.compose-cache"
	xkbDataDir  = "/usr/share/X11/xkb"
)

// xkbDataDirs are what the keymap is compiled from: the script runs the
// real xkbcomp when any is newer than the cached keymap.
var xkbDataDirs = []string{"keycodes", "types", "compat", "symbols", "geometry", "rules"}

// xstartInputs are the host files the caches are made from or for; their
// identity names the cache.
func xstartInputs(xvfb, openbox string) []string {
	in := []string{xkbcompPath, xvfb, openbox, xkbDataDir, "/usr/share/X11/xkb/rules/evdev",
		"/usr/share/X11/locale", "/usr/share/X11/locale/compose.dir", "/usr/share/X11/locale/en_US.UTF-8/Compose"}
	for _, d := range xkbDataDirs {
		in = append(in, filepath.Join(xkbDataDir, d))
	}
	return in
}

// xstartKey names a cache by the format, the sandbox's host uid and the
// identity of each input (a missing one is part of the identity too).
func xstartKey(uid int, inputs []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "format %s\nuid %d\n", xstartFormat, uid)
	for _, p := range inputs {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(h, "%s missing\n", p)
			continue
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		fmt.Fprintf(h, "%s %d %d %d %v\n", p, fi.Size(), fi.ModTime().UnixNano(), ino, fi.Mode())
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// xstart is a host's start-up caches, or why there are none.
type xstart struct {
	dir     string // on the host; "" when there is no cache
	compose string // the compose cache directory, "" when none
	why     string // what is not cached and why
}

// args are bubblewrap's arguments that bind the caches: the keymap script
// over xkbcomp, the real xkbcomp beside it, the cached keymap; and, unless
// the home is a named sandbox's (bound over the tmpfs's later, it would
// hide it; libX11 keeps a cache there of its own), the compose cache.
func (x *xstart) args(namedHome bool) []string {
	if x == nil || x.dir == "" {
		return nil
	}
	a := []string{
		"--ro-bind", xkbcompPath, xkbcompReal,
		"--ro-bind", filepath.Join(x.dir, "keymap"), xkbCacheDir,
		"--ro-bind", filepath.Join(x.dir, "xkbcomp"), xkbcompPath,
	}
	if x.compose != "" && !namedHome {
		// The home as the guest makes it (0755), not as bubblewrap would
		// to hold a mount point (0700).
		a = append(a, "--perms", "0755", "--dir", guestenv.Home, "--ro-bind", x.compose, composeDir)
	}
	return a
}

// describe says what sandboxes get, for doctor.
func (x *xstart) describe() string {
	if x.dir == "" {
		return "not cached (" + x.why + "): every sandbox's Xvfb compiles its keymap with xkbcomp and Openbox parses the Compose file at each start"
	}
	s := "Xvfb's keymap"
	if x.compose != "" {
		s += " and libX11's compose table"
	}
	s += " cached in " + x.dir + " (made once per host and bound read-only into each sandbox)"
	if x.why != "" {
		s += "; " + x.why
	}
	return s
}

var (
	xstartMu   sync.Mutex
	xstartMemo = map[string]*xstart{} // key → caches, in this process
	// xstartRetry is how long a failed build is not retried (by any
	// agentbox process: the failure is recorded beside the cache).
	xstartRetry = time.Hour
	// xstartBuildTimeout bounds one build (Xvfb and Openbox starting in a
	// sandbox, on a busy host).
	xstartBuildTimeout = 60 * time.Second
)

// startupCaches returns this host's start-up caches, building them once.
// It never fails: without caches it says why.
func startupCaches(ctx context.Context, bw *bwrapInfo) *xstart {
	xvfb, err := hostProgram("Xvfb")
	if err != nil {
		return &xstart{why: "Xvfb is not installed"}
	}
	if _, err := os.Stat(xkbcompPath); err != nil {
		return &xstart{why: xkbcompPath + " is missing"}
	}
	openbox, _ := hostProgram("openbox")
	uid, gid, _ := hostIdentity()
	key := xstartKey(uid, xstartInputs(xvfb, openbox))
	xstartMu.Lock()
	defer xstartMu.Unlock()
	if x, ok := xstartMemo[key]; ok && (x.dir == "" || loadXstart(x.dir, uid) != nil) {
		return x
	}
	x := loadOrBuild(ctx, bw, guestenv.StageDir(), key, xvfb, openbox, uid, gid)
	if ctx.Err() == nil { // a cancelled build is tried again
		xstartMemo[key] = x
	}
	return x
}

// loadOrBuild finds the cache named key in dir, or builds it.
func loadOrBuild(ctx context.Context, bw *bwrapInfo, dir, key, xvfb, openbox string, uid, gid int) *xstart {
	if err := cacheParent(dir); err != nil {
		return &xstart{why: err.Error()}
	}
	final := filepath.Join(dir, "xstart-"+key)
	if x := loadXstart(final, uid); x != nil {
		now := time.Now()
		_ = os.Chtimes(final, now, now) // in use: not pruned
		return x
	}
	failed := final + ".failed"
	if fi, err := os.Stat(failed); err == nil && time.Since(fi.ModTime()) < xstartRetry {
		b, _ := os.ReadFile(failed)
		return &xstart{why: "building them failed: " + strings.TrimSpace(string(b))}
	}
	if bw == nil || bw.err != nil {
		return &xstart{why: "bubblewrap is unusable"}
	}
	err := buildXstart(ctx, bw, final, xvfb, openbox, uid, gid)
	if err != nil {
		if ctx.Err() == nil {
			_ = os.WriteFile(failed, []byte(err.Error()+"\n"), 0o644)
		}
		return &xstart{why: "building them failed: " + err.Error()}
	}
	_ = os.Remove(failed)
	pruneXstart(dir, final)
	if x := loadXstart(final, uid); x != nil {
		return x
	}
	return &xstart{why: "the cache built in " + final + " is not sound"}
}

// cacheParent makes the directory caches go in, refusing one others may
// write to (they could change what every sandbox runs as xkbcomp).
func cacheParent(dir string) error {
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("cannot make %s: %w", dir, err)
	}
	if !ownedSafe(dir, true) {
		return fmt.Errorf("%s is not a directory of uid %d's that only it may write to", dir, os.Geteuid())
	}
	return nil
}

// ownedSafe reports whether p is this process's, a directory (dir) or
// a regular file, and writable by nobody else.
func ownedSafe(p string, dir bool) bool {
	fi, err := os.Lstat(p)
	if err != nil || fi.IsDir() != dir || (!dir && !fi.Mode().IsRegular()) || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// ownedBy reports whether directory p is uid's and writable by nobody
// else.
func ownedBy(p string, uid int) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// loadXstart returns the cache at dir if it is whole and sound, else nil.
func loadXstart(dir string, sandboxUID int) *xstart {
	for _, p := range []string{dir, filepath.Join(dir, "keymap")} {
		if !ownedSafe(p, true) {
			return nil
		}
	}
	for _, f := range []string{"xkbcomp", "keymap/keymap.xkm"} {
		if !ownedSafe(filepath.Join(dir, f), false) {
			return nil
		}
	}
	x := &xstart{dir: dir}
	// The compose cache and its directory are the sandbox's host uid's:
	// libX11 reads only its user's.
	c := filepath.Join(dir, "compose")
	if ents, err := os.ReadDir(c); err == nil && len(ents) > 0 && ownedBy(c, sandboxUID) {
		x.compose = c
	} else if b, err := os.ReadFile(filepath.Join(dir, "compose.why")); err == nil {
		x.why = "no compose cache: " + strings.TrimSpace(string(b))
	} else {
		x.why = "no compose cache"
	}
	return x
}

// pruneXstart removes caches other than keep that were last used more than
// a day ago (a host upgrade leaves the old one behind), and the leftovers
// of builds that never finished.
func pruneXstart(dir, keep string) {
	for _, pattern := range []string{"xstart-*", ".xstart-*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range old {
			if p == keep || p == keep+".failed" {
				continue
			}
			if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
				os.RemoveAll(p)
			}
		}
	}
}

// recordScript, bound over xkbcomp while the cache is built, records the
// arguments (one a line) and the keymap names Xvfb passes, runs the real
// xkbcomp, and keeps the keymap it compiled: the very bytes Xvfb loads.
const recordScript = `#!/bin/sh
d=` + xbuildDir + `
out=
for a; do out=$a; printf '%s\n' "$a"; done >"$d/args"
cat >"$d/keymap.xkb"
` + xkbcompReal + ` "$@" <"$d/keymap.xkb" || exit
cat "$out" >"$d/keymap.xkm.part" && mv "$d/keymap.xkm.part" "$d/keymap.xkm"
`

// buildScript runs in the sandbox that builds the cache: Xvfb with the
// guest's arguments (its keymap through recordScript), then, where it is
// installed, Openbox, whose libX11 writes the compose cache into the
// home's .compose-cache (bound from the build directory).
const buildScript = `d=` + xbuildDir + `
"$@" 3>"$d/display" 2>"$d/xvfb.log" &
while [ ! -s "$d/display" ]; do sleep 0.02; done
[ -x /usr/bin/openbox ] || exec sleep 3600
read n <"$d/display"
DISPLAY=:$n HOME=` + guestenv.Home + ` exec openbox 2>"$d/openbox.log"
`

// buildXstart builds the cache into final: in a sandbox like Create's (the
// same uid, system binds, locale) it records what Xvfb asks xkbcomp for and
// lets Openbox write its compose cache, then checks that compiling again
// gives the same keymap and writes the serving script.
func buildXstart(ctx context.Context, bw *bwrapInfo, final, xvfb, openbox string, uid, gid int) (retErr error) {
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".xstart-")
	if err != nil {
		return err
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	if os.Geteuid() == 0 {
		if err := os.Chmod(tmp, 0o755); err != nil {
			return err
		}
	}
	// The build directory, and the compose cache in it, are the sandbox's
	// host uid's: it writes them.
	build := filepath.Join(tmp, "build")
	compose := filepath.Join(tmp, "compose")
	for _, d := range []string{build, compose} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := os.Lchown(d, uid, gid); err != nil {
			return err
		}
	}
	record := filepath.Join(tmp, "record")
	if err := os.WriteFile(record, []byte(recordScript), 0o755); err != nil {
		return err
	}
	args := []string{"--unshare-user", "--uid", strconv.Itoa(sandboxID), "--gid", strconv.Itoa(sandboxID),
		"--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
		"--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"}
	args = append(args, systemLinks()...)
	args = append(args,
		"--ro-bind", "/etc", "/etc",
		"--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp",
		"--ro-bind", xkbcompPath, xkbcompReal,
		"--ro-bind", record, xkbcompPath,
		"--bind", build, xbuildDir,
		"--perms", "0755", "--dir", guestenv.Home,
		"--bind", compose, composeDir,
		"--remount-ro", "/",
		"--clearenv", "--setenv", "HOME", guestenv.Home, "--setenv", "LANG", "C.UTF-8", "--setenv", "PATH", sandboxPath,
		"--chdir", "/tmp",
		"/bin/sh", "-c", buildScript, "sh", xvfb)
	args = append(args, xserver.Args(xserver.Config{}, 3)...)
	var out bytes.Buffer
	cmd := exec.Command(bw.path, args...)
	cmd.Env = []string{}
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start bubblewrap: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()

	// Done when the keymap is kept and, with Openbox, its compose cache
	// has been the same size twice in a row.
	composeWhy := ""
	switch {
	case openbox == "":
		composeWhy = "openbox is not installed, which writes it"
	case uid != os.Geteuid():
		// libX11 takes a cache only from a directory of the sandbox user's
		// own: as root that is nobody's, which any host process running
		// as nobody could change. Not worth a few milliseconds of Openbox's
		// start.
		composeWhy = fmt.Sprintf("the sandbox's host uid (%d) is not agentbox's: a compose cache would be writable by another user's processes", uid)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(xstartBuildTimeout)
	defer deadline.Stop()
	keymapKept := func() bool {
		_, err := os.Stat(filepath.Join(build, "keymap.xkm"))
		return err == nil
	}
	var lastSize int64 = -1
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if !keymapKept() {
				return fmt.Errorf("the keymap was not compiled (Xvfb, xkbcomp) within %v: %s", xstartBuildTimeout, strings.TrimSpace(out.String()))
			}
			if composeWhy == "" {
				composeWhy = "Openbox wrote none in time"
			}
			done = true
		case err := <-exited:
			exited <- err
			if !keymapKept() {
				log, _ := os.ReadFile(filepath.Join(build, "xvfb.log"))
				return fmt.Errorf("the build sandbox exited (%v) before Xvfb's keymap was compiled: %s %s", err, strings.TrimSpace(out.String()), lastLines(string(log), 3))
			}
			if composeWhy == "" {
				composeWhy = "Openbox exited before writing it"
			}
			done = true
		case <-tick.C:
			if !keymapKept() {
				continue
			}
			if composeWhy != "" {
				done = true
				continue
			}
			size := dirBytes(compose)
			done = size > 0 && size == lastSize
			lastSize = size
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	// What Xvfb asked for; the last argument is the output file (it
	// differs with the display's number).
	b, err := os.ReadFile(filepath.Join(build, "args"))
	if err != nil {
		return err
	}
	argv := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(argv) < 2 {
		return fmt.Errorf("unexpected xkbcomp arguments from Xvfb: %q", argv)
	}
	argv = argv[:len(argv)-1]
	keymap := filepath.Join(tmp, "keymap")
	if err := os.Mkdir(keymap, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"keymap.xkm", "keymap.xkb"} {
		data, err := os.ReadFile(filepath.Join(build, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(keymap, f), data, 0o644); err != nil {
			return err
		}
	}
	names, err := os.ReadFile(filepath.Join(keymap, "keymap.xkb"))
	if err != nil {
		return err
	}
	if err := sameKeymap(ctx, argv, names, filepath.Join(keymap, "keymap.xkm"), tmp); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "xkbcomp"), []byte(xkbcompScript(argv, string(names))), 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(build); err != nil {
		return err
	}
	os.Remove(record)
	if composeWhy != "" || dirBytes(compose) == 0 {
		if composeWhy == "" {
			composeWhy = "Openbox wrote none"
		}
		os.RemoveAll(compose)
		if err := os.WriteFile(filepath.Join(tmp, "compose.why"), []byte(composeWhy+"\n"), 0o644); err != nil {
			return err
		}
	} else if err := os.Chmod(compose, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if loadXstart(final, uid) != nil {
			return nil // another process built it first
		}
		return err
	}
	tmp = ""
	return nil
}

// sameKeymap compiles the keymap again with the host's xkbcomp and checks
// that it is the one kept: decompiled (xkbcomp -xkb) the two are the same
// (the .xkm bytes themselves differ in padding xkbcomp leaves
// uninitialised).
func sameKeymap(ctx context.Context, argv []string, names []byte, kept, tmp string) error {
	again := filepath.Join(tmp, "again.xkm")
	defer os.Remove(again)
	cmd := exec.CommandContext(ctx, xkbcompPath, append(append([]string{}, argv...), again)...)
	cmd.Stdin = bytes.NewReader(names)
	cmd.Env = []string{}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("xkbcomp: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var dumps [2][]byte
	for i, f := range []string{kept, again} {
		txt := f + ".txt"
		out, err := exec.CommandContext(ctx, xkbcompPath, "-w", "1", "-xkb", f, txt).CombinedOutput()
		if err != nil {
			return fmt.Errorf("xkbcomp -xkb %s: %w: %s", f, err, strings.TrimSpace(string(out)))
		}
		dumps[i], err = os.ReadFile(txt)
		os.Remove(txt)
		if err != nil {
			return err
		}
	}
	if len(dumps[0]) == 0 || !bytes.Equal(dumps[0], dumps[1]) {
		return errors.New("the keymap Xvfb loaded differs from the host's xkbcomp's")
	}
	return nil
}

// xkbcompScript is the script bound over xkbcomp: shell builtins only
// until it knows which to run. With exactly the recorded arguments (all
// but the output file, the last) it reads stdin, and if that is the
// recorded keymap and neither the real xkbcomp nor the keymap data is
// newer than the cached keymap, copies the cached keymap to the output
// file; with other input it passes what it read on to the real xkbcomp;
// with other arguments it runs the real xkbcomp without reading stdin
// (`xkbcomp $DISPLAY out.xkb` from a terminal behaves as before).
func xkbcompScript(argv []string, names string) string {
	return keymapScript(xkbCacheDir, xkbcompReal, dataPaths(), argv, names)
}

// dataPaths are the keymap data's directories.
func dataPaths() []string {
	var p []string
	for _, d := range xkbDataDirs {
		p = append(p, filepath.Join(xkbDataDir, d))
	}
	return p
}

// keymapScript is xkbcompScript with the cache directory, the real xkbcomp
// and the keymap data's directories where they are.
func keymapScript(dir, real string, data []string, argv []string, names string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString("# agentbox: serves the keymap Xvfb compiles at every start, compiled once on\n")
	b.WriteString("# this host (environment/local/xstart.go); else runs the real xkbcomp.\n")
	fmt.Fprintf(&b, "d=%s real=%s\n", shQuote(dir), shQuote(real))
	// The arguments: their count (the output file too), then each.
	fmt.Fprintf(&b, "if [ $# -eq %d ]", len(argv)+1)
	for i, a := range argv {
		fmt.Fprintf(&b, " && [ \"$%s\" = %s ]", posParam(i+1), shQuote(a))
	}
	b.WriteString("; then\n")
	b.WriteString("  fresh=1\n")
	fmt.Fprintf(&b, "  for f in \"$real\"")
	for _, d := range data {
		fmt.Fprintf(&b, " %s", shQuote(d))
	}
	b.WriteString("; do [ \"$f\" -nt \"$d/keymap.xkm\" ] && fresh=; done\n")
	b.WriteString("  nl='\n'\n  in=\n")
	b.WriteString("  while IFS= read -r l || [ -n \"$l\" ]; do in=\"$in$l$nl\"; done\n")
	fmt.Fprintf(&b, "  out=\"$%s\"\n", posParam(len(argv)+1))
	fmt.Fprintf(&b, "  [ -n \"$fresh\" ] && [ \"$in\" = %s ] && exec /bin/cat \"$d/keymap.xkm\" >\"$out\"\n", shQuote(normLines(names)))
	b.WriteString("  printf '%s' \"$in\" | \"$real\" \"$@\"; exit\n")
	b.WriteString("fi\n")
	b.WriteString("exec \"$real\" \"$@\"\n")
	return b.String()
}

// normLines is s as the script's read loop sees it: every line, the last
// too, ending in a newline.
func normLines(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// posParam is the shell's name of positional parameter i.
func posParam(i int) string {
	if i < 10 {
		return strconv.Itoa(i)
	}
	return "{" + strconv.Itoa(i) + "}"
}

// shQuote quotes s for sh: in single quotes, each single quote in s
// closed, escaped and reopened.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dirBytes is the total size of the regular files in dir.
func dirBytes(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}
