package session

import "github.com/codegirl-games/agentbox/internal/lockrank"

// The session's lock order, outermost first: a goroutine that holds one of
// these locks takes only locks further down the list (or none). Tests run
// with internal/lockrank's checking on (TestMain, and TestLockOrder under
// load with a person taking over, freezing, events and Close at once), so
// a lock taken out of this order panics, naming both locks.
//
//	Session.mu     the step lock: one step (observe or act) at a time
//	Session.fz     freezing (--freeze-while-thinking) against looks and takeovers
//	control.mu     who drives: the agent, or a person who took over
//	Session.emu    the environment, until it is torn down
//	Session.cmu    the End Close was called with
//	Session.tmu    the timings
//	sink.mu        the app's output, its exit and readiness
//	sink.netMu     the network events for the next observation
//	Relay.mu       where a pool's environment sends its events
//	leaves         trace.Writer's and EventLog's locks: nothing is taken under them
//
// A Listener (Config.Listener) is called with none of these held but the
// ones its caller documents, and must only take leaves (an EventLog's Add).
const (
	rankStep lockrank.Rank = 10 * (iota + 1)
	rankFreeze
	rankControl
	rankEnv
	rankClosing
	rankTimings
	rankSink
	rankNet
	rankRelay
)

type (
	stepLock    struct{}
	freezeLock  struct{}
	controlLock struct{}
	envLock     struct{}
	closingLock struct{}
	timingsLock struct{}
	sinkLock    struct{}
	netLock     struct{}
	relayLock   struct{}
	eventLogLk  struct{}
)

func (stepLock) Rank() lockrank.Rank    { return rankStep }
func (freezeLock) Rank() lockrank.Rank  { return rankFreeze }
func (controlLock) Rank() lockrank.Rank { return rankControl }
func (envLock) Rank() lockrank.Rank     { return rankEnv }
func (closingLock) Rank() lockrank.Rank { return rankClosing }
func (timingsLock) Rank() lockrank.Rank { return rankTimings }
func (sinkLock) Rank() lockrank.Rank    { return rankSink }
func (netLock) Rank() lockrank.Rank     { return rankNet }
func (relayLock) Rank() lockrank.Rank   { return rankRelay }
func (eventLogLk) Rank() lockrank.Rank  { return lockrank.Leaf }

func (stepLock) String() string    { return "Session.mu (the step lock)" }
func (freezeLock) String() string  { return "Session.fz (freezing)" }
func (controlLock) String() string { return "control.mu (who drives)" }
func (envLock) String() string     { return "Session.emu (the environment)" }
func (closingLock) String() string { return "Session.cmu (closing)" }
func (timingsLock) String() string { return "Session.tmu (timings)" }
func (sinkLock) String() string    { return "sink.mu (output, exit)" }
func (netLock) String() string     { return "sink.netMu (network events)" }
func (relayLock) String() string   { return "Relay.mu" }
func (eventLogLk) String() string  { return "EventLog.mu (a leaf)" }
