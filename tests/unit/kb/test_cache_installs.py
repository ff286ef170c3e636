"""Issue 32, item 1: two tfgpu installs that share one cache directory (a pipx install and a project venv, a home
on NFS) keep a cache each: run in turn, neither rebuilds. Two real venvs, tfgpu installed into each from its own
copy of the source tree (the copies differ in a cached module, as two versions would), run `tfgpu doctor` in
turn; a rebuilt cache is a new file (written under a new name and renamed into place), so its inode tells."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests import REPO, TESTS

FACTS = TESTS / "data" / "facts" / "r740-4x-tesla-m60.json"
UV = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))

pytestmark = [pytest.mark.slow, pytest.mark.real_subprocess,
              pytest.mark.skipif(UV is None, reason="needs uv (the test dependencies install it) to install tfgpu")]


def _install(tmp: Path, name: str, edit: str | None) -> Path:
    """A venv with tfgpu installed (not editable) from a copy of this source tree; ``edit`` appended to a module
    whose code the cache key covers. The venv reads tfgpu's dependencies from the test environment (a .pth
    line), so nothing is downloaded."""
    src = tmp / f"src-{name}"
    for part in ("src", "compat"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / part, src / part)
    if edit:
        with (src / "src" / "tfgpu" / "kb" / "records.py").open("a") as fh:
            fh.write(edit)
    venv = tmp / f"venv-{name}"
    assert UV is not None
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([UV, "pip", "install", "-q", "--offline", "--no-deps", "--no-build-isolation", "--python",
                    str(python), str(src)], check=True)
    return venv / ("Scripts" if os.name == "nt" else "bin") / "tfgpu"


def _caches(cache: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in cache.glob("kb-*.json")}


def test_two_installs_in_turn_keep_their_caches(tmp_path: Path) -> None:
    first = _install(tmp_path, "a", None)
    second = _install(tmp_path, "b", "\n# another install of tfgpu: a different cache key\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFGPU_")}
    env["TFGPU_CACHE_DIR"] = str(cache)
    env.pop("PYTHONPATH", None)

    def doctor(exe: Path) -> str:
        res = subprocess.run([str(exe), "doctor", "--json", "--facts", str(FACTS)], env=env, capture_output=True,
                             text=True, check=False, timeout=120)
        assert res.returncode in (0, 1), res.stderr
        assert res.stderr == ""  # no note about a corrupt or refused cache
        return res.stdout

    out_a = doctor(first)
    after_a = _caches(cache)
    out_b = doctor(second)
    after_b = _caches(cache)
    assert len(after_a) == 2  # the cache and its devices section
    assert set(after_a) < set(after_b)  # the second install wrote its own beside the first's
    assert len(after_b) == 4
    for _ in range(2):  # in turn again: both read their own cache, neither rebuilds nor removes the other's
        assert doctor(first) == out_a
        assert doctor(second) == out_b
        assert _caches(cache) == after_b
