"""examples/python/play_mover.py plays the mover through the server, with
NumPy (arrays) and without it (RGB bytes)."""

import os
import subprocess
import sys

import pytest

import agentbox
from conftest import REPO, need

EXAMPLE = os.path.join(REPO, "examples", "python", "play_mover.py")


@pytest.mark.parametrize("numpy", [True, False])
def test_play_mover(target, tmp_path, numpy):
    if numpy:
        need("NumPy (apt-get install python3-numpy)", agentbox.have_numpy())
    env = dict(os.environ, AGENTBOX_URL=target.url, AGENTBOX_TOKEN=target.token)
    # Run from elsewhere, as a user would: the example finds the package.
    args = [sys.executable, EXAMPLE]
    if not numpy:
        # The example with NumPy unimportable.
        args = [sys.executable, "-c", "import sys, runpy; sys.modules['numpy'] = None; sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')", EXAMPLE]
    r = subprocess.run(args, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "episode ended: success" in r.stdout, r.stdout
    moved = int(r.stdout.split("the square moved ")[1].split(" px")[0])
    assert moved >= 100
