package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// captureClientLog points clientLog at a buffer for the test's length.
func captureClientLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	clientLog.mu.Lock()
	out, said := clientLog.out, clientLog.said
	clientLog.out, clientLog.said = &buf, map[string]bool{}
	clientLog.mu.Unlock()
	t.Cleanup(func() {
		clientLog.mu.Lock()
		clientLog.out, clientLog.said = out, said
		clientLog.mu.Unlock()
	})
	return &buf
}

// closedPing is the error client-go's WebSocket heartbeat gets when it
// pings a connection that was closed on this side: the error behind
// `E… websocket.go:521] "Websocket Ping failed" err="… use of closed
// network connection"`.
func closedPing(t *testing.T) error {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	err = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Minute))
	if err == nil {
		t.Fatal("a ping on a closed connection succeeded")
	}
	return err
}

// TestClientLogDropsEndedStreams: what client-go logs when a stream ends
// (agentbox closed it, or the Pod went away: the run's error says so)
// reaches no terminal, whether logged through klog or handed to
// utilruntime.HandleError.
func TestClientLogDropsEndedStreams(t *testing.T) {
	buf := captureClientLog(t)
	ping := closedPing(t)
	if !strings.Contains(ping.Error(), "use of closed network connection") {
		t.Logf("the closed ping's error reads %q", ping)
	}
	logger := klog.FromContext(context.Background())
	logger.Error(ping, "Websocket Ping failed")
	logger.Error(fmt.Errorf("read: %w", context.Canceled), "Websocket setting read deadline failed")
	utilruntime.HandleErrorWithLogger(logger, &websocket.CloseError{Code: websocket.CloseAbnormalClosure, Text: "unexpected EOF"}, "Copying stdout failed")
	utilruntime.HandleError(errors.New("write tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"))
	klog.ErrorS(ping, "Websocket Ping failed")
	logger.V(4).Info("Subprotocol negotiated", "protocol", "v5.channel.k8s.io")
	klog.Flush()
	if buf.Len() != 0 {
		t.Errorf("an ended stream was said:\n%s", buf)
	}
}

// TestClientLogSaysOthersOnce: any other error client-go logs is said in
// agentbox's words, once however often client-go repeats it, on one line
// with nothing of klog's header.
func TestClientLogSaysOthersOnce(t *testing.T) {
	buf := captureClientLog(t)
	timeout := errors.New("write tcp 10.0.0.1:1->10.0.0.2:6443: i/o timeout")
	logger := klog.FromContext(context.Background())
	for range 3 {
		logger.Error(timeout, "Websocket Ping failed")
	}
	utilruntime.HandleError(errors.New("certificate has expired\x1b[2J"))
	utilruntime.HandleError(errors.New("certificate has expired again"))
	klog.Flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{
		"agentbox: kubernetes: the cluster's client: Websocket Ping failed: write tcp 10.0.0.1:1->10.0.0.2:6443: i/o timeout (not repeated)",
		"agentbox: kubernetes: the cluster's client: Unhandled Error: certificate has expired",
	}
	if len(lines) != len(want) {
		t.Fatalf("said %d lines, want %d:\n%s", len(lines), len(want), buf)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to begin %q", i+1, lines[i], w)
		}
		if strings.ContainsRune(lines[i], '\x1b') {
			t.Errorf("line %d carries a terminal escape: %q", i+1, lines[i])
		}
	}
}
