// Package archtest holds the placement table of docs/architecture.md true:
// every package has a row, imports only what its row allows, and the
// shipped binary depends on no test code.
package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/codegirl-games/agentbox"

// row is one row of the placement table.
type row struct {
	line     int
	paths    []string // patterns, module-relative; <name> matches one element
	below    bool     // "everything below"
	allowed  []string // module-relative packages, or third-party module paths
	external []string // the third-party modules among allowed
}

// table is the placement table in order.
type table []row

var backticked = regexp.MustCompile("`([^`]+)`")

// parseTable reads the placement table from docs/architecture.md.
func parseTable(doc []byte) (table, error) {
	var t table
	sc := bufio.NewScanner(bytes.NewReader(doc))
	in, n := false, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Placement table"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			return nil, fmt.Errorf("architecture.md:%d: a row needs 3 cells, has %d", n, len(cells))
		}
		r := row{line: n}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.paths = append(r.paths, strings.TrimSuffix(m[1], "/"))
		}
		may := strings.TrimSpace(cells[2])
		r.below = strings.HasPrefix(may, "everything below")
		for _, m := range backticked.FindAllStringSubmatch(may, -1) {
			p := strings.TrimSuffix(m[1], "/")
			r.allowed = append(r.allowed, p)
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
				r.external = append(r.external, p)
			}
		}
		if len(r.paths) == 0 {
			return nil, fmt.Errorf("architecture.md:%d: no path in the first cell", n)
		}
		if !r.below && len(r.allowed) == 0 && may != "—" {
			return nil, fmt.Errorf("architecture.md:%d: cannot read %q (want backticked paths, \"everything below\" or \"—\")", n, may)
		}
		t = append(t, r)
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("architecture.md: no placement table")
	}
	return t, sc.Err()
}

// matches reports whether the module-relative package pkg fits pattern.
func matches(pattern, pkg string) bool {
	ps, ks := strings.Split(pattern, "/"), strings.Split(pkg, "/")
	if len(ps) != len(ks) {
		return false
	}
	for i := range ps {
		if ps[i] != ks[i] && !(strings.HasPrefix(ps[i], "<") && strings.HasSuffix(ps[i], ">")) {
			return false
		}
	}
	return true
}

// rowOf returns the index of the row holding pkg, or -1.
func (t table) rowOf(pkg string) int {
	for i, r := range t {
		for _, p := range r.paths {
			if matches(p, pkg) {
				return i
			}
		}
	}
	return -1
}

// graph maps each module-relative package to what it imports (module
// packages relative, everything else as is).
type graph map[string][]string

// check returns every way g breaks t, sorted.
func (t table) check(g graph) []string {
	var bad []string
	exclusive := map[string][]int{} // third-party module → rows naming it
	for i, r := range t {
		for _, m := range r.external {
			exclusive[m] = append(exclusive[m], i)
		}
	}
	for pkg, imports := range g {
		i := t.rowOf(pkg)
		if i < 0 {
			bad = append(bad, fmt.Sprintf("%s: no row in the placement table", pkg))
			continue
		}
		r := t[i]
		for _, imp := range imports {
			if !strings.Contains(strings.Split(imp, "/")[0], ".") {
				// The module's own packages (relative) and the standard library.
				if _, ours := g[imp]; !ours {
					continue // standard library
				}
				switch {
				case strings.HasPrefix(imp, "internal/") && (!strings.HasPrefix(pkg, "internal/") || t.rowOf(imp) >= 0):
					// Leaf utilities: anyone may import them.
				case slices.Contains(r.allowed, imp):
				case r.below && t.rowOf(imp) > i:
				default:
					bad = append(bad, fmt.Sprintf("%s imports %s, which its row (architecture.md:%d) does not allow", pkg, imp, r.line))
				}
				continue
			}
			for mod, rows := range exclusive {
				if (imp == mod || strings.HasPrefix(imp, mod+"/")) && !slices.Contains(rows, i) {
					bad = append(bad, fmt.Sprintf("%s imports %s, which only the rows naming %s may (architecture.md:%d)", pkg, imp, mod, r.line))
				}
			}
		}
		if strings.HasPrefix(pkg, "internal/") {
			for _, imp := range imports {
				if _, ours := g[imp]; ours && !strings.HasPrefix(imp, "internal/") {
					bad = append(bad, fmt.Sprintf("%s is a leaf under internal/ but imports %s", pkg, imp))
				}
			}
		}
	}
	sort.Strings(bad)
	return slices.Compact(bad)
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs go list -json with args in the module's root.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var ps []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

// moduleGraph is the import graph of every package of the module, without
// tests.
func moduleGraph(t *testing.T) graph {
	g := graph{}
	for _, p := range goList(t, "./...") {
		var imps []string
		for _, imp := range p.Imports {
			imps = append(imps, rel(imp))
		}
		g[rel(p.ImportPath)] = imps
	}
	return g
}

func readTable(t *testing.T) table {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := parseTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestPlacement: every package has a row and imports only what it allows.
func TestPlacement(t *testing.T) {
	tab := readTable(t)
	g := moduleGraph(t)
	for _, b := range tab.check(g) {
		t.Error(b)
	}
	// Rows that match nothing are stale.
	for _, r := range tab {
		for _, p := range r.paths {
			if !slices.ContainsFunc(mapsKeys(g), func(pkg string) bool { return matches(p, pkg) }) {
				t.Errorf("architecture.md:%d: %s matches no package", r.line, p)
			}
		}
	}
}

func mapsKeys(g graph) []string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	return keys
}

// TestPlacementCatchesViolations plants violations in the real graph: the
// check must name each.
func TestPlacementCatchesViolations(t *testing.T) {
	tab := readTable(t)
	for _, tt := range []struct {
		name, pkg, imp, want string
	}{
		{"upwards", "action", "session", "action imports session"},
		{"sideways between backends", "environment/local", "environment/docker", "environment/local imports environment/docker"},
		{"an agent importing a backend", "agent/demo", "environment/docker", "agent/demo imports environment/docker"},
		{"the Docker SDK outside its backend", "session", "github.com/moby/moby/client", "session imports github.com/moby/moby/client"},
		{"a leaf importing upwards", "internal/keysym", "action", "internal/keysym is a leaf"},
		{"a package with no row", "newpkg", "action", "newpkg: no row"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := moduleGraph(t)
			g[tt.pkg] = append(g[tt.pkg], tt.imp)
			bad := tab.check(g)
			if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, tt.want) }) {
				t.Errorf("planted %s → %s; the check said %q", tt.pkg, tt.imp, bad)
			}
		})
	}
}

// TestReleaseBinaryHasNoTestCode: nothing the agentbox binaries are built
// from imports testing or a test helper. (github.com/jezek/xgb imports
// testing from a non-test file; only the package's init is linked.)
func TestReleaseBinaryHasNoTestCode(t *testing.T) {
	tab := readTable(t)
	for _, p := range goList(t, "-deps", "./cmd/agentbox", "./cmd/agentbox-guest") {
		if !strings.HasPrefix(p.ImportPath, module) {
			continue
		}
		pkg := rel(p.ImportPath)
		if slices.Contains(p.Imports, "testing") {
			t.Errorf("%s is linked into agentbox and imports testing", pkg)
		}
		if strings.HasSuffix(pkg, "test") || pkg == "internal/cpuload" {
			t.Errorf("%s (test support) is linked into agentbox", pkg)
		}
		if tab.rowOf(pkg) < 0 {
			t.Errorf("%s is linked into agentbox but has no row", pkg)
		}
	}
}

// TestGuestBinaryLinksOnlyTheGuest: agentbox-guest, which every sandbox
// starts, links the guest side only — none of the packages only the host
// uses, whose initialisers it exists to spare (docs/measurements.md).
func TestGuestBinaryLinksOnlyTheGuest(t *testing.T) {
	guestSide := []string{"cmd/agentbox-guest", "guest", "wire", "observe", "action"}
	hostOnly := []string{"k8s.io/", "github.com/xuri/", "github.com/moby/", "modernc.org/", "github.com/spf13/cobra", "github.com/anthropics/", "github.com/openai/"}
	for _, p := range goList(t, "-deps", "./cmd/agentbox-guest") {
		if strings.HasPrefix(p.ImportPath, module) {
			pkg := rel(p.ImportPath)
			if !strings.HasPrefix(pkg, "internal/") && !slices.ContainsFunc(guestSide, func(g string) bool { return pkg == g || strings.HasPrefix(pkg, g+"/") }) {
				t.Errorf("agentbox-guest links %s, which is not the guest's", pkg)
			}
			continue
		}
		for _, h := range hostOnly {
			if strings.HasPrefix(p.ImportPath, h) {
				t.Errorf("agentbox-guest links %s, which only the host uses", p.ImportPath)
			}
		}
	}
}
