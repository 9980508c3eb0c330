package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// headerCases are headers as the wire writes them and in other forms a
// peer could send.
var headerCases = []string{
	`{"t":"req","id":1,"m":"step","b":{"action":{"action":"mouse_move","x":10,"y":20},"screenshot":{"if_not":123,"with_state":true}}}`,
	`{"t":"res","id":4294967295,"m":"step","b":{"result":{"ok":true}}}`,
	`{"t":"evt","m":"hello","b":{"magic":"agentbox-guest","protocol":8}}`,
	`{"t":"res","id":7,"m":"ping"}`,
	`{"t":"res","id":7,"m":"act","err":{"code":"invalid","msg":"bad"}}`,
	`{"t":"res","id":7,"m":"act","err":{"code":"invalid","msg":"bad"},"b":{}}`,
	`{"t":"req"}`,
	`{"t":"req","b":null}`,
	`{"t":"req","b":"a string"}`,
	`{"t":"req","b":[1,2,{"x":"}"}]}`,
	`{"t":"req","id":0,"m":"x"}`,
	`{"t":"req","id":01,"m":"x"}`,
	`{"t":"req","id":4294967296,"m":"x"}`,
	`{"t":"req","id":-1,"m":"x"}`,
	`{"t":"req","id":1.5,"m":"x"}`,
	`{"t":"req","m":"a\"b"}`,
	`{"t":"req","m":"a\u0041b"}`,
	`{"t":"req","m":"é"}`,
	`{"t":"req","m":"x","b":{"a":1},"x":2}`,
	`{"t":"req","m":"x","b":{"a":1}}}`,
	`{"t":"req","m":"x","b":{"a":1}`,
	`{"t":"req","m":"x","b": {"a":1}}`,
	`{"t":"req","m":"x","b":{"a":1} }`,
	`{"t":"req","m":"x","b":}`,
	`{"t":"req","m":"x","b":{"a":}}`,
	`{"m":"x","t":"req"}`,
	`{"T":"req","M":"x"}`,
	`{"t":"req","t":"res"}`,
	`{"t":"req","m":"x"} `,
	` {"t":"req","m":"x"}`,
	`{"t":"req","m":"x"`,
	`{"t":"re`,
	`{"t":1}`,
	`{"t":"req","id":"1"}`,
	`{}`,
	`null`,
	``,
}

// TestParseHeader holds parseHeader to json.Unmarshal on every case.
func TestParseHeader(t *testing.T) {
	for _, c := range headerCases {
		checkParse(t, []byte(c))
	}
}

func checkParse(t *testing.T, p []byte) {
	t.Helper()
	var want Header
	werr := json.Unmarshal(p, &want)
	got := Header{Type: "junk", ID: 99, Method: "junk", Body: json.RawMessage("1")}
	gerr := parseHeader(p, &got)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%q: parseHeader error %v, json.Unmarshal's %v", p, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q: parseHeader = %+v, json.Unmarshal = %+v", p, got, want)
	}
}

// TestAppendHeader: what appendHeader writes decodes, with encoding/json
// and parseHeader alike, to the header written; a body that is not JSON
// is refused as json.Marshal refused it.
func TestAppendHeader(t *testing.T) {
	for _, h := range []Header{
		{Type: Request, ID: 1, Method: MethodStep, Body: json.RawMessage(`{"a":[1,2]}`)},
		{Type: Response, ID: 4294967295, Method: "m"},
		{Type: Event, Method: EventHello},
		{Type: Response, ID: 3, Method: "act", Error: &RemoteError{Code: CodeInvalid, Message: "bad \"quote\" <tag> é \x01"}},
		{Type: "odd \"type\"", Method: "é\n"},
		{Type: Request, Body: json.RawMessage(`null`)},
	} {
		b, err := appendHeader(nil, &h)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		var dec Header
		if err := json.Unmarshal(b, &dec); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(dec, h) {
			t.Errorf("%s decodes to %+v, want %+v", b, dec, h)
		}
		checkParse(t, b)
	}
	if _, err := appendHeader(nil, &Header{Type: Request, Body: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("a body that is not JSON was written")
	}
}

// FuzzParseHeader holds parseHeader to json.Unmarshal on any bytes.
func FuzzParseHeader(f *testing.F) {
	for _, c := range headerCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, p []byte) { checkParse(t, p) })
}
