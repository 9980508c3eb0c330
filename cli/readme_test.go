package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

// The README's samples, held to what the code prints so they cannot drift:
// the ls sample is ls's output, byte for byte; the image table names the
// apps the Dockerfiles install; the Go snippet imports what it uses. (The
// usage sample is held to a real run by e2e's TestMoverDemo.)

// readme is README.md at the module's root.
func readme(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readmeBlock is the first fenced block after the first line holding
// marker, without its fences.
func readmeBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	i := strings.Index(doc, marker)
	if i < 0 {
		t.Fatalf("README.md has no %q", marker)
	}
	rest := doc[i:]
	start := strings.Index(rest, "\n```")
	if start < 0 {
		t.Fatalf("README.md has no block after %q", marker)
	}
	rest = rest[start+4:]
	rest = rest[strings.Index(rest, "\n")+1:] // the fence's language
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatalf("README.md: the block after %q does not end", marker)
	}
	return rest[:end]
}

// TestReadmeLs: the sample of agentbox ls is what ls prints, run where
// run and eval leave their traces (./agentbox-runs, ./agentbox-evals).
func TestReadmeLs(t *testing.T) {
	want := readmeBlock(t, readme(t), "**`agentbox ls [DIR]`** lists")
	fixture := lsFixture(t)
	cwd := t.TempDir()
	runs, evals := filepath.Join(cwd, "agentbox-runs"), filepath.Join(cwd, "agentbox-evals")
	if err := os.MkdirAll(evals, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(fixture, "20261129-203000-nightly-abcdef"), filepath.Join(evals, "20261129-203000-nightly-abcdef")); err != nil {
		t.Fatal(err)
	}
	for _, junk := range []string{"README.txt", "notes", "future"} {
		os.RemoveAll(filepath.Join(fixture, junk))
	}
	if err := os.Rename(fixture, runs); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	local := time.Local
	time.Local = time.UTC // the fixture's times, as the sample shows them
	t.Cleanup(func() { time.Local = local })
	var so, se bytes.Buffer
	if code := Main([]string{"ls"}, &so, &se); code != 0 {
		t.Fatalf("ls: exit %d: %s", code, se.String())
	}
	if so.String() != want {
		t.Errorf("README.md's ls sample differs from ls's output; the output:\n%s\nthe sample:\n%s", so.String(), want)
	}
}

// TestReadmeImages: the apps the README's image table names are the ones
// each Dockerfile installs (its APPS, which image ls shows).
func TestReadmeImages(t *testing.T) {
	doc := readme(t)
	for _, tt := range []struct{ image, dockerfile string }{
		{"agentbox/runtime:bookworm", "Dockerfile"},
		{"agentbox/test:bookworm", "Dockerfile.test"},
	} {
		data, err := os.ReadFile(filepath.Join("..", "images", tt.dockerfile))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^ARG APPS="([^"]*)"`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s has no ARG APPS", tt.dockerfile)
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(tt.image) + "` \\|.*\\| ([^|]*) \\|$").FindStringSubmatch(doc)
		if row == nil {
			t.Fatalf("README.md's image table has no row for %s", tt.image)
		}
		if got, want := strings.Join(strings.Split(row[1], ", "), " "), string(m[1]); got != want {
			t.Errorf("README.md says %s has %q; %s installs %q", tt.image, got, tt.dockerfile, want)
		}
	}
}

// TestReadmeGoClient: the Go client's snippet imports every package it
// uses, by its import path.
func TestReadmeGoClient(t *testing.T) {
	block := readmeBlock(t, readme(t), "From Go, `client` is gymnasium's shape")
	for _, pkg := range regexp.MustCompile(`\b(client|api|action)\.`).FindAllStringSubmatch(block, -1) {
		if !regexp.MustCompile(`"github\.com/codegirl-games/agentbox/(serve/)?` + pkg[1] + `"`).MatchString(block) {
			t.Errorf("README.md's Go client snippet uses %s without importing it:\n%s", pkg[1], block)
		}
	}
}

// TestReadmeRunNames: runs are named as README says: an executable by its
// file name, an app directory by its directory, a program of the image by
// its name, also when a manifest's command is one.
func TestReadmeRunNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "calc-app")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "xcalc"}`), 0o644)
	game := filepath.Join(t.TempDir(), "game-dir")
	os.MkdirAll(game, 0o755)
	os.WriteFile(filepath.Join(game, "game"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(game, "agentbox.json"), []byte(`{"command": "game"}`), 0o644)
	for _, tt := range []struct{ target, want string }{
		{dir, "xcalc"},
		{game, "game-dir"},
		{filepath.Join(game, "game"), "game"},
		{"xterm", "xterm"},
	} {
		b, err := loadApp(tt.target, environment.Resources{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := bundleName(b); got != tt.want {
			t.Errorf("%s is named %q, want %q", tt.target, got, tt.want)
		}
		b.Close()
	}
	if !strings.Contains(readme(t), "names its runs `…-xcalc-…`") {
		t.Errorf("README.md does not say how a manifest whose command is a program of the image is named")
	}
}
