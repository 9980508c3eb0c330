"""Unit tests of the WebSocket client (agentbox._ws) against a scripted
peer on loopback: what a real server rarely sends (masked frames, reserved
bits, a wrong accept key, interleaved pings, 64-bit lengths, a close in
the middle of a message) is sent here on purpose. The same client against
the real server is test_ws_server.py."""

import base64
import hashlib
import socket
import struct
import threading

import pytest

from agentbox import _ws

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def test_mask_round_trips_and_matches_the_rfc():
    # RFC 6455 5.7: "Hello" masked with 37 fa 21 3d is 7f 9f 4d 51 58.
    key = bytes([0x37, 0xFA, 0x21, 0x3D])
    assert _ws.mask(key, b"Hello") == bytes([0x7F, 0x9F, 0x4D, 0x51, 0x58])
    for n in (0, 1, 3, 4, 5, 125, 126, 65535, 65536, 1 << 20):
        data = bytes(range(256)) * (n // 256) + bytes(range(n % 256))
        masked = _ws.mask(key, data)
        assert len(masked) == n
        assert _ws.mask(key, masked) == data


def test_accept_key_of_the_rfc():
    assert _ws.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


class Peer:
    """A one-connection WebSocket server whose every byte the test scripts."""

    def __init__(self, script, accept=None, status=101, extra=b""):
        self.ln = socket.socket()
        self.ln.bind(("127.0.0.1", 0))
        self.ln.listen(1)
        self.url = "ws://127.0.0.1:%d/v1/x" % self.ln.getsockname()[1]
        self.script, self.accept, self.status, self.extra = script, accept, status, extra
        self.request = b""
        self.error = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            c, _ = self.ln.accept()
            c.settimeout(10)
            self.conn = c
            while b"\r\n\r\n" not in self.request:
                chunk = c.recv(4096)
                if not chunk:
                    raise EOFError("the client closed during the handshake")
                self.request += chunk
            key = [ln.split(b":", 1)[1].strip() for ln in self.request.split(b"\r\n") if ln.lower().startswith(b"sec-websocket-key:")][0]
            accept = self.accept or base64.b64encode(hashlib.sha1(key + GUID).digest())
            if self.status == 101:
                c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n" + self.extra + b"\r\n")
            else:
                body = b'{"error":{"code":"unauthorized","message":"no","status":401}}'
                c.sendall(b"HTTP/1.1 %d No\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (self.status, len(body)) + body)
            self.script(self)
        except Exception as e:  # reported by done()
            self.error = e
        finally:
            try:
                self.conn.close()
            except Exception:
                pass
            self.ln.close()

    def frame(self, opcode, payload=b"", fin=True, masked=False, rsv=0):
        head = bytearray([(0x80 if fin else 0) | rsv << 4 | opcode])
        n = len(payload)
        m = 0x80 if masked else 0
        if n < 126:
            head.append(m | n)
        elif n < 65536:
            head += bytes([m | 126]) + struct.pack("!H", n)
        else:
            head += bytes([m | 127]) + struct.pack("!Q", n)
        if masked:
            head += b"\x01\x02\x03\x04"
            payload = _ws.mask(b"\x01\x02\x03\x04", payload)
        self.conn.sendall(bytes(head) + payload)

    def _exact(self, n):
        b = b""
        while len(b) < n:
            chunk = self.conn.recv(n - len(b))
            if not chunk:
                raise EOFError("the client closed")
            b += chunk
        return b

    def read(self):
        """A frame of the client: (fin, opcode, payload, was it masked)."""
        b0, b1 = self._exact(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._exact(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._exact(8))
        key = self._exact(4) if b1 & 0x80 else None
        payload = self._exact(n)
        if key:
            payload = _ws.mask(key, payload)
        return bool(b0 & 0x80), b0 & 0x0F, payload, key is not None

    def done(self):
        self.t.join(10)
        if self.error:
            raise self.error


def test_handshake_and_masked_frames():
    got = []

    def script(p):
        got.append(p.read())
        got.append(p.read())  # 70000 bytes: a 64-bit length
        p.frame(_ws.OP_TEXT, "héllo".encode())
        got.append(p.read())  # the close
        p.frame(_ws.OP_CLOSE, struct.pack("!H", 1000))

    p = Peer(script)
    ws = _ws.connect(p.url, {"Authorization": "Bearer t0k"}, timeout=10)
    ws.send_text('{"op":"info"}')
    big = bytes(range(256)) * 273 + b"1234"
    ws.send_binary(big)
    assert ws.recv() == (_ws.OP_TEXT, "héllo")
    assert ws.close() == 1000
    p.done()
    req = p.request.decode()
    assert req.startswith("GET /v1/x HTTP/1.1\r\n")
    assert "Authorization: Bearer t0k\r\n" in req and "Sec-WebSocket-Version: 13\r\n" in req
    assert got[0] == (True, _ws.OP_TEXT, b'{"op":"info"}', True)
    assert got[1] == (True, _ws.OP_BINARY, big, True)
    assert got[2][1] == _ws.OP_CLOSE and got[2][2][:2] == struct.pack("!H", 1000) and got[2][3]


def test_fragmented_message_with_a_ping_between_fragments():
    pongs = []

    def script(p):
        p.frame(_ws.OP_BINARY, b"a" * 100, fin=False)
        p.frame(_ws.OP_PING, b"are you there")
        p.frame(_ws.OP_CONTINUATION, b"b" * 70000, fin=False)
        p.frame(_ws.OP_PONG, b"unasked")
        p.frame(_ws.OP_CONTINUATION, b"c", fin=True)
        pongs.append(p.read())

    p = Peer(script)
    ws = _ws.connect(p.url, timeout=10)
    op, data = ws.recv()
    assert op == _ws.OP_BINARY and data == b"a" * 100 + b"b" * 70000 + b"c"
    assert ws.frames_received == 5
    assert ws.pongs == [b"unasked"]
    p.done()
    assert pongs == [(True, _ws.OP_PONG, b"are you there", True)]


@pytest.mark.parametrize(
    "frames, why",
    [
        ([(_ws.OP_TEXT, b"x", True, True, 0)], "masked frame from the server"),
        ([(_ws.OP_TEXT, b"x", True, False, 4)], "reserved bits"),
        ([(0x3, b"x", True, False, 0)], "unknown opcode"),
        ([(_ws.OP_CONTINUATION, b"x", True, False, 0)], "no message to continue"),
        ([(_ws.OP_TEXT, b"x", False, False, 0), (_ws.OP_TEXT, b"y", True, False, 0)], "new message began"),
        ([(_ws.OP_PING, b"x" * 126, True, False, 0)], "control frame longer"),
        ([(_ws.OP_PING, b"x", False, False, 0)], "fragmented"),
        ([(_ws.OP_TEXT, b"\xff\xfe", True, False, 0)], "not UTF-8"),
    ],
)
def test_protocol_violations_fail_the_connection(frames, why):
    closes = []

    def script(p):
        for op, payload, fin, masked, rsv in frames:
            p.frame(op, payload, fin=fin, masked=masked, rsv=rsv)
        closes.append(p.read())

    p = Peer(script)
    ws = _ws.connect(p.url, timeout=10)
    with pytest.raises(_ws.ProtocolError, match=why):
        ws.recv()
    assert ws.closed
    p.done()
    code = struct.unpack("!H", closes[0][2][:2])[0]
    assert closes[0][1] == _ws.OP_CLOSE and code in (1002, 1007)


def test_a_message_beyond_the_limit_is_refused():
    closes = []

    def script(p):
        p.frame(_ws.OP_BINARY, b"x" * 600, fin=False)
        p.frame(_ws.OP_CONTINUATION, b"x" * 600)
        closes.append(p.read())

    p = Peer(script)
    ws = _ws.connect(p.url, timeout=10, max_message=1000)
    with pytest.raises(_ws.ProtocolError, match="more than 1000"):
        ws.recv()
    p.done()
    assert struct.unpack("!H", closes[0][2][:2])[0] == 1009


def test_close_from_the_server_is_echoed_and_raised():
    echoed = []

    def script(p):
        p.frame(_ws.OP_TEXT, b"part", fin=False)
        p.frame(_ws.OP_CLOSE, struct.pack("!H", 1001) + "going away ✓".encode())
        echoed.append(p.read())

    p = Peer(script)
    ws = _ws.connect(p.url, timeout=10)
    with pytest.raises(_ws.ConnectionClosed) as e:
        ws.recv()
    assert e.value.code == 1001 and e.value.reason == "going away ✓"
    p.done()
    assert echoed[0][1] == _ws.OP_CLOSE and echoed[0][2] == struct.pack("!H", 1001)
    with pytest.raises(_ws.ConnectionClosed):
        ws.send_text("after the close")


def test_a_connection_that_breaks_mid_frame():
    def script(p):
        p.conn.sendall(bytes([0x82, 126]) + struct.pack("!H", 1000) + b"only part")

    p = Peer(script)
    ws = _ws.connect(p.url, timeout=10)
    with pytest.raises(_ws.ConnectionClosed) as e:
        ws.recv()
    assert e.value.code == 1006
    p.done()


@pytest.mark.parametrize(
    "accept, status, extra, why",
    [
        (b"d3JvbmcgYWNjZXB0IGtleQ==", 101, b"", "Sec-WebSocket-Accept"),
        (None, 101, b"Sec-WebSocket-Extensions: permessage-deflate\r\n", "extension"),
        (None, 401, b"", "answered 401"),
    ],
)
def test_handshakes_refused(accept, status, extra, why):
    p = Peer(lambda p: None, accept=accept, status=status, extra=extra)
    with pytest.raises(_ws.HandshakeError, match=why) as e:
        _ws.connect(p.url, timeout=10)
    p.done()
    if status == 401:
        assert e.value.status == 401 and b"unauthorized" in e.value.body


def test_nothing_listening():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionRefusedError):
        _ws.connect("ws://127.0.0.1:%d/" % port, timeout=10)


def test_bad_urls_and_headers():
    with pytest.raises(ValueError):
        _ws.connect("http://127.0.0.1/")
    # Refused before anything is sent (nothing listens there).
    with pytest.raises(ValueError, match="line breaks"):
        _ws.connect("ws://127.0.0.1:9/", {"X-Evil": "a\r\nHost: elsewhere"}, timeout=10)


def test_a_length_with_its_top_bit_set():
    closes = []

    def script(p):
        p.conn.sendall(bytes([0x82, 127]) + struct.pack("!Q", 1 << 63 | 5) + b"hello")
        closes.append(p.read())

    p = Peer(script)
    ws = _ws.connect(p.url, timeout=10)
    with pytest.raises(_ws.ProtocolError, match="top bit"):
        ws.recv()
    p.done()
    assert struct.unpack("!H", closes[0][2][:2])[0] == 1002


def test_endless_handshake_headers():
    p = Peer(lambda p: None, extra=b"".join(b"X-Filler-%d: %s\r\n" % (i, b"x" * 1000) for i in range(100)))
    with pytest.raises(_ws.HandshakeError, match="too long"):
        _ws.connect(p.url, timeout=10)
    p.t.join(10)
    assert p.error is None or isinstance(p.error, OSError)  # the client hung up on it
