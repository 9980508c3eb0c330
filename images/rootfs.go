package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RootfsOptions configure BuildRootfs.
type RootfsOptions struct {
	// Mirror is the Debian mirror to bootstrap from and to write into the
	// root's sources.list. Empty: the host's apt configuration
	// (HostMirrors), else DefaultMirror.
	Mirror string
	// SecurityMirror is written into the root's sources.list for
	// SUITE-security. Empty: the host's apt configuration, else
	// DefaultSecurityMirror.
	SecurityMirror string
	// Suite defaults to Suite ("bookworm").
	Suite string
	// TempDir is the parent of the temporary root and of the debootstrap
	// log. Empty: os.TempDir(). It must allow device nodes and exec.
	TempDir string
	// Progress receives human progress lines; nil discards them.
	Progress io.Writer
	// Prefix starts every progress line; empty: "[base]".
	Prefix string
	// Debootstrap is the debootstrap command; empty: "debootstrap" on PATH.
	Debootstrap string
	// AptRoot is where the host apt configuration is read from; empty: "/".
	AptRoot string
}

// Rootfs is a bootstrapped Debian root in a temporary directory. Call Remove
// when done with it (after WriteTar).
type Rootfs struct {
	Dir            string
	Suite          string
	Mirror         string
	SecurityMirror string
	Duration       time.Duration // of debootstrap itself

	removeOnce sync.Once
	removeErr  error
}

// debootstrapTailLines is how many lines of debootstrap's log an error shows.
const debootstrapTailLines = 30

// BuildRootfs bootstraps a minimal Debian root:
//
//	debootstrap --variant=minbase --components=main SUITE DIR MIRROR
//
// and prepares it to be the base of the runtime image: /etc/apt/sources.list
// names MIRROR for SUITE and SUITE-updates and the security mirror for
// SUITE-security; downloaded packages and apt lists are removed; dpkg is
// configured like debian:*-slim (no docs, man pages or translations) and the
// ones debootstrap already installed are removed; apt is configured like
// Debian's Docker images (no package cache, no translations).
//
// debootstrap needs root (it mknods device nodes and chroots into the new
// root); BuildRootfs fails early when not run as root. Its output goes to a
// log file that is removed on success and on cancellation; on failure it is
// kept, and the error names it and quotes its last lines. The temporary root is removed on every failure
// path, including cancellation of ctx (debootstrap's process group is
// signalled, and any mount it left inside the root is detached before the
// removal). On success the caller owns it: stream it with WriteTar, then
// call Remove.
func BuildRootfs(ctx context.Context, opts RootfsOptions) (_ *Rootfs, err error) {
	start := time.Now()
	p := rootfsProgress{w: opts.Progress, prefix: opts.Prefix}
	if p.w == nil {
		p.w = io.Discard
	}
	if p.prefix == "" {
		p.prefix = "[base]"
	}
	suite := opts.Suite
	if suite == "" {
		suite = Suite
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("build rootfs: debootstrap needs root (run as root, or bring a base image)")
	}
	bin := opts.Debootstrap
	if bin == "" {
		bin = "debootstrap"
	}
	binPath, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("build rootfs: %w (install it: apt-get install debootstrap)", err)
	}

	mirror, security := strings.TrimRight(opts.Mirror, "/"), strings.TrimRight(opts.SecurityMirror, "/")
	if mirror == "" || security == "" {
		aptRoot := opts.AptRoot
		if aptRoot == "" {
			aptRoot = "/"
		}
		host, herr := HostMirrors(aptRoot, suite)
		if herr != nil {
			p.printf("warning: %v; using %s", herr, host.Debian)
		}
		if mirror == "" {
			mirror = host.Debian
		}
		if security == "" {
			security = host.Security
		}
	}

	dir, err := os.MkdirTemp(opts.TempDir, "agentbox-rootfs-")
	if err != nil {
		return nil, fmt.Errorf("build rootfs: %w", err)
	}
	r := &Rootfs{Dir: dir, Suite: suite, Mirror: mirror, SecurityMirror: security}
	defer func() {
		if err != nil {
			if rerr := r.Remove(); rerr != nil {
				err = fmt.Errorf("%w (and: %v)", err, rerr)
			}
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("build rootfs: %w", err)
	}

	logf, err := os.CreateTemp(opts.TempDir, "agentbox-debootstrap-*.log")
	if err != nil {
		return nil, fmt.Errorf("build rootfs: %w", err)
	}
	logPath := logf.Name()
	keepLog := false
	defer func() {
		logf.Close()
		if !keepLog {
			os.Remove(logPath)
		}
	}()

	p.printf("debootstrap %s from %s (minbase, log %s)", suite, mirror, logPath)
	args := []string{"--variant=minbase", "--components=main", suite, dir, mirror}
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.Dir = "/"
	// Own process group, so cancellation reaches dpkg and the chrooted
	// maintainer scripts too. SIGTERM first: debootstrap's exit trap then
	// unmounts what it mounted inside the root.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	watch := &debootstrapWatcher{log: logf, p: p, start: start}
	cmd.Stdout = watch
	cmd.Stderr = watch
	runErr := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers, if any
	}
	watch.flush()
	r.Duration = time.Since(start)
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("build rootfs: debootstrap interrupted after %s: %w", fmtDuration(r.Duration), context.Cause(ctx))
		}
		keepLog = true
		return nil, fmt.Errorf("build rootfs: debootstrap %s from %s: %w; log %s, last lines:\n%s",
			suite, mirror, runErr, logPath, tailFile(logPath, debootstrapTailLines))
	}
	p.printf("debootstrap %s from %s … done in %s (%d packages)", suite, mirror, fmtDuration(r.Duration), watch.retrieved)

	t := time.Now()
	if err := finishRootfs(dir, suite, mirror, security); err != nil {
		keepLog = true
		return nil, fmt.Errorf("build rootfs: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build rootfs: %w", context.Cause(ctx))
	}
	size, _ := dirSize(dir)
	p.printf("rootfs ready: sources.list, apt cleanup, slim docs … done in %s (%s)", fmtDuration(time.Since(t)), fmtBytes(size))
	return r, nil
}

// Remove removes the root, first detaching anything still mounted inside it.
// It is safe to call more than once.
func (r *Rootfs) Remove() error {
	r.removeOnce.Do(func() { r.removeErr = removeRoot(r.Dir) })
	return r.removeErr
}

// removeRoot detaches mounts below dir (deepest first) and removes it. If a
// mount cannot be detached it refuses to remove anything, so as never to
// descend into a host file system.
func removeRoot(dir string) error {
	if dir == "" {
		return nil
	}
	mounts, err := mountsBelow(dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: unmount %s: %w", dir, m, err)
		}
	}
	if left, err := mountsBelow(dir); err != nil || len(left) > 0 {
		return fmt.Errorf("remove %s: still mounted inside: %v (%v)", dir, left, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// mountsBelow lists mount points strictly below dir, deepest first.
func mountsBelow(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir) + "/"
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountPath(f[4])
		if strings.HasPrefix(mp, dir) {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// slimDpkgConfig is what Debian's -slim images configure (debuerreotype's
// slimify): dpkg skips documentation, man pages and translations.
const slimDpkgConfig = `# agentbox: like debian:*-slim, install no documentation or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
`

// dockerAptConfig mirrors the apt configuration of Debian's Docker images.
const dockerAptConfig = `// agentbox: like Debian's Docker images.
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Acquire::CompressionTypes::Order:: "gz";
APT::AutoRemove::SuggestsImportant "false";
`

// finishRootfs writes the apt and dpkg configuration and removes caches and
// what the slim configuration would not have installed.
func finishRootfs(dir, suite, mirror, security string) error {
	sources := fmt.Sprintf("deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n",
		mirror, suite, mirror, suite, security, suite)
	files := []struct {
		path string
		data string
	}{
		{"etc/apt/sources.list", sources},
		{"etc/dpkg/dpkg.cfg.d/agentbox-slim", slimDpkgConfig},
		{"etc/apt/apt.conf.d/agentbox-docker", dockerAptConfig},
		// Docker bind-mounts these at run time; do not ship the host's.
		{"etc/resolv.conf", ""},
		{"etc/hostname", ""},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		// Replace, never write through a symlink into the host.
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(p, []byte(f.data), 0o644); err != nil {
			return err
		}
	}
	// debootstrap writes a deb822 file on some versions; sources.list is the
	// one source of truth here.
	if err := os.Remove(filepath.Join(dir, "etc/apt/sources.list.d/debian.sources")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, pattern := range []string{
		"var/cache/apt/archives/*.deb",
		"var/cache/apt/archives/partial/*",
		"var/cache/apt/*.bin",
		"var/lib/apt/lists/*",
		"var/log/apt/*",
		"var/log/dpkg.log",
		"var/log/bootstrap.log",
		"var/log/alternatives.log",
		"usr/share/man/*",
		"usr/share/info/*",
		"usr/share/groff/*",
		"usr/share/lintian/overrides/*",
		"usr/share/linda/*",
		"usr/share/locale/*",
	} {
		if err := removeGlob(dir, pattern); err != nil {
			return err
		}
	}
	// Documentation except the copyright files.
	docs, err := filepath.Glob(filepath.Join(dir, "usr/share/doc/*"))
	if err != nil {
		return err
	}
	for _, d := range docs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue // a symlink or a file: leave it
		}
		for _, e := range entries {
			if e.Name() != "copyright" {
				if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func removeGlob(dir, pattern string) error {
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return err
	}
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			return err
		}
	}
	return nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// rootfsProgress prints prefixed progress lines.
type rootfsProgress struct {
	w      io.Writer
	prefix string
}

func (p rootfsProgress) printf(format string, args ...any) {
	fmt.Fprintf(p.w, p.prefix+" "+format+"\n", args...)
}

// debootstrapWatcher copies debootstrap's output to the log and prints a
// progress line whenever debootstrap enters a new phase, plus its warnings
// and errors. debootstrap's stdout and stderr share it, and exec copies both
// from one pipe, so writes do not race; the mutex is for flush.
type debootstrapWatcher struct {
	mu        sync.Mutex
	log       io.Writer
	p         rootfsProgress
	start     time.Time
	buf       []byte
	phase     string
	retrieved int
}

func (w *debootstrapWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.log.Write(b); err != nil {
		return 0, err
	}
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(b), nil
}

func (w *debootstrapWatcher) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

func (w *debootstrapWatcher) line(s string) {
	s = strings.TrimSpace(s)
	if msg, ok := strings.CutPrefix(s, "W: "); ok {
		w.p.printf("  warning: %s", msg)
		return
	}
	if msg, ok := strings.CutPrefix(s, "E: "); ok {
		w.p.printf("  error: %s", msg)
		return
	}
	msg, ok := strings.CutPrefix(s, "I: ")
	if !ok {
		return
	}
	phase := debootstrapPhase(msg)
	if phase == "downloading packages" && strings.HasPrefix(msg, "Retrieving ") {
		w.retrieved++
	}
	if phase == "" || phase == w.phase {
		return
	}
	w.phase = phase
	w.p.printf("  %7s  %s", fmtDuration(time.Since(w.start)), phase)
}

// debootstrapPhase maps an "I:" message of debootstrap to a phase name.
func debootstrapPhase(msg string) string {
	switch {
	case strings.HasPrefix(msg, "Retrieving InRelease"),
		strings.HasPrefix(msg, "Retrieving Release"),
		strings.HasPrefix(msg, "Checking Release signature"),
		strings.HasPrefix(msg, "Valid Release signature"),
		strings.HasPrefix(msg, "Retrieving Packages"),
		strings.HasPrefix(msg, "Validating Packages"):
		return "fetching the package index"
	case strings.HasPrefix(msg, "Resolving dependencies"),
		strings.HasPrefix(msg, "Checking component"),
		strings.HasPrefix(msg, "Found additional"):
		return "resolving dependencies"
	case strings.HasPrefix(msg, "Retrieving "), strings.HasPrefix(msg, "Validating "):
		return "downloading packages"
	case strings.HasPrefix(msg, "Chosen extractor"), strings.HasPrefix(msg, "Extracting "):
		return "extracting packages"
	case strings.HasPrefix(msg, "Installing core packages"):
		return "installing core packages"
	case strings.HasPrefix(msg, "Unpacking required packages"),
		strings.HasPrefix(msg, "Configuring required packages"):
		return "installing required packages"
	case strings.HasPrefix(msg, "Unpacking the base system"):
		return "unpacking the base system"
	case strings.HasPrefix(msg, "Configuring the base system"):
		return "configuring the base system"
	case strings.HasPrefix(msg, "Base system installed successfully"):
		return "base system installed"
	}
	return ""
}

// tailFile returns the last n lines of a file, indented, or a note why not.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// fmtDuration formats a duration for progress lines: 850ms, 4.2s, 1m12s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtBytes formats a size in decimal units like docker does: 78.4MB.
func fmtBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	f, u := float64(n), "kMGT"
	i := -1
	for f >= unit && i < len(u)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f%cB", f, u[i])
}

// FormatDuration and FormatBytes are the formats of progress lines, shared
// with the image builder so all lines read alike.
func FormatDuration(d time.Duration) string { return fmtDuration(d) }

// FormatBytes formats a size in decimal units, as docker image ls does.
func FormatBytes(n int64) string { return fmtBytes(n) }
