// Package vault reads a file of named secrets (--vault) and replaces their
// values wherever text leaves the sandbox: a Redactor for whole strings, a
// Stream for output that arrives in chunks (a value split between two
// chunks is still replaced).
//
// The file is one secret a line, NAME=VALUE: NAME is a letter or an
// underscore followed by letters, digits and underscores; VALUE is
// everything after the first "=" up to the end of the line, as is (no
// quotes, no escapes, no trimming). Blank lines and lines whose first
// character is "#" are ignored. The file must not be readable or writable
// by group or others (mode 0600 or 0400).
package vault

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Bounds on a vault's contents.
const (
	// MinValue is the shortest value: a shorter one would be replaced
	// wherever its letters happen to appear.
	MinValue = 4
	// MaxValue is the longest value (it bounds the tail a Stream holds
	// back).
	MaxValue = 4096
	// MaxSecrets is the most secrets a vault holds.
	MaxSecrets = 256
	// maxFile bounds the file read.
	maxFile = 1 << 20
)

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidName reports whether name may name a secret.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Vault is a set of named secrets. The zero Vault (and a nil *Vault) holds
// none.
type Vault struct {
	// Path is the file it was read from (for messages).
	Path    string
	secrets map[string]string
}

// ErrMode is wrapped by the error Load returns for a file others may read
// or write.
var ErrMode = errors.New("readable or writable by group or others")

// Load reads the vault at path. It refuses a file whose mode lets group or
// others read or write it, before reading it; parse errors name the file
// and the line (and never the value).
func Load(path string) (*Vault, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("vault %s: not a regular file", path)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("vault %s: mode %04o is %w (chmod 600 %s)", path, m, ErrMode, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("vault %s: %w", path, err)
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("vault %s: larger than %d bytes", path, maxFile)
	}
	v, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Parse reads a vault's text; file names it in errors.
func Parse(file string, data []byte) (*Vault, error) {
	v := &Vault{Path: file, secrets: map[string]string{}}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, line := range lines {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%s:%d: want NAME=VALUE", file, n)
		case !ValidName(name):
			return nil, fmt.Errorf("%s:%d: %q is no secret name (a letter or _, then letters, digits and _; at most 64)", file, n, name)
		case v.secrets[name] != "":
			return nil, fmt.Errorf("%s:%d: secret %s is given twice", file, n, name)
		case len(value) < MinValue:
			return nil, fmt.Errorf("%s:%d: secret %s: the value is shorter than %d bytes", file, n, name, MinValue)
		case len(value) > MaxValue:
			return nil, fmt.Errorf("%s:%d: secret %s: the value is longer than %d bytes", file, n, name, MaxValue)
		case strings.ContainsRune(value, 0):
			return nil, fmt.Errorf("%s:%d: secret %s: the value holds a NUL byte", file, n, name)
		}
		v.secrets[name] = value
		if len(v.secrets) > MaxSecrets {
			return nil, fmt.Errorf("%s:%d: more than %d secrets", file, n, MaxSecrets)
		}
	}
	if len(v.secrets) == 0 {
		return nil, fmt.Errorf("%s: no secrets (want NAME=VALUE lines)", file)
	}
	return v, nil
}

// New makes a vault of the given secrets (tests, callers that hold them
// already); the names and values are checked as Parse checks them.
func New(secrets map[string]string) (*Vault, error) {
	var b strings.Builder
	for _, n := range sortedNames(secrets) {
		if strings.ContainsAny(secrets[n], "\r\n") {
			return nil, fmt.Errorf("vault: secret %s: the value holds a line break", n)
		}
		fmt.Fprintf(&b, "%s=%s\n", n, secrets[n])
	}
	return Parse("vault", []byte(b.String()))
}

// Has reports whether the vault holds a secret called name.
func (v *Vault) Has(name string) bool {
	if v == nil {
		return false
	}
	_, ok := v.secrets[name]
	return ok
}

// Value returns the secret called name.
func (v *Vault) Value(name string) (string, bool) {
	if v == nil {
		return "", false
	}
	s, ok := v.secrets[name]
	return s, ok
}

// Names lists the secrets' names, sorted.
func (v *Vault) Names() []string {
	if v == nil {
		return nil
	}
	return sortedNames(v.secrets)
}

// Len is the number of secrets.
func (v *Vault) Len() int {
	if v == nil {
		return 0
	}
	return len(v.secrets)
}

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Placeholder is what replaces the secret called name: [secret:NAME].
func Placeholder(name string) string { return "[secret:" + name + "]" }

// Redactor replaces every secret's value with its placeholder. A nil
// *Redactor replaces nothing. It is safe for concurrent use.
type Redactor struct {
	// secrets, longest value first, so that where two values start at the
	// same place the longer is replaced.
	secrets []secret
	first   [256]bool // the first bytes of values
	max     int
}

type secret struct {
	value []byte
	repl  []byte
}

// Redactor returns the redactor of v's secrets, nil when v holds none.
func (v *Vault) Redactor() *Redactor {
	if v.Len() == 0 {
		return nil
	}
	r := &Redactor{}
	for _, n := range v.Names() {
		val := v.secrets[n]
		r.secrets = append(r.secrets, secret{[]byte(val), []byte(Placeholder(n))})
		r.first[val[0]] = true
		r.max = max(r.max, len(val))
	}
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i].value) > len(r.secrets[j].value) })
	return r
}

// String returns s with every value replaced.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	out, _ := r.scan([]byte(s), true)
	return string(out)
}

// Bytes returns b with every value replaced (b itself when nothing was).
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	out, _ := r.scan(b, true)
	return out
}

// Contains reports whether s holds a value.
func (r *Redactor) Contains(s string) bool {
	if r == nil {
		return false
	}
	for _, sec := range r.secrets {
		if strings.Contains(s, string(sec.value)) {
			return true
		}
	}
	return false
}

// scan replaces the values in b, leftmost first (longest where two start
// at one place). Unless final, it stops at the first place from which the
// rest of b is the beginning of a value and returns that rest as held: the
// next chunk may complete it.
func (r *Redactor) scan(b []byte, final bool) (out, held []byte) {
	var w bytes.Buffer
	last := 0
	for i := 0; i < len(b); i++ {
		if !r.first[b[i]] {
			continue
		}
		rest := b[i:]
		matched := false
		for _, sec := range r.secrets {
			if bytes.HasPrefix(rest, sec.value) {
				w.Write(b[last:i])
				w.Write(sec.repl)
				i += len(sec.value) - 1
				last = i + 1
				matched = true
				break
			}
		}
		if matched || final {
			continue
		}
		for _, sec := range r.secrets {
			if len(rest) < len(sec.value) && bytes.HasPrefix(sec.value, rest) {
				w.Write(b[last:i])
				return w.Bytes(), append([]byte(nil), rest...)
			}
		}
	}
	if last == 0 {
		return b, nil
	}
	w.Write(b[last:])
	return w.Bytes(), nil
}

// Stream redacts one stream of output that arrives in chunks: it holds
// back a chunk's end while it could be the beginning of a value (at most
// the longest value's length less one byte) until the next chunk says. A
// nil *Stream passes everything through. Not safe for concurrent use.
type Stream struct {
	r    *Redactor
	tail []byte
}

// Stream returns a new stream redactor (nil when r is nil).
func (r *Redactor) Stream() *Stream {
	if r == nil {
		return nil
	}
	return &Stream{r: r}
}

// Write returns what of the stream so far can be passed on, redacted.
func (s *Stream) Write(b []byte) []byte {
	if s == nil {
		return b
	}
	buf := b
	if len(s.tail) > 0 {
		buf = append(s.tail, b...)
	}
	out, held := s.r.scan(buf, false)
	s.tail = held
	return out
}

// Flush returns what was held back (the stream has ended).
func (s *Stream) Flush() []byte {
	if s == nil || len(s.tail) == 0 {
		return nil
	}
	t := s.tail
	s.tail = nil
	return t
}

// Held is the number of bytes held back.
func (s *Stream) Held() int {
	if s == nil {
		return 0
	}
	return len(s.tail)
}
