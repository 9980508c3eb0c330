package wire

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// stepCases are answers of every shape a step gives, and the values at
// the edges of what appendStep writes itself.
func stepCases() []StepResponse {
	pt := func(x, y int) *action.Point { return &action.Point{X: x, Y: y} }
	yes := true
	win := observe.Window{ID: 4194311, Title: "Mover", X: 0, Y: 0, Width: 640, Height: 480, Focused: true}
	return []StepResponse{
		{},
		{Result: action.Result{OK: true}},
		{Result: action.Result{OK: true, Cursor: pt(10, 20), ElapsedUS: 45, ConfirmUS: 40},
			Shot: &ScreenshotResponse{Width: 640, Height: 480, Hash: math.MaxUint64, Unchanged: true,
				State: &State{Cursor: action.Point{X: 10, Y: 20}, Windows: []observe.Window{win}, Running: true}}, ObserveUS: 50},
		{Result: action.Result{OK: true}, Shot: &ScreenshotResponse{Width: 1920, Height: 1080, Hash: 1, Encoding: EncodingBGRXS2,
			State: &State{Windows: []observe.Window{}}}},
		{Result: action.Result{OK: true}, Shot: &ScreenshotResponse{State: &State{Windows: []observe.Window{win, {Title: `a "quoted" \ title <b>&amp; é ✓ ` + "\x01\t\u2028"}, {ID: math.MaxUint32, X: -5, Y: math.MinInt64, Width: math.MaxInt64}}}}},
		{Result: action.Result{OK: false, Error: "x11: mouse move: <unconfirmed> & \"late\"\n", Cursor: pt(-1, -2), ElapsedUS: -3, ConfirmUS: math.MaxInt64}},
		{Result: action.Result{OK: true}, Failed: "capture: the display is gone", ObserveUS: math.MinInt64},
		{Result: action.Result{OK: true, Error: "plain error"}, Shot: &ScreenshotResponse{Encoding: "weird\xffenc"}},
		// What appendStep leaves to json.Marshal.
		{Result: action.Result{OK: true, Met: &yes}},
		{Result: action.Result{OK: true, Target: &action.Resolved{Role: "button", Name: "OK"}}},
		{Result: action.Result{OK: true}, Settled: &action.Result{OK: true}},
		{Result: action.Result{OK: true}, Shot: &ScreenshotResponse{State: &State{Exit: &observe.Exit{Code: 1}}}},
	}
}

// TestStepJSON: appendStep writes json.Marshal's bytes, and UnmarshalStep
// reads them (and json.Marshal's of what appendStep leaves) as
// json.Unmarshal does; marshal uses appendStep for a step's answer.
func TestStepJSON(t *testing.T) {
	cases := stepCases()
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		cases = append(cases, randomStep(r))
	}
	for i, c := range cases {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := appendStep(nil, &c); ok && string(got) != string(want) {
			t.Fatalf("case %d: appendStep\n got %s\nwant %s", i, got, want)
		}
		if got, err := marshal(c); err != nil || string(got) != string(want) {
			t.Fatalf("case %d: marshal\n got %s (%v)\nwant %s", i, got, err, want)
		}
		sameAsUnmarshal(t, want)
	}
}

func randomStep(r *rand.Rand) StepResponse {
	n := func() int {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.IntN(4000) - 100
		case 2:
			return int(r.Int64()) // any
		}
		return -int(r.Int64())
	}
	str := func() string {
		const chars = "aZ09 _-:/.<>&\"\\\x00\x1f\x7fé✓"
		b := []rune{}
		for range r.IntN(12) {
			b = append(b, []rune(chars)[r.IntN(len([]rune(chars)))])
		}
		return string(b)
	}
	var s StepResponse
	s.Result = action.Result{OK: r.IntN(2) == 0, ElapsedUS: int64(n()), ConfirmUS: int64(n())}
	if r.IntN(3) == 0 {
		s.Result.Error = str()
	}
	if r.IntN(2) == 0 {
		s.Result.Cursor = &action.Point{X: n(), Y: n()}
	}
	if r.IntN(3) > 0 {
		sh := &ScreenshotResponse{Width: n(), Height: n(), Hash: r.Uint64(), Unchanged: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			sh.Encoding = str()
		}
		if r.IntN(4) > 0 {
			st := &State{Cursor: action.Point{X: n(), Y: n()}, Running: r.IntN(2) == 0}
			if k := r.IntN(4); k > 0 {
				st.Windows = []observe.Window{}
				for range k - 1 {
					st.Windows = append(st.Windows, observe.Window{ID: r.Uint32(), Title: str(), X: n(), Y: n(), Width: n(), Height: n(), Focused: r.IntN(2) == 0})
				}
			}
			sh.State = st
		}
		s.Shot = sh
	}
	if r.IntN(4) == 0 {
		s.Failed = str()
	}
	s.ObserveUS = int64(n())
	return s
}

// sameAsUnmarshal checks UnmarshalStep against json.Unmarshal on data.
func sameAsUnmarshal(t *testing.T, data []byte) {
	t.Helper()
	var got, want StepResponse
	gerr := UnmarshalStep(data, &got)
	werr := json.Unmarshal(data, &want)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: UnmarshalStep: %v, json.Unmarshal: %v", data, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: UnmarshalStep\n got %+v\nwant %+v", data, got, want)
	}
}

// FuzzUnmarshalStep holds UnmarshalStep to json.Unmarshal on any bytes.
func FuzzUnmarshalStep(f *testing.F) {
	for _, c := range stepCases() {
		b, _ := json.Marshal(c)
		f.Add(b)
	}
	for _, s := range []string{
		`{"result":{"ok":true},"shot":{"w":1,"h":2,"hash":-3}}`,
		`{"result":{"ok":true},"shot":{"w":1e3,"h":2,"hash":3}}`,
		`{"result":{"ok":true,"cursor":{"x":01,"y":2}}}`,
		`{"result":{"ok":true,"cursor":{"x":1,"y":2}}} `,
		`{"result":{"ok":true},"shot":{"w":99999999999999999999,"h":2,"hash":3}}`,
		`{"result":{"ok":true},"shot":{"w":1,"h":2,"hash":3,"state":{"cursor":{"x":1,"y":2},"windows":[{"id":-1,"title":"","x":0,"y":0,"width":0,"height":0}],"running":true}}}`,
		`{"result":{"ok":true},"shot":{"w":1,"h":2,"hash":3,"state":{"cursor":{"x":1,"y":2},"windows":[,],"running":true}}}`,
		`{"result":{"ok":true},"observe_us":-0}`,
		`{"result":{"ok":true,"error":"\u0041"}}`,
		`{"result":{"ok":true},"shot":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsUnmarshal(t, data)
	})
}

// BenchmarkStepJSON is a step's answer (an unchanged screen, one window)
// encoded and decoded, by encoding/json and by appendStep and
// UnmarshalStep.
func BenchmarkStepJSON(b *testing.B) {
	r := stepCases()[2]
	data, _ := json.Marshal(r)
	b.Run("marshal/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
	b.Run("marshal/append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = marshal(r)
		}
	})
	b.Run("unmarshal/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v StepResponse
			_ = json.Unmarshal(data, &v)
		}
	})
	b.Run("unmarshal/step", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v StepResponse
			_ = UnmarshalStep(data, &v)
		}
	})
}

// TestStepJSONKnowsEveryField: appendStep and UnmarshalStep name the
// fields of a step's answer one by one. A field added to one of these
// types without them would be dropped from json.Marshal's bytes only
// where its value is set (the random cases would not have it), so the
// list of fields they know is checked here: add the new field to
// stepjson.go (or to what it leaves to json.Marshal) and then here.
func TestStepJSONKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{StepResponse{}, []string{"Result", "Settled", "Shot", "Failed", "ObserveUS"}},
		{action.Result{}, []string{"OK", "Error", "Cursor", "Met", "ElapsedUS", "ConfirmUS", "Target"}},
		{ScreenshotResponse{}, []string{"Width", "Height", "Hash", "Unchanged", "Encoding", "State"}},
		{State{}, []string{"Cursor", "Windows", "Running", "Exit"}},
		{observe.Window{}, []string{"ID", "Title", "X", "Y", "Width", "Height", "Focused"}},
		{action.Point{}, []string{"X", "Y"}},
	} {
		typ := reflect.TypeOf(c.v)
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s has fields %v; stepjson.go writes and reads %v: teach it the new ones", typ, got, c.want)
		}
	}
}
