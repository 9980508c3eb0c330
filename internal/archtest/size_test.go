package archtest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the size of a package (its non-test Go files' lines) above
// which docs/architecture.md must say why the package is one.
const maxLines = 2000

// largeReasons reads the section "Packages over 2,000 lines": a bullet
// per package, "- `path`: why".
func largeReasons(doc []byte) map[string]string {
	reasons := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	in := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, "## Packages over 2,000 lines")
			continue
		}
		if m := backticked.FindStringSubmatch(line); in && strings.HasPrefix(line, "- `") && m != nil {
			_, why, _ := strings.Cut(line, "`: ")
			reasons[m[1]] = strings.TrimSpace(why)
		}
	}
	return reasons
}

// TestLargePackagesSayWhy: a package over maxLines lines has its reason
// written in docs/architecture.md, and a reason is not kept for a package
// that has shrunk below the line (or gone).
func TestLargePackagesSayWhy(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := largeReasons(doc)
	large := map[string]int{}
	for _, p := range goList(t, "./...") {
		dir := filepath.Join(root, rel(p.ImportPath))
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		n := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(data, []byte("\n"))
		}
		if n > maxLines {
			large[rel(p.ImportPath)] = n
		}
	}
	for pkg, n := range large {
		if reasons[pkg] == "" {
			t.Errorf("%s has %d lines (non-test Go), over %d: split it, or say why it is one package in docs/architecture.md's \"Packages over 2,000 lines\" (\"- `%s`: why\")", pkg, n, maxLines, pkg)
		}
	}
	for pkg := range reasons {
		if _, ok := large[pkg]; !ok {
			t.Errorf("docs/architecture.md gives a reason for %s being over %d lines, and it is not (any more): remove the line", pkg, maxLines)
		}
	}
}
