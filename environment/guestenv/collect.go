package guestenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/wire"
)

// Bounds of collection's calls: the guest's walk (at most
// collectfs.MaxVisit entries) and one chunk's read.
const (
	findBound = time.Minute
	readBound = 10 * time.Second
)

// Collect asks the guest which files below the home the patterns name
// and copies each into dir (created if missing), chunk by chunk, through
// a temporary file renamed into place: dir holds only whole files. The
// host holds the guest to lim again: a file that grew past the bytes left
// is refused and removed.
func (c *Client) Collect(ctx context.Context, patterns []string, lim app.CollectLimits, dir string) (environment.Collected, error) {
	var out environment.Collected
	lim = lim.WithDefaults()
	for _, p := range patterns {
		if err := collectfs.CheckPattern(p); err != nil {
			return out, err
		}
	}
	var resp wire.CollectResponse
	req := wire.CollectRequest{Patterns: patterns, MaxFiles: lim.Files, MaxBytes: lim.Bytes}
	if _, err := c.call(ctx, wire.MethodCollect, findBound, req, &resp, nil); err != nil {
		return out, c.wrap("collect", err)
	}
	for _, r := range resp.Refused {
		out.Refused = append(out.Refused, environment.RefusedFile{Path: clip(r.Path, MaxText), Reason: clip(r.Reason, MaxText)})
	}
	if len(resp.Files) == 0 {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return out, fmt.Errorf("collect: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return out, fmt.Errorf("collect: %w", err)
	}
	defer root.Close()
	var total int64
	for i, f := range resp.Files {
		if i >= lim.Files {
			out.Refused = append(out.Refused, environment.RefusedFile{Path: f.Path, Reason: fmt.Sprintf("%s (%d files)", collectfs.ReasonFileLimit, lim.Files)})
			continue
		}
		if err := collectfs.CheckPattern(f.Path); err != nil || path.Clean(f.Path) != f.Path {
			out.Refused = append(out.Refused, environment.RefusedFile{Path: clip(f.Path, MaxText), Reason: "not a path below the home"})
			continue
		}
		n, sum, reason, err := c.fetch(ctx, root, f.Path, lim.Bytes-total)
		if err != nil {
			return out, err
		}
		if reason != "" {
			out.Refused = append(out.Refused, environment.RefusedFile{Path: f.Path, Reason: reason})
			continue
		}
		total += n
		out.Files = append(out.Files, environment.CollectedFile{Path: f.Path, Size: n, SHA256: sum})
	}
	return out, nil
}

// fetch copies one file, at most room bytes. reason says why it was
// refused (the file went away, grew past the limit); err is a failure of
// the guest or of the host's disk.
func (c *Client) fetch(ctx context.Context, root *os.Root, rel string, room int64) (n int64, sum, reason string, err error) {
	name := filepath.FromSlash(rel)
	if d := filepath.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return 0, "", "", fmt.Errorf("collect %s: %w", rel, err)
		}
	}
	tmp := fmt.Sprintf("%s.%s.partial", name, rand.Text()[:8])
	fh, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, "", "", fmt.Errorf("collect %s: %w", rel, err)
	}
	done := false
	defer func() {
		if !done {
			fh.Close()
			_ = root.Remove(tmp)
		}
	}()
	var h hash.Hash = sha256.New()
	for {
		var resp wire.ReadFileResponse
		payload, err := c.call(ctx, wire.MethodReadFile, readBound, wire.ReadFileRequest{Path: rel, Offset: n, Len: chunk}, &resp, nil)
		if err != nil {
			var re *wire.RemoteError
			if errors.As(err, &re) && re.Code == wire.CodeNotFound {
				return 0, "", "could not be read: " + clip(re.Message, MaxText), nil
			}
			return 0, "", "", c.wrap("collect "+rel, err)
		}
		if int64(len(payload)) > room-n {
			return 0, "", fmt.Sprintf("%s (grew while it was collected)", collectfs.ReasonByteLimit), nil
		}
		if _, err := fh.Write(payload); err != nil {
			return 0, "", "", fmt.Errorf("collect %s: %w", rel, err)
		}
		h.Write(payload)
		n += int64(len(payload))
		if resp.EOF || len(payload) == 0 {
			break
		}
	}
	if err := fh.Close(); err != nil {
		return 0, "", "", fmt.Errorf("collect %s: %w", rel, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		done = true
		return 0, "", "", fmt.Errorf("collect %s: %w", rel, err)
	}
	done = true
	return n, hex.EncodeToString(h.Sum(nil)), "", nil
}
