// Package observe holds what a decision-maker observes of the app before
// each decision: the screen's geometry (Screen), its pixels (Frame) and the
// part shown (View), windows, the app's output and how it ended (Exit), the
// network it used (NetEvent), the accessibility tree (Tree) and the marks
// drawn from it, and a person's intervention — gathered in Observation.
//
// The vocabulary of what it may do is package action's; observe builds on
// it (an Intervention lists actions, a Tree resolves an action's target)
// and action imports nothing of observe.
package observe
