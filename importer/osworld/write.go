package osworld

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
)

// ReadDir reads the task files under dir (every *.json, at any depth, in
// name order), or dir itself when it is one file. Names are relative to
// dir.
func ReadDir(dir string) ([]Source, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !fi.IsDir() {
		data, err := os.ReadFile(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return []Source{{File: filepath.Base(dir), Data: data}}, nil
	}
	var srcs []Source
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != dir {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		srcs = append(srcs, Source{File: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%w: %s holds no .json file", ErrInvalid, dir)
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].File < srcs[j].File })
	return srcs, nil
}

// SideDir is the directory beside suite that holds its tasks' apps,
// inputs and expected files: the suite's name without extension + ".d".
func SideDir(suite string) string { return stem(suite) + ".d" }

// ReportFile is the import report beside suite.
func ReportFile(suite string) string { return stem(suite) + ".import.yaml" }

func stem(p string) string { return strings.TrimSuffix(p, filepath.Ext(p)) }

// SuiteYAML is the suite as YAML, with a comment on how to run it and,
// above each task, the file it came from.
func (r *Result) SuiteYAML(suiteFile string) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(r.Suite); err != nil {
		return nil, err
	}
	doc.HeadComment = "Imported from OSWorld-format task files (agentbox import osworld).\n" +
		"No task names an agent: run the suite with one, e.g.\n" +
		"  agentbox eval " + filepath.Base(suiteFile) + " --agent NAME [--agent-opt K=V]\n" +
		"Each task's app, inputs and expected files are under " + filepath.Base(SideDir(suiteFile)) + "/TASK/;\n" +
		"the expected files and the grade stay on the host."
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "tasks" {
			continue
		}
		for j, t := range doc.Content[i+1].Content {
			t.HeadComment = "from " + r.Suite.Tasks[j].Source
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// report is the import report's content.
type report struct {
	Source       string        `yaml:"source"`
	Suite        string        `yaml:"suite,omitempty"`
	Files        int           `yaml:"files"`
	Converted    int           `yaml:"converted"`
	NotConverted int           `yaml:"not_converted"`
	Reasons      []reasonCount `yaml:"reasons,omitempty"`
	Tasks        []reportTask  `yaml:"converted_tasks,omitempty"`
	Skipped      []Skipped     `yaml:"not_converted_tasks,omitempty"`
}

type reasonCount struct {
	Reason string `yaml:"reason"`
	Tasks  int    `yaml:"tasks"`
}

type reportTask struct {
	File string `yaml:"file"`
	Name string `yaml:"name"`
}

// ReportYAML is the import report: counts per reason, and every task,
// converted or not (with its reason and detail). suite is empty when no
// suite was written.
func (r *Result) ReportYAML(source, suite string) ([]byte, error) {
	rep := report{Source: source, Suite: suite, Files: r.Files, Converted: len(r.Suite.Tasks), NotConverted: len(r.Skipped), Skipped: r.Skipped}
	counts := r.Counts()
	for _, k := range r.Reasons() {
		rep.Reasons = append(rep.Reasons, reasonCount{k, counts[k]})
	}
	for _, t := range r.Suite.Tasks {
		rep.Tasks = append(rep.Tasks, reportTask{File: t.Source, Name: t.Name})
	}
	var b bytes.Buffer
	b.WriteString("# agentbox import osworld: the tasks converted and those not, with why\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(rep); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// Summary is the report for a person: counts, and each task not
// converted with its reason.
func (r *Result) Summary(w io.Writer) {
	fmt.Fprintf(w, "converted %d of %d tasks", len(r.Suite.Tasks), len(r.Suite.Tasks)+len(r.Skipped))
	if len(r.Skipped) == 0 {
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "; not converted: %d\n", len(r.Skipped))
	counts := r.Counts()
	for _, k := range r.Reasons() {
		fmt.Fprintf(w, "  %-28s %d\n", k+":", counts[k])
	}
	for _, s := range r.Skipped {
		id := ""
		if s.ID != "" {
			id = " (" + s.ID + ")"
		}
		fmt.Fprintf(w, "  %s%s: %s: %s\n", s.File, id, s.Reason, s.Detail)
	}
}

// WriteOptions say where Write writes.
type WriteOptions struct {
	Suite  string // the suite file; its side directory and report go beside it
	Source string // the task directory, named in the report
	Cache  fs.FS
	// Force replaces a suite, report and side directory written before;
	// without it, any of them existing is an error and nothing is written.
	Force bool
}

// ErrExists is wrapped when Write would replace a file without Force.
var ErrExists = errors.New("already exists")

// Write writes the report, and, when a task was converted, the side
// directory (each task's agentbox.json, inputs and expected files) and
// the suite.
func (r *Result) Write(o WriteOptions) error {
	side, reportFile := SideDir(o.Suite), ReportFile(o.Suite)
	if !o.Force {
		for _, p := range []string{o.Suite, side, reportFile} {
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s %w (give --force to replace it)", p, ErrExists)
			}
		}
	}
	dir := filepath.Dir(o.Suite)
	if len(r.Suite.Tasks) > 0 {
		if o.Force {
			if err := os.RemoveAll(side); err != nil {
				return err
			}
		}
		done := false
		defer func() {
			if !done {
				os.RemoveAll(side) // nothing half-written is left
			}
		}()
		for _, name := range sortedKeys(r.Apps) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r.Apps[name]); err != nil {
				return err
			}
			if err := writeNew(filepath.Join(dir, filepath.FromSlash(name)), b.Bytes()); err != nil {
				return err
			}
		}
		copied := map[string]bool{}
		for _, c := range r.Copies {
			if copied[c.To] {
				continue
			}
			copied[c.To] = true
			if err := copyFile(o.Cache, c.From, filepath.Join(dir, filepath.FromSlash(c.To))); err != nil {
				return err
			}
		}
		data, err := r.SuiteYAML(o.Suite)
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(o.Suite, data, 0o644); err != nil {
			return err
		}
		done = true
	}
	suite := filepath.Base(o.Suite)
	if len(r.Suite.Tasks) == 0 {
		suite = ""
	}
	data, err := r.ReportYAML(o.Source, suite)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(reportFile, data, 0o644)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeNew(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func copyFile(cache fs.FS, from, to string) error {
	in, err := cache.Open(from)
	if err != nil {
		return fmt.Errorf("the cache: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
