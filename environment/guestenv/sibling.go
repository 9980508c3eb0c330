package guestenv

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
)

// GuestName is the small guest binary's name (cmd/agentbox-guest), which
// `make build` puts beside bin/agentbox: the guest without the packages
// only the host uses, whose initialisers every sandbox's start would pay.
const GuestName = "agentbox-guest"

// Sibling is GuestName in the directory of exe (the running agentbox,
// symlinks resolved) when it is there and of the same build as this
// process: the same Go, main module version and checksum, build settings
// (flags, -ldflags and so the version stamped by make, VCS revision, time
// and modified flag), and the same version of every module it links. Any
// other file of that name — absent, unreadable, not a Go binary, from
// another build — is not used (ok false, path still naming a file that is
// there): the backend runs exe itself as the guest, which is always
// right, only slower to start.
func Sibling(exe string) (path string, ok bool) {
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	path = filepath.Join(filepath.Dir(exe), GuestName)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	self, ok := debug.ReadBuildInfo()
	if !ok {
		return path, false
	}
	key := path + "|" + strconv.FormatInt(fi.Size(), 10) + "|" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	if v, ok := siblings.Load(key); ok {
		return path, v.(bool)
	}
	bi, err := buildinfo.ReadFile(path)
	same := err == nil && sameBuild(self, bi)
	siblings.Store(key, same)
	return path, same
}

// siblings remembers Sibling's verdict per file (path, size, mtime): an
// eval reads the binary's build information once, not once per episode.
var siblings sync.Map

// sameBuild says whether guest was built from the same source and
// settings as host (see Sibling); the main packages differ, so their
// paths and the set of modules linked are not compared, only that each
// module the guest links is the one the host links.
func sameBuild(host, guest *debug.BuildInfo) bool {
	if host.GoVersion != guest.GoVersion || !sameModule(&host.Main, &guest.Main) || len(host.Settings) != len(guest.Settings) {
		return false
	}
	settings := make(map[string]string, len(host.Settings))
	for _, s := range host.Settings {
		settings[s.Key] = s.Value
	}
	for _, s := range guest.Settings {
		if v, ok := settings[s.Key]; !ok || v != s.Value {
			return false
		}
	}
	deps := make(map[string]*debug.Module, len(host.Deps))
	for _, m := range host.Deps {
		deps[m.Path] = m
	}
	for _, m := range guest.Deps {
		if h, ok := deps[m.Path]; !ok || !sameModule(h, m) {
			return false
		}
	}
	return true
}

func sameModule(a, b *debug.Module) bool {
	if a.Path != b.Path || a.Version != b.Version || a.Sum != b.Sum || (a.Replace == nil) != (b.Replace == nil) {
		return false
	}
	return a.Replace == nil || sameModule(a.Replace, b.Replace)
}

// SiblingNote is what doctor adds when Binary(path, …) passed over an
// agentbox-guest of another build beside the executable: "" otherwise.
func SiblingNote(path string) string {
	if path != "" || os.Getenv("AGENTBOX_GUEST_BINARY") != "" {
		return ""
	}
	exe, err := executable()
	if err != nil {
		return ""
	}
	if p, ok := Sibling(exe); p != "" && !ok {
		return "; " + p + " is not of this agentbox's build, so agentbox itself is the guest (slower to start: rebuild both, make build)"
	}
	return ""
}
