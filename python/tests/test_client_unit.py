"""Env's side of the wire against a scripted peer: what a broken or hostile
server may answer (a binary answer shorter than its header says, an answer
to another request, nothing at all), and the tar an upload sends. The
real server is test_env.py's."""

import io
import json
import os
import struct
import tarfile

import pytest

import agentbox
from agentbox import _ws
from test_ws_unit import Peer


def env_at(peer, timeout=30):
    port = peer.url.split(":")[2].split("/")[0]
    c = agentbox.Client("http://127.0.0.1:%s" % port, "test-token-0123456789", timeout=timeout)
    return agentbox.Env(c, "env-x", observation="rgba")


def request_id(peer):
    _, op, payload, masked = peer.read()
    assert op == _ws.OP_TEXT and masked
    return json.loads(payload)["id"]


@pytest.mark.parametrize(
    "answer, why",
    [
        (lambda rid: struct.pack("!I", 1000) + b'{"id":%d}' % rid, "shorter than its header says"),
        (lambda rid: b"\x00\x00", "a binary answer of 2 bytes"),
        (lambda rid: json.dumps({"id": rid + 1, "observation": {}}).encode(), "came for request"),
        (lambda rid: b"not json", "not JSON"),
    ],
)
def test_answers_that_break_the_api(answer, why):
    def script(p):
        rid = request_id(p)
        data = answer(rid)
        p.frame(_ws.OP_BINARY if data[:1] != b"{" and data != b"not json" else _ws.OP_TEXT, data)
        with pytest.raises(EOFError):
            p.read()  # the client drops the connection

    p = Peer(script)
    env = env_at(p)
    with pytest.raises(agentbox.ProtocolError, match=why):
        env.observe()
    assert env._ws is None  # dropped: the next request dials again
    p.done()


def test_the_path_and_the_token_of_the_handshake():
    def script(p):
        rid = request_id(p)
        p.frame(_ws.OP_TEXT, json.dumps({"id": rid, "error": {"code": "episode_ended", "message": "it ended", "status": 409,
                                                              "end": {"outcome": "success", "reason": "done"}}}).encode())
        p.read()

    p = Peer(script)
    env = env_at(p)
    with pytest.raises(agentbox.EpisodeEnded) as e:
        env.step({"action": "key", "keys": "a"})
    assert (e.value.code, e.value.status, e.value.end["reason"]) == ("episode_ended", 409, "done")
    env._drop_ws(graceful=True)
    p.done()
    req = p.request.decode()
    assert req.startswith("GET /v1/envs/env-x/ws HTTP/1.1\r\n")
    assert "Authorization: Bearer test-token-0123456789\r\n" in req


def test_a_server_that_never_answers():
    def script(p):
        request_id(p)
        try:
            p.read()  # nothing is answered; the client gives up and goes
        except EOFError:
            pass

    p = Peer(script)
    env = env_at(p, timeout=1)
    with pytest.raises(agentbox.Timeout) as e:
        env.observe()
    assert isinstance(e.value, TimeoutError) and env._ws is None
    p.done()


def test_a_token_with_a_line_break_is_refused():
    with pytest.raises(ValueError):
        _ws.connect("ws://127.0.0.1:9/", {"Authorization": "Bearer a\r\nX-Evil: 1"})
    c = agentbox.Client("http://127.0.0.1:9", "a\r\nX-Evil: 1")
    with pytest.raises(ValueError):
        c.server()


def test_upload_sends_files_directories_and_links_as_links(tmp_path):
    app = tmp_path / "app"
    (app / "data" / "levels").mkdir(parents=True)
    (app / "agentbox.json").write_text('{"command": "game"}')
    (app / "game").write_text("#!/bin/sh\n")
    os.chmod(app / "game", 0o755)
    (app / "data" / "levels" / "1.txt").write_text("1")
    os.symlink("data/levels", app / "levels")  # a link to a directory
    os.symlink("levels/1.txt", app / "first")  # a link to a file
    sent = {}

    class Capture(agentbox.Client):
        def upload_tar(self, data):
            sent["tar"] = data.read()
            return {"id": "up-x"}

    c = Capture("http://127.0.0.1:9", "test-token-0123456789")
    assert c.upload(str(app)) == {"id": "up-x"}
    with tarfile.open(fileobj=io.BytesIO(sent["tar"])) as t:
        members = {m.name: m for m in t.getmembers()}
    assert set(members) == {"agentbox.json", "game", "data", "data/levels", "data/levels/1.txt", "levels", "first"}
    assert members["levels"].issym() and members["levels"].linkname == "data/levels"
    assert members["first"].issym() and members["first"].linkname == "levels/1.txt"
    assert members["game"].mode & 0o111 and members["data"].isdir()
    assert all(m.uid == 0 and m.uname == "" and m.mtime == 0 for m in members.values())


def test_a_url_that_is_not_agentbox():
    """A server that is not agentbox (here one that answers 404 with a page
    to everything) is named as such, not as the API's internal error."""
    import http.server
    import threading

    class NotFoundPage(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html><body>404 page not found</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFoundPage)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        c = agentbox.Client(url, "test-token-0123456789", timeout=30)
        with pytest.raises(agentbox.NotAgentbox) as e:
            c.server()
        assert "%s does not answer as an agentbox server (HTTP 404" % url in str(e.value), e.value
        assert e.value.status == 404 and not isinstance(e.value, agentbox.APIError)
        env = agentbox.Env(c, "env-x", observation="rgba")
        with pytest.raises(agentbox.NotAgentbox, match="does not answer as an agentbox server"):
            env.observe()
        c.close()
    finally:
        srv.shutdown()
        srv.server_close()


def test_fork_returns_environments_and_raises_fork_diverged():
    """env.fork(n) posts the count and returns Envs of the answer's
    environments in the parent's settings; fork_diverged raises
    ForkDiverged with the step."""
    import http.server
    import threading

    seen = []

    class Forks(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(n))
            seen.append((self.path, req))
            if req["count"] == 2:
                status = 201
                body = {"fork": "replay", "ready_ms": 12.5, "environments": [
                    {"id": "env-a", "state": "running", "steps": 50, "forked_from": {"env": "env-p", "run_id": "r", "step": 50}},
                    {"id": "env-b", "state": "running", "steps": 50, "forked_from": {"env": "env-p", "run_id": "r", "step": 50}}]}
            else:
                status = 422
                body = {"error": {"code": "fork_diverged", "status": 422, "step": 7, "trace": "/t",
                                  "message": "fork env-c of environment r diverged at step 7"}}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forks)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = agentbox.Client("http://127.0.0.1:%d" % srv.server_address[1], "test-token-0123456789", timeout=30)
        env = agentbox.Env(c, "env-p", observation="rgba", transport="http")
        forks = env.fork(2)
        assert [f.id for f in forks] == ["env-a", "env-b"]
        assert all(f.observation == "rgba" and f.transport == "http" and f._fresh for f in forks)
        assert forks[0]._describe["forked_from"]["step"] == 50
        with pytest.raises(agentbox.ForkDiverged) as e:
            env.fork(3)
        assert e.value.step == 7 and e.value.status == 422 and e.value.trace == "/t"
        with pytest.raises(TypeError):
            env.fork("2")
        assert seen == [("/v1/envs/env-p/fork", {"count": 2}), ("/v1/envs/env-p/fork", {"count": 3})]
        c.close()
    finally:
        srv.shutdown()
        srv.server_close()


def test_create_sends_the_name_and_raises_sandbox_in_use():
    """create(name=...) sends name in the create request (and nothing when
    it is None); a name held elsewhere is the APIError sandbox_in_use, 409."""
    import http.server
    import threading

    seen = []

    class Creates(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(n))
            seen.append((self.path, req))
            if req.get("name") == "held":
                status = 409
                body = {"error": {"code": "sandbox_in_use", "status": 409,
                                  "message": "name held: sandbox in use: sandbox held is held by run env-1"}}
            else:
                status = 201
                body = {"id": "env-n", "state": "running", "episode": 1}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Creates)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = agentbox.Client("http://127.0.0.1:%d" % srv.server_address[1], "test-token-0123456789", timeout=30)
        env = c.create("game", name="notes", transport="http")
        assert env.id == "env-n"
        c.create("game", transport="http")
        with pytest.raises(agentbox.APIError) as e:
            c.create("game", name="held", transport="http")
        assert e.value.code == "sandbox_in_use" and e.value.status == 409 and "env-1" in e.value.message
        assert seen == [("/v1/envs", {"app": "game", "name": "notes"}), ("/v1/envs", {"app": "game"}),
                        ("/v1/envs", {"app": "game", "name": "held"})]
        c.close()
    finally:
        srv.shutdown()
        srv.server_close()
