package collectfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMatches(t *testing.T) {
	for _, tt := range []struct {
		pat, rel string
		want     bool
	}{
		{"Documents/*.ods", "Documents/sales.ods", true},
		{"Documents/*.ods", "Documents/sub/sales.ods", false},
		{"Documents/**/*.ods", "Documents/sales.ods", true},
		{"Documents/**/*.ods", "Documents/a/b/sales.ods", true},
		{"**", "x/y/z", true},
		{"**/*.txt", "a.txt", true},
		{"out.txt", "out.txt", true},
		{"out.txt", "out.txt2", false},
		{"Documents", "Documents/x/y.txt", true}, // a directory collects what is in it
		{"d?c/[ab].txt", "doc/a.txt", true},
		{"d?c/[ab].txt", "doc/c.txt", false},
	} {
		if got := Matches(tt.pat, tt.rel); got != tt.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tt.pat, tt.rel, got, tt.want)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../b", "a/**b", "a\\b", "[", "a\x00"} {
		if CheckPattern(p) == nil {
			t.Errorf("CheckPattern(%q) accepted it", p)
		}
	}
	for _, p := range []string{"a", "a/**/b", "*.txt", "[ab]?"} {
		if err := CheckPattern(p); err != nil {
			t.Errorf("CheckPattern(%q) = %v", p, err)
		}
	}
}

func write(t *testing.T, dir, rel, text string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, dir string, pats []string, lim Limits) Result {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Find(ctx, root, pats, lim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func refusedFor(r Result, rel string) string {
	for _, x := range r.Refused {
		if x.Path == rel {
			return x.Reason
		}
	}
	return ""
}

func TestFindNeverFollowsLinks(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	write(t, outside, "secret.txt", "secret")
	write(t, home, "Documents/a.txt", "a")
	for _, l := range []struct{ target, name string }{
		{filepath.Join(outside, "secret.txt"), "Documents/abs.txt"},
		{"../../" + filepath.Base(outside) + "/secret.txt", "Documents/rel.txt"},
		{outside, "Documents/dirlink"},
		{outside, "linkdir"},
	} {
		if err := os.Symlink(l.target, filepath.Join(home, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(home, "Documents/fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := find(t, home, []string{"Documents/**", "linkdir/*.txt"}, Limits{Files: 100, Bytes: 1 << 20})
	if len(r.Files) != 1 || r.Files[0].Path != "Documents/a.txt" {
		t.Errorf("files = %v, want only Documents/a.txt", r.Files)
	}
	for _, rel := range []string{"Documents/abs.txt", "Documents/rel.txt", "Documents/dirlink", "linkdir"} {
		if got := refusedFor(r, rel); got != ReasonLink {
			t.Errorf("%s: refused %q, want %q (all: %v)", rel, got, ReasonLink, r.Refused)
		}
	}
	if got := refusedFor(r, "Documents/fifo.txt"); got != ReasonFIFO {
		t.Errorf("fifo: refused %q", got)
	}
	// Open refuses a link and a FIFO even if named directly.
	root, _ := os.OpenRoot(home)
	defer root.Close()
	for _, rel := range []string{"Documents/abs.txt", "Documents/rel.txt", "Documents/fifo.txt", "linkdir/secret.txt"} {
		if f, err := Open(root, rel); err == nil {
			f.Close()
			t.Errorf("Open(%s) succeeded", rel)
		}
	}
}

func TestFindFileLimitCutsManyMatches(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 100,000 files")
	}
	home := t.TempDir()
	dir := filepath.Join(home, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%06d.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	t0 := time.Now()
	r := find(t, home, []string{"many/*.txt"}, Limits{Files: 100, Bytes: 1 << 20})
	t.Logf("%d matches walked in %v", n, time.Since(t0).Round(time.Millisecond))
	if len(r.Files) != 100 {
		t.Fatalf("collected %d files, want the limit 100", len(r.Files))
	}
	if r.Files[0].Path != "many/f000000.txt" || r.Files[99].Path != "many/f000099.txt" {
		t.Errorf("files %s..%s, want the first 100 in path order", r.Files[0].Path, r.Files[99].Path)
	}
	if len(r.Refused) != MaxRefused+1 {
		t.Fatalf("%d refusals listed, want %d and one that counts the rest", len(r.Refused), MaxRefused+1)
	}
	last := r.Refused[len(r.Refused)-1]
	if want := fmt.Sprintf("%d more: %s", n-100-MaxRefused, ReasonFileLimit); last.Reason != want {
		t.Errorf("last refusal %q, want %q", last.Reason, want)
	}
}

func TestFindRefusesHugeFileBySize(t *testing.T) {
	home := t.TempDir()
	write(t, home, "small.txt", "hello")
	f, err := os.Create(filepath.Join(home, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 30); err != nil { // sparse: 10 GB that take no room
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	r := find(t, home, []string{"*"}, Limits{Files: 100, Bytes: 64 << 20})
	if len(r.Files) != 1 || r.Files[0].Path != "small.txt" {
		t.Errorf("files = %v, want small.txt", r.Files)
	}
	if got := refusedFor(r, "huge.bin"); !strings.HasPrefix(got, ReasonByteLimit) {
		t.Errorf("huge.bin refused %q, want %s", got, ReasonByteLimit)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v: the file was read", d)
	}
}

func TestFindByteLimitCountsAll(t *testing.T) {
	home := t.TempDir()
	write(t, home, "a.txt", "12345")
	write(t, home, "b.txt", "12345")
	write(t, home, "c.txt", "1")
	r := find(t, home, []string{"*.txt"}, Limits{Files: 10, Bytes: 6})
	var got []string
	for _, f := range r.Files {
		got = append(got, f.Path)
	}
	if strings.Join(got, ",") != "a.txt,c.txt" || r.Bytes != 6 {
		t.Errorf("files %v (%d bytes), want a.txt,c.txt (6)", got, r.Bytes)
	}
	if !strings.HasPrefix(refusedFor(r, "b.txt"), ReasonByteLimit) {
		t.Errorf("b.txt not refused by bytes: %v", r.Refused)
	}
}

func TestReadAt(t *testing.T) {
	home := t.TempDir()
	write(t, home, "x/y.txt", "hello world")
	root, _ := os.OpenRoot(home)
	defer root.Close()
	b, eof, err := ReadAt(root, "x/y.txt", 6, 100)
	if err != nil || !eof || string(b) != "world" {
		t.Errorf("ReadAt = %q, %v, %v", b, eof, err)
	}
	if _, _, err := ReadAt(root, "../etc/passwd", 0, 10); err == nil {
		t.Error("ReadAt of ../etc/passwd succeeded")
	}
}
