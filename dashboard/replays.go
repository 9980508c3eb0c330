package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/codegirl-games/agentbox/replay"
	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

// replayRow is a replay and its verdict, read from its replay.json.
type replayRow struct {
	store.Entry
	Verdict, Message, Source string
}

// maxReplaySummary bounds the replay.json read.
const maxReplaySummary = 4 << 20

// replayOf reads a replay's verdict from its trace ("unknown" when its
// replay.json is missing: the replay did not finish).
func (s *Server) replayOf(e store.Entry) replayRow {
	r := replayRow{Entry: e, Verdict: "unknown", Source: strings.TrimPrefix(e.Agent, "replay of ")}
	if e.Status != trace.StatusComplete {
		r.Verdict = "running"
	}
	data, err := trace.ReadFile(e.Path, replay.SummaryFile, maxReplaySummary)
	if err != nil {
		r.Message = "no " + replay.SummaryFile + " in its trace"
		return r
	}
	var sum struct {
		Verdict string `json:"verdict"`
		Message string `json:"message"`
		Source  struct {
			Dir string `json:"dir"`
			ID  string `json:"id"`
		} `json:"source"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		r.Message = replay.SummaryFile + ": " + err.Error()
		return r
	}
	r.Verdict, r.Message = sum.Verdict, sum.Message
	if sum.Source.Dir != "" {
		r.Source = sum.Source.Dir
	}
	return r
}

const maxReplays = 200

func (s *Server) handleReplays(w http.ResponseWriter, r *http.Request) {
	f := store.Filter{Roots: s.roots, Episodes: true, ReplaysOnly: true}
	total, _, err := s.o.Store.Totals(r.Context(), f)
	if err != nil {
		serverError(w, err)
		return
	}
	f.Limit = maxReplays
	es, err := s.o.Store.Query(r.Context(), f)
	if err != nil {
		serverError(w, err)
		return
	}
	d := struct {
		page
		Replays []replayRow
		Total   int
	}{page: page{"Replays", "replays"}, Total: total}
	for _, e := range es {
		d.Replays = append(d.Replays, s.replayOf(e))
	}
	s.render(w, "replays", d)
}
