"""The package's build backend (PEP 517, PEP 660), standard library only.

``pip install ./python`` builds in an isolated environment and would fetch
setuptools from an index for that; this backend needs nothing, so the
package installs where no index is reachable. It builds a pure-Python
wheel of the ``agentbox`` package (every .py file under it), an sdist, and
an editable wheel (a .pth file naming this directory).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

NAME = "agentbox"
SUMMARY = "Python client of agentbox serve: disposable, isolated Linux desktops for computer-use agents"
REQUIRES_PYTHON = ">=3.8"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
TAG = "py3-none-any"


def _version():
    with open(os.path.join(HERE, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("no __version__ in %s/__init__.py" % NAME)
    return m.group(1)


def _metadata():
    readme = ""
    path = os.path.join(HERE, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + _version(),
        "Summary: " + SUMMARY,
        "Requires-Python: " + REQUIRES_PYTHON,
        "Provides-Extra: numpy",
        "Requires-Dist: numpy; extra == 'numpy'",
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ]
    return "\n".join(lines)


def _files():
    """The package's files: (path in the archive, path on disk)."""
    out = []
    for root, dirs, files in os.walk(os.path.join(HERE, NAME)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py") or name == "py.typed":
                p = os.path.join(root, name)
                out.append((os.path.relpath(p, HERE).replace(os.sep, "/"), p))
    return out


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _write_wheel(directory, entries):
    """A wheel of entries (archive path → bytes) plus its dist-info."""
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    entries = dict(entries)
    entries[dist_info + "/METADATA"] = _metadata().encode("utf-8")
    entries[dist_info + "/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: agentbox_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG
    ).encode("ascii")
    record = dist_info + "/RECORD"
    lines = ["%s,%s,%d" % (p, _digest(d), len(d)) for p, d in entries.items()]
    lines.append(record + ",,")
    entries[record] = ("\n".join(lines) + "\n").encode("utf-8")
    name = "%s-%s-%s.whl" % (NAME, version, TAG)
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in entries.items():
            info = zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return name


# -- PEP 517 ------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = {}
    for arc, path in _files():
        with open(path, "rb") as f:
            entries[arc] = f.read()
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, {"%s_editable.pth" % NAME: (HERE + "\n").encode("utf-8")})


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    paths = [arc for arc, _ in _files()] + ["pyproject.toml", "README.md", "_build/agentbox_build.py"]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for arc in paths:
            p = os.path.join(HERE, arc)
            if os.path.exists(p):
                info = tar.gettarinfo(p, arcname=base + "/" + arc)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = int(time.time())
                with open(p, "rb") as f:
                    tar.addfile(info, f)
        data = _metadata().encode("utf-8")
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
        tar.addfile(info, io.BytesIO(data))
    return name
