package images

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Default Debian mirrors, used when the host's apt configuration names none.
const (
	DefaultMirror         = "http://deb.debian.org/debian"
	DefaultSecurityMirror = "http://deb.debian.org/debian-security"
)

// AptSource is one source entry of an apt configuration, in either format:
// a line of sources.list ("deb [opts] URI SUITE COMPONENT...") or a deb822
// stanza of a .sources file. A one-line entry has one type and one URI.
type AptSource struct {
	Types      []string // "deb", "deb-src"
	URIs       []string
	Suites     []string
	Components []string
	File       string // where it came from, for messages; may be empty
	Line       int    // line of the entry (or of the stanza's first field)
}

// Mirrors are the Debian mirrors a root is bootstrapped from and configured
// with.
type Mirrors struct {
	Debian   string // for SUITE and SUITE-updates, e.g. http://deb.debian.org/debian
	Security string // for SUITE-security, e.g. http://deb.debian.org/debian-security
}

// ParseSourcesList parses the one-line format of /etc/apt/sources.list and
// sources.list.d/*.list. Comments (#) and blank lines are skipped, options in
// brackets are accepted and ignored; name is used in error messages.
func ParseSourcesList(name string, data []byte) ([]AptSource, error) {
	var out []AptSource
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		typ := fields[0]
		if typ != "deb" && typ != "deb-src" {
			return nil, fmt.Errorf("%s:%d: unknown source type %q", name, n, typ)
		}
		rest := fields[1:]
		// Options: "[opt=v opt=v]", possibly split over several fields.
		if len(rest) > 0 && strings.HasPrefix(rest[0], "[") {
			end := -1
			for i, f := range rest {
				if strings.HasSuffix(f, "]") {
					end = i
					break
				}
			}
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: unterminated option list", name, n)
			}
			rest = rest[end+1:]
		}
		if len(rest) < 2 {
			return nil, fmt.Errorf("%s:%d: want URI and suite after %q", name, n, typ)
		}
		out = append(out, AptSource{
			Types:      []string{typ},
			URIs:       []string{rest[0]},
			Suites:     []string{rest[1]},
			Components: slices.Clone(rest[2:]),
			File:       name,
			Line:       n,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// ParseDeb822Sources parses the deb822 format of sources.list.d/*.sources:
// stanzas of "Field: value" lines separated by blank lines, continuation lines
// starting with white space, comment lines starting with '#'. Field names are
// case-insensitive; stanzas with "Enabled: no" are dropped.
func ParseDeb822Sources(name string, data []byte) ([]AptSource, error) {
	var out []AptSource
	fields := map[string]string{}
	start, last := 0, ""
	flush := func() error {
		if len(fields) == 0 {
			return nil
		}
		defer func() { fields = map[string]string{}; last = "" }()
		if strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no") {
			return nil
		}
		s := AptSource{
			Types:      strings.Fields(fields["types"]),
			URIs:       strings.Fields(fields["uris"]),
			Suites:     strings.Fields(fields["suites"]),
			Components: strings.Fields(fields["components"]),
			File:       name,
			Line:       start,
		}
		if len(s.Types) == 0 || len(s.URIs) == 0 || len(s.Suites) == 0 {
			return fmt.Errorf("%s:%d: stanza needs Types, URIs and Suites", name, start)
		}
		out = append(out, s)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "#"):
			// comment, also inside a stanza
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("%s:%d: continuation line outside a field", name, n)
			}
			fields[last] += " " + strings.TrimSpace(line)
		default:
			key, val, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("%s:%d: want \"Field: value\", got %q", name, n, line)
			}
			if len(fields) == 0 {
				start = n
			}
			last = strings.ToLower(strings.TrimSpace(key))
			fields[last] = strings.TrimSpace(val)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadAptSources reads the apt source configuration below root ("/" for the
// host): etc/apt/sources.list, then etc/apt/sources.list.d/*.list and
// *.sources in name order. Missing files are not an error.
func ReadAptSources(root string) ([]AptSource, error) {
	dir := filepath.Join(root, "etc", "apt")
	files := []string{filepath.Join(dir, "sources.list")}
	entries, err := os.ReadDir(filepath.Join(dir, "sources.list.d"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	var more []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources")) {
			more = append(more, filepath.Join(dir, "sources.list.d", n))
		}
	}
	sort.Strings(more)
	files = append(files, more...)

	var out []AptSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read apt sources: %w", err)
		}
		var srcs []AptSource
		if strings.HasSuffix(f, ".sources") {
			srcs, err = ParseDeb822Sources(f, data)
		} else {
			srcs, err = ParseSourcesList(f, data)
		}
		if err != nil {
			return nil, fmt.Errorf("read apt sources: %w", err)
		}
		out = append(out, srcs...)
	}
	return out, nil
}

// PickMirrors chooses the Debian and security mirrors for suite from parsed
// sources. Only "deb" entries with an http, https or file URI count. The
// Debian mirror is the first entry listing suite or suite-updates (or, failing
// that, any entry that is not a security one); the security mirror is the
// first entry listing suite-security (or the old suite/updates). Whatever is
// not found is left empty.
func PickMirrors(srcs []AptSource, suite string) Mirrors {
	var m Mirrors
	var fallback string
	for _, s := range srcs {
		if !slices.Contains(s.Types, "deb") {
			continue
		}
		uri := ""
		for _, u := range s.URIs {
			if usableMirrorURI(u) {
				uri = strings.TrimRight(u, "/")
				break
			}
		}
		if uri == "" {
			continue
		}
		security := false
		for _, su := range s.Suites {
			switch su {
			case suite + "-security", suite + "/updates":
				security = true
				if m.Security == "" {
					m.Security = uri
				}
			case suite, suite + "-updates":
				if m.Debian == "" {
					m.Debian = uri
				}
			}
		}
		if !security && fallback == "" {
			fallback = uri
		}
	}
	if m.Debian == "" {
		m.Debian = fallback
	}
	return m
}

func usableMirrorURI(u string) bool {
	for _, p := range []string{"http://", "https://", "file:/"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// HostMirrors returns the mirrors of the host's apt configuration (below
// root, "/" for the host), with DefaultMirror and DefaultSecurityMirror for
// whatever it does not name.
func HostMirrors(root, suite string) (Mirrors, error) {
	srcs, err := ReadAptSources(root)
	if err != nil {
		return Mirrors{DefaultMirror, DefaultSecurityMirror}, err
	}
	m := PickMirrors(srcs, suite)
	if m.Debian == "" {
		m.Debian = DefaultMirror
	}
	if m.Security == "" {
		m.Security = DefaultSecurityMirror
	}
	return m, nil
}
