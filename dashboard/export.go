package dashboard

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/store"
)

// SummaryCSV is the summary table at the top of an export.
const SummaryCSV = "summary.csv"

// summaryHeader are summary.csv's columns.
var summaryHeader = []string{"kind", "path", "id", "status", "outcome", "reason", "app", "agent", "task", "started", "duration_ms", "steps", "passed", "episodes"}

// cell keeps a spreadsheet from reading text agentbox did not write (a
// task, a reason) as a formula.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// handleExport sends what a filter selects (or ?run=ROW, one run) as a
// .tar.gz: summary.csv (one row a run and an eval), then each run's trace
// directory and each eval's summary.json, under the path below its root
// (prefixed with the root's name). Files are read through an os.Root of
// each directory: no link is followed, only regular files are sent.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var entries []store.Entry
	if v := r.URL.Query().Get("run"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			badRequest(w, &filterError{"run", v, "want a run's number"})
			return
		}
		d, err := s.o.Store.Run(ctx, n)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !s.inRoots(d.Path)) {
			notFound(w, fmt.Sprintf("no run %d in the index below the dashboard's roots", n))
			return
		}
		if err != nil {
			serverError(w, err)
			return
		}
		entries = []store.Entry{d.Entry}
	} else {
		_, sf, err := parseFilter(r.URL.Query(), s.o.Now())
		if err != nil {
			badRequest(w, err)
			return
		}
		sf.Roots = s.roots
		if entries, err = s.o.Store.Query(ctx, sf); err != nil {
			serverError(w, err)
			return
		}
	}
	name := "agentbox-export-" + s.o.Now().UTC().Format("20060102-150405")
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.tar.gz"`)
	if err := s.writeExport(w, name, entries); err != nil {
		// The status is sent; a broken archive tells the client.
		return
	}
}

func (s *Server) writeExport(w io.Writer, name string, entries []store.Entry) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	now := s.o.Now()
	var sum bytes.Buffer
	cw := csv.NewWriter(&sum)
	_ = cw.Write(summaryHeader)
	var kept []store.Entry
	for _, e := range entries {
		rel := s.relPath(e.Path)
		if rel == "" || !s.inRoots(e.Path) {
			continue
		}
		kept = append(kept, e)
		started := ""
		if !e.Started.IsZero() {
			started = e.Started.UTC().Format(time.RFC3339)
		}
		row := []string{e.Kind, rel, e.ID, e.Status, e.Outcome, e.Reason, e.App, e.Agent, e.Task, started,
			strconv.FormatFloat(e.DurationMS, 'f', 0, 64), strconv.Itoa(e.Steps), "", ""}
		if e.Kind == store.KindEval {
			row[11], row[12], row[13] = "", strconv.Itoa(e.Passed), strconv.Itoa(e.Episodes)
		}
		for i := range row {
			row[i] = cell(row[i])
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	if err := tw.WriteHeader(&tar.Header{Name: name + "/" + SummaryCSV, Mode: 0o644, Size: int64(sum.Len()), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(sum.Bytes()); err != nil {
		return err
	}
	for _, e := range kept {
		prefix := name + "/" + s.relPath(e.Path)
		var err error
		if e.Kind == store.KindEval {
			err = addFiles(tw, e.Path, prefix, func(p string) bool { return p == eval.SummaryFile })
		} else {
			err = addFiles(tw, e.Path, prefix, nil)
		}
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// relPath is dir below its root, prefixed with the root's name
// (agentbox-runs/20261129-…); "" when it is below none.
func (s *Server) relPath(dir string) string {
	for _, root := range s.roots {
		if rel, err := filepath.Rel(root, dir); err == nil && (filepath.IsLocal(rel) || rel == ".") {
			return path.Join(filepath.Base(root), filepath.ToSlash(rel))
		}
	}
	return ""
}

// addFiles writes the regular files below dir (those keep selects; nil:
// all) into tw under prefix, through an os.Root: a symbolic link, a
// device or anything but a regular file or a directory is left out.
func addFiles(tw *tar.Writer, dir, prefix string, keep func(string) bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil // gone since it was indexed
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: left out
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() || (keep != nil && !keep(p)) {
			return nil
		}
		f, err := root.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if err := tw.WriteHeader(&tar.Header{Name: prefix + "/" + p, Mode: 0o644, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		// A file that grows while it is read (a running trace) is cut at
		// the size in its header.
		n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
		if err != nil {
			return err
		}
		if n < fi.Size() { // shrank: pad, the header said so
			_, err = io.CopyN(tw, zeros{}, fi.Size()-n)
		}
		return err
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
