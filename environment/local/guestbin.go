package local

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestconn"
)

// GuestBinary resolves the agentbox binary the sandbox runs as its guest
// (see guestconn.Binary). It runs on the host's own libraries, so unlike
// Docker's it need not be static.
func GuestBinary(path string) (string, error) {
	return guestconn.Binary(path, nil)
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

// cacheDir holds copies of guest binaries the sandbox's host identity could
// not otherwise reach (agentbox run as root from a private directory).
var cacheDir = "/var/cache/agentbox"

var (
	copyMu sync.Mutex
	copies = map[string]string{} // path|size|mtime → copy
)

// sandboxCopy returns a path of the guest binary that uid/gid can reach:
// the binary itself when it can, else a root-owned, content-addressed copy
// under cacheDir (made once per binary and process).
func sandboxCopy(path string, uid, gid int) (string, error) {
	if reachable(path, uid, gid) {
		return path, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
	copyMu.Lock()
	defer copyMu.Unlock()
	if p, ok := copies[key]; ok {
		return p, nil
	}
	if err := safeDir(cacheDir); err != nil {
		return "", err
	}
	src, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	h := sha256.New()
	if _, err := io.Copy(h, src); err != nil {
		return "", err
	}
	dst := filepath.Join(cacheDir, "guest-"+hex.EncodeToString(h.Sum(nil))[:20])
	if _, err := os.Stat(dst); err != nil {
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		tmp, err := os.CreateTemp(cacheDir, ".guest-*")
		if err != nil {
			return "", err
		}
		_, err = io.Copy(tmp, src)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o755)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), dst)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return "", fmt.Errorf("copy the guest binary to %s: %w", cacheDir, err)
		}
	}
	now := time.Now()
	_ = os.Chtimes(dst, now, now) // in use: not pruned
	pruneCache(dst)
	if !reachable(dst, uid, gid) {
		return "", fmt.Errorf("%s is not readable by uid %d", dst, uid)
	}
	copies[key] = dst
	return dst, nil
}

// pruneCache removes guest copies other than keep that were made more
// than a day ago (a sandbox still using one keeps its inode).
func pruneCache(keep string) {
	old, _ := filepath.Glob(filepath.Join(cacheDir, "guest-*"))
	for _, p := range old {
		if fi, err := os.Stat(p); err == nil && p != keep && time.Since(fi.ModTime()) > 24*time.Hour {
			os.Remove(p)
		}
	}
}

// safeDir makes dir (mode 0755) and checks that only its owner, this
// process's user, can write to it, so nobody can swap the guest.
func safeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a directory owned by uid %d and writable only by it", dir, os.Geteuid())
	}
	if fi.Mode().Perm()&0o005 != 0o005 {
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// trimErr drops the wrapped class prefix of an error for messages.
func trimErr(err error) string {
	return strings.TrimPrefix(err.Error(), environment.ErrGuest.Error()+": ")
}
