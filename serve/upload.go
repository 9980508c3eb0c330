package serve

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/internal/stagepath"
	"github.com/codegirl-games/agentbox/serve/api"
)

// upload is an app directory a client uploaded as a tar, unpacked and
// loaded with the same staging checks as `agentbox run DIR`.
type upload struct {
	id, owner, name string
	dir             string
	bundle          *app.Bundle
	created         time.Time
	inUse           int  // environments created from it; guarded by Server.mu
	deleted         bool // deleted while in use: removed with its last environment
}

func (u *upload) remove() {
	u.bundle.Close()
	os.RemoveAll(u.dir)
}

func (u *upload) describe() api.Upload {
	return api.Upload{ID: u.id, Command: u.bundle.Manifest.Command, Files: len(u.bundle.Files), Bytes: u.bundle.TotalBytes, Created: u.created, InUse: u.inUse}
}

// tarOverhead bounds what a tar adds to its files: a 512-byte header per
// entry (long names take more), padding, the end.
func tarOverhead(l app.Limits) int64 { return int64(l.MaxFiles)*2048 + 1<<20 }

func (s *Server) handleCreateUpload(w http.ResponseWriter, r *http.Request, owner string) {
	if mt := r.Header.Get("Content-Type"); mt != "application/x-tar" {
		writeError(w, apiError(api.CodeUnsupportedMedia, "the body must be application/x-tar (an app directory, agentbox.json at its root), not %q", mt))
		return
	}
	// The body must arrive within UploadTimeout: a client that trickles
	// it holds its slot, one of the server's and disk space no longer.
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.o.UploadTimeout)); err != nil {
		writeError(w, apiError(api.CodeInternal, "this connection cannot bound the upload: %v", err))
		return
	}
	release, aerr := s.reserveUpload(owner)
	if aerr != nil {
		// Answered at once, the body unread: the connection closes
		// rather than wait for the body to drain it.
		w.Header().Set("Connection", "close")
		writeError(w, aerr)
		return
	}
	registered := false
	defer func() {
		if !registered {
			release()
		}
	}()
	id := "up-" + randomID(6)
	dir := s.uploadPath(id)
	lim := s.o.UploadLimits
	body := http.MaxBytesReader(w, r.Body, lim.MaxBytes+tarOverhead(lim))
	if err := unpack(body, dir, lim); err != nil {
		os.RemoveAll(dir)
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, apiError(api.CodeTooLarge, "the upload is larger than %d bytes", mbe.Limit))
		case errors.Is(err, os.ErrDeadlineExceeded):
			writeError(w, apiError(api.CodeInvalidUpload, "the upload's body did not arrive within %v (the server's --upload-timeout)", s.o.UploadTimeout))
		default:
			writeError(w, apiError(api.CodeInvalidUpload, "%v", err))
		}
		return
	}
	b, err := app.Load(dir, lim)
	if err != nil {
		os.RemoveAll(dir)
		writeError(w, apiError(api.CodeInvalidUpload, "%s", strings.ReplaceAll(err.Error(), dir, "the upload")))
		return
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, path.Base(b.Manifest.Command))
	u := &upload{id: id, owner: owner, name: name, dir: dir, bundle: b, created: time.Now()}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		u.remove()
		writeError(w, apiError(api.CodeShuttingDown, "the server is shutting down"))
		return
	}
	// The reserved slot becomes the upload, under the one lock: the
	// token's count never dips in between.
	s.releaseUploadLocked(owner)
	registered = true
	s.uploads[id] = u
	d := u.describe()
	s.mu.Unlock()
	s.logf("upload %s for token %s: %s, %d files, %d bytes", id, ownerLabel(owner), name, d.Files, d.Bytes)
	writeJSON(w, 201, d)
}

// reserveUpload takes one of owner's upload slots and one of the
// server's uploads in progress, under the lock, before the body is read:
// uploads sent at once cannot all pass the count and then all be added.
// The function it returns gives both back (the upload failed); a
// successful upload gives them back as it is registered.
func (s *Server) reserveUpload(owner string) (release func(), _ *api.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, apiError(api.CodeShuttingDown, "the server is shutting down")
	}
	n := s.receiving[owner]
	for _, u := range s.uploads {
		if u.owner == owner {
			n++
		}
	}
	if n >= s.o.MaxUploads {
		return nil, apiError(api.CodeTooManyUploads, "this token holds %d uploads (those being received included), the most it may (delete one first)", n)
	}
	in := 0
	for _, k := range s.receiving {
		in += k
	}
	if in >= s.o.UploadsInProgress {
		return nil, apiError(api.CodeTooManyUploads, "the server is receiving %d uploads, the most it does at once: try again shortly", in)
	}
	s.receiving[owner]++
	return func() {
		s.mu.Lock()
		s.releaseUploadLocked(owner)
		s.mu.Unlock()
	}, nil
}

// releaseUploadLocked gives back a slot reserveUpload took; s.mu is held.
func (s *Server) releaseUploadLocked(owner string) {
	if s.receiving[owner]--; s.receiving[owner] <= 0 {
		delete(s.receiving, owner)
	}
}

func (s *Server) handleListUploads(w http.ResponseWriter, _ *http.Request, owner string) {
	s.mu.Lock()
	list := []api.Upload{}
	for _, u := range s.uploads {
		if u.owner == owner && !u.deleted {
			list = append(list, u.describe())
		}
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Created.Before(list[j].Created) })
	writeJSON(w, 200, list)
}

func (s *Server) findUpload(r *http.Request, owner string) (*upload, *api.Error) {
	id := r.PathValue("id")
	u := s.uploads[id]
	if u == nil || u.owner != owner || u.deleted {
		return nil, apiError(api.CodeNotFound, "no upload %q", id)
	}
	return u, nil
}

func (s *Server) handleGetUpload(w http.ResponseWriter, r *http.Request, owner string) {
	s.mu.Lock()
	u, aerr := s.findUpload(r, owner)
	var d api.Upload
	if u != nil {
		d = u.describe()
	}
	s.mu.Unlock()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, 200, d)
}

// handleDeleteUpload removes an upload; one still in use goes with its
// last environment.
func (s *Server) handleDeleteUpload(w http.ResponseWriter, r *http.Request, owner string) {
	s.mu.Lock()
	u, aerr := s.findUpload(r, owner)
	if aerr != nil {
		s.mu.Unlock()
		writeError(w, aerr)
		return
	}
	u.deleted = true
	d := u.describe()
	if u.inUse == 0 {
		u.remove()
		delete(s.uploads, u.id)
	}
	s.mu.Unlock()
	writeJSON(w, 200, d)
}

// unpack writes a tar's entries under dir (made, 0700) through an
// os.Root, so no entry and no link it made can reach outside: only
// directories, regular files and symbolic links that stay inside
// (stagepath's rule, as for an app directory); at most lim's files and
// bytes; no duplicates. app.Load checks the result again, links chains
// included.
func unpack(r io.Reader, dir string, lim app.Limits) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var files int
	var total int64
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not a tar archive: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if err := stagepath.Check(name); err != nil || !filepath.IsLocal(name) {
			return fmt.Errorf("%q: not a path inside the app directory", h.Name)
		}
		if seen[name] {
			return fmt.Errorf("%q: twice in the archive", h.Name)
		}
		seen[name] = true
		files++
		if files > lim.MaxFiles {
			return fmt.Errorf("more than %d files", lim.MaxFiles)
		}
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("%q: %w", h.Name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("%q: %w", h.Name, err)
			}
		case tar.TypeReg:
			total += h.Size
			if h.Size < 0 || total > lim.MaxBytes {
				return fmt.Errorf("the app's files exceed %d bytes (at %q)", lim.MaxBytes, h.Name)
			}
			// Permission bits only: no setuid, setgid or sticky bit.
			mode := fs.FileMode(h.Mode).Perm()&0o755 | 0o600
			f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				return fmt.Errorf("%q: %w", h.Name, err)
			}
			n, err := io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil && n != h.Size {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return fmt.Errorf("%q: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if err := stagepath.LinkInside(name, h.Linkname); err != nil {
				return fmt.Errorf("%q: %v", h.Name, err)
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return fmt.Errorf("%q: %w", h.Name, err)
			}
		case tar.TypeLink:
			return fmt.Errorf("%q: a hard link; hard links are refused (copy the file)", h.Name)
		case tar.TypeChar, tar.TypeBlock:
			return fmt.Errorf("%q: a device; only files, directories and links are staged", h.Name)
		case tar.TypeFifo:
			return fmt.Errorf("%q: a FIFO; only files, directories and links are staged", h.Name)
		default:
			return fmt.Errorf("%q: an entry of type %q; only files, directories and links are staged", h.Name, h.Typeflag)
		}
	}
	if files == 0 {
		return errors.New("the archive is empty")
	}
	return nil
}
