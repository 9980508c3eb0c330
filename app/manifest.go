// Package app turns a TARGET (an executable, a directory holding
// agentbox.json, or a manifest file) into a Bundle: the files to stream into
// the sandbox and how to start them. It checks every path before anything
// starts: no "..", no absolute paths, no links that leave the directory, no
// hard links, devices, FIFOs or sockets, and caps on size and file count.
package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/stagepath"
	"github.com/codegirl-games/agentbox/netpolicy"
)

// ManifestName is the manifest file looked for in an app directory.
const ManifestName = "agentbox.json"

// ErrInvalid is wrapped by every error about a target, manifest or file.
var ErrInvalid = errors.New("invalid app")

// Manifest says how to start an app. It is the JSON document agentbox.json.
type Manifest struct {
	// Command is a file in the app directory, or a program already in the
	// image (a bare name not present in the directory, looked up in PATH).
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env adds variables to the app's environment.
	Env map[string]string `json:"env,omitempty"`
	// WindowTitle waits until a window with this title is mapped: a glob
	// ("mover*") or a regular expression between slashes ("/^mover$/").
	WindowTitle string `json:"window_title,omitempty"`
	// WaitForWindow, when false, starts the run without waiting for any
	// window. Default: wait for WindowTitle, or for any window.
	WaitForWindow *bool `json:"wait_for_window,omitempty"`
	// ReadyOutput, when set, also waits (after the window) until the app
	// prints a line, on stdout or stderr, containing this text: for apps
	// whose window is mapped before its first frame is drawn.
	ReadyOutput string `json:"ready_output,omitempty"`
	// ReadyTimeout bounds the wait for the window and the ready output
	// ("10s"; default 30s).
	ReadyTimeout Duration `json:"ready_timeout,omitempty"`
	// Files limits staging to these paths (files or directories) relative
	// to the app directory; default: the whole directory.
	Files []string `json:"files,omitempty"`
	// A11y starts the sandbox's accessibility bus for the app (as --a11y
	// does): its tree can be read and scripts can name elements.
	A11y bool `json:"a11y,omitempty"`
	// OpenGL, when false, says the app draws without OpenGL: the X server
	// starts without its GLX extension, which saves loading Mesa's
	// software renderer at every start. Default true (GLX offered).
	OpenGL *bool `json:"opengl,omitempty"`
	// AllowNet lists the hosts the app needs, as --allow-net rules
	// ("api.example.com:443"); they add to the command line's.
	AllowNet []string `json:"allow_net,omitempty"`
	// Policy is a policy file (docs/policy.md), relative to the
	// manifest's directory, that gates the app's runs when the command
	// line (--policy) or a suite's task names none.
	Policy string `json:"policy,omitempty"`
	// Task holds the task's file parts the manifest names (inputs,
	// collect, collect_limits, before_collect; docs/tasks.md). Its Dir is
	// the manifest's directory once loaded.
	Task TaskFiles `json:"-"`
}

// Rules parses AllowNet (ParseManifest has checked it).
func (m *Manifest) Rules() ([]netpolicy.Rule, error) {
	var out []netpolicy.Rule
	for _, s := range m.AllowNet {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// NoGLX reports whether the app said it draws without OpenGL.
func (m *Manifest) NoGLX() bool { return m.OpenGL != nil && !*m.OpenGL }

// Waits reports whether launching waits for a window.
func (m *Manifest) Waits() bool { return m.WaitForWindow == nil || *m.WaitForWindow }

// MaxReadyOutput bounds the text of ready_output; longer lines are cut
// before they are matched.
const MaxReadyOutput = 1024

// DefaultReadyTimeout bounds the wait for the app's window.
const DefaultReadyTimeout = 30 * time.Second

// Duration is a time.Duration that reads "10s" or a number of milliseconds.
type Duration time.Duration

// UnmarshalJSON accepts "1m30s" or 1500 (milliseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("bad duration %q: use a form like \"10s\" or \"1m30s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration must be a string like \"10s\" or milliseconds, got %s", b)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

// MarshalJSON writes the string form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnv is the rule for a variable added to the app's environment,
// wherever it comes from (a manifest's env, --env, a suite's env): a name
// of letters, digits and '_' not starting with a digit, and no NUL byte in
// the value.
func CheckEnv(name, value string) error {
	if !envName.MatchString(name) {
		return fmt.Errorf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", name)
	}
	if strings.ContainsRune(value, 0) {
		return fmt.Errorf("the value of %s contains a NUL byte", name)
	}
	return nil
}

// ParseManifest decodes and checks a manifest. name is used in errors.
func ParseManifest(name string, data []byte) (*Manifest, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fail("%s", jsonError(data, err))
	}
	known := []string{"command", "args", "env", "window_title", "wait_for_window", "ready_output", "ready_timeout", "files", "a11y", "opengl", "allow_net", "policy"}
	known = append(known, TaskFields...)
	var unknown []string
	for k := range raw {
		if !containsString(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fail("unknown field %q (known: %s)", unknown[0], strings.Join(known, ", "))
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fail("%s", jsonError(data, err))
	}
	for _, f := range TaskFields {
		if v, ok := raw[f]; ok {
			if err := m.Task.Set(f, v); err != nil {
				return nil, fail("%v", err)
			}
		}
	}
	if err := m.Task.Check(); err != nil {
		return nil, fail("%v", err)
	}
	if strings.TrimSpace(m.Command) == "" {
		return nil, fail("field \"command\" is required: the program to start")
	}
	if err := stagepath.Check(m.Command); err != nil && strings.Contains(m.Command, "/") {
		return nil, fail("field \"command\": %v", err)
	}
	if strings.ContainsRune(m.Command, 0) {
		return nil, fail("field \"command\" contains a NUL byte")
	}
	for i, a := range m.Args {
		if strings.ContainsRune(a, 0) {
			return nil, fail("field \"args\"[%d] contains a NUL byte", i)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		if err := CheckEnv(k, m.Env[k]); err != nil {
			return nil, fail("field \"env\": %v", err)
		}
	}
	if _, err := action.TitleMatcher(m.WindowTitle); err != nil {
		return nil, fail("field \"window_title\": %v", err)
	}
	switch {
	case m.ReadyOutput == "":
	case strings.TrimSpace(m.ReadyOutput) == "":
		return nil, fail("field \"ready_output\" is blank: give the text of a line the app prints when it is ready")
	case strings.ContainsAny(m.ReadyOutput, "\x00\n"):
		return nil, fail("field \"ready_output\" contains a NUL byte or a newline: it matches within one line")
	case len(m.ReadyOutput) > MaxReadyOutput:
		return nil, fail("field \"ready_output\" is %d bytes, more than %d", len(m.ReadyOutput), MaxReadyOutput)
	}
	if m.Policy != "" && (strings.TrimSpace(m.Policy) == "" || strings.ContainsRune(m.Policy, 0)) {
		return nil, fail("field \"policy\": want the path of a policy file, relative to the manifest")
	}
	if m.ReadyTimeout < 0 {
		return nil, fail("field \"ready_timeout\" is negative")
	}
	for i, f := range m.Files {
		if err := stagepath.Check(f); err != nil {
			return nil, fail("field \"files\"[%d]: %v", i, err)
		}
	}
	for i, r := range m.AllowNet {
		if _, err := netpolicy.ParseRule(r); err != nil {
			return nil, fail("field \"allow_net\"[%d]: %v", i, err)
		}
	}
	return &m, nil
}

// jsonError turns a decoding error into "line L, column C: …".
func jsonError(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		if te.Field != "" {
			return fmt.Sprintf("%s: field %q must be %s, not %s", lineCol(data, off), te.Field, te.Type, te.Value)
		}
	}
	if off < 0 {
		return err.Error()
	}
	return fmt.Sprintf("%s: %v", lineCol(data, off), err)
}

// lineCol locates the byte before offset off (encoding/json reports the
// count of bytes read, including the offending one).
func lineCol(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off > 0 {
		off--
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
