package keysym

import (
	"strconv"
	"strings"
)

// aliases maps lower-cased key names used by xdotool, pyautogui-style tools
// and computer-use models (Anthropic's xdotool-style names, OpenAI's
// upper-case "CTRL", "ENTER", "ARROWLEFT", …) to keysyms. Lookup consults it
// case-insensitively, after exact X names. "f1"…"f35" are handled by
// lookupAlias.
//
// Choices:
//
//   - Modifiers map to the left-hand keysym (Control_L, Shift_L, Alt_L,
//     Super_L), as xdotool does.
//   - "meta" is Super_L, not Meta_L (xdotool's choice). Computer-use models
//     take their key names from the browser, where "Meta" is the
//     Windows/Command key; Chrome and Firefox on X11 report Super_L as
//     "Meta". Meta_L, on the other hand, sits on Mod1 together with Alt_L in
//     the default XKB keymap (pc+us under Xvfb), so pressing it acts as Alt:
//     "meta+a" sent as Meta_L would be alt+a. Send the exact name "Meta_L"
//     (or "meta_l") to get the real Meta_L keysym.
//   - "cmd", "command", "win", "windows" and "super" are Super_L too, and
//     "option" is Alt_L, because macOS-trained models say "cmd"/"option".
//   - "pageup"/"pgup"/"page_up"/"prior" are Prior (0xff55, which Page_Up
//     also names); "pagedown"/"pgdn"/"page_down"/"next" are Next (0xff56).
//   - "print" and "printscreen" are Print; "altgr" is ISO_Level3_Shift.
var aliases = map[string]Keysym{
	"ctrl":    xkControlL,
	"control": xkControlL,
	"alt":     xkAltL,
	"option":  xkAltL,
	"altgr":   xkISOLevel3Shift,
	"shift":   xkShiftL,
	"super":   xkSuperL,
	"meta":    xkSuperL,
	"cmd":     xkSuperL,
	"command": xkSuperL,
	"win":     xkSuperL,
	"windows": xkSuperL,

	"enter":     xkReturn,
	"return":    xkReturn,
	"esc":       xkEscape,
	"escape":    xkEscape,
	"backspace": xkBackSpace,
	"tab":       xkTab,
	"space":     xkSpace,
	"delete":    xkDelete,
	"del":       xkDelete,
	"insert":    xkInsert,
	"ins":       xkInsert,
	"home":      xkHome,
	"end":       xkEnd,

	"pageup":    xkPrior,
	"page_up":   xkPrior,
	"pgup":      xkPrior,
	"prior":     xkPrior,
	"pagedown":  xkNext,
	"page_down": xkNext,
	"pgdn":      xkNext,
	"next":      xkNext,

	"up":          xkUp,
	"down":        xkDown,
	"left":        xkLeft,
	"right":       xkRight,
	"arrowup":     xkUp,
	"arrowdown":   xkDown,
	"arrowleft":   xkLeft,
	"arrowright":  xkRight,
	"arrow_up":    xkUp,
	"arrow_down":  xkDown,
	"arrow_left":  xkLeft,
	"arrow_right": xkRight,

	"capslock":    xkCapsLock,
	"numlock":     xkNumLock,
	"scrolllock":  xkScrollLock,
	"printscreen": xkPrint,
	"print":       xkPrint,
	"menu":        xkMenu,
	"contextmenu": xkMenu,
	"pause":       xkPause,
}

// maxF is the highest function key X defines (F35).
const maxF = 35

// lookupAlias resolves name case-insensitively against aliases and
// "f1"…"f35".
func lookupAlias(name string) (Keysym, bool) {
	lower := strings.ToLower(name)
	if k, ok := aliases[lower]; ok {
		return k, true
	}
	if len(lower) >= 2 && lower[0] == 'f' && lower[1] != '0' && lower[1] != '+' {
		if n, err := strconv.Atoi(lower[1:]); err == nil && n >= 1 && n <= maxF {
			return xkF1 + Keysym(n-1), true
		}
	}
	return NoSymbol, false
}
