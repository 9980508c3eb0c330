package app

import "testing"

// TestSameFiles: a bundle and its copies (eval's per-episode copy with
// its own environment) stage the same files; another Load of the same
// directory, or another app, does not count as the same (a warm pool
// hands a sandbox staged ahead only to the same files).
func TestSameFiles(t *testing.T) {
	files := []File{{Rel: "mover", Mode: 0o755, Size: 4}}
	b := &Bundle{Dir: "/apps/mover", Files: files}
	cp := *b
	cp.Manifest.Env = map[string]string{"A": "1"}
	reload := &Bundle{Dir: "/apps/mover", Files: append([]File(nil), files...)}
	other := &Bundle{Dir: "/apps/other", Files: files}
	empty := &Bundle{Dir: "/apps/mover"}
	for _, tc := range []struct {
		name string
		a, b *Bundle
		want bool
	}{
		{"itself", b, b, true},
		{"a copy", b, &cp, true},
		{"another load", b, reload, false},
		{"another directory", b, other, false},
		{"no files", empty, empty, true},
		{"no files, a copy", empty, &Bundle{Dir: "/apps/mover"}, false},
		{"nil", b, nil, false},
	} {
		if got := tc.a.SameFiles(tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
