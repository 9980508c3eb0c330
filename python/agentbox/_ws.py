"""A minimal WebSocket client (RFC 6455), standard library only.

Just what the step loop needs: the opening handshake over a plain or TLS
socket, masked frames out, text and binary messages in (fragmented or not,
of any length up to a bound), ping answered with pong, and the closing
handshake. No extensions (permessage-deflate is not offered), no
subprotocols.

A protocol violation by the server raises ProtocolError after failing the
connection (close 1002); a close from the server raises ConnectionClosed
with its code and reason; a connection that breaks raises
ConnectionClosed with code 1006.
"""

import base64
import hashlib
import os
import socket
import ssl as _ssl
import struct
import urllib.parse

__all__ = [
    "WebSocket",
    "WebSocketError",
    "HandshakeError",
    "ProtocolError",
    "ConnectionClosed",
    "connect",
    "mask",
    "OP_CONTINUATION",
    "OP_TEXT",
    "OP_BINARY",
    "OP_CLOSE",
    "OP_PING",
    "OP_PONG",
]

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

_DATA_OPS = (OP_CONTINUATION, OP_TEXT, OP_BINARY)
_CONTROL_OPS = (OP_CLOSE, OP_PING, OP_PONG)

# Close codes (RFC 6455 section 7.4.1).
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_NO_STATUS = 1005
CLOSE_ABNORMAL = 1006
CLOSE_INVALID_DATA = 1007
CLOSE_TOO_BIG = 1009

# The most bytes of headers a handshake answer may have.
_MAX_HANDSHAKE = 64 << 10


class WebSocketError(Exception):
    """Something went wrong on a WebSocket."""


class HandshakeError(WebSocketError):
    """The server did not switch to the WebSocket protocol: ``status``,
    ``headers`` (lower-case names) and ``body`` are its answer."""

    def __init__(self, message, status=0, headers=None, body=b""):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}
        self.body = body


class ProtocolError(WebSocketError):
    """The server broke the protocol; the connection is failed."""


class ConnectionClosed(WebSocketError):
    """The connection is closed: by a close frame (``code``, ``reason``),
    or broken (code 1006)."""

    def __init__(self, code, reason=""):
        self.code = code
        self.reason = reason
        text = "the WebSocket closed with code %d" % code
        if code == CLOSE_ABNORMAL:
            text = "the WebSocket connection broke"
        if reason:
            text += ": " + reason
        super().__init__(text)


def mask(key, data):
    """XOR data with the 4-byte masking key, repeated (RFC 6455 5.3)."""
    n = len(data)
    if n == 0:
        return b""
    # One big-integer XOR: C speed for any length, no per-byte loop.
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def accept_key(key):
    """The Sec-WebSocket-Accept value the server must answer for key."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def connect(url, headers=None, timeout=30.0, ssl_context=None, max_message=64 << 20):
    """Open a WebSocket to url (ws:// or wss://) with extra request headers.

    timeout bounds connecting and the handshake, and is then each read's and
    write's timeout (None: none). Raises HandshakeError when the server
    answers anything but 101 Switching Protocols, OSError when it cannot be
    reached.
    """
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("ws", "wss") or not u.hostname:
        raise ValueError("%r is not a ws:// or wss:// URL" % url)
    for name, value in (headers or {}).items():
        if any(c in str(name) + str(value) for c in "\r\n\0"):
            raise ValueError("header %r: no line breaks allowed" % name)
    secure = u.scheme == "wss"
    port = u.port or (443 if secure else 80)
    sock = socket.create_connection((u.hostname, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secure:
            ctx = ssl_context or _ssl.create_default_context()
            sock = ctx.wrap_socket(sock, server_hostname=u.hostname)
        ws = WebSocket(sock, max_message=max_message)
        ws._handshake(u, headers or {})
        return ws
    except BaseException:
        sock.close()
        raise


class WebSocket:
    """The client end of one WebSocket connection. Not safe for use by
    several threads at once.

    ``frames_received`` counts the frames read (data and control):
    fragmented messages show as more frames than messages.
    """

    def __init__(self, sock, max_message=64 << 20):
        self.sock = sock
        self.max_message = max_message
        self._rfile = sock.makefile("rb", buffering=256 << 10)
        self.closed = False
        self.close_code = None
        self.close_reason = ""
        self.frames_received = 0
        self.pongs = []  # payloads of the pongs received, the latest last (at most 16)

    # -- the opening handshake --------------------------------------------

    def _handshake(self, u, headers):
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        host = u.hostname
        if ":" in host:  # an IPv6 literal
            host = "[%s]" % host
        if u.port:
            host += ":%d" % u.port
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        lines = [
            "GET %s HTTP/1.1" % path,
            "Host: %s" % host,
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: %s" % key,
            "Sec-WebSocket-Version: 13",
        ]
        for name, value in headers.items():
            lines.append("%s: %s" % (name, value))
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

        status_line = self._rfile.readline(_MAX_HANDSHAKE)
        if not status_line:
            raise ConnectionClosed(CLOSE_ABNORMAL, "the server closed the connection during the handshake")
        parts = status_line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise HandshakeError("the server's answer is not HTTP: %r" % status_line[:80])
        status = int(parts[1])
        answer = {}
        size = len(status_line)
        while True:
            line = self._rfile.readline(_MAX_HANDSHAKE)
            size += len(line)
            if not line or size > _MAX_HANDSHAKE:
                raise HandshakeError("the server's answer ended early or is too long", status, answer)
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            answer[name.strip().lower()] = value.strip()
        if status != 101:
            body = b""
            n = answer.get("content-length", "")
            if n.isdigit() and int(n) <= _MAX_HANDSHAKE:
                body = self._rfile.read(int(n))
            raise HandshakeError("the server answered %d instead of switching to WebSocket" % status, status, answer, body)
        if answer.get("upgrade", "").lower() != "websocket" or "upgrade" not in answer.get("connection", "").lower():
            raise HandshakeError("the server's 101 answer lacks Upgrade: websocket", status, answer)
        if answer.get("sec-websocket-accept") != accept_key(key):
            raise HandshakeError("the server's Sec-WebSocket-Accept does not match the key", status, answer)
        if answer.get("sec-websocket-extensions") or answer.get("sec-websocket-protocol"):
            raise HandshakeError("the server chose an extension or subprotocol that was not offered", status, answer)

    # -- frames ------------------------------------------------------------

    def send_frame(self, opcode, payload=b"", fin=True, masked=True, rsv=0):
        """Send one frame as it is. Frames from a client must be masked;
        masked=False is for tests of the server."""
        if self.closed:
            raise ConnectionClosed(self.close_code or CLOSE_ABNORMAL, self.close_reason)
        payload = bytes(payload)
        n = len(payload)
        head = bytearray([(0x80 if fin else 0) | (rsv << 4) | opcode])
        mbit = 0x80 if masked else 0
        if n < 126:
            head.append(mbit | n)
        elif n < 1 << 16:
            head.append(mbit | 126)
            head += struct.pack("!H", n)
        else:
            head.append(mbit | 127)
            head += struct.pack("!Q", n)
        if masked:
            key = os.urandom(4)
            head += key
            payload = mask(key, payload)
        try:
            if n < 4096:
                self.sock.sendall(bytes(head) + payload)
            else:
                self.sock.sendall(head)
                self.sock.sendall(payload)
        except OSError as e:
            self._broken()
            raise ConnectionClosed(CLOSE_ABNORMAL, str(e)) from e

    def _read(self, n):
        try:
            data = self._rfile.read(n)
        except (OSError, ValueError) as e:
            self._broken()
            if isinstance(e, socket.timeout):
                raise
            raise ConnectionClosed(CLOSE_ABNORMAL, str(e)) from e
        if data is None or len(data) < n:
            self._broken()
            raise ConnectionClosed(CLOSE_ABNORMAL, "the server closed the connection")
        return data

    def recv_frame(self):
        """Read one frame: (fin, opcode, payload). Checks what every frame
        must be (unmasked, no reserved bits, a known opcode, a control
        frame short and whole); does not answer pings or closes."""
        b0, b1 = self._read(2)
        fin, rsv, opcode = bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F
        masked, n = bool(b1 & 0x80), b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._read(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read(8))
            if n >> 63:
                self._fail("a frame length with its top bit set")
        if rsv:
            self._fail("reserved bits set in a frame (no extension was agreed)")
        if opcode not in _DATA_OPS and opcode not in _CONTROL_OPS:
            self._fail("unknown opcode 0x%x" % opcode)
        if masked:
            self._fail("a masked frame from the server")
        if opcode in _CONTROL_OPS and (n > 125 or not fin):
            self._fail("a control frame longer than 125 bytes or fragmented")
        if n > self.max_message:
            self._fail("a frame of %d bytes, more than the %d this client accepts" % (n, self.max_message), CLOSE_TOO_BIG)
        payload = self._read(n) if n else b""
        self.frames_received += 1
        return fin, opcode, payload

    # -- messages ----------------------------------------------------------

    def send_text(self, text):
        self.send_frame(OP_TEXT, text.encode("utf-8"))

    def send_binary(self, data):
        self.send_frame(OP_BINARY, data)

    def ping(self, payload=b""):
        """Send a ping; its pong shows in ``pongs`` once read."""
        if len(payload) > 125:
            raise ValueError("a ping carries at most 125 bytes")
        self.send_frame(OP_PING, payload)

    def recv(self):
        """Read the next message: (opcode, payload), opcode OP_TEXT (payload
        a str) or OP_BINARY (bytes). Pings are answered, pongs noted, and a
        close is answered and raised as ConnectionClosed."""
        if self.closed:
            raise ConnectionClosed(self.close_code or CLOSE_ABNORMAL, self.close_reason)
        first = None
        parts = []
        size = 0
        while True:
            fin, opcode, payload = self.recv_frame()
            if opcode == OP_PING:
                self.send_frame(OP_PONG, payload)
                continue
            if opcode == OP_PONG:
                self.pongs = self.pongs[-15:] + [payload]
                continue
            if opcode == OP_CLOSE:
                self._closed_by_server(payload)
            if first is None:
                if opcode == OP_CONTINUATION:
                    self._fail("a continuation frame with no message to continue")
                first = opcode
            elif opcode != OP_CONTINUATION:
                self._fail("a new message began before the last one ended")
            size += len(payload)
            if size > self.max_message:
                self._fail("a message of more than %d bytes" % self.max_message, CLOSE_TOO_BIG)
            parts.append(payload)
            if fin:
                break
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if first == OP_TEXT:
            try:
                return OP_TEXT, data.decode("utf-8")
            except UnicodeDecodeError:
                self._fail("a text message that is not UTF-8", CLOSE_INVALID_DATA)
        return OP_BINARY, data

    # -- closing -----------------------------------------------------------

    def _closed_by_server(self, payload):
        code, reason = CLOSE_NO_STATUS, ""
        if len(payload) == 1:
            self._fail("a close frame with a one-byte body")
        if len(payload) >= 2:
            (code,) = struct.unpack("!H", payload[:2])
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                self._fail("a close reason that is not UTF-8", CLOSE_INVALID_DATA)
        if not self.closed:
            # Echo the close (its code), then the TCP connection ends.
            try:
                self.send_frame(OP_CLOSE, struct.pack("!H", code) if code != CLOSE_NO_STATUS else b"")
            except ConnectionClosed:
                pass
        self.close_code, self.close_reason = code, reason
        self._shutdown()
        raise ConnectionClosed(code, reason)

    def _fail(self, why, code=CLOSE_PROTOCOL_ERROR):
        """Fail the connection: a close with code, then the socket goes."""
        try:
            if not self.closed:
                self.send_frame(OP_CLOSE, struct.pack("!H", code) + why.encode("utf-8")[:120])
        except (ConnectionClosed, OSError):
            pass
        self.close_code, self.close_reason = code, why
        self._shutdown()
        raise ProtocolError(why)

    def _broken(self):
        if not self.closed:
            self.close_code = CLOSE_ABNORMAL
        self._shutdown()

    def _shutdown(self):
        self.closed = True
        try:
            self._rfile.close()
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def close(self, code=CLOSE_NORMAL, reason="", timeout=5.0):
        """The closing handshake: send a close, read until the server's
        close (or timeout), close the socket. Returns the server's close
        code, or None when it sent none. Never raises."""
        if self.closed:
            return self.close_code
        try:
            self.sock.settimeout(timeout)
            self.send_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode("utf-8")[:123])
            self.closed = True  # nothing more may be sent
            while True:
                fin, opcode, payload = self.recv_frame()
                if opcode == OP_CLOSE:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else CLOSE_NO_STATUS
                    return self.close_code
        except (WebSocketError, OSError):
            return None
        finally:
            self._shutdown()

    def settimeout(self, timeout):
        self.sock.settimeout(timeout)
