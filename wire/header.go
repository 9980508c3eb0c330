package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The header's JSON without encoding/json's reflection: a step is a
// request and a response, and the two headers' encoding and decoding were
// most of the wire's allocations and a good part of its time on both
// sides. appendHeader writes what json.Marshal of the Header would mean
// (the same keys and values; the body as it is, after checking it is
// JSON); parseHeader reads the headers appendHeader writes and hands
// anything else to encoding/json, so the stream accepts exactly what it
// accepted before.

// appendHeader appends h's JSON to b: {"t":…,"id":…,"m":…,"err":…,"b":…},
// the body last (where parseHeader looks for it).
func appendHeader(b []byte, h *Header) ([]byte, error) {
	b = append(b, `{"t":`...)
	b = appendString(b, string(h.Type))
	if h.ID != 0 {
		b = append(b, `,"id":`...)
		b = strconv.AppendUint(b, uint64(h.ID), 10)
	}
	if h.Method != "" {
		b = append(b, `,"m":`...)
		b = appendString(b, h.Method)
	}
	if h.Error != nil {
		e, err := json.Marshal(h.Error)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"err":`...)
		b = append(b, e...)
	}
	if len(h.Body) > 0 {
		if !h.bodyJSON && !json.Valid(h.Body) {
			return nil, fmt.Errorf("the body is not JSON: %.40q", h.Body)
		}
		b = append(b, `,"b":`...)
		b = append(b, h.Body...)
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string: as it is where it needs no
// escape (method names and types always), else as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	if plain(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// plain reports whether s is printable ASCII without '"' and '\\': the
// same bytes inside a JSON string, for every decoder.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// parseHeader decodes a header into h. The headers appendHeader writes
// without an error ({"t":"…"[,"id":N][,"m":"…"][,"b":BODY]} with plain
// strings) are read directly, the body checked as JSON and copied; any
// other form (an error, escapes, another order, spaces) goes to
// encoding/json, so the result is json.Unmarshal's in every case.
func parseHeader(p []byte, h *Header) error {
	if parseFast(p, h) {
		return nil
	}
	*h = Header{}
	return json.Unmarshal(p, h)
}

func parseFast(p []byte, h *Header) bool {
	i := 0
	lit := func(s string) bool {
		if len(p)-i < len(s) || string(p[i:i+len(s)]) != s {
			return false
		}
		i += len(s)
		return true
	}
	str := func() (string, bool) {
		if i >= len(p) || p[i] != '"' {
			return "", false
		}
		j := i + 1
		for j < len(p) && p[j] != '"' {
			if c := p[j]; c < 0x20 || c > 0x7e || c == '\\' {
				return "", false
			}
			j++
		}
		if j >= len(p) {
			return "", false
		}
		s := string(p[i+1 : j])
		i = j + 1
		return s, true
	}
	if !lit(`{"t":`) {
		return false
	}
	t, ok := str()
	if !ok {
		return false
	}
	var out Header
	out.Type = Type(t)
	if lit(`,"id":`) {
		j := i
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j == i || (p[i] == '0' && j-i > 1) {
			return false // no digits, or a leading zero JSON refuses
		}
		id, err := strconv.ParseUint(string(p[i:j]), 10, 32)
		if err != nil || id == 0 {
			return false // out of range (encoding/json says so), or omitted by the writer
		}
		out.ID, i = uint32(id), j
	}
	if lit(`,"m":`) {
		if out.Method, ok = str(); !ok {
			return false
		}
	}
	if lit(`,"b":`) {
		if i >= len(p) {
			return false
		}
		body := p[i : len(p)-1]
		if p[len(p)-1] != '}' || len(body) == 0 || space(body[0]) || space(body[len(body)-1]) || !json.Valid(body) {
			return false
		}
		out.Body = append(json.RawMessage(nil), body...)
		i = len(p) - 1
	}
	if i != len(p)-1 || p[i] != '}' {
		return false
	}
	*h = out
	return true
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
