package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/codegirl-games/agentbox/internal/termsafe"
)

// client-go logs on klog besides returning errors: a stream's heartbeat
// that fails once the stream is closed ("Websocket Ping failed … use of
// closed network connection"), a copy that ends with its stream ("Copying
// stdout failed"). Left to klog, those reach the user's terminal raw and
// mid-run. clientLog takes all of it instead (klog's logger and
// utilruntime's error handlers): an error that only says a stream ended is
// dropped (agentbox reports the stream's end itself, in the run's error);
// anything else is said once per message, in agentbox's words.
var clientLog = &clientLogSink{out: os.Stderr, said: map[string]bool{}}

func init() {
	klog.SetLogger(logr.New(clientLog))
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, msg string, kv ...any) {
		clientLog.Error(err, msg, kv...)
	}}
}

// clientLogSink is the logr.LogSink client-go's logging goes to.
type clientLogSink struct {
	mu   sync.Mutex
	out  io.Writer
	said map[string]bool // messages said already
}

// Init implements logr.LogSink.
func (s *clientLogSink) Init(logr.RuntimeInfo) {}

// Enabled implements logr.LogSink: client-go's debugging (V(1) and up) is
// never built.
func (s *clientLogSink) Enabled(level int) bool { return level == 0 }

// Info implements logr.LogSink.
func (s *clientLogSink) Info(_ int, msg string, _ ...any) { s.say(msg, "") }

// Error implements logr.LogSink.
func (s *clientLogSink) Error(err error, msg string, _ ...any) {
	if streamEnded(err) {
		return
	}
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	s.say(msg, detail)
}

// WithValues implements logr.LogSink: values are not said.
func (s *clientLogSink) WithValues(...any) logr.LogSink { return s }

// WithName implements logr.LogSink.
func (s *clientLogSink) WithName(string) logr.LogSink { return s }

// say writes msg (and detail) once per msg: a failure that repeats (a
// heartbeat every few seconds) is one line.
func (s *clientLogSink) say(msg, detail string) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said[msg] {
		return
	}
	s.said[msg] = true
	line := "agentbox: kubernetes: the cluster's client: " + msg
	if detail != "" {
		line += ": " + detail
	}
	fmt.Fprintf(s.out, "%s (not repeated)\n", termsafe.Line(line))
}

// streamEnded says whether err only says that a connection or stream
// ended: closed here (agentbox closes a Pod's attach stream when it is done
// with it, a context's end closes it), or by the other side (the Pod went
// away; the run's error says how, from the Pod's status).
func streamEnded(err error) bool {
	if err == nil {
		return false
	}
	var ce *websocket.CloseError
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, context.Canceled) ||
		errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ce) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		// spdystream and some of client-go's errors are strings only
		strings.Contains(err.Error(), "use of closed network connection") ||
		strings.Contains(err.Error(), "stream reset") || strings.Contains(err.Error(), "connection closed")
}
