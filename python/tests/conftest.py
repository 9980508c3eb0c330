"""Fixtures of the Python client's tests: a real ``agentbox serve`` with the
mover app on a real sandbox (Docker by default).

Run from ``go test ./e2e -run TestPython`` (make test): the Go test starts
the server and passes AGENTBOX_TEST_URL, AGENTBOX_TEST_TOKEN, AGENTBOX_TEST_OUT
(its --out), AGENTBOX_BIN (the binary) and AGENTBOX_TEST_APP (the mover's
directory).
Run alone (``python3 -m pytest python/tests``): the fixture builds the
binary and the mover with Go and starts the server itself.

What a test needs and the machine lacks skips it, and fails it when
CI=true (as internal/testenv does for the Go tests).
"""

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
sys.path.insert(0, PYTHON_DIR)

import agentbox  # noqa: E402

BACKEND = os.environ.get("AGENTBOX_TEST_BACKEND", "docker")


def need(what, ok, why=""):
    """Skip the test unless ok; under CI=true fail it instead."""
    if ok:
        return
    msg = "needs %s%s" % (what, (": " + why) if why else "")
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true and a requirement is missing: " + msg, pytrace=False)
    pytest.skip(msg + " (CI=true would fail here)")


def docker_ok():
    if not shutil.which("docker"):
        return False, "no docker in PATH"
    try:
        r = subprocess.run(["docker", "image", "inspect", "agentbox/runtime:bookworm"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return r.returncode == 0, r.stderr.decode(errors="replace").strip()


class Built:
    """The agentbox binary and the mover's app directory."""

    def __init__(self, bin, app):
        self.bin, self.app = bin, app


_built = None


def built():
    """AGENTBOX_BIN and AGENTBOX_TEST_APP, or a build of both with Go."""
    global _built
    if _built is not None:
        return _built
    b, a = os.environ.get("AGENTBOX_BIN"), os.environ.get("AGENTBOX_TEST_APP")
    if b and a:
        _built = Built(b, a)
        return _built
    need("go in PATH (to build agentbox and the mover)", shutil.which("go") is not None)
    d = tempfile.mkdtemp(prefix="agentbox-pytest-bin-")
    atexit.register(shutil.rmtree, d, True)
    app = os.path.join(d, "mover")
    os.mkdir(app)
    env = dict(os.environ, CGO_ENABLED="0")
    for pkg, out in (("./cmd/agentbox", os.path.join(d, "agentbox")), ("./examples/mover", os.path.join(app, "mover"))):
        r = subprocess.run(["go", "build", "-trimpath", "-o", out, pkg], cwd=REPO, env=env, capture_output=True, timeout=900)
        if r.returncode != 0:
            pytest.fail("go build %s: %s" % (pkg, r.stderr.decode(errors="replace")))
    with open(os.path.join(app, "agentbox.json"), "w") as f:
        json.dump({"command": "mover", "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "20s"}, f)
    _built = Built(os.path.join(d, "agentbox"), app)
    return _built


class Server:
    """A running ``agentbox serve`` of this test run."""

    def __init__(self, args, out):
        b = built()
        self.out = out
        self.token_file = os.path.join(out, "token")
        env = dict(os.environ, AGENTBOX_TOKEN="")
        self.proc = subprocess.Popen(
            [b.bin, "serve", "--listen", "127.0.0.1:0", "--write-token", self.token_file, "--backend", BACKEND,
             "--app", "mover=" + b.app, "--out", os.path.join(out, "runs")] + list(args),
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
        self.lines = []
        found = threading.Event()
        self.url = None

        def read():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                self.lines.append(line)
                m = re.search(r"listening on (https?://\S+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        found.wait(120)
        if self.url is None:
            self.kill()
            pytest.fail("agentbox serve did not listen:\n" + self.log())
        with open(self.token_file) as f:
            self.token = f.read().strip()

    def log(self):
        return "".join(self.lines)

    def stop(self, timeout=180):
        """SIGTERM, and the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("agentbox serve did not stop within %ds of SIGTERM:\n%s" % (timeout, self.log()))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)


def start_server(tmp, *args):
    ok, why = docker_ok() if BACKEND == "docker" else (True, "")
    need("Docker with the image agentbox/runtime:bookworm (make images)", ok, why)
    return Server(args, tmp)


class Target:
    """The server the tests talk to: url, token, out (its --out, for the
    traces), and the Server when this run started it."""

    def __init__(self, url, token, out, server=None):
        self.url, self.token, self.out, self.server = url, token, out, server

    def client(self, **kw):
        return agentbox.Client(self.url, self.token, **kw)


@pytest.fixture(scope="session")
def target(tmp_path_factory):
    url, token = os.environ.get("AGENTBOX_TEST_URL"), os.environ.get("AGENTBOX_TEST_TOKEN")
    if url and token:
        yield Target(url, token, os.environ.get("AGENTBOX_TEST_OUT"))
        return
    tmp = str(tmp_path_factory.mktemp("serve"))
    s = start_server(tmp, "--max-envs", "8")
    yield Target(s.url, s.token, os.path.join(tmp, "runs"), s)
    code = s.stop()
    assert code == 0, "agentbox serve exited %d:\n%s" % (code, s.log())


@pytest.fixture
def client(target):
    with target.client() as c:
        yield c


def wait_for(cond, timeout=60.0, what="the condition"):
    """Wait until cond() is true (no fixed sleeps on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    pytest.fail("%s did not hold within %ss" % (what, timeout))
