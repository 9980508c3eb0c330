package openai

import (
	"slices"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
)

// BenchmarkDecide is one decision of each agent against a local server
// answering at once with a canned answer, on a 640×480 screen that changes
// every step. Besides ns/op it reports what agentbox adds around the model
// call: each decision's latency minus the server's handling time (from
// receiving the request to having written the answer), p50 and p95. That
// covers the SDK (request building, JSON, retries' bookkeeping), the
// recorder, the data URL, loopback HTTP and the mapping; "png-included"
// also encodes the screenshot inside Decide (in a run the trace writer
// usually has encoded it already: frames share one encoding). A
// measurement: nothing here passes or fails on a figure.
//
//	go test -run '^$' -bench Decide -benchtime 60x ./agent/openai/
func BenchmarkDecide(b *testing.B) {
	setKey(b)
	respBody := openaitest.ResponseBody("resp_1", "", DefaultModel, 640, 480,
		openaitest.ComputerCall("c1", map[string]any{"type": "keypress", "keys": []any{"RIGHT"}}))
	chatBody := openaitest.ChatBody("m", `{"thought":"go","action":"key","keys":"Right"}`)
	for _, tt := range []struct {
		name string
		body []byte
		make func(b *testing.B, srv *openaitest.Server) agent.Agent
	}{
		{"openai", respBody, func(b *testing.B, srv *openaitest.Server) agent.Agent { return newResponses(b, srv, nil) }},
		{"openai-chat", chatBody, func(b *testing.B, srv *openaitest.Server) agent.Agent {
			return newChat(b, srv, agent.Options{"max_screenshots": "3", "max_history": "20"})
		}},
	} {
		for _, png := range []struct {
			name    string
			encoded bool
		}{{"png-encoded", true}, {"png-included", false}} {
			b.Run(tt.name+"/"+png.name, func(b *testing.B) {
				srv := openaitest.New(b, func(*openaitest.Server, *openaitest.Request) openaitest.Reply {
					return openaitest.Reply{Body: tt.body}
				})
				ag := tt.make(b, srv)
				s := newSim(640, 480)
				var over []time.Duration
				for b.Loop() {
					b.StopTimer()
					obs := s.observe()
					if png.encoded {
						obs.Screen.PNG()
					}
					b.StartTimer()
					t0 := time.Now()
					d, err := ag.Decide(b.Context(), obs)
					l := time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					s.act(b, d.Action)
					reqs := srv.Requests()
					over = append(over, l-reqs[len(reqs)-1].Handling)
					b.StartTimer()
				}
				b.ReportMetric(float64(pct(over, 50)), "p50-overhead-ns")
				b.ReportMetric(float64(pct(over, 95)), "p95-overhead-ns")
			})
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
