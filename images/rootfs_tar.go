package images

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// WriteTar streams the root as a tar archive, as `docker import` (POST
// /images/create?fromSrc=-) takes it. See WriteDirTar.
func (r *Rootfs) WriteTar(ctx context.Context, w io.Writer) error {
	return WriteDirTar(ctx, r.Dir, w)
}

// WriteDirTar streams the tree below dir as a tar archive whose entry names
// are relative to dir (the root directory itself is not an entry). It keeps
// what an operating system root needs: modes including setuid, setgid and
// sticky bits; numeric uid and gid only (no user or group names, so the
// host's names never leak into the image's ids); symlinks as they are;
// hard links as links to the first path seen; character and block devices
// and FIFOs; file capabilities (the security.capability xattr, as a
// SCHILY.xattr PAX record). Sockets are skipped. Entries come in lexical
// order, so the same tree gives the same stream. It stops when ctx is done.
func WriteDirTar(ctx context.Context, dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	buf := make([]byte, 256<<10)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		fi, err := d.Info() // lstat
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
			if fi.Mode().IsRegular() && st.Nlink > 1 {
				key := inode{uint64(st.Dev), st.Ino}
				if first, ok := seen[key]; ok {
					hdr.Typeflag = tar.TypeLink
					hdr.Linkname = first
					hdr.Size = 0
				} else {
					seen[key] = hdr.Name
				}
			}
		}
		if hdr.Typeflag == tar.TypeReg {
			if capab, ok := fileCapability(path); ok {
				hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": capab}
				hdr.Format = tar.FormatPAX
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size == 0 {
			return nil
		}
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyBuffer(tw, f, buf); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	return nil
}

// fileCapability returns the raw security.capability xattr of a file.
func fileCapability(path string) (string, bool) {
	buf := make([]byte, 128)
	n, err := unix.Lgetxattr(path, "security.capability", buf)
	if err != nil || n <= 0 { // usually ENODATA: no capabilities
		return "", false
	}
	return string(buf[:n]), true
}
