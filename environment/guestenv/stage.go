package guestenv

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
)

// Backends bind-mount the guest binary into the sandbox, and a sandbox's
// /proc/self/mountinfo shows where a bind mount comes from: mounting the
// binary where it was built or installed (often under the user's home)
// would tell the app the user's name and directory layout. So the binary
// is mounted from a neutral copy, named by its content, in a directory of
// agentbox's own:
//
//	/var/cache/agentbox/guest-<hash>        agentbox run as root (0755: the
//	                                        local backend's sandboxes run as
//	                                        nobody and must read it)
//	$TMPDIR/agentbox-<uid>/guest-<hash>     anyone else (0700)
//
// A copy is made once per binary (atomically: written aside, renamed into
// place), reused by every run and every agentbox process, and removed a day
// after its last use; a sandbox still running from a removed copy keeps
// its inode.

// stageDir is where guest copies go (tests point it elsewhere).
var stageDir = defaultStageDir()

func defaultStageDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache/agentbox"
	}
	return filepath.Join(os.TempDir(), "agentbox-"+strconv.Itoa(os.Geteuid()))
}

// StageDir is the directory guest binaries are staged in.
func StageDir() string { return stageDir }

// stagedKeep is how long a copy is kept after its last use.
const stagedKeep = 24 * time.Hour

var (
	stageMu sync.Mutex
	staged  = map[string]string{} // path|size|mtime|inode → copy
)

// Staged returns the neutral copy of the guest binary at path (resolved by
// Binary), making it if needed.
func Staged(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	var ino uint64
	if st != nil {
		ino = st.Ino
	}
	key := fmt.Sprintf("%s|%d|%d|%d", path, fi.Size(), fi.ModTime().UnixNano(), ino)
	stageMu.Lock()
	defer stageMu.Unlock()
	dir := stageDir
	if err := ownDir(dir); err != nil {
		return "", err
	}
	dst, ok := staged[key]
	if !ok {
		id, err := contentID(path)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256([]byte(id + "|" + strconv.FormatInt(fi.Size(), 10)))
		dst = filepath.Join(dir, "guest-"+hex.EncodeToString(sum[:])[:20])
	}
	if !sound(dst, fi.Size()) {
		if err := copyInto(path, dst); err != nil {
			return "", fmt.Errorf("copy the guest binary to %s: %w", dir, err)
		}
	}
	now := time.Now()
	_ = os.Chtimes(dst, now, now) // in use: not pruned
	prune(dir, dst)
	staged[key] = dst
	return dst, nil
}

// contentID names a binary's content: the content part of a Go binary's
// build ID (a hash of the linked output), else the SHA-256 of the file.
func contentID(path string) (string, error) {
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		if s := f.Section(".note.go.buildid"); s != nil {
			if data, err := s.Data(); err == nil {
				// The note is namesz, descsz, type, "Go\0\0", then the ID.
				if i := bytes.Index(data, []byte("Go\x00\x00")); i >= 0 {
					id := bytes.TrimRight(data[i+4:], "\x00")
					if j := bytes.LastIndexByte(id, '/'); j >= 0 && len(id)-j > 8 {
						return "go:" + string(id[j+1:]), nil
					}
				}
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// sound reports whether dst is a copy agentbox made: a regular file of
// this user's, of the expected size, that only its owner may change.
func sound(dst string, size int64) bool {
	fi, err := os.Lstat(dst)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// copyInto copies src to dst through a temporary file beside it and a
// rename, so no process ever sees half a binary.
func copyInto(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := atomicfile.Create(dst, 0o755)
	if err != nil {
		return err
	}
	defer tmp.Abort()
	if _, err := io.Copy(tmp, in); err != nil {
		return err
	}
	return tmp.Commit()
}

// prune removes copies other than keep that were last used more than
// stagedKeep ago, and temporary files of copies that never finished.
func prune(dir, keep string) {
	for _, pattern := range []string{"guest-*", ".guest-*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range old {
			if fi, err := os.Lstat(p); err == nil && p != keep && time.Since(fi.ModTime()) > stagedKeep {
				os.Remove(p)
			}
		}
	}
}

// ownDir makes dir and checks that it is a directory of this user's that
// nobody else may write to, so nobody can swap the guest. Root's is 0755
// (sandboxes of the local backend run as nobody and must reach the copy),
// anyone else's 0700.
func ownDir(dir string) error {
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a directory owned by uid %d and writable only by it; remove it", dir, os.Geteuid())
	}
	if fi.Mode().Perm() != mode {
		if err := os.Chmod(dir, mode); err != nil {
			return err
		}
	}
	return nil
}

// LoopbackHosts is the /etc/hosts of a sandbox without a network: the
// loopback names, as Docker writes them for a container of network mode
// "none" (byte for byte), so that `localhost` resolves inside.
const LoopbackHosts = "127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"ff00::0\tip6-mcastprefix\n" +
	"ff02::1\tip6-allnodes\n" +
	"ff02::2\tip6-allrouters\n"

// HostsFile returns the path of a file holding LoopbackHosts in the stage
// directory (StageDir, beside the guest's copies: the same neutral place
// in a sandbox's mount table, the same owner and modes), written once
// (atomically) and again whenever it is not this user's, is writable by
// others or differs. A backend whose runtime writes no /etc/hosts mounts
// it there read-only.
func HostsFile() (string, error) {
	stageMu.Lock()
	defer stageMu.Unlock()
	if err := ownDir(stageDir); err != nil {
		return "", err
	}
	dst := filepath.Join(stageDir, "hosts")
	if sound(dst, int64(len(LoopbackHosts))) {
		if got, err := os.ReadFile(dst); err == nil && string(got) == LoopbackHosts {
			return dst, nil
		}
	}
	if err := atomicfile.WriteFile(dst, []byte(LoopbackHosts), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", dst, err)
	}
	return dst, nil
}
