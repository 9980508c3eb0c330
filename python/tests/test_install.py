"""`pip install ./python` works with no package index (the build backend is
in the tree and needs nothing), and the installed package is the one in
the tree."""

import os
import subprocess
import sys

from conftest import PYTHON_DIR, need


def pip_ok():
    r = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, timeout=60)
    return r.returncode == 0


def test_pip_install_without_an_index(tmp_path):
    need("pip for %s (apt-get install python3-pip)" % sys.executable, pip_ok())
    target = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS="", PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--target", str(target), PYTHON_DIR],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "agentbox" / "_ws.py").exists()
    dist = [p.name for p in target.iterdir() if p.name.endswith(".dist-info")]
    assert dist == ["agentbox-0.1.0.dist-info"], dist
    # Imported from the installation, not from the tree.
    code = "import agentbox, sys; print(agentbox.__file__); print(agentbox.Env.step.__doc__ is not None)"
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(target)), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(target / "agentbox" / "__init__.py"), "True"]


def test_the_build_backend_makes_a_wheel_and_an_sdist(tmp_path):
    sys.path.insert(0, os.path.join(PYTHON_DIR, "_build"))
    try:
        import agentbox_build
    finally:
        sys.path.pop(0)
    import tarfile
    import zipfile

    whl = agentbox_build.build_wheel(str(tmp_path))
    with zipfile.ZipFile(tmp_path / whl) as z:
        names = set(z.namelist())
        assert {"agentbox/__init__.py", "agentbox/_ws.py", "agentbox/client.py", "agentbox/errors.py"} <= names
        assert not any("tests" in n or "__pycache__" in n for n in names), names
        record = z.read("agentbox-0.1.0.dist-info/RECORD").decode()
        assert "agentbox/_ws.py,sha256=" in record
    sd = agentbox_build.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / sd) as t:
        names = set(t.getnames())
        assert {"agentbox-0.1.0/PKG-INFO", "agentbox-0.1.0/pyproject.toml", "agentbox-0.1.0/_build/agentbox_build.py"} <= names
