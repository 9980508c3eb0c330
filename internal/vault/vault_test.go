package vault

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, text string
		want       map[string]string
		err        string // substring of the error; "" none
	}{
		{name: "plain", text: "A=hunter22\n# comment\n\nB_2=x y=z \r\n", want: map[string]string{"A": "hunter22", "B_2": "x y=z "}},
		{name: "no final newline", text: "TOKEN=abcd", want: map[string]string{"TOKEN": "abcd"}},
		{name: "no equals", text: "A=abcd\nnonsense\n", err: "v:2: want NAME=VALUE"},
		{name: "bad name", text: "1A=abcd\n", err: `v:1: "1A" is no secret name`},
		{name: "space in name", text: "A B=abcd\n", err: `v:1: "A B" is no secret name`},
		{name: "twice", text: "A=abcd\nA=efgh\n", err: "v:2: secret A is given twice"},
		{name: "short", text: "A=abc\n", err: "v:1: secret A: the value is shorter than 4 bytes"},
		{name: "long", text: "A=" + strings.Repeat("x", MaxValue+1), err: "longer than 4096"},
		{name: "nul", text: "A=ab\x00cd\n", err: "NUL"},
		{name: "empty", text: "# nothing\n", err: "v: no secrets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Parse("v", []byte(tt.text))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "efgh") || strings.Contains(err.Error(), "abc\n") {
					t.Errorf("the error shows a value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for n, want := range tt.want {
				if got, _ := v.Value(n); got != want {
					t.Errorf("%s = %q, want %q", n, got, want)
				}
			}
			if v.Len() != len(tt.want) {
				t.Errorf("%d secrets, want %d", v.Len(), len(tt.want))
			}
		})
	}
}

func TestLoadMode(t *testing.T) {
	tests := []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o644, false}, {0o602, false}, {0o660, false}}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "vault")
			if err := os.WriteFile(p, []byte("PW=hunter22\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			v, err := Load(p)
			if tt.ok {
				if err != nil || !v.Has("PW") {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMode) {
				t.Fatalf("err = %v, want ErrMode", err)
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "mode 0"+octal(tt.mode)) {
				t.Errorf("err = %v: want the file and its mode named", err)
			}
		})
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: err = %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file loaded")
	}
}

func octal(m os.FileMode) string {
	const digits = "01234567"
	p := m.Perm()
	return string([]byte{digits[p>>6&7], digits[p>>3&7], digits[p&7]})
}

func redactor(t *testing.T, secrets map[string]string) *Redactor {
	t.Helper()
	v, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return v.Redactor()
}

func TestRedactorString(t *testing.T) {
	r := redactor(t, map[string]string{"PW": "hunter22", "LONG": "hunter22xyz", "TOK": "tok-1234", "AB": "abcd", "CD": "cdef"})
	tests := []struct{ in, want string }{
		{"", ""},
		{"nothing here", "nothing here"},
		{"pw: hunter22!", "pw: [secret:PW]!"},
		{"hunter22hunter22", "[secret:PW][secret:PW]"},
		{"hunter22xyz", "[secret:LONG]"},                          // the longer of two starting at one place
		{"a hunter22 b tok-1234", "a [secret:PW] b [secret:TOK]"}, // several
		{"abcdef", "[secret:AB]ef"},                               // overlapping: the leftmost
		{"hunter2", "hunter2"},                                    // a prefix alone is no secret
		{"héllo hunter22 ✓", "héllo [secret:PW] ✓"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var nilR *Redactor
	if nilR.String("hunter22") != "hunter22" {
		t.Error("a nil redactor changed text")
	}
}

// TestStreamSplit feeds every split of the text into two and three chunks:
// the value never comes out whole or in part across chunks, and what comes
// out (with the flush) is the redacted text.
func TestStreamSplit(t *testing.T) {
	r := redactor(t, map[string]string{"PW": "hunter22", "TOK": "tok-1234"})
	text := "log: hunter22 and tok-1234, again hunter22\nhunte"
	want := r.String(text)
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			s := r.Stream()
			var out []byte
			for _, c := range []string{text[:i], text[i:j], text[j:]} {
				got := s.Write([]byte(c))
				if strings.Contains(string(got), "hunter22") || strings.Contains(string(got), "tok-1234") {
					t.Fatalf("split %d,%d: a chunk passed on a value: %q", i, j, got)
				}
				out = append(out, got...)
			}
			if s.Held() > len("tok-1234")-1 {
				t.Fatalf("held %d bytes", s.Held())
			}
			out = append(out, s.Flush()...)
			if string(out) != want {
				t.Fatalf("split %d,%d: %q, want %q", i, j, out, want)
			}
		}
	}
}

// TestStreamByteByByte: a value typed back one byte a chunk (an echoing
// terminal) is still replaced, and nothing is held once it is.
func TestStreamByteByByte(t *testing.T) {
	r := redactor(t, map[string]string{"PW": "hunter22"})
	s := r.Stream()
	var out []byte
	for _, c := range []byte("$ hunter22\r\n$ ") {
		out = append(out, s.Write([]byte{c})...)
	}
	if string(out) != "$ [secret:PW]\r\n$ " || s.Held() != 0 {
		t.Fatalf("out %q, held %d", out, s.Held())
	}
}

func TestNilVault(t *testing.T) {
	var v *Vault
	if v.Has("X") || v.Len() != 0 || v.Redactor() != nil || v.Redactor().Stream() != nil {
		t.Fatal("a nil vault holds something")
	}
	var s *Stream
	if string(s.Write([]byte("x"))) != "x" {
		t.Fatal("a nil stream changed output")
	}
}

// BenchmarkStream: the cost of redacting output, 4 KiB chunks of terminal
// text, with a vault of 8 secrets.
func BenchmarkStream(b *testing.B) {
	secrets := map[string]string{}
	for i := range 8 {
		secrets["S"+string(rune('A'+i))] = "value-" + strings.Repeat(string(rune('a'+i)), 12)
	}
	v, err := New(secrets)
	if err != nil {
		b.Fatal(err)
	}
	chunk := []byte(strings.Repeat("$ ls -la /tmp/home; echo value-x done\r\n", 4096/40))
	s := v.Redactor().Stream()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		s.Write(chunk)
	}
}
