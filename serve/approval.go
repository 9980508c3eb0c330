package serve

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
)

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
	if !e.approvals.Answer(id, policy.Answer{Allow: req.Allow, Always: req.Always, By: policy.ApproveAPI}) {
		writeError(w, apiError(api.CodeNotFound, "environment %s has no ask %q waiting for an answer (answered, timed out, or never asked)", e.id, id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
