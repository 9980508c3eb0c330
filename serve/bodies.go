package serve

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/serve/api"
)

// Bounds on the connections and large bodies the server holds at once, so
// that a flood of them costs a bounded amount of memory (SECURITY.md, "A
// memory bound for every listener").
const (
	// maxConns bounds the open connections, and maxConnsPerHost those
	// from one address: beyond them a connection is closed as soon as it
	// is accepted. Each costs at most about 40 KiB (headers of at most
	// maxHeaderBytes, a goroutine, buffers).
	maxConns        = 1024
	maxConnsPerHost = 128
	// maxHeaderBytes bounds a request's headers (a token and a few
	// short ones are all the API needs).
	maxHeaderBytes = 16 << 10
	// largeBody is the size above which a body (an action up to
	// action.MaxJSON, an MCP message up to mcp.MaxBody) is read only
	// with one of its token's largeBodies slots: smaller ones, every
	// request a well-behaved client sends, are read at once.
	largeBody   = 64 << 10
	largeBodies = 2
	// largeWait is how long a large body waits for a slot before it is
	// refused (503), and largeRead how long it may take to arrive.
	largeWait = 30 * time.Second
	largeRead = 60 * time.Second
)

// boundBodies reads large bodies (a declared length above largeBody, or
// none declared) only with one of the token's largeBodies slots, held
// until the request is answered, and within largeRead: a token's
// unfinished or slow large bodies hold at most largeBodies of them in
// memory, whatever the number of its connections. Uploads, which stream
// to disk, and requests without a known token (refused before their body
// is read) pass as they are.
func boundBodies(owner func(*http.Request) string, next http.Handler) http.Handler {
	var mu sync.Mutex
	slots := map[string]chan struct{}{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || (r.ContentLength >= 0 && r.ContentLength <= largeBody) ||
			strings.HasPrefix(r.URL.Path, "/"+api.Version+"/uploads") {
			next.ServeHTTP(w, r)
			return
		}
		o := owner(r)
		if o == "" {
			next.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		sem := slots[o]
		if sem == nil {
			sem = make(chan struct{}, largeBodies)
			slots[o] = sem
		}
		mu.Unlock()
		ctx, cancel := context.WithTimeout(r.Context(), largeWait)
		defer cancel()
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			w.Header().Set("Connection", "close")
			writeError(w, apiError(api.CodeTooManyConnections, "this token has %d large request bodies (above %d bytes) in flight, the most it may at once: try again", largeBodies, largeBody))
			return
		}
		defer func() { <-sem }()
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(largeRead))
		next.ServeHTTP(w, r)
	})
}
