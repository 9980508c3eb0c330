"""The WebSocket client against the real server (agentbox serve's
/v1/envs/{id}/ws, github.com/coder/websocket) with the mover in a real
sandbox: masking, fragmented and large messages both ways, ping/pong,
the closing handshake, and what the server does with frames a client must
not send."""

import json
import struct

import pytest

from agentbox import _ws

RGBA_640x480 = 640 * 480 * 4


@pytest.fixture
def env(client):
    with client.create("mover") as e:
        yield e


def dial(env):
    return _ws.connect(env._ws_url(), {"Authorization": "Bearer " + env.client.token}, timeout=120)


def answer(ws):
    """The next answer: (JSON, image bytes or None)."""
    op, msg = ws.recv()
    if op == _ws.OP_TEXT:
        return json.loads(msg), None
    (n,) = struct.unpack_from("!I", msg)
    return json.loads(msg[4:4 + n]), msg[4 + n:]


def test_a_large_binary_answer_in_fragments(env):
    ws = dial(env)
    try:
        # The window manager may still be drawing (the title bar of a window
        # just focused, on a busy machine): wait for a still screen first.
        ws.send_text(json.dumps({"id": 0, "op": "step",
                                 "action": {"action": "wait", "until": "stable", "stable_ms": 300}}))
        resp, _ = answer(ws)
        assert resp["id"] == 0 and resp["step"]["result"]["ok"], resp
        ws.send_text(json.dumps({"id": 1, "op": "observe", "image": "rgba"}))
        resp, image = answer(ws)
        frame = resp["observation"]["frame"]
        assert resp["id"] == 1 and frame["format"] == "rgba" and frame["bytes"] == RGBA_640x480
        assert len(image) == RGBA_640x480
        assert image[3::4] == b"\xff" * (640 * 480)  # every pixel's alpha: nothing lost or shifted
        # The server wrote the 1.2 MB message as several frames (a
        # continuation at least): the client put them back together.
        assert ws.frames_received > 1, "the server sent the frame in one piece; fragmentation is untested"
        # The same screen again, known: no pixels, a text answer. A screen
        # that changed after all comes whole, with a new hash, and is the
        # one known next (nothing in the test depends on how busy the
        # machine is).
        known = frame["hash"]
        for i in range(2, 22):
            ws.send_text(json.dumps({"id": i, "op": "observe", "image": "rgba", "known": known}))
            resp, image = answer(ws)
            f = resp["observation"]["frame"]
            assert resp["id"] == i, resp
            if f.get("unchanged"):
                assert image is None and f["hash"] == known, resp
                break
            assert image is not None and len(image) == RGBA_640x480 and f["hash"] != known, resp
            known = f["hash"]
        else:
            pytest.fail("the screen changed on each of 20 observations: 'known' never answered 'unchanged'")
    finally:
        ws.close()


def test_large_masked_requests_whole_and_fragmented_with_a_ping_between(env):
    """A 70,000-character type action needs the 64-bit length; the server
    unmasks and reads all of it (its answer counts the characters), whole
    and in three fragments, each masked with its own key, with a ping
    between them that the server answers in the middle of the message."""
    text = "a" * 70000
    req = json.dumps({"id": 1, "op": "step", "action": {"action": "type", "text": text}}).encode()
    ws = dial(env)
    try:
        ws.send_frame(_ws.OP_TEXT, req)
        resp, _ = answer(ws)
        st = resp["step"]
        assert resp["id"] == 1 and st["invalid"] and "has 70000 characters" in st["result"]["error"], resp

        req = req.replace(b'"id": 1', b'"id": 2')
        third = len(req) // 3
        ws.send_frame(_ws.OP_TEXT, req[:third], fin=False)
        ws.ping(b"between fragments")
        ws.send_frame(_ws.OP_CONTINUATION, req[third:2 * third], fin=False)
        ws.send_frame(_ws.OP_CONTINUATION, req[2 * third:], fin=True)
        resp, _ = answer(ws)
        assert resp["id"] == 2 and "has 70000 characters" in resp["step"]["result"]["error"], resp
        assert ws.pongs == [b"between fragments"]
    finally:
        ws.close()


def test_ping_pong(env):
    ws = dial(env)
    try:
        for payload in (b"", b"x", bytes(range(125))):
            ws.ping(payload)
            ws.send_text('{"id":7,"op":"info"}')
            resp, _ = answer(ws)
            assert resp["id"] == 7 and resp["environment"]["id"] == env.id
            assert ws.pongs[-1] == payload
    finally:
        ws.close()


def test_closing_handshake(env):
    ws = dial(env)
    ws.send_text('{"id":1,"op":"info"}')
    answer(ws)
    # The server echoes the close code, and the environment stays.
    assert ws.close(1000, "done for now") == 1000
    assert ws.closed
    with pytest.raises(_ws.ConnectionClosed):
        ws.send_text('{"id":2,"op":"info"}')
    obs, info = env.observe()
    assert info["env"] == env.id


def test_an_unmasked_frame_ends_the_connection(env):
    ws = dial(env)
    ws.send_frame(_ws.OP_TEXT, b'{"id":1,"op":"info"}', masked=False)
    with pytest.raises(_ws.ConnectionClosed) as e:
        ws.recv()
    # coder/websocket drops the connection (1006) or says why (1002).
    assert e.value.code in (1002, 1006)
    # The server and the environment go on.
    obs, info = env.observe()
    assert info["env"] == env.id


def test_a_binary_request_is_refused_and_the_connection_goes_on(env):
    ws = dial(env)
    try:
        ws.send_binary(b'{"id":1,"op":"info"}')
        resp, _ = answer(ws)
        assert resp["error"]["code"] == "invalid_json" and "text messages" in resp["error"]["message"]
        ws.send_text('{"id":2,"op":"info"}')
        resp, _ = answer(ws)
        assert resp["id"] == 2 and "environment" in resp
    finally:
        ws.close()


def test_a_message_beyond_the_servers_limit_is_closed_1009(env):
    ws = dial(env)
    # api.MaxMessage is 1 MiB + 64 KiB; in fragments, so the server counts
    # the whole message, not one frame.
    chunk = b"x" * (512 << 10)
    ws.send_frame(_ws.OP_TEXT, chunk, fin=False)
    ws.send_frame(_ws.OP_CONTINUATION, chunk, fin=False)
    try:
        ws.send_frame(_ws.OP_CONTINUATION, chunk, fin=True)
    except _ws.ConnectionClosed:
        pass  # the server may have closed before the last fragment went
    with pytest.raises(_ws.ConnectionClosed) as e:
        ws.recv()
    assert e.value.code in (1009, 1006)
    obs, info = env.observe()
    assert info["env"] == env.id


def test_handshake_without_the_token(env):
    with pytest.raises(_ws.HandshakeError) as e:
        _ws.connect(env._ws_url(), timeout=60)
    assert e.value.status == 401
    assert json.loads(e.value.body)["error"]["code"] == "unauthorized"
