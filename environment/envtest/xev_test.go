package envtest

import "testing"

const sample = `KeyPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825452, (99,80), root:(100,100),
    state 0x1, keycode 38 (keysym 0x41, A), same_screen YES,
    XLookupString gives 1 bytes: (41) "A"
    XmbLookupString gives 1 bytes: (41) "A"
    XFilterEvent returns: False

KeyPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825455, (99,80), root:(100,100),
    state 0x0, keycode 93 (keysym 0x10020ac, U20AC), same_screen YES,
    XLookupString gives 3 bytes: (e2 82 ac) "€"

KeyPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825457, (99,80), root:(100,100),
    state 0x0, keycode 37 (keysym 0xffe3, Control_L), same_screen YES,
    XLookupString gives 0 bytes: 

ButtonPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825458, (99,80), root:(100,100),
    state 0x100, button 3, same_screen YES
`

func TestParseXev(t *testing.T) {
	evs := ParseXev(sample)
	if len(evs) != 4 {
		t.Fatalf("%d events", len(evs))
	}
	if e := evs[0]; e.Type != "KeyPress" || e.Keysym != 0x41 || e.KeysymName != "A" || string(e.Text) != "A" || e.State != 1 || e.RootX != 100 || e.Y != 80 {
		t.Errorf("event 0 = %+v", e)
	}
	if e := evs[1]; e.Keysym != 0x10020ac || string(e.Text) != "€" {
		t.Errorf("event 1 = %+v", e)
	}
	if e := evs[2]; e.Text != nil || e.KeysymName != "Control_L" {
		t.Errorf("event 2 = %+v", e)
	}
	if e := evs[3]; e.Type != "ButtonPress" || e.Button != 3 || e.State != 0x100 || e.Time != 3825458 {
		t.Errorf("event 3 = %+v", e)
	}
}
