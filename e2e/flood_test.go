package e2e

// A memory bound for every listener (issue 22): each host-side listener of
// the real binary is flooded from a loopback address of its own
// (127.0.0.2) with many connections carrying large, unfinished or slow
// requests, and agentbox's anonymous memory (RssAnon) must stay within
// floodBound of what it was before, while another client (127.0.0.1) is
// served meanwhile. The figures each test logs are SECURITY.md's ("A
// memory bound for every listener"):
//
//	go test -count=1 -v -run 'TestFlood' ./e2e/

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/mcp"
	"github.com/codegirl-games/agentbox/serve/api"
)

// floodBound is how much agentbox's anonymous memory may grow under a
// flood, in KiB.
const floodBound = 64 << 10

// flooder is where the floods come from: a loopback address other than
// the one the well-behaved client uses (listeners bound connections per
// source address).
var flooder = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// floodDial opens a connection to addr (host:port) from the flooder's
// address.
func floodDial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: flooder, Timeout: 10 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// floodConns holds what a flood opened, to close it all at the end.
type floodConns struct {
	mu     sync.Mutex
	conns  []net.Conn
	opened int // connections the listener accepted (a write got through)
	failed int
}

func (f *floodConns) add(c net.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
}

// dial opens a connection to addr and keeps it to be closed at the end;
// nil (counted as failed) when it cannot.
func (f *floodConns) dial(ctx context.Context, addr string) net.Conn {
	c, err := floodDial(ctx, addr)
	if err != nil {
		f.count(false)
		return nil
	}
	f.add(c)
	return c
}

func (f *floodConns) count(ok bool) {
	f.mu.Lock()
	if ok {
		f.opened++
	} else {
		f.failed++
	}
	f.mu.Unlock()
}

func (f *floodConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// parallel runs n calls of fn, at most 32 at a time, until ctx ends.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int)) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(ctx, i)
		}()
	}
	wg.Wait()
}

// anonKiB is pid's RssAnon now.
func anonKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("agentbox's memory: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}

// floodCase is one listener's flood.
type floodCase struct {
	listener string
	// flood opens the flood's connections and starts what they send,
	// returning once they are open and sending (its work may go on in
	// the background until ctx ends); it says what it did.
	flood func(ctx context.Context, fc *floodConns) string
	// probe is the well-behaved client's request during the flood (nil:
	// none, for stdio, which has one client).
	probe func(ctx context.Context) error
	// hold keeps the flood up after the probe, for the memory to show.
	hold time.Duration
}

// runFlood floods a listener of the agentbox process pid and judges its
// anonymous memory against floodBound, and the probe.
func runFlood(t *testing.T, pid int, fc floodCase) {
	t.Helper()
	base := anonKiB(t, pid)
	peak := sampleMemory(pid)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var conns floodConns
	defer conns.closeAll()
	t0 := time.Now()
	what := fc.flood(ctx, &conns)
	var probeErr error
	var probeTook time.Duration
	if fc.probe != nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Minute)
		p0 := time.Now()
		probeErr = fc.probe(pctx)
		probeTook = time.Since(p0)
		pcancel()
	}
	select {
	case <-time.After(fc.hold):
	case <-ctx.Done():
	}
	mem := peak()
	cancel()
	conns.mu.Lock()
	opened, failed := conns.opened, conns.failed
	conns.mu.Unlock()
	grew := mem.anon - base
	t.Logf("FIGURES %s: %s; %d connections took the flood, %d were refused or cut; anonymous memory %d MiB before, peak %d MiB during (+%d MiB, bound +%d MiB; %d samples over %v); the other client's request took %v",
		fc.listener, what, opened, failed, base>>10, mem.anon>>10, grew>>10, floodBound>>10, mem.samples, time.Since(t0).Round(time.Second), probeTook.Round(time.Millisecond))
	if mem.samples == 0 {
		t.Fatalf("no memory sample of agentbox was taken")
	}
	if grew > floodBound {
		t.Errorf("%s: agentbox's anonymous memory grew by %d MiB under the flood (from %d to %d MiB), more than the bound of %d MiB",
			fc.listener, grew>>10, base>>10, mem.anon>>10, floodBound>>10)
	}
	if probeErr != nil {
		t.Errorf("%s: the other client was not served during the flood: %v", fc.listener, probeErr)
	}
}

// ---- HTTP/1.1 by hand ----

// slowloris opens n connections that send a request's line and then
// headers, headerBytes in all, without ever ending them.
func slowloris(ctx context.Context, fc *floodConns, addr, path string, n, headerBytes int) {
	line := "X-Flood: " + strings.Repeat("a", 1000) + "\r\n"
	var head strings.Builder
	for head.Len() < headerBytes {
		head.WriteString(line)
	}
	parallel(ctx, n, func(ctx context.Context, _ int) {
		c := fc.dial(ctx, addr)
		if c == nil {
			return
		}
		c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+head.String())
		fc.count(err == nil)
	})
}

// together runs the floods at once and returns when all have.
func together(floods ...func()) {
	var wg sync.WaitGroup
	for _, f := range floods {
		wg.Go(f)
	}
	wg.Wait()
}

// idle opens n connections that send nothing.
func idle(ctx context.Context, fc *floodConns, addr string, n int) {
	parallel(ctx, n, func(ctx context.Context, _ int) {
		c := fc.dial(ctx, addr)
		if c == nil {
			return
		}
		fc.count(true)
	})
}

// unfinishedBodies opens n connections, each POSTing to path a body of
// the given length of which it sends all but the last KiB (headers are
// extra header lines).
func unfinishedBodies(ctx context.Context, fc *floodConns, addr, path, headers string, n, length int) {
	body := strings.Repeat("x", length-1024)
	parallel(ctx, n, func(ctx context.Context, _ int) {
		c := fc.dial(ctx, addr)
		if c == nil {
			return
		}
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %d\r\n\r\n%s", path, headers, length, body)
		fc.count(err == nil)
	})
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// ---- WebSockets by hand ----

// wsDial opens a WebSocket to path from the flooder's address, with extra
// header lines; it returns the connection once the server switched
// protocols.
func wsDial(ctx context.Context, addr, path, headers string) (net.Conn, error) {
	c, err := floodDial(ctx, addr)
	if err != nil {
		return nil, err
	}
	var key [16]byte
	rand.Read(key[:])
	c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n%s\r\n",
		path, base64.StdEncoding.EncodeToString(key[:]), headers)
	if err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("the handshake: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// wsFrame writes one masked client frame: opcode (0 continuation, 1 text,
// 2 binary), fin, and a payload of n bytes of 'x'; declared, when
// positive, is the length the header claims instead (more than is sent).
func wsFrame(w io.Writer, opcode byte, fin bool, n int, declared uint64) error {
	if declared == 0 {
		declared = uint64(n)
	}
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	hdr := []byte{b0, 0x80 | 127}
	hdr = binary.BigEndian.AppendUint64(hdr, declared)
	hdr = append(hdr, 1, 2, 3, 4) // the mask
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = 'x' ^ []byte{1, 2, 3, 4}[i%4]
	}
	_, err := w.Write(append(hdr, payload...))
	return err
}

// wsFragments sends a text message in frames of chunk bytes, total bytes
// in all, and never its last frame.
func wsFragments(c net.Conn, total, chunk int) error {
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for sent := 0; sent < total; sent += chunk {
		op := byte(0)
		if sent == 0 {
			op = 1
		}
		if err := wsFrame(c, op, false, min(chunk, total-sent), 0); err != nil {
			return err
		}
	}
	return nil
}

// ---- agentbox serve ----

// startServeTokens starts agentbox serve accepting the tokens (a token
// file of its own) and waits until it listens.
func startServeTokens(t *testing.T, tokens []string, args ...string) *served {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte(strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := spawnServe(t, nil, append([]string{"--listen", "127.0.0.1:0", "--token-file", tokenFile}, args...)...)
	s.token = tokens[0]
	return s
}

// floodTokens are the flooder's token and the well-behaved client's.
var floodTokens = []string{"flood-token-0123456789abcdef", "other-token-0123456789abcdef"}

// serverUp asks GET /v1/server with the other client's token.
func serverUp(ctx context.Context, base string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/server", nil)
	req.Header.Set("Authorization", "Bearer "+floodTokens[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET /v1/server: %s", resp.Status)
	}
	return nil
}

// TestFloodServeHTTP: agentbox serve's HTTP listener under slowloris
// headers (60 KiB each, never ended), connections that send nothing, and
// huge unfinished bodies, with and without the token, on every endpoint
// that takes one.
func TestFloodServeHTTP(t *testing.T) {
	testenv.Require(t, testenv.Docker())
	s := startServeTokens(t, floodTokens, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir())
	addr := hostOf(t, s.url)
	if err := serverUp(t.Context(), s.url); err != nil {
		t.Fatal(err)
	}
	auth := "Authorization: Bearer " + floodTokens[0] + "\r\n"
	runFlood(t, s.cmd.Process.Pid, floodCase{
		listener: "serve HTTP",
		flood: func(ctx context.Context, fc *floodConns) string {
			together(
				func() { slowloris(ctx, fc, addr, "/v1/server", 1500, 60<<10) },
				func() { idle(ctx, fc, addr, 500) },
				func() {
					unfinishedBodies(ctx, fc, addr, "/v1/envs", "Content-Type: application/json\r\n"+auth, 100, 64<<10)
				},
				func() {
					unfinishedBodies(ctx, fc, addr, "/v1/envs", "Content-Type: application/json\r\n", 100, 64<<10)
				},
				func() {
					unfinishedBodies(ctx, fc, addr, "/v1/uploads", "Content-Type: application/x-tar\r\n"+auth, 20, 64<<20)
				},
			)
			return "1500 slowloris connections (60 KiB of headers, never ended), 500 idle, 200 creates of 64 KiB (half without the token) and 20 uploads of 64 MiB left unfinished, from 127.0.0.2"
		},
		probe: func(ctx context.Context) error { return serverUp(ctx, s.url) },
		hold:  3 * time.Second,
	})
	if err := serverUp(t.Context(), s.url); err != nil {
		t.Errorf("after the flood: %v", err)
	}
}

// TestFloodServeWebSockets: the step WebSockets and event streams of
// agentbox serve. The flooder fills each of its environments (the most
// its token may hold) with the most connections an environment takes:
// WebSockets that send a message in fragments up to the message bound
// and never finish it, or a frame claiming 2^62 bytes, WebSockets that
// ask for observations as RGBA and never read, and event streams never
// read. Another token's client steps its own environment meanwhile.
func TestFloodServeWebSockets(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	const envs = 6
	s := startServeTokens(t, floodTokens, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(),
		"--max-envs", strconv.Itoa(envs), "--start-timeout", "5m")
	addr := hostOf(t, s.url)
	ctx := t.Context()
	fcl, err := client.New(s.url, floodTokens[0])
	if err != nil {
		t.Fatal(err)
	}
	ocl, err := client.New(s.url, floodTokens[1])
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range envs {
		e, err := fcl.Create(ctx, api.CreateRequest{App: "mover"})
		if err != nil {
			t.Fatalf("%v\n%s", err, s.log())
		}
		ids = append(ids, e.ID())
	}
	other, err := ocl.Create(ctx, api.CreateRequest{App: "mover"})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log())
	}
	if _, _, err := other.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	auth := "Authorization: Bearer " + floodTokens[0] + "\r\n"
	runFlood(t, s.cmd.Process.Pid, floodCase{
		listener: "serve WebSockets and SSE",
		flood: func(ctx context.Context, fc *floodConns) string {
			parallel(ctx, envs*16, func(ctx context.Context, i int) {
				id := ids[i/16]
				switch k := i % 16; {
				case k < 12: // a message up to its bound in fragments, never finished
					c, err := wsDial(ctx, addr, "/v1/envs/"+id+"/ws", auth)
					if err != nil {
						fc.count(false)
						return
					}
					fc.add(c)
					fc.count(wsFragments(c, api.MaxMessage-4096, 64<<10) == nil)
				case k < 13: // one frame claiming 2^62 bytes, with a MiB of them
					c, err := wsDial(ctx, addr, "/v1/envs/"+id+"/ws", auth)
					if err != nil {
						fc.count(false)
						return
					}
					fc.add(c)
					c.SetWriteDeadline(time.Now().Add(30 * time.Second))
					fc.count(wsFrame(c, 1, false, 1<<20, 1<<62) == nil)
				case k < 15: // observations asked for and never read
					c, err := wsDial(ctx, addr, "/v1/envs/"+id+"/ws", auth)
					if err != nil {
						fc.count(false)
						return
					}
					fc.add(c)
					c.SetWriteDeadline(time.Now().Add(30 * time.Second))
					req := `{"op":"observe","image":"rgba"}`
					var err2 error
					for range 50 {
						if err2 = wsFrameText(c, req); err2 != nil {
							break
						}
					}
					fc.count(err2 == nil)
				default: // the event stream, never read
					c := fc.dial(ctx, addr)
					if c == nil {
						return
					}
					_, err := fmt.Fprintf(c, "GET /v1/envs/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", id, auth)
					fc.count(err == nil)
				}
			})
			return fmt.Sprintf("%d environments × 16 connections: 12 WebSockets sending %d bytes in 64 KiB fragments never finished, 1 a frame claiming 2^62 bytes, 2 asking 50 RGBA observations never read, 1 event stream never read, from 127.0.0.2", envs, api.MaxMessage-4096)
		},
		probe: func(ctx context.Context) error {
			for i := range 5 {
				x, y := 100+i*10, 100
				if _, _, _, _, _, err := other.Step(ctx, action.Action{Kind: action.MouseMove, X: &x, Y: &y}); err != nil {
					return fmt.Errorf("step %d: %w", i+1, err)
				}
			}
			return serverUp(ctx, s.url)
		},
		hold: 5 * time.Second,
	})
}

// wsFrameText writes one whole masked text message.
func wsFrameText(w io.Writer, text string) error {
	hdr := []byte{0x81, 0x80 | 127}
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(text)))
	mask := []byte{1, 2, 3, 4}
	hdr = append(hdr, mask...)
	p := []byte(text)
	for i := range p {
		p[i] ^= mask[i%4]
	}
	_, err := w.Write(append(hdr, p...))
	return err
}

// TestFloodServeMCP: /v1/mcp under the flooder's token: its sessions, the
// most it may hold, each sent requests whose bodies stop just short of
// the bound, and new sessions' bodies likewise; another token's MCP
// client initializes and lists the tools meanwhile.
func TestFloodServeMCP(t *testing.T) {
	testenv.Require(t, testenv.Docker())
	s := startServeTokens(t, floodTokens, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir())
	addr := hostOf(t, s.url)
	ctx := t.Context()
	hc := &http.Client{Transport: bearerTransport{floodTokens[0]}}
	var sessions []string
	for range 16 {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || id == "" {
			t.Fatalf("initialize: %s, session %q", resp.Status, id)
		}
		sessions = append(sessions, id)
	}
	auth := "Authorization: Bearer " + floodTokens[0] + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	const bodies = 48
	runFlood(t, s.cmd.Process.Pid, floodCase{
		listener: "serve /v1/mcp",
		flood: func(ctx context.Context, fc *floodConns) string {
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				parallel(ctx, bodies, func(ctx context.Context, i int) {
					unfinishedBodies(ctx, fc, addr, "/v1/mcp", auth+"Mcp-Session-Id: "+sessions[i%len(sessions)]+"\r\nMcp-Protocol-Version: 2025-06-18\r\n", 1, 8<<20)
				})
			}()
			go func() {
				defer wg.Done()
				unfinishedBodies(ctx, fc, addr, "/v1/mcp", auth, 16, 8<<20)
			}()
			wg.Wait()
			return fmt.Sprintf("16 sessions, %d requests in them with bodies of 8 MiB left 1 KiB short, 16 new sessions' likewise, from 127.0.0.2", bodies)
		},
		probe: func(ctx context.Context) error {
			c := sdk.NewClient(&sdk.Implementation{Name: "other", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.url + "/v1/mcp", HTTPClient: &http.Client{Transport: bearerTransport{floodTokens[1]}}}, nil)
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				return fmt.Errorf("tools/list: %w", err)
			}
			if len(tools.Tools) == 0 {
				return errors.New("tools/list: no tools")
			}
			return nil
		},
		hold: 5 * time.Second,
	})
}

// ---- the live page ----

// TestFloodLive: agentbox run --live's page: slowloris headers,
// connections that send nothing, and WebSockets of the view that send a
// message up to its bound in fragments never finished or never read what
// the page is sent; another viewer loads the page and gets its
// WebSocket's hello meanwhile.
func TestFloodLive(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	script := writeScript(t, "steps:\n  - {wait_for: log, contains: never said, timeout_ms: 600000}\n")
	run := startLive(t, "run", moverApp(t, ""), "--script", script, "--live", "--out", filepath.Join(t.TempDir(), "trace"), "--timeout", "10m")
	addr := hostOf(t, run.url)
	tok := strings.TrimPrefix(run.url[strings.Index(run.url, "?"):], "?token=")
	port := addr[strings.LastIndex(addr, ":")+1:]
	cookie := "Cookie: agentbox_live_" + port + "=" + tok + "\r\n"
	probe := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v/1", nil)
		req.Header.Set("Cookie", "agentbox_live_"+port+"="+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `data-page="view"`) {
			return fmt.Errorf("GET /v/1: %s", resp.Status)
		}
		// The page's WebSocket, from the usual address: its hello.
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET /ws/v/1 HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s\r\n", addr, cookie)
		br := bufio.NewReader(c)
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			return fmt.Errorf("the WebSocket: %s", resp.Status)
		}
		for range 20 {
			var h [2]byte
			if _, err := io.ReadFull(br, h[:]); err != nil {
				return fmt.Errorf("reading the WebSocket: %w", err)
			}
			n := uint64(h[1] & 0x7f)
			switch n {
			case 126:
				var b [2]byte
				io.ReadFull(br, b[:])
				n = uint64(binary.BigEndian.Uint16(b[:]))
			case 127:
				var b [8]byte
				io.ReadFull(br, b[:])
				n = binary.BigEndian.Uint64(b[:])
			}
			p := make([]byte, min(n, 64<<20))
			if _, err := io.ReadFull(br, p); err != nil {
				return fmt.Errorf("reading the WebSocket: %w", err)
			}
			var m struct {
				T string `json:"t"`
			}
			if h[0]&0x0f == 1 && json.Unmarshal(p, &m) == nil && m.T == "hello" {
				return nil
			}
		}
		return errors.New("no hello among the WebSocket's first 20 messages")
	}
	// The page is up before the run's sandbox: its view is there once
	// the run started.
	for deadline := time.Now().Add(5 * time.Minute); ; {
		err := probe(t.Context())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("before the flood: %v\n%s", err, run.stderr())
		}
		time.Sleep(time.Second)
	}
	runFlood(t, run.cmd.Process.Pid, floodCase{
		listener: "live page (run --live)",
		flood: func(ctx context.Context, fc *floodConns) string {
			together(
				func() { slowloris(ctx, fc, addr, "/", 1500, 14<<10) },
				func() { idle(ctx, fc, addr, 500) },
				func() {
					parallel(ctx, 300, func(ctx context.Context, i int) {
						c, err := wsDial(ctx, addr, "/ws/v/1", cookie)
						if err != nil {
							fc.count(false)
							return
						}
						fc.add(c)
						if i%2 == 0 { // a message up to its bound, never finished
							fc.count(wsFragments(c, 60<<10, 8<<10) == nil)
						} else { // never reads what it is sent
							fc.count(true)
						}
					})
				},
			)
			return "1500 slowloris connections (14 KiB of headers, never ended), 500 idle, 300 view WebSockets (half sending 60 KiB in fragments never finished, half never reading), from 127.0.0.2"
		},
		probe: probe,
		hold:  3 * time.Second,
	})
}

// ---- agentbox mcp's stdio ----

// TestFloodMCPStdio: agentbox mcp's stdin, its only listener, takes a
// client's messages: many huge messages, each one below the line bound,
// then a normal request, which is answered; and, in another process, a
// line of 256 MiB without its newline, which ends the session (the
// process exits, naming the bound) instead of being kept.
func TestFloodMCPStdio(t *testing.T) {
	testenv.Require(t, testenv.Docker())
	bin := testenv.Build(t, "./cmd/agentbox")
	app := moverApp(t, "")
	start := func(t *testing.T) (*exec.Cmd, chan struct{}, io.WriteCloser, *bufio.Reader, *testenv.Buffer) {
		cmd := exec.Command(bin, "mcp", app, "--backend", "docker", "--out", t.TempDir())
		var stderr testenv.Buffer
		cmd.Stderr = &stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			in.Close()
			select {
			case <-done:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-done
			}
		})
		r := bufio.NewReaderSize(out, 1<<20)
		io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`+"\n")
		if _, err := readRPC(r, 1); err != nil {
			t.Fatalf("initialize: %v\n%s", err, stderr.String())
		}
		io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		return cmd, done, in, r, &stderr
	}
	t.Run("many huge messages", func(t *testing.T) {
		cmd, _, in, r, stderr := start(t)
		const n, size = 16, mcpStdioLine - 4096
		answered := make(chan error, 1)
		runFlood(t, cmd.Process.Pid, floodCase{
			listener: "agentbox mcp stdio (many huge messages)",
			flood: func(ctx context.Context, fc *floodConns) string {
				go func() {
					for i := range n {
						text := strings.Repeat("x", size-200)
						msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"type","arguments":{"text":"%s"}}}`+"\n", 100+i, text)
						if _, err := io.WriteString(in, msg); err != nil {
							answered <- err
							return
						}
					}
					io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
				}()
				go func() {
					_, err := readRPC(r, 2)
					answered <- err
				}()
				return fmt.Sprintf("%d tools/call messages of %d MiB each (just below the line bound), then tools/list", n, size>>20)
			},
			probe: func(ctx context.Context) error {
				select {
				case err := <-answered:
					if err != nil {
						return fmt.Errorf("tools/list after the huge messages: %w\n%s", err, stderr.String())
					}
					return nil
				case <-ctx.Done():
					return fmt.Errorf("tools/list after the huge messages: no answer\n%s", stderr.String())
				}
			},
			hold: time.Second,
		})
	})
	t.Run("a line without end", func(t *testing.T) {
		cmd, exited, in, _, stderr := start(t)
		runFlood(t, cmd.Process.Pid, floodCase{
			listener: "agentbox mcp stdio (a line without end)",
			flood: func(ctx context.Context, fc *floodConns) string {
				go func() {
					io.WriteString(in, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"type","arguments":{"text":"`)
					chunk := strings.Repeat("x", 1<<20)
					for range 256 {
						if _, err := io.WriteString(in, chunk); err != nil {
							break // the session ended: it stopped reading
						}
					}
				}()
				return "one line of 256 MiB without its newline"
			},
			probe: func(ctx context.Context) error {
				select {
				case <-exited:
					return nil
				case <-ctx.Done():
					return fmt.Errorf("agentbox mcp did not end the session\n%s", stderr.String())
				}
			},
			hold: 0,
		})
		t.Logf("agentbox mcp (exit %d) said:\n%s", cmd.ProcessState.ExitCode(), stderr.String())
		if code := cmd.ProcessState.ExitCode(); code != 3 {
			t.Errorf("agentbox mcp exited %d after the endless line, want 3", code)
		}
		if want := fmt.Sprintf("a message on standard input exceeds %d MiB (the limit); ending the session", mcpStdioLine>>20); !strings.Contains(stderr.String(), want) {
			t.Errorf("agentbox mcp did not say %q on stderr:\n%s", want, stderr.String())
		}
	})
}

// mcpStdioLine is the bound on one message of agentbox mcp's stdio.
const mcpStdioLine = mcp.MaxLine

// readRPC reads answers from r until the one with id.
func readRPC(r *bufio.Reader, id int) (json.RawMessage, error) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil || *m.ID != id {
			continue
		}
		if m.Error != nil {
			return nil, fmt.Errorf("error %s", m.Error)
		}
		return m.Result, nil
	}
}
