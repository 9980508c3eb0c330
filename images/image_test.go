package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

func TestDockerfile(t *testing.T) {
	for _, v := range Variants() {
		df, err := Dockerfile(v)
		if err != nil {
			t.Fatal(err)
		}
		s := string(df)
		for _, want := range []string{"ARG BASE=", "FROM ${BASE}", "--no-install-recommends", "LABEL " + LabelImage + "=" + v} {
			if !strings.Contains(s, want) {
				t.Errorf("%s Dockerfile lacks %q", v, want)
			}
		}
		// A layer that installs packages may add fonts: it keeps the font
		// caches valid (whole-second directory mtimes, symlinked
		// directories too, then fc-cache), or every sandbox's first font
		// lookup rebuilds them in its home (images/Dockerfile).
		for _, want := range []string{"touch -h -d @1700000000", "find -L /usr/share/fonts", "fc-cache -f"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s Dockerfile lacks %q", v, want)
			}
		}
		if n := strings.Count(s, "apt-get install"); n != 1 {
			t.Errorf("%s Dockerfile: %d apt-get install, want one apt layer", v, n)
		}
		df[0] = 'X' // a copy: must not change the embedded file
		if again, _ := Dockerfile(v); again[0] == 'X' {
			t.Errorf("Dockerfile(%q) returns the embedded slice", v)
		}
	}
	rt, _ := Dockerfile(VariantRuntime)
	for _, pkg := range []string{"xvfb", "openbox", "xkb-data", "x11-xkb-utils", "fontconfig", "fonts-dejavu-core",
		"libgl1-mesa-dri", "libglx-mesa0", "libegl1", "libgl1", "libsdl2-2.0-0", "libgtk-3-0", "dbus-x11", "libxtst6",
		"fc-cache -f", "--uid 1000", "LANG=C.UTF-8", "ARG BASE=" + DefaultBase,
		"/var/cache/libx11/compose", "--divert /usr/bin/xkbcomp.real"} {
		if !strings.Contains(string(rt), pkg) {
			t.Errorf("runtime Dockerfile lacks %q", pkg)
		}
	}
	if _, err := Dockerfile("nope"); err == nil {
		t.Error("unknown variant: no error")
	}
}

func TestParseDeb822Sources(t *testing.T) {
	data, err := os.ReadFile("testdata/debian.sources")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseDeb822Sources("debian.sources", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []AptSource{
		{Types: []string{"deb"}, URIs: []string{"http://mirror.example.org/debian/"}, Suites: []string{"bookworm", "bookworm-updates"}, Components: []string{"main"}, File: "debian.sources", Line: 2},
		{Types: []string{"deb-src"}, URIs: []string{"http://src.example.org/debian"}, Suites: []string{"bookworm"}, Components: []string{"main"}, File: "debian.sources", Line: 9},
		// the "Enabled: no" stanza is dropped
		{Types: []string{"deb"}, URIs: []string{"http://security.example.org/debian-security"}, Suites: []string{"bookworm-security"}, Components: []string{"main", "contrib", "non-free"}, File: "debian.sources", Line: 20},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	m := PickMirrors(got, "bookworm")
	if want := (Mirrors{"http://mirror.example.org/debian", "http://security.example.org/debian-security"}); m != want {
		t.Errorf("PickMirrors = %+v, want %+v", m, want)
	}

	bad, _ := os.ReadFile("testdata/bad.sources")
	if _, err := ParseDeb822Sources("bad.sources", bad); err == nil || !strings.Contains(err.Error(), "bad.sources:1") {
		t.Errorf("stanza without URIs: err = %v", err)
	}
	if _, err := ParseDeb822Sources("x", []byte("Types deb\n")); err == nil {
		t.Error("line without colon: no error")
	}
}

func TestParseSourcesList(t *testing.T) {
	data, err := os.ReadFile("testdata/sources.list")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSourcesList("sources.list", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []AptSource{
		{Types: []string{"deb-src"}, URIs: []string{"http://src.example.org/debian"}, Suites: []string{"bookworm"}, Components: []string{"main"}, File: "sources.list", Line: 2},
		{Types: []string{"deb"}, URIs: []string{"https://mirror.example.net/debian"}, Suites: []string{"bookworm"}, Components: []string{"main", "contrib"}, File: "sources.list", Line: 4},
		{Types: []string{"deb"}, URIs: []string{"https://mirror.example.net/debian"}, Suites: []string{"bookworm-updates"}, Components: []string{"main"}, File: "sources.list", Line: 5},
		{Types: []string{"deb"}, URIs: []string{"http://security.example.net/debian-security"}, Suites: []string{"bookworm-security"}, Components: []string{"main"}, File: "sources.list", Line: 6},
		{Types: []string{"deb"}, URIs: []string{"cdrom:[Debian"}, Suites: []string{"GNU/Linux"}, Components: []string{"12]/", "bookworm", "main"}, File: "sources.list", Line: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	m := PickMirrors(got, "bookworm")
	if want := (Mirrors{"https://mirror.example.net/debian", "http://security.example.net/debian-security"}); m != want {
		t.Errorf("PickMirrors = %+v, want %+v", m, want)
	}

	old, _ := os.ReadFile("testdata/old-security.list")
	srcs, err := ParseSourcesList("old-security.list", old)
	if err != nil {
		t.Fatal(err)
	}
	// "stable" is not bookworm, but it is the only non-security mirror.
	if m, want := PickMirrors(srcs, "bookworm"), (Mirrors{"http://ftp.example.com/debian", "http://security.example.com"}); m != want {
		t.Errorf("PickMirrors(old) = %+v, want %+v", m, want)
	}

	for _, bad := range []string{"rpm http://x bookworm main\n", "deb [arch=amd64 http://x bookworm\n", "deb http://x\n"} {
		if _, err := ParseSourcesList("bad", []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestHostMirrors(t *testing.T) {
	m, err := HostMirrors("testdata/hostroot", "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	// sources.list comes first; *.txt in sources.list.d is not read.
	if want := (Mirrors{"http://first.example.org/debian", "http://security.example.org/debian-security"}); m != want {
		t.Errorf("HostMirrors = %+v, want %+v", m, want)
	}
	m, err = HostMirrors(t.TempDir(), "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Mirrors{DefaultMirror, DefaultSecurityMirror}); m != want {
		t.Errorf("HostMirrors(empty) = %+v, want %+v", m, want)
	}
}

func TestWriteDirTar(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/bin/su"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(filepath.Join(dir, "usr/bin/su"), 0o4755|os.ModeSetuid))
	must(os.Link(filepath.Join(dir, "usr/bin/su"), filepath.Join(dir, "usr/bin/su2")))
	must(os.Symlink("usr/bin", filepath.Join(dir, "bin")))
	must(os.Mkdir(filepath.Join(dir, "tmp"), 0o755))
	must(os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	root := os.Geteuid() == 0
	if root {
		must(os.MkdirAll(filepath.Join(dir, "dev"), 0o755))
		must(syscall.Mknod(filepath.Join(dir, "dev/null"), syscall.S_IFCHR|0o666, int(1<<8|3)))
		must(os.Lchown(filepath.Join(dir, "tmp"), 1000, 1001))
	}

	var buf bytes.Buffer
	must(WriteDirTar(t.Context(), dir, &buf))
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got[h.Name] = h
		names = append(names, h.Name)
	}
	if names[0] != "bin" || got["usr/"] == nil || got["usr/bin/"] == nil {
		t.Errorf("names = %q", names)
	}
	if h := got["usr/bin/su"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o7777 != 0o4755 || h.Size != 10 || h.Uname != "" {
		t.Errorf("su = %+v", h)
	}
	if h := got["usr/bin/su2"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/su" {
		t.Errorf("su2 = %+v", h)
	}
	if h := got["bin"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin" {
		t.Errorf("bin = %+v", h)
	}
	if h := got["tmp/"]; h == nil || h.Mode&0o7777 != 0o1777 {
		t.Errorf("tmp = %+v", h)
	}
	if h := got["fifo"]; h == nil || h.Typeflag != tar.TypeFifo {
		t.Errorf("fifo = %+v", h)
	}
	if root {
		if h := got["dev/null"]; h == nil || h.Typeflag != tar.TypeChar || h.Devmajor != 1 || h.Devminor != 3 {
			t.Errorf("dev/null = %+v", h)
		}
		if h := got["tmp/"]; h.Uid != 1000 || h.Gid != 1001 || h.Gname != "" {
			t.Errorf("tmp ids = %d:%d %q", h.Uid, h.Gid, h.Gname)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := WriteDirTar(ctx, dir, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestDebootstrapPhase(t *testing.T) {
	var out bytes.Buffer
	w := &debootstrapWatcher{log: io.Discard, p: rootfsProgress{w: &out, prefix: "[base]"}, start: time.Now()}
	for _, l := range []string{
		"I: Target architecture can be executed", "I: Retrieving InRelease", "I: Checking Release signature",
		"I: Retrieving Packages", "I: Validating Packages", "I: Resolving dependencies of required packages...",
		"I: Retrieving libacl1 2.3.1-3", "I: Validating libacl1 2.3.1-3", "I: Retrieving zlib1g 1:1.2.13",
		"W: Cannot check Release signature", "I: Chosen extractor for .deb packages: dpkg-deb", "I: Extracting zlib1g...",
		"I: Installing core packages...", "I: Unpacking required packages...", "I: Configuring required packages...",
		"I: Unpacking the base system...", "I: Configuring the base system...", "I: Base system installed successfully.",
	} {
		w.Write([]byte(l + "\n"))
	}
	w.flush()
	var phases []string
	for l := range strings.Lines(out.String()) {
		f := strings.Fields(l)[1:] // after the prefix: a duration, or "warning:"
		if f[0] != "warning:" {
			f = f[1:]
		}
		phases = append(phases, strings.Join(f, " "))
	}
	want := []string{"fetching the package index", "resolving dependencies", "downloading packages",
		"warning: Cannot check Release signature", "extracting packages", "installing core packages",
		"installing required packages", "unpacking the base system", "configuring the base system", "base system installed"}
	if !reflect.DeepEqual(phases, want) {
		t.Errorf("phases:\n%q\nwant\n%q", phases, want)
	}
	if w.retrieved != 2 {
		t.Errorf("retrieved = %d, want 2", w.retrieved)
	}
}

// fakeDebootstrap writes a script standing in for debootstrap; the body
// finds the target directory in $T and the mirror in $M (debootstrap's last
// two arguments).
func fakeDebootstrap(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "debootstrap")
	pre := "#!/bin/sh\nfor a; do T=$M; M=$a; done\ncase $T in /*/agentbox-rootfs-*) ;; *) echo \"bad target $T\" >&2; exit 9;; esac\n"
	if err := os.WriteFile(p, []byte(pre+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// rootfsLeftovers lists what BuildRootfs left in its temp dir.
func rootfsLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "agentbox-*"))
	return m
}

func TestBuildRootfsFake(t *testing.T) {
	testenv.Require(t, testenv.Root("BuildRootfs chroots and keeps owners"))
	tmp := t.TempDir()
	ok := fakeDebootstrap(t, `set -e
echo "I: Retrieving InRelease"
echo "I: Retrieving base-files 12"
mkdir -p "$T/etc/apt" "$T/usr/share/doc/bash" "$T/var/lib/apt/lists" "$T/var/cache/apt/archives"
echo "deb $M bookworm main" > "$T/etc/apt/sources.list"
echo c > "$T/usr/share/doc/bash/copyright"; echo x > "$T/usr/share/doc/bash/README"
touch "$T/var/lib/apt/lists/x_Packages" "$T/var/cache/apt/archives/bash.deb"
echo "I: Base system installed successfully."
`)
	var out bytes.Buffer
	r, err := BuildRootfs(t.Context(), RootfsOptions{
		Mirror: "http://m.example/debian/", SecurityMirror: "http://s.example/ds",
		TempDir: tmp, Progress: &out, Debootstrap: ok,
	})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(filepath.Join(r.Dir, "etc/apt/sources.list"))
	if want := "deb http://m.example/debian bookworm main\ndeb http://m.example/debian bookworm-updates main\ndeb http://s.example/ds bookworm-security main\n"; string(src) != want {
		t.Errorf("sources.list = %q", src)
	}
	for _, gone := range []string{"var/lib/apt/lists/x_Packages", "var/cache/apt/archives/bash.deb", "usr/share/doc/bash/README"} {
		if _, err := os.Lstat(filepath.Join(r.Dir, gone)); err == nil {
			t.Errorf("%s not removed", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "usr/share/doc/bash/copyright")); err != nil {
		t.Errorf("copyright removed: %v", err)
	}
	if s := out.String(); !strings.Contains(s, "[base] debootstrap bookworm from http://m.example/debian … done in") {
		t.Errorf("progress:\n%s", s)
	}
	if err := r.Remove(); err != nil {
		t.Fatal(err)
	}
	if left := rootfsLeftovers(t, tmp); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}

	// Failure: the error quotes the log's tail and names it; the root is gone.
	fail := fakeDebootstrap(t, `mkdir -p "$T/etc"; for i in $(seq 1 40); do echo "line $i"; done; echo "E: Couldn't download packages: bash" >&2; exit 1`)
	_, err = BuildRootfs(t.Context(), RootfsOptions{Mirror: "http://m.example/debian", TempDir: tmp, Debootstrap: fail})
	if err == nil || !strings.Contains(err.Error(), "line 40") || strings.Contains(err.Error(), "line 10\n") ||
		!strings.Contains(err.Error(), "Couldn't download") || !strings.Contains(err.Error(), "agentbox-debootstrap-") {
		t.Errorf("failure error = %v", err)
	}
	left := rootfsLeftovers(t, tmp)
	if len(left) != 1 || !strings.HasSuffix(left[0], ".log") {
		t.Errorf("after failure, want only the log, got %q", left)
	}
	for _, l := range left {
		os.Remove(l)
	}

	// Cancellation: the process group is signalled, the root removed.
	hang := fakeDebootstrap(t, `mkdir -p "$T/etc"; echo "I: Retrieving InRelease"; sleep 60 & wait`)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = BuildRootfs(ctx, RootfsOptions{Mirror: "http://m.example/debian", TempDir: tmp, Debootstrap: hang})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: err = %v", err)
	}
	if d := time.Since(start); d > 30*time.Second { // the fake would take a minute
		t.Errorf("cancel took %s", d)
	}
	if left := rootfsLeftovers(t, tmp); len(left) > 0 {
		t.Errorf("after cancel, left behind %q", left)
	}
}
