package wire

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// A step's answer without encoding/json's reflection: the guest answers
// one per step, and its encoding (the guest) and decoding (the host) were
// most of the JSON a step made. appendStep writes exactly json.Marshal's
// bytes for the answers a step usually gives (the action's result, the
// screenshot with its state), and leaves the rest to json.Marshal;
// UnmarshalStep reads what appendStep writes and hands anything else to
// json.Unmarshal, so the result is json.Unmarshal's in every case
// (TestStepJSON, FuzzUnmarshalStep). Nothing on the stream changes.

// appendStep appends json.Marshal(r) to b; false when r holds what it
// does not write (a settle's result, a wait's met, a target, the app's
// exit), which json.Marshal then writes.
func appendStep(b []byte, r *StepResponse) ([]byte, bool) {
	res := &r.Result
	if r.Settled != nil || res.Met != nil || res.Target != nil || (r.Shot != nil && r.Shot.State != nil && r.Shot.State.Exit != nil) {
		return b, false
	}
	b = append(b, `{"result":{"ok":`...)
	b = strconv.AppendBool(b, res.OK)
	if res.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, res.Error)
	}
	if res.Cursor != nil {
		b = append(b, `,"cursor":`...)
		b = appendPoint(b, *res.Cursor)
	}
	if res.ElapsedUS != 0 {
		b = append(b, `,"elapsed_us":`...)
		b = strconv.AppendInt(b, res.ElapsedUS, 10)
	}
	if res.ConfirmUS != 0 {
		b = append(b, `,"confirm_us":`...)
		b = strconv.AppendInt(b, res.ConfirmUS, 10)
	}
	b = append(b, '}')
	if s := r.Shot; s != nil {
		b = append(b, `,"shot":{"w":`...)
		b = strconv.AppendInt(b, int64(s.Width), 10)
		b = append(b, `,"h":`...)
		b = strconv.AppendInt(b, int64(s.Height), 10)
		b = append(b, `,"hash":`...)
		b = strconv.AppendUint(b, s.Hash, 10)
		if s.Unchanged {
			b = append(b, `,"unchanged":true`...)
		}
		if s.Encoding != "" {
			b = append(b, `,"enc":`...)
			b = appendJSONString(b, s.Encoding)
		}
		if st := s.State; st != nil {
			b = append(b, `,"state":{"cursor":`...)
			b = appendPoint(b, st.Cursor)
			b = append(b, `,"windows":`...)
			if st.Windows == nil {
				b = append(b, "null"...)
			} else {
				b = append(b, '[')
				for i, w := range st.Windows {
					if i > 0 {
						b = append(b, ',')
					}
					b = appendWindow(b, &w)
				}
				b = append(b, ']')
			}
			b = append(b, `,"running":`...)
			b = strconv.AppendBool(b, st.Running)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if r.Failed != "" {
		b = append(b, `,"failed":`...)
		b = appendJSONString(b, r.Failed)
	}
	if r.ObserveUS != 0 {
		b = append(b, `,"observe_us":`...)
		b = strconv.AppendInt(b, r.ObserveUS, 10)
	}
	return append(b, '}'), true
}

func appendPoint(b []byte, p action.Point) []byte {
	b = append(b, `{"x":`...)
	b = strconv.AppendInt(b, int64(p.X), 10)
	b = append(b, `,"y":`...)
	b = strconv.AppendInt(b, int64(p.Y), 10)
	return append(b, '}')
}

func appendWindow(b []byte, w *observe.Window) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, uint64(w.ID), 10)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, w.Title)
	b = append(b, `,"x":`...)
	b = strconv.AppendInt(b, int64(w.X), 10)
	b = append(b, `,"y":`...)
	b = strconv.AppendInt(b, int64(w.Y), 10)
	b = append(b, `,"width":`...)
	b = strconv.AppendInt(b, int64(w.Width), 10)
	b = append(b, `,"height":`...)
	b = strconv.AppendInt(b, int64(w.Height), 10)
	if w.Focused {
		b = append(b, `,"focused":true`...)
	}
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal writes it: as it is where
// json.Marshal escapes nothing, else json.Marshal's own bytes.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !plainByte(c) {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainByte is a byte json.Marshal writes as it is inside a string and
// json.Unmarshal reads as it is: printable ASCII but '"', '\\' and the
// three it escapes for HTML.
func plainByte(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// UnmarshalStep decodes a step's answer into r as json.Unmarshal does:
// directly where it is in the form appendStep writes, else by
// json.Unmarshal.
func UnmarshalStep(data []byte, r *StepResponse) error {
	p := stepParser{b: data}
	var out StepResponse
	if p.step(&out) && p.i == len(p.b) {
		*r = out
		return nil
	}
	return json.Unmarshal(data, r)
}

// stepParser reads the form appendStep writes; any other form fails it
// (ok false), and the caller hands the bytes to encoding/json.
type stepParser struct {
	b []byte
	i int
}

func (p *stepParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// num reads a JSON integer's text (an optional minus where neg, then 0
// or digits without a leading zero; a fraction or an exponent fails the
// caller's next literal) as its sign and magnitude, at most max (the
// magnitude a field's type holds: json.Unmarshal refuses a larger one,
// and so does this, for the caller to fall back to it).
func (p *stepParser) num(neg bool, max uint64) (minus bool, v uint64, ok bool) {
	j := p.i
	if neg && j < len(p.b) && p.b[j] == '-' {
		minus = true
		j++
	}
	k := j
	for ; k < len(p.b) && p.b[k] >= '0' && p.b[k] <= '9'; k++ {
		d := uint64(p.b[k] - '0')
		if v > (max-d)/10 {
			return false, 0, false
		}
		v = v*10 + d
	}
	if k == j || (p.b[j] == '0' && k-j > 1) {
		return false, 0, false
	}
	p.i = k
	return minus, v, true
}

// int reads an integer of bits bits.
func (p *stepParser) int(bits int) (int64, bool) {
	lim := uint64(1) << (bits - 1) // -lim is the least
	minus, v, ok := p.num(true, lim)
	switch {
	case !ok:
		return 0, false
	case minus:
		return -int64(v-1) - 1, true // -lim does not overflow
	case v == lim:
		return 0, false
	}
	return int64(v), true
}

// uint reads an unsigned integer of bits bits.
func (p *stepParser) uint(bits int) (uint64, bool) {
	_, v, ok := p.num(false, math.MaxUint64>>(64-bits))
	return v, ok
}

func (p *stepParser) bool() (bool, bool) {
	switch {
	case p.lit("true"):
		return true, true
	case p.lit("false"):
		return false, true
	}
	return false, false
}

// str reads a string of plain bytes only (no escapes, nothing outside
// printable ASCII).
func (p *stepParser) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	j := p.i + 1
	for j < len(p.b) && p.b[j] != '"' {
		if c := p.b[j]; c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
		j++
	}
	if j >= len(p.b) {
		return "", false
	}
	s := string(p.b[p.i+1 : j])
	p.i = j + 1
	return s, true
}

// intBits is the size of int, which json.Unmarshal bounds int fields by.
const intBits = strconv.IntSize

func (p *stepParser) point(pt *action.Point) bool {
	if !p.lit(`{"x":`) {
		return false
	}
	x, ok := p.int(intBits)
	if !ok || !p.lit(`,"y":`) {
		return false
	}
	y, ok := p.int(intBits)
	if !ok || !p.lit(`}`) {
		return false
	}
	pt.X, pt.Y = int(x), int(y)
	return true
}

func (p *stepParser) step(r *StepResponse) bool {
	if !p.lit(`{"result":{"ok":`) {
		return false
	}
	res := &r.Result
	var ok bool
	if res.OK, ok = p.bool(); !ok {
		return false
	}
	if p.lit(`,"error":`) {
		if res.Error, ok = p.str(); !ok {
			return false
		}
	}
	if p.lit(`,"cursor":`) {
		res.Cursor = new(action.Point)
		if !p.point(res.Cursor) {
			return false
		}
	}
	if p.lit(`,"elapsed_us":`) {
		if res.ElapsedUS, ok = p.int(64); !ok {
			return false
		}
	}
	if p.lit(`,"confirm_us":`) {
		if res.ConfirmUS, ok = p.int(64); !ok {
			return false
		}
	}
	if !p.lit(`}`) {
		return false
	}
	if p.lit(`,"shot":`) {
		r.Shot = new(ScreenshotResponse)
		if !p.shot(r.Shot) {
			return false
		}
	}
	if p.lit(`,"failed":`) {
		if r.Failed, ok = p.str(); !ok {
			return false
		}
	}
	if p.lit(`,"observe_us":`) {
		if r.ObserveUS, ok = p.int(64); !ok {
			return false
		}
	}
	return p.lit(`}`)
}

func (p *stepParser) shot(s *ScreenshotResponse) bool {
	if !p.lit(`{"w":`) {
		return false
	}
	w, ok := p.int(intBits)
	if !ok || !p.lit(`,"h":`) {
		return false
	}
	h, ok := p.int(intBits)
	if !ok || !p.lit(`,"hash":`) {
		return false
	}
	if s.Hash, ok = p.uint(64); !ok {
		return false
	}
	s.Width, s.Height = int(w), int(h)
	if p.lit(`,"unchanged":`) {
		if s.Unchanged, ok = p.bool(); !ok {
			return false
		}
	}
	if p.lit(`,"enc":`) {
		if s.Encoding, ok = p.str(); !ok {
			return false
		}
	}
	if p.lit(`,"state":`) {
		s.State = new(State)
		if !p.state(s.State) {
			return false
		}
	}
	return p.lit(`}`)
}

func (p *stepParser) state(st *State) bool {
	if !p.lit(`{"cursor":`) || !p.point(&st.Cursor) || !p.lit(`,"windows":`) {
		return false
	}
	if !p.lit("null") {
		if !p.lit("[") {
			return false
		}
		st.Windows = []observe.Window{}
		for !p.lit("]") {
			if len(st.Windows) > 0 && !p.lit(",") {
				return false
			}
			var w observe.Window
			if !p.window(&w) {
				return false
			}
			st.Windows = append(st.Windows, w)
		}
	}
	var ok bool
	if !p.lit(`,"running":`) {
		return false
	}
	if st.Running, ok = p.bool(); !ok {
		return false
	}
	return p.lit(`}`)
}

func (p *stepParser) window(w *observe.Window) bool {
	if !p.lit(`{"id":`) {
		return false
	}
	id, ok := p.uint(32)
	if !ok || !p.lit(`,"title":`) {
		return false
	}
	w.ID = uint32(id)
	if w.Title, ok = p.str(); !ok {
		return false
	}
	if !p.lit(`,"x":`) || !p.intField(&w.X) || !p.lit(`,"y":`) || !p.intField(&w.Y) ||
		!p.lit(`,"width":`) || !p.intField(&w.Width) || !p.lit(`,"height":`) || !p.intField(&w.Height) {
		return false
	}
	if p.lit(`,"focused":`) {
		if w.Focused, ok = p.bool(); !ok {
			return false
		}
	}
	return p.lit(`}`)
}

// intField reads an int into v.
func (p *stepParser) intField(v *int) bool {
	x, ok := p.int(intBits)
	*v = int(x)
	return ok
}
