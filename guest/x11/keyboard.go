package x11

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// Keysyms this package needs by value.
const (
	keysymShiftL   = 0xffe1
	keysymShiftR   = 0xffe2
	keysymCapsLock = 0xffe5
	keysymReturn   = 0xff0d
	keysymTab      = 0xff09
)

// reuseAge is the minimum time between the last press of a spare keycode
// and binding it to another keysym. A client translates a key event with the
// keyboard mapping it holds when it handles the event, and Xlib refreshes
// that mapping from the server's current state when it handles a
// MappingNotify; a client running behind could thus read a later binding for
// an earlier key. How far a client runs behind is a matter of time, not of
// characters, so the guard is an age: spares are reused least recently used
// first (with Xvfb's 19 spares a binding normally survives 19 other
// unmapped keysyms), and only when the least recently used one was pressed
// less than reuseAge ago does the Conn wait for it to age. Text cycling
// through more distinct unmapped keysyms than there are spares is therefore
// typed at up to (spares / reuseAge) such characters per second.
//
// 250 ms was measured enough with four busy loops on two cores, but not on
// a machine also running several test suites at once (load average 14):
// xev read 2 of 175 rebound characters wrong. One second holds there; it
// only slows text with more than 19 distinct characters missing from the
// keymap (CJK, mostly) to 19 such characters a second.
const reuseAge = time.Second

// keyboard is the Conn's view of the keyboard mapping and the keys it holds.
// Fields below mu are shared with the event goroutine; the rest belong to the
// input lane.
type keyboard struct {
	mu         sync.Mutex
	stale      bool                   // the keyboard mapping must be re-read
	modStale   bool                   // the modifier mapping must be re-read
	ownPending map[xproto.Keycode]int // own one-key remaps whose MappingNotify is due

	loaded, modLoaded bool
	min, max          xproto.Keycode
	per               int             // keysyms per keycode
	syms              []xproto.Keysym // (max-min+1)*per
	modKeys           map[xproto.Keycode]bool
	spares            []*spare
	bySym             map[uint32]*spare
	clock             uint64    // counts presses and bindings of spares (LRU order)
	firstPress        time.Time // the Conn's first key press (see bind)
	held              []heldKey
}

// spare is a keycode with no keysyms in the server's default mapping that
// the Conn binds keysyms to.
type spare struct {
	code    xproto.Keycode
	sym     uint32    // bound keysym, 0 if none
	last    uint64    // clock at the last press or binding (LRU order)
	pressed time.Time // time of the last press since the binding, zero if none
	pins    int       // > 0 while held (or in use by a chord)
}

// heldKey is a key pressed by KeyDown and not yet released.
type heldKey struct {
	sym   uint32
	code  xproto.Keycode
	shift bool // Shift_L was pressed for it and must be released with it
	sp    *spare
}

// resolved is a keysym's keycode and whether it needs Shift.
type resolved struct {
	sym   uint32
	code  xproto.Keycode
	shift bool
	sp    *spare
}

// mappingChanged is called by the event goroutine for MappingNotify.
func (k *keyboard) mappingChanged(e xproto.MappingNotifyEvent) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch e.Request {
	case xproto.MappingKeyboard:
		if e.Count == 1 && k.ownPending[e.FirstKeycode] > 0 {
			k.ownPending[e.FirstKeycode]--
			return
		}
		k.stale = true
	case xproto.MappingModifier:
		k.modStale = true
	}
}

// ensure (re)reads the keyboard and modifier mappings when needed.
func (c *Conn) ensureKeymap(o *op) error {
	k := &c.kb
	k.mu.Lock()
	stale := k.stale || !k.loaded
	modStale := k.modStale || !k.modLoaded
	k.stale, k.modStale = false, false
	k.mu.Unlock()
	if stale {
		count := int(c.maxKC) - int(c.minKC) + 1
		var r *xproto.GetKeyboardMappingReply
		err := o.do(func() (err error) {
			r, err = xproto.GetKeyboardMapping(c.xc, c.minKC, byte(count)).Reply()
			return err
		})
		if err != nil {
			k.mu.Lock()
			k.stale = true
			k.mu.Unlock()
			return err
		}
		k.min, k.max, k.per = c.minKC, c.maxKC, int(r.KeysymsPerKeycode)
		k.syms = r.Keysyms
		k.loaded = true
		k.rebuildSpares()
	}
	if modStale {
		var r *xproto.GetModifierMappingReply
		err := o.do(func() (err error) {
			r, err = xproto.GetModifierMapping(c.xc).Reply()
			return err
		})
		if err != nil {
			k.mu.Lock()
			k.modStale = true
			k.mu.Unlock()
			return err
		}
		k.modKeys = map[xproto.Keycode]bool{}
		for _, kc := range r.Keycodes {
			if kc != 0 {
				k.modKeys[kc] = true
			}
		}
		k.modLoaded = true
	}
	return nil
}

// column returns the keysym in column col of keycode code.
func (k *keyboard) column(code xproto.Keycode, col int) uint32 {
	if col >= k.per || code < k.min || code > k.max {
		return 0
	}
	return uint32(k.syms[int(code-k.min)*k.per+col])
}

// empty reports whether keycode code has no keysyms, or only sym.
func (k *keyboard) emptyOr(code xproto.Keycode, sym uint32) bool {
	for col := range k.per {
		if s := k.column(code, col); s != 0 && s != sym {
			return false
		}
	}
	return true
}

// rebuildSpares reconciles the spare pool with a freshly read mapping: a
// spare still holding our keysym (or nothing) stays, one somebody else
// rebound leaves the pool, and keycodes that became empty join it.
func (k *keyboard) rebuildSpares() {
	if k.bySym == nil {
		k.bySym = map[uint32]*spare{}
	}
	known := map[xproto.Keycode]bool{}
	kept := k.spares[:0]
	for _, sp := range k.spares {
		switch {
		case sp.sym != 0 && k.emptyOr(sp.code, sp.sym) && k.column(sp.code, 0) == sp.sym:
			kept = append(kept, sp)
		case k.emptyOr(sp.code, 0):
			if sp.sym != 0 {
				delete(k.bySym, sp.sym)
				sp.sym = 0
			}
			kept = append(kept, sp)
		default:
			if sp.sym != 0 {
				delete(k.bySym, sp.sym)
			}
			continue
		}
		known[sp.code] = true
	}
	k.spares = kept
	for code := int(k.min); code <= int(k.max); code++ {
		kc := xproto.Keycode(code)
		if !known[kc] && k.emptyOr(kc, 0) {
			k.spares = append(k.spares, &spare{code: kc})
		}
	}
}

// lookup finds sym in the mapping: column 0 (no modifier) on any keycode
// first, then column 1 (Shift). Like Xlib, a keycode whose column 1 is
// NoSymbol and whose column 0 is a lower-case letter yields the upper-case
// letter in column 1.
func (k *keyboard) lookup(sym uint32) (resolved, bool) {
	if sym == 0 {
		return resolved{}, false
	}
	for code := int(k.min); code <= int(k.max); code++ {
		if k.column(xproto.Keycode(code), 0) == sym {
			r := resolved{sym: sym, code: xproto.Keycode(code)}
			if sp := k.bySym[sym]; sp != nil && sp.code == r.code {
				r.sp = sp
			}
			return r, true
		}
	}
	for code := int(k.min); code <= int(k.max); code++ {
		kc := xproto.Keycode(code)
		c1 := k.column(kc, 1)
		if c1 == sym || (c1 == 0 && upperLatin1(k.column(kc, 0)) == sym && k.column(kc, 0) != sym) {
			return resolved{sym: sym, code: kc, shift: true}, true
		}
	}
	return resolved{}, false
}

// upperLatin1 returns the upper-case keysym of a lower-case Latin-1 letter
// keysym, or 0.
func upperLatin1(s uint32) uint32 {
	switch {
	case s >= 'a' && s <= 'z':
		return s - 0x20
	case s >= 0xe0 && s <= 0xfe && s != 0xf7:
		return s - 0x20
	}
	return 0
}

// resolve returns the keycode for sym, binding it to a spare keycode when
// the mapping lacks it in columns 0 and 1.
func (c *Conn) resolve(o *op, sym uint32) (resolved, error) {
	k := &c.kb
	if r, ok := k.lookup(sym); ok {
		return r, nil
	}
	victim := k.lruVictim()
	if victim == nil {
		return resolved{}, fmt.Errorf("keysym %#x: %w", sym, ErrNoSpareKeycode)
	}
	if wait := victim.wait(); wait > 0 {
		if err := o.sleep(wait); err != nil {
			return resolved{}, err
		}
	}
	if err := c.bind(o, []binding{{victim, sym}}); err != nil {
		return resolved{}, err
	}
	return resolved{sym: sym, code: victim.code, sp: victim}, nil
}

// binding is a keysym to be written into a spare keycode.
type binding struct {
	sp  *spare
	sym uint32
}

// bind writes the bindings with ChangeKeyboardMapping, all requests sent
// before one round trip, so that the server has applied them (and sent
// MappingNotify to every client) before any later key event. The spares
// must be distinct.
//
// Xlib reads the keyboard mapping when an app handles its first key event
// and subscribes to mapping changes only when it next waits for events; a
// binding the server applies in between never reaches the app. So a binding
// within reuseAge of the Conn's first key press waits for the rest of it.
func (c *Conn) bind(o *op, bs []binding) error {
	k := &c.kb
	if !k.firstPress.IsZero() {
		if wait := reuseAge - time.Since(k.firstPress); wait > 0 {
			if err := o.sleep(wait); err != nil {
				return err
			}
		}
	}
	rows := make([][]xproto.Keysym, len(bs))
	k.mu.Lock()
	if k.ownPending == nil {
		k.ownPending = map[xproto.Keycode]int{}
	}
	for i, b := range bs {
		row := make([]xproto.Keysym, k.per)
		row[0] = xproto.Keysym(b.sym)
		if k.per > 1 {
			row[1] = xproto.Keysym(b.sym)
		}
		rows[i] = row
		k.ownPending[b.sp.code]++
	}
	k.mu.Unlock()
	per := byte(k.per)
	err := o.do(func() error {
		cookies := make([]xproto.ChangeKeyboardMappingCookie, len(bs))
		for i, b := range bs {
			cookies[i] = xproto.ChangeKeyboardMappingChecked(c.xc, 1, b.sp.code, per, rows[i])
		}
		var first error
		for _, ck := range cookies {
			// The first Check makes the round trip; the others are answered
			// by it.
			if err := ck.Check(); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
	if err != nil {
		if !isContextErr(err) {
			// Unknown which ones applied: re-read the mapping next time.
			k.mu.Lock()
			for _, b := range bs {
				k.ownPending[b.sp.code]--
			}
			k.stale = true
			k.mu.Unlock()
		}
		return err
	}
	for i, b := range bs {
		if b.sp.sym != 0 {
			delete(k.bySym, b.sp.sym)
		}
		b.sp.sym = b.sym
		k.clock++
		b.sp.last = k.clock // binding counts as a use for the LRU order
		b.sp.pressed = time.Time{}
		k.bySym[b.sym] = b.sp
		copy(k.syms[int(b.sp.code-k.min)*k.per:], rows[i])
	}
	return nil
}

// wait returns how long sp must still age before it may be rebound.
func (sp *spare) wait() time.Duration {
	if sp.sym == 0 || sp.pressed.IsZero() {
		return 0
	}
	return reuseAge - time.Since(sp.pressed)
}

// lruVictim returns the unpinned spare used least recently, or nil.
func (k *keyboard) lruVictim() *spare {
	var victim *spare
	for _, sp := range k.spares {
		if sp.pins > 0 {
			continue
		}
		if victim == nil || sp.last < victim.last {
			victim = sp
		}
	}
	return victim
}

// shiftCode returns the keycode of Shift_L.
func (c *Conn) shiftCode(o *op) (xproto.Keycode, error) {
	r, err := c.resolve(o, keysymShiftL)
	if err != nil {
		return 0, err
	}
	return r.code, nil
}

// shiftHeld reports whether a Shift key is held through KeyDown.
func (k *keyboard) shiftHeld() bool {
	for _, h := range k.held {
		if h.sym == keysymShiftL || h.sym == keysymShiftR || h.shift {
			return true
		}
	}
	return false
}

// fake sends one XTEST event (unchecked; errors surface on the next sync).
func (c *Conn) fake(typ byte, detail byte, x, y int16) {
	xtest.FakeInput(c.xc, typ, detail, 0, c.root, x, y, 0)
}

// press and release send key events for r, with Shift_L around it if needed.
func (c *Conn) pressKey(r resolved, shift xproto.Keycode, addShift bool) {
	if addShift {
		c.fake(xproto.KeyPress, byte(shift), 0, 0)
	}
	c.fake(xproto.KeyPress, byte(r.code), 0, 0)
	if c.kb.firstPress.IsZero() {
		c.kb.firstPress = time.Now()
	}
	if r.sp != nil {
		c.kb.clock++
		r.sp.last = c.kb.clock
		r.sp.pressed = time.Now()
	}
}

func (c *Conn) releaseKey(r resolved, shift xproto.Keycode, addShift bool) {
	c.fake(xproto.KeyRelease, byte(r.code), 0, 0)
	if addShift {
		c.fake(xproto.KeyRelease, byte(shift), 0, 0)
	}
}

// KeyDown presses the key for keysym and keeps it held until KeyUp or
// ReleaseAll. A keysym reachable only with Shift gets Shift_L pressed with it
// (and released with it), unless a Shift key is already held. Pressing a
// held key again sends another press (like auto-repeat) and is still released
// by one KeyUp.
func (c *Conn) KeyDown(ctx context.Context, keysym uint32) error {
	o, err := c.begin(ctx, &c.input, "key down")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("key down", c.keyDown(o, keysym))
}

func (c *Conn) keyDown(o *op, keysym uint32) error {
	if err := c.ensureKeymap(o); err != nil {
		return err
	}
	k := &c.kb
	r, err := c.resolve(o, keysym)
	if err != nil {
		return err
	}
	addShift := r.shift && !k.shiftHeld()
	var shift xproto.Keycode
	if addShift {
		if shift, err = c.shiftCode(o); err != nil {
			return err
		}
	}
	again := slices.ContainsFunc(k.held, func(h heldKey) bool { return h.sym == keysym })
	if again {
		addShift = false
	} else {
		if r.sp != nil {
			r.sp.pins++
		}
		k.held = append(k.held, heldKey{sym: keysym, code: r.code, shift: addShift, sp: r.sp})
		c.publishHeld()
	}
	return o.do(func() error {
		c.pressKey(r, shift, addShift)
		return c.syncInput()
	})
}

// KeyUp releases the key for keysym pressed by KeyDown (and the Shift_L
// pressed for it). For a keysym that is not held it sends a release of its
// keycode anyway, if the keysym is in the mapping.
func (c *Conn) KeyUp(ctx context.Context, keysym uint32) error {
	o, err := c.begin(ctx, &c.input, "key up")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("key up", c.keyUp(o, keysym))
}

func (c *Conn) keyUp(o *op, keysym uint32) error {
	if err := c.ensureKeymap(o); err != nil {
		return err
	}
	k := &c.kb
	i := slices.IndexFunc(k.held, func(h heldKey) bool { return h.sym == keysym })
	if i < 0 {
		r, ok := k.lookup(keysym)
		if !ok {
			return nil
		}
		return o.do(func() error {
			c.releaseKey(r, 0, false)
			return c.syncInput()
		})
	}
	h := k.held[i]
	var shift xproto.Keycode
	if h.shift {
		var err error
		if shift, err = c.shiftCode(o); err != nil {
			return err
		}
	}
	k.held = slices.Delete(k.held, i, i+1)
	if h.sp != nil && h.sp.pins > 0 {
		h.sp.pins--
	}
	c.publishHeld()
	return o.do(func() error {
		c.releaseKey(resolved{sym: h.sym, code: h.code}, shift, h.shift)
		return c.syncInput()
	})
}

// Chord presses keysyms in order and releases them in reverse order, repeat
// times (at least once), like xdotool's "key ctrl+shift+t". A keysym that
// needs Shift gets Shift_L pressed just before it and released just after it,
// unless a Shift key is already down (held, or earlier in the chord). The
// Conn syncs after each repetition.
func (c *Conn) Chord(ctx context.Context, keysyms []uint32, repeat int) error {
	if len(keysyms) == 0 {
		return fmt.Errorf("x11: chord: no keys: %w", ErrBadArgument)
	}
	o, err := c.begin(ctx, &c.input, "chord")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("chord", c.chord(o, keysyms, max(repeat, 1)))
}

func (c *Conn) chord(o *op, keysyms []uint32, repeat int) error {
	if err := c.ensureKeymap(o); err != nil {
		return err
	}
	k := &c.kb
	rs := make([]resolved, len(keysyms))
	adds := make([]bool, len(keysyms))
	defer func() {
		for _, r := range rs {
			if r.sp != nil && r.sp.pins > 0 {
				r.sp.pins--
			}
		}
	}()
	shiftDown := k.shiftHeld()
	needShift := false
	for i, sym := range keysyms {
		r, err := c.resolve(o, sym)
		if err != nil {
			return err
		}
		if r.sp != nil {
			r.sp.pins++ // keep it bound while later keys are resolved
		}
		rs[i] = r
		if r.shift && !shiftDown {
			adds[i] = true
			needShift = true
		}
		if sym == keysymShiftL || sym == keysymShiftR {
			shiftDown = true
		}
	}
	var shift xproto.Keycode
	if needShift {
		var err error
		if shift, err = c.shiftCode(o); err != nil {
			return err
		}
	}
	for range repeat {
		err := o.do(func() error {
			for i, r := range rs {
				c.pressKey(r, shift, adds[i])
			}
			for i := len(rs) - 1; i >= 0; i-- {
				c.releaseKey(rs[i], shift, adds[i])
			}
			return c.syncInput()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// RuneKeysym returns the keysym TypeText sends for r: the code point for
// printable Latin-1 (0x20–0x7e, 0xa0–0xff), Return for '\n', Tab for '\t',
// and 0x01000000|r for other printable runes. Control characters and
// invalid runes are an error.
func RuneKeysym(r rune) (uint32, error) {
	switch {
	case r == '\n':
		return keysymReturn, nil
	case r == '\t':
		return keysymTab, nil
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xff:
		return uint32(r), nil
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return 0, fmt.Errorf("%w: control character %U", ErrBadText, r)
	case r == utf8.RuneError, r > utf8.MaxRune, r >= 0xd800 && r <= 0xdfff:
		return 0, fmt.Errorf("%w: invalid rune %U", ErrBadText, r)
	}
	return 0x01000000 | uint32(r), nil
}

// TypeText types text, one character at a time with perCharDelay between
// characters, syncing after each. Characters are turned into keysyms by
// RuneKeysym; the whole text is checked before anything is typed.
//
// Like xdotool's type, TypeText clears active modifiers first: modifier keys
// that are down (for example a Shift or Ctrl held with KeyDown) are released
// and a locked Caps Lock is toggled off, so that "a" types "a"; afterwards
// the same keys are pressed again and Caps Lock is restored. Held-key
// bookkeeping is unchanged. If typing is cut short by the context, the
// modifiers stay released (ReleaseAll still releases what KeyDown pressed).
func (c *Conn) TypeText(ctx context.Context, text string, perCharDelay time.Duration) error {
	syms := make([]uint32, 0, len(text))
	for i, r := range text {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(text[i:]); size <= 1 {
				return fmt.Errorf("x11: type: %w: invalid UTF-8 at byte %d", ErrBadText, i)
			}
		}
		s, err := RuneKeysym(r)
		if err != nil {
			return fmt.Errorf("x11: type: %w", err)
		}
		syms = append(syms, s)
	}
	if len(syms) == 0 {
		return nil
	}
	o, err := c.begin(ctx, &c.input, "type")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("type", c.typeSyms(o, syms, perCharDelay))
}

func (c *Conn) typeSyms(o *op, syms []uint32, delay time.Duration) error {
	if err := c.ensureKeymap(o); err != nil {
		return err
	}
	cleared, capsCode, err := c.clearModifiers(o)
	if err != nil {
		return err
	}
	shift, err := c.shiftCode(o)
	if err != nil {
		return err
	}
	if err := c.prebind(o, syms); err != nil {
		return err
	}
	var typeErr error
	for i, sym := range syms {
		if i > 0 {
			if typeErr = o.sleep(delay); typeErr != nil {
				break
			}
			if typeErr = c.ensureKeymap(o); typeErr != nil {
				break
			}
		}
		var r resolved
		if r, typeErr = c.resolve(o, sym); typeErr != nil {
			break
		}
		typeErr = o.do(func() error {
			c.pressKey(r, shift, r.shift)
			c.releaseKey(r, shift, r.shift)
			return c.syncInput()
		})
		if typeErr != nil {
			break
		}
	}
	if isContextErr(typeErr) {
		return typeErr
	}
	if err := c.restoreModifiers(o, cleared, capsCode); err != nil && typeErr == nil {
		typeErr = err
	}
	return typeErr
}

// prebind binds the keysyms of syms that are missing from the mapping to
// spare keycodes before any of them is typed, in text order, as many as there
// are free spares. Xlib reads the keyboard mapping lazily, when an
// application handles its first key event, and does not hear about changes
// made between that read and its subscription to mapping changes (about one
// round trip of the application's); binding up front keeps the remaps of a
// typical text out of that window. Later keysyms are bound as they come.
func (c *Conn) prebind(o *op, syms []uint32) error {
	k := &c.kb
	var bs []binding
	taken := map[*spare]bool{}
	seen := map[uint32]bool{}
	for _, sym := range syms {
		if seen[sym] {
			continue
		}
		seen[sym] = true
		if _, ok := k.lookup(sym); ok {
			continue
		}
		// The least recently used spare not chosen yet; only one that may be
		// rebound at once (waiting is left to the binding on demand).
		var victim *spare
		for _, sp := range k.spares {
			if sp.pins > 0 || taken[sp] {
				continue
			}
			if victim == nil || sp.last < victim.last {
				victim = sp
			}
		}
		if victim == nil || victim.wait() > 0 {
			break
		}
		taken[victim] = true
		bs = append(bs, binding{victim, sym})
	}
	if len(bs) == 0 {
		return nil
	}
	return c.bind(o, bs)
}

// clearModifiers releases modifier keys that are down and toggles a locked
// Caps Lock off. It returns what it released and the Caps Lock keycode it
// tapped (0 if none).
func (c *Conn) clearModifiers(o *op) (released []xproto.Keycode, caps xproto.Keycode, err error) {
	const modMask = xproto.ModMaskShift | xproto.ModMaskLock | xproto.ModMaskControl |
		xproto.ModMask1 | xproto.ModMask2 | xproto.ModMask3 | xproto.ModMask4 | xproto.ModMask5
	var state uint16
	var keys []byte
	err = o.do(func() error {
		p, err := xproto.QueryPointer(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		state = p.Mask
		if state&modMask == 0 {
			return nil
		}
		km, err := xproto.QueryKeymap(c.xc).Reply()
		if err != nil {
			return err
		}
		keys = km.Keys
		return nil
	})
	if err != nil || state&modMask == 0 {
		return nil, 0, err
	}
	for code := range len(keys) * 8 {
		kc := xproto.Keycode(code)
		if keys[code/8]&(1<<(code%8)) != 0 && c.kb.modKeys[kc] {
			released = append(released, kc)
		}
	}
	if state&xproto.ModMaskLock != 0 {
		if r, ok := c.kb.lookup(keysymCapsLock); ok {
			caps = r.code
		}
	}
	if len(released) == 0 && caps == 0 {
		return nil, 0, nil
	}
	err = o.do(func() error {
		for _, kc := range released {
			c.fake(xproto.KeyRelease, byte(kc), 0, 0)
		}
		if caps != 0 {
			c.fake(xproto.KeyPress, byte(caps), 0, 0)
			c.fake(xproto.KeyRelease, byte(caps), 0, 0)
		}
		return c.syncInput()
	})
	return released, caps, err
}

// restoreModifiers undoes clearModifiers.
func (c *Conn) restoreModifiers(o *op, released []xproto.Keycode, caps xproto.Keycode) error {
	if len(released) == 0 && caps == 0 {
		return nil
	}
	return o.do(func() error {
		if caps != 0 {
			c.fake(xproto.KeyPress, byte(caps), 0, 0)
			c.fake(xproto.KeyRelease, byte(caps), 0, 0)
		}
		for _, kc := range released {
			c.fake(xproto.KeyPress, byte(kc), 0, 0)
		}
		return c.syncInput()
	})
}

// ReleaseAll releases every key and button pressed through this Conn and
// not yet released, and then any key or button (1–5) the server still
// reports as down, so that a run never ends with something held.
func (c *Conn) ReleaseAll(ctx context.Context) error {
	o, err := c.begin(ctx, &c.input, "release all")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("release all", c.releaseAll(o))
}

func (c *Conn) releaseAll(o *op) error {
	k := &c.kb
	held := k.held
	buttons := c.ptr.held
	k.held = nil
	c.ptr.held = nil
	for _, h := range held {
		if h.sp != nil && h.sp.pins > 0 {
			h.sp.pins--
		}
	}
	c.publishHeld()
	var shift xproto.Keycode
	if slices.ContainsFunc(held, func(h heldKey) bool { return h.shift }) {
		if err := c.ensureKeymap(o); err != nil {
			return err
		}
		var err error
		if shift, err = c.shiftCode(o); err != nil {
			return err
		}
	}
	var keys []byte
	var mask uint16
	err := o.do(func() error {
		for i := len(held) - 1; i >= 0; i-- {
			c.releaseKey(resolved{code: held[i].code}, shift, held[i].shift)
		}
		for i := len(buttons) - 1; i >= 0; i-- {
			c.fake(xproto.ButtonRelease, byte(buttons[i]), 0, 0)
		}
		km, err := xproto.QueryKeymap(c.xc).Reply()
		if err != nil {
			return err
		}
		keys = km.Keys
		p, err := xproto.QueryPointer(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		mask = p.Mask
		return nil
	})
	if err != nil {
		return err
	}
	var stuckKeys []byte
	for code := range len(keys) * 8 {
		if keys[code/8]&(1<<(code%8)) != 0 {
			stuckKeys = append(stuckKeys, byte(code))
		}
	}
	var stuckButtons []byte
	for b := 1; b <= 5; b++ {
		if mask&(xproto.ButtonMask1<<(b-1)) != 0 {
			stuckButtons = append(stuckButtons, byte(b))
		}
	}
	if len(stuckKeys) == 0 && len(stuckButtons) == 0 {
		return nil
	}
	return o.do(func() error {
		for _, kc := range stuckKeys {
			c.fake(xproto.KeyRelease, kc, 0, 0)
		}
		for _, b := range stuckButtons {
			c.fake(xproto.ButtonRelease, b, 0, 0)
		}
		return c.syncInput()
	})
}

// Held returns the keysyms held by KeyDown (in press order) and the buttons
// held by ButtonDown.
func (c *Conn) Held() (keysyms []uint32, buttons []int) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	return slices.Clone(c.heldKey), slices.Clone(c.heldBtn)
}

// publishHeld refreshes the snapshot Held reads. Called under the input lane.
func (c *Conn) publishHeld() {
	keys := make([]uint32, len(c.kb.held))
	for i, h := range c.kb.held {
		keys[i] = h.sym
	}
	btns := slices.Clone(c.ptr.held)
	c.heldMu.Lock()
	c.heldKey, c.heldBtn = keys, btns
	c.heldMu.Unlock()
}

// ClaimKeyboard makes the XTEST keyboard the core keyboard's source device
// before any app connects, by pressing and releasing a keycode that has no
// keysym (a spare; nothing reads it as a key).
//
// The server's core keyboard takes the keymap of the device that sent its
// last key, and Xvfb starts with its own keyboard as that source. Left to
// the agent's first key, the switch to the XTEST keyboard came with that
// key: the server told every client the keyboard had changed (XI2
// DeviceChanged, XkbNewKeyboardNotify, MappingNotify) in the same moment,
// and each reloaded its keyboard state while the first keys arrived. A
// person's session never sees that; after the claim, no key of a run does
// either. Without a spare keycode it does nothing.
func (c *Conn) ClaimKeyboard(ctx context.Context) error {
	o, err := c.begin(ctx, &c.input, "claim the keyboard")
	if err != nil {
		return err
	}
	defer o.end()
	if err := c.ensureKeymap(o); err != nil {
		return o.wrap("claim the keyboard", err)
	}
	var code xproto.Keycode
	for _, sp := range c.kb.spares {
		if sp.sym == 0 {
			code = sp.code
			break
		}
	}
	if code == 0 {
		return nil
	}
	return o.wrap("claim the keyboard", o.do(func() error {
		c.fake(xproto.KeyPress, byte(code), 0, 0)
		c.fake(xproto.KeyRelease, byte(code), 0, 0)
		return c.syncX()
	}))
}
