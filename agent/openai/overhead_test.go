package openai

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
)

// TestOverhead measures what agentbox adds around a model call: each
// decision's latency minus the server's handling time (from receiving the
// request to having written the answer), p50 and p95 over 60 steps of a
// 640×480 screen, with a local server answering instantly with a canned
// answer. It covers the SDK (request building, JSON, retries' bookkeeping),
// the recorder, the data URL, loopback HTTP and the mapping; "PNG
// included" also encodes the screenshot inside Decide (in a run the trace
// writer usually has encoded it already: frames share one encoding).
func TestOverhead(t *testing.T) {
	setKey(t)
	const steps = 60
	respBody := openaitest.ResponseBody("resp_1", "", DefaultModel, 640, 480,
		openaitest.ComputerCall("c1", map[string]any{"type": "keypress", "keys": []any{"RIGHT"}}))
	chatBody := openaitest.ChatBody("m", `{"thought":"go","action":"key","keys":"Right"}`)
	for _, tt := range []struct {
		name string
		body []byte
		make func(srv *openaitest.Server) agent.Agent
	}{
		{"openai", respBody, func(srv *openaitest.Server) agent.Agent { return newResponses(t, srv, nil) }},
		{"openai-chat", chatBody, func(srv *openaitest.Server) agent.Agent {
			return newChat(t, srv, agent.Options{"max_screenshots": "3", "max_history": "20"})
		}},
	} {
		for _, pngFirst := range []bool{true, false} {
			srv := openaitest.New(t, func(*openaitest.Server, *openaitest.Request) openaitest.Reply {
				return openaitest.Reply{Body: tt.body}
			})
			ag := tt.make(srv)
			s := newSim(640, 480)
			var over, lat []time.Duration
			for i := 0; i < steps; i++ {
				obs := s.observe()
				if pngFirst {
					obs.Screen.PNG()
				}
				t0 := time.Now()
				d, err := ag.Decide(context.Background(), obs)
				l := time.Since(t0)
				if err != nil {
					t.Fatal(err)
				}
				s.act(t, d.Action)
				reqs := srv.Requests()
				lat = append(lat, l)
				over = append(over, l-reqs[len(reqs)-1].Handling)
			}
			what := "PNG included"
			if pngFirst {
				what = "PNG already encoded"
			}
			t.Logf("%s, %s: overhead p50 %v p95 %v (decision latency p50 %v) over %d steps",
				tt.name, what, pct(over, 50), pct(over, 95), pct(lat, 50), steps)
			if p := pct(over, 50); p > 250*time.Millisecond {
				t.Errorf("%s: overhead p50 %v", tt.name, p)
			}
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// BenchmarkDecide is one decision of each agent against a local server
// answering instantly, PNG already encoded (as in a run).
func BenchmarkDecide(b *testing.B) {
	b.Setenv(KeyEnv, testKey)
	for _, name := range []string{"openai", "openai-chat"} {
		b.Run(name, func(b *testing.B) {
			body := openaitest.ResponseBody("resp_1", "", DefaultModel, 640, 480,
				openaitest.ComputerCall("c1", map[string]any{"type": "keypress", "keys": []any{"RIGHT"}}))
			if name == "openai-chat" {
				body = openaitest.ChatBody("m", `{"thought":"go","action":"key","keys":"Right"}`)
			}
			srv := openaitest.New(b, func(*openaitest.Server, *openaitest.Request) openaitest.Reply { return openaitest.Reply{Body: body} })
			ag, err := agent.New(name, agent.Options{"base_url": srv.URL, "model": "m"})
			if err != nil {
				b.Fatal(err)
			}
			s := newSim(640, 480)
			obs := s.observe()
			obs.Screen.PNG()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := ag.Decide(context.Background(), obs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
