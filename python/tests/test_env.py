"""Env against the real server with the mover in a real sandbox: whole
episodes, reset, each observation format over each transport, bad actions
and the server's errors, the context manager, the token's sources."""

import json
import os
import subprocess
import sys
import time

import pytest

import agentbox
from conftest import PYTHON_DIR, built, need, wait_for

W, H = 640, 480
# HTTP's answers binary (the default), or JSON with the image in base64.
TRANSPORTS = ["websocket", "http", "http-json"]


def create(client, *args, transport="websocket", **kw):
    env = client.create(*args, transport=transport.split("-")[0], **kw)
    env.http_binary = transport != "http-json"
    return env


def green_x(obs, fmt="array"):
    """The mean x of the mover's green square, and how many pixels it has."""
    if fmt == "array":
        import numpy as np

        g = (obs[:, :, 1] > 180) & (obs[:, :, 0] < 80) & (obs[:, :, 2] < 80)
        xs = np.nonzero(g)[1]
        return (float(xs.mean()) if len(xs) else None), int(len(xs))
    step = 3 if fmt == "rgb" else 4
    total = n = 0
    for i in range(0, len(obs), step):
        if obs[i + 1] > 180 and obs[i] < 80 and obs[i + 2] < 80:
            total += (i // step) % W
            n += 1
    return (total / n if n else None), n


def run_json(trace):
    with open(os.path.join(trace, "run.json")) as f:
        return json.load(f)


def local_trace(target, trace):
    """The trace directory, when the server writes it on this machine."""
    if target.out is None or not os.path.isabs(trace):
        return None
    return trace if os.path.isdir(trace) else None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_whole_episode(client, target, transport):
    fmt = "array" if agentbox.have_numpy() else "rgb"
    with create(client, "mover", task="Move the character right.", transport=transport) as env:
        obs, info = env.reset()
        assert info["episode"] == 1 and info["step"] == 0 and info["running"]
        assert [w["title"] for w in info["windows"]] == ["mover"]
        assert any("mover: ready" in line["text"] for line in info["output"])
        x0, n0 = green_x(obs, fmt)
        assert n0 > 100, "no green square on the first screen"
        steps = [{"action": "key_down", "key": "Right"}, {"action": "wait", "ms": 1000}, {"action": "key_up", "key": "Right"}]
        for i, a in enumerate(steps, 1):
            obs, reward, terminated, truncated, info = env.step(a)
            assert (reward, terminated, truncated) == (0.0, False, False)
            assert info["step"] == i and info["result"]["ok"] and not info["invalid"], info
            assert info["trace"] and info["run_id"]
        x1, _ = green_x(obs, fmt)
        assert x1 - x0 >= 100, "the square moved %.1f px" % (x1 - x0)
        obs, reward, terminated, truncated, info = env.step({"action": "done", "message": "moved"})
        assert terminated and not truncated
        assert info["ended"]["outcome"] == "success" and info["ended"]["terminated"]
        with pytest.raises(agentbox.EpisodeEnded) as e:
            env.step({"action": "key", "keys": "Right"})
        assert e.value.code == "episode_ended" and e.value.status == 409 and e.value.end["outcome"] == "success"
        trace = info["trace"]
    d = local_trace(target, trace)
    if d:
        run = run_json(d)
        assert run["outcome"] == "success"


def test_truncated_at_the_step_limit(client):
    with client.create("mover", max_steps=2) as env:
        env.reset()
        _, _, terminated, truncated, _ = env.step({"action": "key", "keys": "Right"})
        assert not terminated and not truncated
        _, _, terminated, truncated, info = env.step({"action": "key", "keys": "Right"})
        assert truncated and not terminated, info["ended"]
        assert info["ended"]["reason"] == "max_steps"


def test_the_app_exiting_terminates(client):
    with client.create("mover") as env:
        env.reset()
        # The mover quits on q.
        _, _, terminated, truncated, info = env.step({"action": "key", "keys": "q"})
        assert info["result"]["ok"], info
        deadline = time.monotonic() + 120  # a loaded machine: wait for it, do not time it
        while not (terminated or truncated) and time.monotonic() < deadline:
            _, _, terminated, truncated, info = env.step({"action": "wait", "ms": 500})
        assert terminated and not truncated, info
        # Terminal at the first observation that shows the app gone; the
        # server ends the episode (app_exited) at the next step.
        assert info["running"] is False and info["exit"]["code"] == 0, info
        if info["ended"] is None:
            _, _, terminated, _, info = env.step({"action": "key", "keys": "Right"})
            assert terminated
        assert info["ended"]["reason"] == "app_exited", info["ended"]


def test_reset_gives_a_fresh_episode_and_trace(client, target):
    with client.create("mover") as env:
        obs, info = env.reset()
        first = info["trace"]
        env.step({"action": "key", "keys": "Right"})
        env.step({"action": "key", "keys": "Right"})
        obs, info = env.reset(options={"task": "Move left."})
        assert info["episode"] == 2 and info["trace"] != first and info["run_id"] not in first
        assert env.describe()["task"] == "Move left."
        _, _, _, _, info = env.step({"action": "key", "keys": "Left"})
        assert info["step"] == 1 and info["episode"] == 2 and info["trace"] != first
        second = info["trace"]
    if local_trace(target, first):
        old, new = run_json(first), run_json(second)
        assert old["id"] != new["id"] and old["status"] == "complete"
        assert old["outcome"] == "interrupted" and old["reason"] == "closed"
        with open(os.path.join(first, "steps.jsonl")) as f:
            steps = [json.loads(line) for line in f if '"type":"step"' in line]
        assert [st["step"] for st in steps] == [1, 2]  # the first episode's steps, and only those


def test_fork(client, target):
    """env.fork(n): environments in the parent's state (the first screen
    the parent's), independent from then on, each trace naming its
    parent; a count of 0 is refused."""
    import shutil
    import tempfile

    fmt = "array" if agentbox.have_numpy() else "rgb"
    # The mover with --step: each key press moves it 7 px whatever the
    # time (by default it moves by time x speed, and a wall-clock fork of
    # it may diverge).
    app = tempfile.mkdtemp(prefix="agentbox-pytest-stepmover-")
    try:
        shutil.copy(os.path.join(built().app, "mover"), os.path.join(app, "mover"))
        with open(os.path.join(app, "agentbox.json"), "w") as f:
            json.dump({"command": "mover", "args": ["--step", "7"], "window_title": "mover",
                       "ready_output": "mover: ready", "ready_timeout": "20s"}, f)
        up = client.upload(app)
    finally:
        shutil.rmtree(app, True)
    with client.create(upload=up["id"], observation=fmt) as env:
        env.reset()
        for _ in range(5):
            env.step({"action": "key", "keys": "Right"})
        with pytest.raises(agentbox.InvalidRequest):
            env.fork(0)
        forks = env.fork(2)
        obs, info = env.observe()
        px, _ = green_x(obs, fmt)
        try:
            xs = []
            for f, key in zip(forks, ("Left", "Down")):
                obs, finfo = f.reset()
                assert green_x(obs, fmt)[0] == px and finfo["episode"] == 1
                for _ in range(3):
                    obs, _, _, _, _ = f.step({"action": "key", "keys": key})
                xs.append(green_x(obs, fmt)[0])
                d = f.describe()
                assert d["forked_from"]["env"] == env.id and d["forked_from"]["step"] == 5, d
                if local_trace(target, d["trace"]):
                    assert run_json(d["trace"])["forked_from"]["step"] == 5
            assert xs[0] < px and xs[1] == px, (xs, px)
        finally:
            for f in forks:
                f.close()


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_relaunch_resets_in_place(client, target, transport):
    """reset_mode relaunch: each reset starts a new episode (its own trace)
    in the same sandbox, the app launched again; a reset's mode "fresh"
    goes back to a new sandbox."""
    with client.create("mover", reset_mode="relaunch", transport=transport) as env:
        traces = []
        for episode in (1, 2, 3):
            obs, info = env.reset()
            assert info["episode"] == episode and info["running"], info
            d = env.describe()
            assert d["reset_mode"] == "relaunch" and d.get("relaunched", False) == (episode > 1), d
            traces.append(info["trace"])
            env.step({"action": "key_down", "key": "Right"})
        obs, info = env.reset(options={"mode": "fresh"})
        d = env.describe()
        assert d["reset_mode"] == "fresh" and not d.get("relaunched", False), d
        traces.append(info["trace"])
        with pytest.raises(ValueError):
            env.reset(options={"mode": "again"})
    if local_trace(target, traces[0]):
        ids = [run_json(t)["environment"]["id"] for t in traces]
        assert ids[0] == ids[1] == ids[2] and ids[3] != ids[0], ids


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("observation", ["array", "rgb", "rgba", "png", "none"])
def test_observation_formats(client, transport, observation):
    if observation == "array":
        need("NumPy (apt-get install python3-numpy)", agentbox.have_numpy())
    with create(client, "mover", observation=observation, transport=transport) as env:
        obs, info = env.reset()
        frame = info["observation"]["frame"]
        assert info["observation"]["frame"]["format"] == env.image_format
        if observation != "none":
            # The image came after the JSON (frame.bytes says how much), or
            # inside it in base64.
            assert ("bytes" in frame) == (transport != "http-json"), frame
        if observation == "none":
            assert obs is None and frame["format"] == "none"
        elif observation == "array":
            assert obs.shape == (H, W, 3) and obs.dtype.name == "uint8" and not obs.flags.writeable
        elif observation == "rgb":
            assert isinstance(obs, bytes) and len(obs) == W * H * 3
        elif observation == "rgba":
            assert isinstance(obs, bytes) and len(obs) == W * H * 4 and obs[3::4] == b"\xff" * (W * H)
        else:
            assert obs[:8] == b"\x89PNG\r\n\x1a\n"
        if observation in ("array", "rgb", "rgba"):
            _, n = green_x(obs, observation)
            assert n > 100
        # Once the screen is still, a mouse move changes nothing on it (the
        # mover draws no pointer): the frame is not sent again, the
        # observation is the one before.
        obs1, _, _, _, info1 = env.step({"action": "wait", "until": "stable", "stable_ms": 300})
        obs2, _, _, _, info2 = env.step({"action": "mouse_move", "x": 5, "y": 5})
        if observation != "none":
            assert info2["observation"]["frame"].get("unchanged") is True
            assert obs2 is obs1
            assert info2["observation"]["frame"]["hash"] == info1["observation"]["frame"]["hash"]
        # The square moves: a new image.
        env.step({"action": "key_down", "key": "Right"})
        obs3, _, _, _, info3 = env.step({"action": "wait", "ms": 500})
        env.step({"action": "key_up", "key": "Right"})
        if observation != "none":
            assert not info3["observation"]["frame"].get("unchanged") and obs3 is not obs2
            assert info3["observation"]["frame"]["hash"] != info2["observation"]["frame"]["hash"]


def test_array_equals_the_rgb_bytes(client):
    need("NumPy (apt-get install python3-numpy)", agentbox.have_numpy())
    with client.create("mover", observation="array") as a, client.create("mover", observation="rgb") as b:
        obs_a, _ = a.reset()
        obs_b, _ = b.reset()
        assert obs_a.tobytes() == obs_b  # the mover's first screens are the same


def test_without_numpy_observations_are_rgb_bytes(target):
    """With NumPy unimportable, 'auto' gives bytes and 'array' is refused
    with a clear error."""
    code = r"""
import sys
sys.modules["numpy"] = None  # import numpy fails
sys.path.insert(0, sys.argv[1])
import agentbox
assert not agentbox.have_numpy()
with agentbox.Client(sys.argv[2], sys.argv[3]) as c:
    try:
        c.create("mover", observation="array")
    except agentbox.AgentboxError as e:
        assert "needs NumPy" in str(e), e
    else:
        raise SystemExit("observation='array' without NumPy was accepted")
    with c.create("mover") as env:
        obs, info = env.reset()
        assert type(obs) is bytes and len(obs) == 640 * 480 * 3, (type(obs), len(obs))
        print("ok", env.observation)
"""
    r = subprocess.run([sys.executable, "-c", code, PYTHON_DIR, target.url, target.token], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok rgb" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_actions(client, transport):
    with create(client, "mover", transport=transport) as env:
        env.reset()
        # Not an action of the vocabulary: the server's error, raised.
        for bad, says in [
            ({"action": "fly"}, 'unknown action "fly"'),
            ({"action": "click", "x": 1.5, "y": 2}, "x"),
            ({"action": "key", "keys": "a", "extra": 1}, "extra"),
            ({"action": "key", "keys": "a", "key": "a"}, "not both"),
        ]:
            with pytest.raises(agentbox.InvalidAction) as e:
                env.step(bad)
            assert e.value.code == "invalid_action" and e.value.status == 400, e.value
            assert says in e.value.message and "docs/actions.md" in e.value.message, e.value.message
        with pytest.raises(TypeError):
            env.step("key Right")
        with pytest.raises(TypeError):
            env.step({"action": "type", "text": object()})
        # key takes its key as key too, the name key_down and key_up use.
        _, _, _, _, info = env.step({"action": "key", "key": "Right"})
        assert info["result"]["ok"] and not info["invalid"], info
        # An action that fails validation is recorded, not run, and not an
        # error: the episode goes on.
        obs, _, terminated, truncated, info = env.step({"action": "click", "x": 5000, "y": 1})
        assert info["invalid"] and "outside the 640x480 screen" in info["result"]["error"]
        assert not terminated and not truncated
        _, _, _, _, info = env.step({"action": "key", "keys": "Retrun"})
        assert info["invalid"] and 'did you mean "Return"' in info["result"]["error"]
        _, _, _, _, info = env.step({"action": "key"})
        assert info["invalid"] and 'field "keys": required' in info["result"]["error"]
        _, _, _, _, info = env.step({"action": "key", "keys": "Right"})
        assert info["result"]["ok"] and info["step"] == 5


def test_the_servers_errors(client, target):
    with pytest.raises(agentbox.UnknownApp) as e:
        client.create("no-such-app")
    assert e.value.status == 422 and "mover" in e.value.message
    with pytest.raises(agentbox.InvalidRequest) as e:
        client.create("mover", screen=(100000, 10))
    with pytest.raises(agentbox.NotFound):
        client.attach("env-000000000000")
    with pytest.raises(agentbox.InvalidRequest) as e:
        client.create("mover", settle="sometimes")
    assert e.value.code == "invalid_request"
    # The clock: an unknown one, a step without the virtual clock, and a
    # virtual clock of the mover, a Go program libfaketime cannot fake:
    # refused before any environment is made.
    before = len(client.environments())
    with pytest.raises(agentbox.InvalidRequest) as e:
        client.create("mover", clock="fast")
    assert 'clock "fast"' in e.value.message
    with pytest.raises(agentbox.InvalidRequest) as e:
        client.create("mover", clock_step=0.5)
    assert "virtual clock only" in e.value.message
    with pytest.raises(agentbox.InvalidRequest) as e:
        client.create("mover", clock="virtual")
    assert "Go program" in e.value.message or "statically linked" in e.value.message or "no virtual clock" in e.value.message
    assert len(client.environments()) == before
    # A wrong token: on the HTTP calls and on the WebSocket's handshake.
    with agentbox.Client(target.url, "not-the-token-0123456789") as bad:
        with pytest.raises(agentbox.Unauthorized) as e:
            bad.server()
        assert e.value.status == 401
        with client.create("mover") as env:
            stranger = agentbox.Env(bad, env.id)
            with pytest.raises(agentbox.Unauthorized):
                stranger.observe()


def test_the_context_manager_always_closes(client):
    ids = []
    with pytest.raises(RuntimeError, match="the agent crashed"):
        with client.create("mover") as env:
            ids.append(env.id)
            env.reset()
            raise RuntimeError("the agent crashed")
    assert env.closed
    with client.create("mover") as env:
        ids.append(env.id)
        env.reset()
    assert env.closed
    live = {e["id"] for e in client.environments()}
    assert not live & set(ids), "environments left open: %s" % (live & set(ids))
    with pytest.raises(agentbox.AgentboxError, match="closed"):
        env.step({"action": "key", "keys": "Right"})
    assert env.close() is None  # twice is fine


def test_make_closes_its_client(target):
    with agentbox.make("mover", url=target.url, token=target.token) as env:
        env.reset()
        c = env.client
        eid = env.id
    assert env.closed and c._conn is None
    with target.client() as c2:
        assert eid not in {e["id"] for e in c2.environments()}


def test_close_after_the_lease_ran_out(client):
    """An environment the server closed already closes without an error."""
    env = client.create("mover")
    client.request("DELETE", "/v1/envs/" + env.id)
    assert env.close() is None


def test_the_token_from_the_environment_and_from_files(target, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTBOX_URL", target.url)
    monkeypatch.setenv("AGENTBOX_TOKEN", target.token)
    with agentbox.Client() as c:
        assert c.server()["api"] == "v1"
    f = tmp_path / "token"
    f.write_text("\n" + target.token + "\n")
    monkeypatch.setenv("AGENTBOX_TOKEN", "")
    with agentbox.Client(token_file=str(f)) as c:
        assert c.token == target.token and c.server()["api"] == "v1"
    # Where agentbox serve writes it by default.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "agentbox").mkdir()
    (tmp_path / "agentbox" / "serve.token").write_text(target.token + "\n")
    assert agentbox.default_token_file() == str(tmp_path / "agentbox" / "serve.token")
    with agentbox.Client() as c:
        assert c.server()["api"] == "v1"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(agentbox.AgentboxError, match="no token"):
        agentbox.Client()


def test_events_and_upload(client):
    up = client.upload(built().app)
    assert up["command"] == "mover" and up["files"] >= 1
    with client.create(upload=up["id"]) as env:
        env.reset()
        env.step({"action": "key", "keys": "Right"})
        kinds = []
        for ev in env.events(timeout=120):
            kinds.append(ev["kind"])
            if ev["kind"] == "result":
                break
        assert "episode" in kinds and "step" in kinds and "result" in kinds, kinds
    client.delete_upload(up["id"])


def test_observe_and_act(client):
    with client.create("mover") as env:
        obs, info = env.reset()
        st = env.act({"action": "key_down", "key": "Right"})
        assert st["result"]["ok"] and st["step"] == 1 and "observation" not in st
        wait_for(lambda: green_x(env.observe()[0], env.observation)[0] > green_x(obs, env.observation)[0] + 50,
                 what="the square moving while Right is held")
        env.act({"action": "key_up", "key": "Right"})


def test_task_files(client):
    """An input from an upload is placed in the home, collected back when the
    episode ends: info["files"] lists it and env.file reads it."""
    up = client.upload(built().app)
    with open(os.path.join(built().app, "agentbox.json"), "rb") as f:
        manifest = f.read()
    with client.create("mover", inputs=[{"from": "upload:%s/agentbox.json" % up["id"], "to": "~/in/m.json"}],
                       collect=["~/in/*.json"]) as env:
        env.reset()
        obs, reward, terminated, truncated, info = env.step({"action": "done"})
        assert terminated and [f["path"] for f in info["files"]] == ["in/m.json"], info
        assert info["files"][0]["size"] == len(manifest)
        assert env.file("in/m.json") == manifest
        with pytest.raises(agentbox.NotFound):
            env.file("in/none.json")
    client.delete_upload(up["id"])
