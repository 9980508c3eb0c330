package local

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
)

// GuestBinary resolves the agentbox binary the sandbox runs as its guest
// (see guestenv.Binary). It runs on the host's own libraries, so unlike
// Docker's it need not be static.
func GuestBinary(path string) (string, error) {
	return guestenv.Binary(path, nil)
}

// reachable reports whether uid/gid may traverse every directory above
// path and read and execute path itself, by the mode bits (bubblewrap
// resolves the source of a bind mount with the sandbox's host identity).
func reachable(path string, uid, gid int) bool {
	check := func(p string, need os.FileMode) bool {
		fi, err := os.Stat(p)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		perm := fi.Mode().Perm()
		switch {
		case int(st.Uid) == uid:
			perm >>= 6
		case int(st.Gid) == gid:
			perm >>= 3
		}
		return perm&need == need
	}
	dir := filepath.Dir(path)
	for {
		if !check(dir, 0o1) {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return check(path, 0o5)
}

// trimErr drops the wrapped class prefix of an error for messages.
func trimErr(err error) string {
	return strings.TrimPrefix(err.Error(), environment.ErrGuest.Error()+": ")
}
