"""The client of agentbox serve (API v1): Client for the server's calls,
Env for one environment in gymnasium's shape.

Steps travel over the server's WebSocket (one round trip a step; an
unchanged screen is not sent again) or, with ``transport="http"``, as one
``POST /v1/envs/{id}/act?observe=…`` each (its answer binary: the JSON and
the pixels as they are, not base64).
"""

import base64
import http.client
import json
import os
import socket
import ssl as _ssl
import struct
import tarfile
import tempfile
import threading
import urllib.parse
from collections.abc import Mapping

from . import _ws
from .errors import (
    AgentboxError,
    APIError,
    NotAgentbox,
    NotFound,
    ProtocolError,
    ServerUnavailable,
    Timeout,
)

try:  # NumPy is optional: observations are arrays when it is there.
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None

__all__ = ["Client", "Env", "make", "DEFAULT_URL", "default_token_file", "OBSERVATIONS", "have_numpy"]

DEFAULT_URL = "http://127.0.0.1:8470"

#: The observation formats an Env can give.
#:
#: - ``array``: a NumPy array, height × width × 3, uint8 (RGB), read-only
#: - ``rgb``: bytes, height rows of width × 3 (R, G, B)
#: - ``rgba``: bytes, height rows of width × 4 (R, G, B, 255), as the server sends them
#: - ``png``: the PNG file's bytes, as the server encoded it
#: - ``none``: no image (None); the state is in info
#: - ``auto``: ``array`` when NumPy is installed, else ``rgb``
OBSERVATIONS = ("auto", "array", "rgb", "rgba", "png", "none")

TRANSPORTS = ("websocket", "http")

#: The binary answer of observe, act and reset over HTTP: a 4-byte
#: big-endian length, the JSON, the image's bytes (as on the WebSocket).
FRAME_MEDIA_TYPE = "application/vnd.agentbox.frame"

# The most bytes one WebSocket answer may have: the largest screen's
# pixels (the server's --max-screen is at most 7680x4320) and its JSON.
_MAX_MESSAGE = 4 * 7680 * 4320 + (16 << 20)


def have_numpy():
    """Whether NumPy is installed (observations default to arrays)."""
    return _np is not None


def default_token_file():
    """Where agentbox serve writes the token it makes:
    $XDG_RUNTIME_DIR/agentbox/serve.token, else
    $XDG_CONFIG_HOME (default ~/.config)/agentbox/serve.token."""
    d = os.environ.get("XDG_RUNTIME_DIR")
    if d:
        return os.path.join(d, "agentbox", "serve.token")
    cfg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(cfg, "agentbox", "serve.token")


def _read_token_file(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                return line.strip()
    raise AgentboxError("the token file %s is empty" % path)


def _resolve_token(token, token_file):
    if token:
        return token
    if token_file:
        return _read_token_file(token_file)
    if os.environ.get("AGENTBOX_TOKEN"):
        return os.environ["AGENTBOX_TOKEN"].strip()
    path = default_token_file()
    try:
        return _read_token_file(path)
    except FileNotFoundError:
        raise AgentboxError(
            "no token: pass token= or token_file=, set AGENTBOX_TOKEN, or start agentbox serve so that it writes %s" % path
        ) from None


class Client:
    """The server at ``url`` (default $AGENTBOX_URL, else
    http://127.0.0.1:8470), with its bearer token: ``token``, else the first
    line of ``token_file``, else $AGENTBOX_TOKEN, else the file agentbox
    serve writes (default_token_file()).

    ``timeout`` (seconds) bounds connecting and each answer; ``ssl_context``
    verifies an https server (default: the system's CAs). A Client may be
    shared by threads (its HTTP requests take turns); close it, or use it as
    a context manager, to drop its connection.
    """

    def __init__(self, url=None, token=None, *, token_file=None, timeout=300.0, ssl_context=None):
        url = (url or os.environ.get("AGENTBOX_URL") or DEFAULT_URL).rstrip("/")
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("%r is not an http:// or https:// URL" % url)
        self.url = url
        self._u = u
        self.token = _resolve_token(token, token_file)
        self.timeout = timeout
        self.ssl_context = ssl_context
        self._conn = None
        self._lock = threading.Lock()

    def __repr__(self):
        return "Client(%r)" % self.url

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Drop the HTTP connection (environments stay on the server)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- HTTP --------------------------------------------------------------

    def _connection(self, timeout=None):
        t = self.timeout if timeout is None else timeout
        if self._u.scheme == "https":
            ctx = self.ssl_context or _ssl.create_default_context()
            return http.client.HTTPSConnection(self._u.hostname, self._u.port, timeout=t, context=ctx)
        return http.client.HTTPConnection(self._u.hostname, self._u.port, timeout=t)

    def _headers(self, content_type=None, accept="application/json"):
        h = {"Authorization": "Bearer " + self.token, "Accept": accept}
        if content_type:
            h["Content-Type"] = content_type
        return h

    def request(self, method, path, query=None, body=None, content_type=None):
        """One API call: the decoded JSON answer, or the API's error raised
        as an APIError. ``body``: a dict (sent as JSON), bytes or a file."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode("utf-8")
            content_type = content_type or "application/json"
        status, headers, data = self._do(method, path, query, body, content_type)
        return self._decode(method, path, status, data)

    def observed(self, method, path, query=None, body=None, content_type=None, binary=True):
        """An observe, act or reset call: (the JSON answer, the image's bytes
        or None). With binary, asks for the binary answer (FRAME_MEDIA_TYPE),
        so pixels travel as they are; a server that answers JSON (the image
        base64 inside) is read too."""
        if isinstance(body, (dict, list)):
            body = _json(body)
            content_type = content_type or "application/json"
        accept = FRAME_MEDIA_TYPE + ", application/json;q=0.5" if binary else "application/json"
        status, headers, data = self._do(method, path, query, body, content_type, accept=accept)
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        if status >= 300 or ctype != FRAME_MEDIA_TYPE:
            return self._decode(method, path, status, data), None
        if len(data) < 4:
            raise ProtocolError("%s %s: a binary answer of %d bytes" % (method, path, len(data)))
        (n,) = struct.unpack_from("!I", data)
        if n > len(data) - 4:
            raise ProtocolError("%s %s: a binary answer shorter than its header says" % (method, path))
        return self._decode(method, path, status, data[4:4 + n]), memoryview(data)[4 + n:]

    def _target(self, path, query):
        target = (self._u.path or "") + path
        if query:
            q = {k: v for k, v in query.items() if v is not None and v != ""}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        return target

    def _do(self, method, path, query, body, content_type, accept="application/json"):
        target = self._target(path, query)
        headers = self._headers(content_type, accept)
        with self._lock:
            for attempt in (0, 1):
                reused = self._conn is not None
                if self._conn is None:
                    self._conn = self._connection()
                try:
                    if hasattr(body, "seek"):
                        body.seek(0)
                    self._conn.request(method, target, body=body, headers=headers)
                    resp = self._conn.getresponse()
                    data = resp.read()
                    if resp.will_close:
                        self._conn.close()
                        self._conn = None
                    return resp.status, resp.headers, data
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                    self._conn.close()
                    self._conn = None
                    # A keep-alive connection the server had closed while
                    # idle: it never read the request. Once more, afresh.
                    if reused and attempt == 0:
                        continue
                    raise ServerUnavailable("%s %s: the server at %s went away: %s" % (method, path, self.url, e)) from e
                except socket.timeout as e:
                    self._conn.close()
                    self._conn = None
                    raise Timeout("%s %s: no answer from %s within %ss" % (method, path, self.url, self.timeout)) from e
                except (OSError, http.client.HTTPException) as e:
                    self._conn.close()
                    self._conn = None
                    raise ServerUnavailable("%s %s: cannot reach the server at %s: %s" % (method, path, self.url, e)) from e
        raise AssertionError("unreachable")

    def _decode(self, method, path, status, data):
        if status >= 300:
            raise self._error(method, path, status, data)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise ProtocolError("%s %s: the answer is not JSON: %.200r" % (method, path, data)) from e

    def _error(self, method, path, status, data):
        try:
            err = json.loads(data)["error"]
            if err.get("code"):
                return APIError.from_json(err, status)
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        # Not the API's error: another server (or a proxy) answered.
        return NotAgentbox("%s %s: %s does not answer as an agentbox server (HTTP %d: %.200r); check the URL: "
                           "agentbox serve prints the one to use" % (method, path, self.url, status, data), status)

    # -- the API -----------------------------------------------------------

    def server(self):
        """What the server offers (GET /v1/server): apps, backends, limits."""
        return self.request("GET", "/v1/server")

    def environments(self):
        """This token's environments (GET /v1/envs)."""
        return self.request("GET", "/v1/envs")

    def create(self, app=None, *, upload=None, task=None, backend=None, screen=None, limits=None,
               max_steps=None, timeout=None, settle=None, observation="auto", transport="websocket",
               reward=None, inputs=None, collect=None, collect_limits=None, before_collect=None,
               grade=None, clock=None, clock_step=None, reset_mode=None, policy=None, name=None):
        """Make an environment and start its first episode (the app up and
        ready); returns its Env once it has.

        ``app`` is an app registered on the server (``--app NAME=DIR``), or
        ``upload`` an upload's ID (Client.upload). ``screen``: (width,
        height) or a dict; ``limits``: {"cpus", "memory_mb", "pids",
        "tmpfs_mb"}; ``max_steps`` and ``timeout`` (seconds) bound each
        episode; ``settle``: "none", "fixed:200ms", "stable:150ms".
        ``inputs`` ([{"from": "upload:ID/PATH", "to": "~/PATH"}]),
        ``collect`` (["~/Documents/*.ods"]), ``collect_limits`` ({"files",
        "bytes"}) and ``before_collect`` (actions, ``wait_for`` and ``expect`` steps) are the task's files
        (docs/tasks.md): the step that ends an episode has them in
        ``info["files"]``, and Env.file reads one. ``grade`` (a list of
        checks, never command or expected) grades them on the server: the
        end's ``info["ended"]["grade"]``, whose score is that step's reward
        unless ``reward`` is given. ``clock``: "wall" (the default) or
        "virtual": the app's time starts at 2025-01-01T00:00:00Z and moves
        only with the steps (a wait by its length, any other action by
        ``clock_step`` seconds, default 0.1), so it stands still while the
        agent thinks; dynamically linked apps only (a static or Go program
        is refused). ``reset_mode`` is how resets start the next episode: "fresh" (default: a new sandbox) or "relaunch" (the
        same sandbox reset in place: the app and everything it started
        killed, the home and /tmp restored, the display's state reset, the
        app launched again; where the backend can).
        ``policy`` (a policy file's text, YAML or
        JSON: docs/policy.md) gates every action: its asks come as
        ``approval`` events, answered with Env.answer. ``name`` makes the
        environment's sandboxes named ones (``agentbox run --name``): the app
        user's home is the name's, as the last run or environment of that
        name left it, for every episode; the environment holds the name
        until it is closed (another create of it fails with the code
        ``sandbox_in_use``, status 409), never takes a warm sandbox, and is
        neither relaunched nor forked. The rest are the Env's
        (observation format, transport, reward function).
        """
        req = {}
        for key, value in (("app", app), ("upload", upload), ("task", task), ("backend", backend),
                           ("limits", limits), ("max_steps", max_steps), ("settle", settle),
                           ("inputs", inputs), ("collect", collect), ("collect_limits", collect_limits),
                           ("before_collect", before_collect), ("grade", grade),
                           ("reset_mode", reset_mode), ("policy", policy), ("name", name)):
            if value is not None:
                req[key] = value
        if screen is not None:
            if isinstance(screen, (tuple, list)):
                screen = {"width": screen[0], "height": screen[1]}
            req["screen"] = screen
        if timeout is not None:
            req["timeout_ms"] = int(timeout * 1000)
        if clock is not None:
            req["clock"] = clock
        if clock_step is not None:
            req["clock_step_ms"] = int(round(clock_step * 1000))
        env = Env(self, None, observation=observation, transport=transport, reward=reward)
        env._describe = self.request("POST", "/v1/envs", body=req)
        env.id = env._describe["id"]
        env._fresh = True
        return env

    def attach(self, env_id, **kwargs):
        """An Env of an environment this token created already."""
        env = Env(self, env_id, **kwargs)
        d = env.describe()
        env._fresh = d.get("steps") == 0 and d.get("state") == "running"
        return env

    def upload(self, directory):
        """Send an app directory (agentbox.json at its root) as a tar; the
        server checks it as ``agentbox run DIR`` does. Returns the upload
        ({"id", "command", …}): create environments of it with
        create(upload=ID)."""
        with tempfile.TemporaryFile() as f:
            with tarfile.open(fileobj=f, mode="w") as tar:
                for root, dirs, files in os.walk(directory):  # links are not followed
                    dirs.sort()
                    for name in dirs + sorted(files):
                        p = os.path.join(root, name)
                        rel = os.path.relpath(p, directory).replace(os.sep, "/")
                        # A directory, a file, or a link as a link (the
                        # server checks that none leads outside the app).
                        tar.add(p, arcname=rel, recursive=False, filter=_anonymous)
            f.seek(0)
            return self.upload_tar(f)

    def upload_tar(self, data):
        """Send an app directory already made into a tar (bytes or a file)."""
        return self.request("POST", "/v1/uploads", body=data, content_type="application/x-tar")

    def delete_upload(self, upload_id):
        """Remove an upload (one in use goes with its last environment)."""
        return self.request("DELETE", "/v1/uploads/" + urllib.parse.quote(upload_id, safe=""))


def _anonymous(info):
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


class Env:
    """One environment on the server, in gymnasium's shape::

        obs, info = env.reset()
        obs, reward, terminated, truncated, info = env.step({"action": "key", "keys": "Right"})

    Actions are dicts in docs/actions.md's vocabulary. ``terminated``: the
    app exited (``info["running"]`` is False, ``info["exit"]`` says how; a
    ``done`` may still follow) or the episode ended of itself (a ``done``,
    ``info["ended"]``); ``truncated``: the steps or the deadline ran out (or
    the episode failed). ``info`` carries the step's
    result, the app's output since the last observation, the windows, the
    cursor and the episode's trace directory.

    ``observation`` is the observations' format (OBSERVATIONS); ``reward``
    a function (obs, info) → float (agentbox gives none of its own: 0.0).
    Use it as a context manager, or call close(): the environment is closed
    on the server (its sandbox removed, its trace kept). Not safe for use by
    several threads at once.
    """

    def __init__(self, client, env_id, *, observation="auto", transport="websocket", reward=None,
                 always_image=False):
        if observation not in OBSERVATIONS:
            raise ValueError("observation %r: want one of %s" % (observation, ", ".join(OBSERVATIONS)))
        if observation == "auto":
            observation = "array" if _np is not None else "rgb"
        if observation == "array" and _np is None:
            raise AgentboxError("observation='array' needs NumPy (apt-get install python3-numpy); "
                                "or use observation='rgb' (bytes)")
        if transport not in TRANSPORTS:
            raise ValueError("transport %r: want websocket or http" % transport)
        self.client = client
        self.id = env_id
        self.observation = observation
        self.transport = transport
        self.reward = reward
        #: Ask for the screen every step, also when unchanged (benchmarks).
        self.always_image = always_image
        #: Over HTTP, ask for the binary answer (False: JSON, the image in
        #: base64, as servers before it answer).
        self.http_binary = True
        #: How reset() starts the next episode: "fresh", "relaunch", or
        #: None (the environment's: create's reset_mode).
        self.reset_mode = None
        self._describe = None
        self._fresh = False
        self._ws = None
        self._next_id = 0
        self._last = None  # the latest observation's image, in self.observation's format
        self._last_hash = None
        self._closed = False
        self._owns_client = False  # make(): the client closes with the environment

    def __repr__(self):
        return "Env(%r, %r)" % (self.id, self.client.url)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.close()
        except AgentboxError as e:
            if exc is None:
                raise
            # Do not hide the error that ended the block.
            if hasattr(exc, "add_note"):
                exc.add_note("and closing the environment failed: %s" % e)
        return False

    @property
    def closed(self):
        return self._closed

    @property
    def image_format(self):
        """The image the server sends: rgba, png or none."""
        return {"array": "rgba", "rgb": "rgba", "rgba": "rgba"}.get(self.observation, self.observation)

    # -- gymnasium -----------------------------------------------------------

    def reset(self, *, seed=None, options=None):
        """Start an episode and return its first observation and info: a
        fresh sandbox (or, with the reset mode "relaunch", the same one
        reset in place) with the app launched again, and a new trace. The
        episode create() started is used as it is, once.
        ``options={"task": …}`` replaces the task from this episode on;
        ``options={"mode": "relaunch"}`` (or "fresh") is this reset's mode,
        and the environment's from then on (default: ``self.reset_mode``,
        else the environment's). (``seed`` is accepted for gymnasium's
        sake; the desktop has no seed.)"""
        self._check_open()
        task = (options or {}).get("task")
        mode = (options or {}).get("mode", self.reset_mode)
        if mode not in (None, "fresh", "relaunch"):
            raise ValueError("reset mode %r: want fresh or relaunch" % (mode,))
        if self._fresh and task is None:
            self._fresh = False
            obs, data = self._observe_raw()
        else:
            self._fresh = False
            self._describe, obs, data = self._reset_raw(task, mode)
        image = self._image(obs, data)
        info = self._info(obs)
        info["step"] = 0
        return image, info

    def step(self, action):
        """Perform an action and observe after it: (obs, reward, terminated,
        truncated, info). An action that fails validation is not an error:
        info["invalid"] is True and info["result"]["error"] says why. Not an
        action at all raises InvalidAction; a step after the episode ended
        raises EpisodeEnded."""
        self._check_open()
        self._fresh = False
        st, data = self._step_raw(action, self.image_format)
        info = {
            "env": st.get("env"),
            "episode": st.get("episode"),
            "step": st.get("step"),
            "result": st.get("result"),
            "invalid": bool(st.get("invalid")),
            "ended": st.get("ended"),
            "files": st.get("files") or [],
            "run_id": self._describe.get("run_id") if self._describe else None,
            "trace": self._describe.get("trace") if self._describe else None,
        }
        o = st.get("observation")
        if o is not None:
            obs = self._image(o, data)
            info.update(self._info(o))
            info["step"] = st.get("step")
            if info["ended"] is None:
                info["ended"] = o.get("ended")
        else:
            # The episode ended without a last observation: the screen
            # is the one before.
            obs = self._last if self.observation != "none" else None
            info.update({"output": [], "windows": [], "cursor": None, "observation": None})
        terminated = truncated = False
        if info["ended"]:
            terminated = bool(info["ended"].get("terminated"))
            truncated = not terminated
        elif o is not None and o.get("running") is False:
            # The app exited: the server shows the agent its screen once
            # (info["exit"] says how), and ends the episode (app_exited) at
            # the next step unless that is a done. For gymnasium it is the
            # terminal state now.
            terminated = True
        if self.reward is not None:
            reward = float(self.reward(obs, info))
        elif info["ended"] and info["ended"].get("grade"):
            # a graded episode's end: its score (docs/tasks.md)
            reward = float(info["ended"]["grade"].get("score", 0.0))
        else:
            reward = 0.0
        return obs, reward, terminated, truncated, info

    # -- beyond gymnasium ----------------------------------------------------

    def observe(self):
        """The next observation without acting: (obs, info)."""
        self._check_open()
        o, data = self._observe_raw()
        return self._image(o, data), self._info(o)

    def act(self, action):
        """Perform an action without observing after it; returns the
        server's step answer (``result``, ``invalid``, ``ended``…)."""
        self._check_open()
        self._fresh = False
        st, _ = self._step_raw(action, "none")
        return st

    def file(self, path):
        """The bytes of one file collected when the latest episode ended, by
        its path below the sandbox's home as ``info["files"]`` names it
        (GET /v1/envs/{id}/files/{path})."""
        self._check_open()
        target = self._path("/files/" + urllib.parse.quote(path, safe="/"))
        status, headers, data = self.client._do("GET", target, None, None, None, accept="application/octet-stream")
        if status >= 300:
            raise self.client._error("GET", target, status, data)
        return bytes(data)

    def fork(self, n):
        """Make ``n`` new environments in this one's state at its current
        step (POST /v1/envs/{id}/fork) and return them as Envs, each in
        this one's settings (observation, transport, reward…). The server
        replays the episode so far into fresh sandboxes and checks each
        fork's screen against this one's: when one does not match it
        raises ForkDiverged (``step``: the first step that differed) and
        keeps none. Each fork's reset() returns its first observation, in
        the forked state, without starting another episode; the forks are
        independent from then on. Close them as any Env."""
        self._check_open()
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError("fork count %r: want an int" % (n,))
        answer = self.client.request("POST", self._path("/fork"), body={"count": n})
        forks = []
        for d in answer.get("environments") or []:
            f = Env(self.client, d["id"], observation=self.observation, transport=self.transport,
                    reward=self.reward, always_image=self.always_image)
            f.http_binary, f.reset_mode = self.http_binary, self.reset_mode
            f._describe, f._fresh = d, True
            forks.append(f)
        return forks

    def describe(self):
        """The environment as the server has it now (GET /v1/envs/{id}):
        state, episode, run_id, trace, steps, end…"""
        self._describe = self.client.request("GET", self._path(""))
        return self._describe

    def answer(self, approval, allow, always=False):
        """Answer a policy's ask (an ``approval`` event's
        ``approval["id"]``): ``allow`` lets the step's action run, False
        denies it; ``always`` grants its rule for the rest of the episode
        (never a sensitive one). Call it from another thread than the held
        step's (one reading events): that step waits for this answer.
        POST /v1/envs/{id}/approvals/{approval}."""
        body = {"allow": bool(allow)}
        if always:
            body["always"] = True
        self.client.request("POST", self._path("/approvals/" + urllib.parse.quote(str(approval), safe="")), body=body)

    def events(self, after=0, timeout=None):
        """The environment's events as dicts (each ``kind`` one of the Event
        schema's in serve/openapi.json: output, step, result, end, takeover
        with ``by``, hand_back with ``by``, ``reason`` and ``steps``, …),
        after the one numbered ``after``, until the environment closes.
        ``timeout`` bounds the wait for each."""
        conn = self.client._connection(timeout)
        try:
            conn.request("GET", self.client._target(self._path("/events"), {"after": str(after)}),
                         headers=self.client._headers(accept="text/event-stream"))
            resp = conn.getresponse()
            if resp.status != 200:
                raise self.client._error("GET", self._path("/events"), resp.status, resp.read())
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.startswith(b"data: "):
                    yield json.loads(line[6:])
        except socket.timeout as e:
            raise Timeout("events of %s: nothing within %ss" % (self.id, timeout)) from e
        finally:
            conn.close()

    def close(self):
        """Close the environment: the episode ends (unless it has), the
        sandbox goes, the trace stays. Returns the environment's last
        description (None if the server had closed it already). Safe to call
        twice; the local connection is dropped whatever happens."""
        if self._closed:
            return None
        self._closed = True
        try:
            self._drop_ws(graceful=True)
            if self.id is None:
                return None
            try:
                return self.client.request("DELETE", self._path(""))
            except NotFound:
                return None  # closed already (its lease ran out, the server restarted)
        finally:
            if self._owns_client:
                self.client.close()

    # -- the wire ------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise AgentboxError("environment %s is closed" % self.id)

    def _path(self, rest):
        return "/v1/envs/" + urllib.parse.quote(self.id, safe="") + rest

    def _known(self):
        if self.always_image or self._last_hash is None:
            return None
        return self._last_hash

    def _observe_raw(self):
        img = self.image_format
        if self.transport == "http":
            return self.client.observed("GET", self._path("/observation"), {"image": img, "known": self._known()},
                                        binary=self.http_binary)
        resp, data = self._round_trip({"op": "observe", "image": img, "known": self._known()})
        if resp.get("observation") is None:
            raise ProtocolError("the server's answer has no observation")
        return resp["observation"], data

    def _reset_raw(self, task, mode=None):
        img = self.image_format
        if self.transport == "http":
            body = {}
            if task is not None:
                body["task"] = task
            if mode is not None:
                body["mode"] = mode
            body = body or None
            rr, data = self.client.observed("POST", self._path("/reset"), {"observe": img, "known": self._known()},
                                            body=body, binary=self.http_binary)
            if rr.get("observation") is None and img != "none":
                raise ProtocolError("the server's answer has no observation")
            return rr["environment"], rr.get("observation") or {}, data
        req = {"op": "reset", "image": img, "known": self._known()}
        if task is not None:
            req["task"] = task
        if mode is not None:
            req["mode"] = mode
        resp, data = self._round_trip(req)
        if resp.get("environment") is None or resp.get("observation") is None:
            raise ProtocolError("the server's answer has no environment or observation")
        return resp["environment"], resp["observation"], data

    def _step_raw(self, action, img):
        if not isinstance(action, Mapping):
            raise TypeError("an action is a dict in docs/actions.md's vocabulary, not %s" % type(action).__name__)
        if self.transport == "http":
            return self.client.observed("POST", self._path("/act"), {"observe": img, "known": self._known()},
                                        body=_json(action), content_type="application/json", binary=self.http_binary)
        req = {"op": "act", "action": action}
        if img != "none":
            req.update(op="step", image=img, known=self._known())
        resp, data = self._round_trip(req)
        if resp.get("step") is None:
            raise ProtocolError("the server's answer has no step")
        return resp["step"], data

    def _ws_url(self):
        u = self.client._u
        scheme = "wss" if u.scheme == "https" else "ws"
        return urllib.parse.urlunsplit((scheme, u.netloc, (u.path or "") + self._path("/ws"), "", ""))

    def _dial(self):
        c = self.client
        try:
            ws = _ws.connect(self._ws_url(), {"Authorization": "Bearer " + c.token}, timeout=c.timeout,
                             ssl_context=c.ssl_context, max_message=_MAX_MESSAGE)
        except _ws.HandshakeError as e:
            try:
                err = json.loads(e.body)["error"]
                if err.get("code"):
                    raise APIError.from_json(err, e.status) from None
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
            if e.status >= 300:
                raise NotAgentbox("WebSocket to %s: %s does not answer as an agentbox server (%s); check the URL: "
                                  "agentbox serve prints the one to use" % (self._ws_url(), c.url, e), e.status) from e
            raise ProtocolError("WebSocket to %s: %s" % (c.url, e)) from e
        except socket.timeout as e:
            raise Timeout("WebSocket to %s: no answer within %ss" % (c.url, c.timeout)) from e
        except (OSError, _ws.ConnectionClosed) as e:
            raise ServerUnavailable("WebSocket to %s: cannot reach the server: %s" % (c.url, e)) from e
        self._ws = ws

    def _drop_ws(self, graceful=False):
        ws, self._ws = self._ws, None
        if ws is None:
            return
        if graceful:
            ws.close()
        else:
            ws._shutdown()

    def _round_trip(self, req):
        """One WebSocket request and its answer: (answer, image bytes or
        None). A broken connection is dropped (the next request dials
        again) and raised as ServerUnavailable."""
        if self._ws is None:
            self._dial()
        self._next_id += 1
        rid = self._next_id
        req = {k: v for k, v in req.items() if v is not None}
        req["id"] = rid
        text = _json(req).decode("utf-8")
        try:
            self._ws.send_text(text)
            op, msg = self._ws.recv()
        except _ws.ConnectionClosed as e:
            self._drop_ws()
            raise ServerUnavailable("the server at %s closed the WebSocket: %s" % (self.client.url, e),
                                    close_code=e.code) from e
        except socket.timeout as e:
            self._drop_ws()
            raise Timeout("no answer from %s within %ss" % (self.client.url, self.client.timeout)) from e
        except _ws.ProtocolError as e:
            self._drop_ws()
            raise ProtocolError("the server broke the WebSocket protocol: %s" % e) from e
        data = None
        if op == _ws.OP_BINARY:
            if len(msg) < 4:
                self._drop_ws()
                raise ProtocolError("a binary answer of %d bytes" % len(msg))
            (n,) = struct.unpack_from("!I", msg)
            if n > len(msg) - 4:
                self._drop_ws()
                raise ProtocolError("a binary answer shorter than its header says")
            data = memoryview(msg)[4 + n:]
            msg = msg[4:4 + n]
        try:
            resp = json.loads(msg)
        except ValueError as e:
            self._drop_ws()
            raise ProtocolError("an answer that is not JSON: %.200r" % msg) from e
        if resp.get("id") != rid:
            self._drop_ws()
            raise ProtocolError("the answer to request %d came for request %r" % (rid, resp.get("id")))
        if resp.get("error"):
            raise APIError.from_json(resp["error"])
        return resp, data

    # -- observations ----------------------------------------------------------

    def _image(self, o, data=None):
        """The observation's image in self.observation's format (data: the
        bytes that came after a WebSocket answer's JSON)."""
        f = o.get("frame") or {}
        fmt = f.get("format") or "none"
        if self.observation == "none" or fmt == "none":
            return None
        if f.get("unchanged"):
            if self._last is None or self._last_hash != f.get("hash"):
                raise ProtocolError("the server sent no image for a screen this client does not have")
            return self._last
        if data is None:  # over HTTP: base64 in the JSON
            data = base64.b64decode(f.get("data") or "")
            f.pop("data", None)
        w, h = f.get("width"), f.get("height")
        if fmt == "rgba":
            if len(data) != 4 * w * h:
                raise ProtocolError("an rgba frame of %dx%d with %d bytes" % (w, h, len(data)))
            image = _convert(data, w, h, self.observation)
        elif fmt == "png":
            image = bytes(data)
        else:
            raise ProtocolError("an image of format %r" % fmt)
        self._last, self._last_hash = image, f.get("hash")
        return image

    def _info(self, o):
        f = dict(o.get("frame") or {})
        f.pop("data", None)
        o = dict(o, frame=f)
        return {
            "env": o.get("env"),
            "episode": o.get("episode"),
            "output": o.get("output") or [],
            "windows": o.get("windows") or [],
            "cursor": o.get("cursor"),
            "running": o.get("running"),
            "exit": o.get("exit"),
            "ended": o.get("ended"),
            "run_id": self._describe.get("run_id") if self._describe else None,
            "trace": self._describe.get("trace") if self._describe else None,
            "observation": o,
        }


def _json(v):
    try:
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise TypeError("not JSON: %s" % e) from None


def _convert(rgba, w, h, fmt):
    """RGBA pixels in the Env's format."""
    if fmt == "rgba":
        return bytes(rgba)
    if fmt == "array":
        return _np.frombuffer(rgba, dtype=_np.uint8).reshape(h, w, 4)[:, :, :3]
    src = bytes(rgba)
    rgb = bytearray(3 * w * h)
    rgb[0::3] = src[0::4]
    rgb[1::3] = src[1::4]
    rgb[2::3] = src[2::4]
    return bytes(rgb)


def make(app=None, *, url=None, token=None, token_file=None, timeout=300.0, ssl_context=None, **create):
    """An environment of ``app`` on the server, with a Client of its own
    that closes with it::

        with agentbox.make("mover") as env:
            obs, info = env.reset()

    The keyword arguments beyond the Client's are Client.create's."""
    client = Client(url, token, token_file=token_file, timeout=timeout, ssl_context=ssl_context)
    try:
        env = client.create(app, **create)
    except BaseException:
        client.close()
        raise
    env._owns_client = True
    return env
