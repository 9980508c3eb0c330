package action

// Result is what executing one action produced. Errors that the agent caused
// (a validation error, a window that never appeared) are reported here and
// the run goes on; infrastructure errors end the run instead.
type Result struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Cursor is the pointer position after the action.
	Cursor *Point `json:"cursor,omitempty"`
	// Met reports whether a wait-until condition held before its deadline.
	Met *bool `json:"met,omitempty"`
	// Elapsed is how long the action took inside the environment.
	ElapsedUS int64 `json:"elapsed_us,omitempty"`
	// ConfirmUS is how much of Elapsed went into confirming the input: the
	// X server's round trip after each batch of events and any wait for the
	// window manager where it had to act first (focus on a click into an
	// inactive window, a drag on a title bar). A busy machine shows here.
	// Input that could not be confirmed before the action's deadline makes
	// the result not OK, with the reason in Error.
	ConfirmUS int64 `json:"confirm_us,omitempty"`
	// Target is the element an action's target named, found in the live
	// accessibility tree, and the point the action used.
	Target *Resolved `json:"target,omitempty"`
}
