package replay

import (
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// TestEpisodeOnly: a task's before_collect steps (the actor collect) are
// not the episode's, and a replay does not play them.
func TestEpisodeOnly(t *testing.T) {
	src := &trace.Trace{Steps: []trace.Step{
		{Record: trace.Record{Step: 1, Actor: trace.ActorAgent}},
		{Record: trace.Record{Step: 2, Actor: trace.ActorAgent}},
		{Record: trace.Record{Step: 4, Actor: trace.ActorCollect}},
	}}
	got := episodeOnly(src)
	if len(got.Steps) != 2 || got.Steps[1].Step != 2 {
		t.Errorf("steps = %+v, want the agent's two", got.Steps)
	}
	if len(src.Steps) != 3 {
		t.Error("the source trace was changed")
	}
	if plain := (&trace.Trace{Steps: src.Steps[:2]}); episodeOnly(plain) != plain {
		t.Error("a trace without collect steps is not returned as it is")
	}
}
