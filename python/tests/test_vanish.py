"""A server that goes away under a client: each test starts a server of its
own (the shared one must stay up), and what it left behind is collected
and checked."""

import shutil
import subprocess
import time

import pytest

import agentbox
from conftest import BACKEND, built, start_server


def leftovers(run_id):
    """The Docker containers of a run that are still there."""
    if BACKEND != "docker" or not shutil.which("docker"):
        return []
    r = subprocess.run(["docker", "ps", "-aq", "--filter", "label=dev.agentbox.run=" + run_id],
                       capture_output=True, text=True, timeout=120)
    return r.stdout.split()


def test_the_server_killed_mid_episode(tmp_path):
    s = start_server(str(tmp_path))
    run_id = None
    try:
        c = agentbox.Client(s.url, s.token, timeout=60)
        env = c.create("mover")
        obs, info = env.reset()
        run_id = info["run_id"]
        env.step({"action": "key", "keys": "Right"})
        s.kill()  # SIGKILL: no close frame, no goodbye
        with pytest.raises(agentbox.ServerUnavailable) as e:
            env.step({"action": "key", "keys": "Right"})
        assert isinstance(e.value, ConnectionError)
        assert s.url in str(e.value), str(e.value)
        # The next request dials again, and finds nothing.
        with pytest.raises(agentbox.ServerUnavailable, match="cannot reach"):
            env.step({"action": "key", "keys": "Right"})
        with pytest.raises(agentbox.ServerUnavailable):
            c.environments()
        # The context manager keeps the error that ended the block, and
        # says closing failed too; the environment counts as closed.
        with pytest.raises(RuntimeError, match="the agent gave up") as e:
            with env:
                raise RuntimeError("the agent gave up")
        assert any("closing the environment failed" in n for n in getattr(e.value, "__notes__", ["closing the environment failed"]))
        assert env.closed
    finally:
        s.kill()
    if run_id:
        # What the killed server left, agentbox gc removes (its owner is
        # gone). A sandbox may be going by itself at that moment (its
        # stdio closed with the server): gc again until none is left.
        gc = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            r = subprocess.run([built().bin, "gc", "--backend", BACKEND], capture_output=True, text=True, timeout=300)
            gc.append(r.stdout + r.stderr)
            if not leftovers(run_id):
                break
            time.sleep(1)
        assert leftovers(run_id) == [], "agentbox gc said:\n" + "".join(gc)


def test_the_server_stopping_mid_episode(tmp_path):
    s = start_server(str(tmp_path))
    try:
        c = agentbox.Client(s.url, s.token, timeout=60)
        with pytest.raises(agentbox.ServerUnavailable) as e:
            with c.create("mover") as env:
                obs, info = env.reset()
                run_id = info["run_id"]
                env.step({"action": "key", "keys": "Right"})
                assert s.stop() == 0, s.log()  # SIGTERM: every environment closed, the WebSockets too
                env.step({"action": "key", "keys": "Right"})
        # Going away (1001) when the close frame is read; a broken
        # connection (1006) when the socket went first.
        assert e.value.close_code in (1001, 1006), e.value
        assert env.closed
    finally:
        s.kill()
    assert leftovers(run_id) == []


def test_no_server_at_all():
    with agentbox.Client("http://127.0.0.1:9", "some-token-0123456789", timeout=30) as c:
        with pytest.raises(agentbox.ServerUnavailable, match="cannot reach the server at http://127.0.0.1:9"):
            c.create("mover")
