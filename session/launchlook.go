package session

import (
	"context"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// launchLook is the first screenshot and state the launch brought
// (Config.LookAtLaunch).
type launchLook struct {
	frame *observe.Frame
	state environment.State
}

// looksAtLaunch says whether the launch is to bring the first screenshot:
// asked for, and no settle between the launch and the first look.
func (s *Session) looksAtLaunch() bool {
	fs := s.cfg.FirstSettle
	return s.cfg.LookAtLaunch && (fs.Mode == "" || fs.Mode == SettleNone)
}

// keepLaunchLook keeps what the launch brought for the first look. With
// the manifest's ready_output, only when the app had printed it by the
// launch's answer (the sandbox waits for it before the screenshot):
// a screenshot from before the app said it was ready is not kept.
func (s *Session) keepLaunchLook(lr environment.LaunchResult) {
	if lr.Frame == nil || lr.State == nil || !s.looksAtLaunch() {
		return
	}
	select {
	case <-s.events.ready:
	default:
		return
	}
	s.launchLook = &launchLook{frame: lr.Frame, state: *lr.State}
}

// screen is the screenshot and state for an observation: the launch's,
// at the first look when it brought them, else the environment's now.
// s.mu is held.
func (s *Session) screen(ctx context.Context, env environment.Environment) (*observe.Frame, environment.State, error) {
	if l := s.launchLook; l != nil {
		s.launchLook = nil
		return l.frame, l.state, nil
	}
	return env.Observe(ctx)
}
