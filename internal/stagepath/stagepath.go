// Package stagepath is the one rule for the paths of a staged app, used
// where the host loads an app directory (app) and again where the guest
// writes it into the sandbox (guest), which trusts nothing it is sent.
package stagepath

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Check accepts a relative, slash-separated path that stays inside its
// directory: not empty, not absolute, no backslash or NUL, no ".."
// component, not the directory itself.
func Check(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is an absolute path; paths are relative to the app directory", p)
	case strings.Contains(p, "\\"):
		return fmt.Errorf("%q contains a backslash; use /", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q contains a NUL byte", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("%q leaves the app directory (..)", p)
		}
	}
	if c := path.Clean(p); c == "." {
		return fmt.Errorf("%q names the directory itself", p)
	}
	return nil
}

// LinkInside accepts the target of a symbolic link at rel (a path Check
// accepts) when, resolved lexically from the link's directory, it stays
// inside the app directory. Chains of links (s -> ., t -> s/..) need the
// other links to judge; the host resolves those before anything starts
// (app.Load), and the guest creates links with os.Root, which refuses to
// follow one out.
func LinkInside(rel, target string) error {
	if target == "" || strings.ContainsRune(target, 0) {
		return fmt.Errorf("symbolic link to %q: not a valid target", target)
	}
	if strings.HasPrefix(target, "/") {
		return fmt.Errorf("symbolic link to %s leaves the app directory (absolute target)", target)
	}
	resolved := path.Join(path.Dir(rel), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("symbolic link to %s leaves the app directory", target)
	}
	return nil
}
