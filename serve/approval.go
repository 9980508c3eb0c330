package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
)

// approvals are an environment's policy asks waiting for an answer from
// its owner (POST /v1/envs/{id}/approvals/{approval}); the session waits
// in Approve until one comes or the ask times out (a denial).
type approvals struct {
	mu      sync.Mutex
	pending map[string]chan policy.Answer
}

// Approve implements policy.Approver: it waits for the answer to a.
func (ap *approvals) Approve(ctx context.Context, a policy.Request) (policy.Answer, error) {
	ch := make(chan policy.Answer, 1)
	ap.mu.Lock()
	if ap.pending == nil {
		ap.pending = map[string]chan policy.Answer{}
	}
	ap.pending[a.ID] = ch
	ap.mu.Unlock()
	defer func() {
		ap.mu.Lock()
		delete(ap.pending, a.ID)
		ap.mu.Unlock()
	}()
	select {
	case ans := <-ch:
		return ans, nil
	case <-ctx.Done():
		return policy.Answer{By: policy.ApproveAPI, Note: "no answer in time"}, nil
	}
}

// answer delivers the answer to the ask id; false when no such ask waits.
func (ap *approvals) answer(id string, ans policy.Answer) bool {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ch, ok := ap.pending[id]
	if !ok {
		return false
	}
	delete(ap.pending, id)
	ch <- ans
	return true
}

// maxPolicyText bounds a create request's policy.
const maxPolicyText = 256 << 10

// maxApprovalBody bounds an answer's body.
const maxApprovalBody = 4 << 10

// handleApproval answers a policy's ask of the environment's episode.
func (s *Server) handleApproval(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	data, aerr := readBody(w, r, "application/json", maxApprovalBody, false)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req api.ApprovalAnswer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, apiError(api.CodeInvalidRequest, "the answer: %v (want {\"allow\": true|false})", err))
		return
	}
	id := r.PathValue("approval")
	if !e.approvals.answer(id, policy.Answer{Allow: req.Allow, Always: req.Always, By: policy.ApproveAPI}) {
		writeError(w, apiError(api.CodeNotFound, "environment %s has no ask %q waiting for an answer (answered, timed out, or never asked)", e.id, id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
