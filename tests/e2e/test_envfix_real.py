"""Issue 26 §3 on real environments: for each environment the issue lists (built with uv from PyPI once, then
reused from a cache directory), the verdict before, `tfgpu fix`, then what `import tensorflow` and TensorFlow's own
CUDA loader really map (/proc/self/maps, through `tfgpu doctor --import`) against the loader simulation, library by
library; then `tfgpu fix --undo` and the package list, which must be exactly the one before.

Networked and slow (minutes; the first build downloads ~10 GB): `nox -s recipes` or `pytest -m recipes -k envfix`.
The cache is $TFGPU_REAL_ENVS (default ~/.cache/tfgpu/real-envs): envs/NAME, uv/ (uv's cache) and table.md, the
table of the last run. Each test works on a copy of the cached environment (site-packages hard-linked), so the cache
is never changed. Skips, with the reason, when PyPI cannot be reached or the environment's Python is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.recipes, pytest.mark.slow, pytest.mark.real_subprocess]

CACHE = Path(os.environ.get("TFGPU_REAL_ENVS") or "~/.cache/tfgpu/real-envs").expanduser()
PYENV = Path("~/.pyenv/versions").expanduser()
LIBCUDA = "libcuda.so.1"


@dataclass(frozen=True)
class Env:
    name: str
    python: str  # X.Y, from ~/.pyenv/versions
    installs: tuple[tuple[str, ...], ...]  # one `uv pip install` per group, in order
    before: str  # the verdict before the fix
    blockers: frozenset[str]  # the blockers' ids before the fix
    libs_fixable: bool  # can `tfgpu fix` supply the CUDA libraries in place (pip wheels exist for its CUDA)?
    after_blockers: frozenset[str] = field(default=frozenset({"driver.libcuda"}))


ENVS = (
    Env("tf114", "3.7", (("tensorflow-gpu==1.14.0",),), "broken",
        frozenset({"python.numpy", "python.protobuf", "libs.missing", "driver.libcuda"}), libs_fixable=False,
        after_blockers=frozenset({"libs.missing", "driver.libcuda"})),
    Env("tf221", "3.12", (("tensorflow==2.21.0",),), "cpu-only", frozenset({"libs.missing", "driver.libcuda"}),
        libs_fixable=True),
    Env("tf221-oldcudnn", "3.12", (("tensorflow[and-cuda]==2.21.0",), ("nvidia-cudnn-cu12==9.1.0.70",)), "cpu-only",
        frozenset({"libs.not_on_search_path", "libs.cudnn_too_old", "driver.libcuda"}), libs_fixable=True),
    Env("tf2161", "3.11", (("tensorflow[and-cuda]==2.16.1",),), "cpu-only",
        frozenset({"libs.not_on_search_path", "driver.libcuda"}), libs_fixable=True),
    Env("tf220", "3.8", (("tensorflow==2.2.0", "numpy==1.24.4"),), "broken",
        frozenset({"python.numpy", "python.protobuf", "libs.missing", "driver.libcuda"}), libs_fixable=False,
        after_blockers=frozenset({"libs.missing", "driver.libcuda"})),
    Env("tfcpu", "3.12", (("tensorflow==2.21.0", "tensorflow-cpu==2.21.0"),), "cpu-only",
        frozenset({"python.tf_conflict", "libs.missing", "driver.libcuda"}), libs_fixable=True),
    Env("keras3", "3.11", (("tensorflow==2.15.1",), ("keras==3.3.3",)), "broken",
        frozenset({"python.keras", "libs.missing", "driver.libcuda"}), libs_fixable=True),
)


def _pypi_unreachable() -> str | None:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15) as r:
            r.read(1)
    except OSError as exc:
        return f"PyPI cannot be reached ({exc}): the real environments are built and repaired from it"
    return None


def _python(xy: str) -> Path | None:
    hits = sorted(PYENV.glob(f"{xy}.*/bin/python{xy}"), key=lambda p: [int(x) for x in p.parts[-3].split(".")
                                                                       if x.isdigit()])
    return hits[-1] if hits else None


def _uv() -> str:
    return shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def _child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")}
    env.update(TFGPU_HOME=str(home), UV_CACHE_DIR=str(CACHE / "uv"), UV_PYTHON_DOWNLOADS="never",
               PYTHONDONTWRITEBYTECODE="1", PATH=os.pathsep.join([str(Path(_uv()).parent), env.get("PATH", "")]))
    return env


def build(env: Env) -> Path:
    """The cached environment, built with uv from PyPI when absent (into a temporary directory, then moved)."""
    target = CACHE / "envs" / env.name
    if (target / ".done").is_file():
        return target
    python = _python(env.python)
    if python is None:
        pytest.skip(f"needs a Python {env.python} in ~/.pyenv/versions")
    why = _pypi_unreachable()
    if why:
        pytest.skip(why)
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    run = _child_env(CACHE / "home")
    subprocess.run([_uv(), "venv", "-q", "--python", str(python), str(tmp)], check=True, env=run, timeout=600)
    for group in env.installs:
        subprocess.run([_uv(), "pip", "install", "--python", str(tmp / "bin" / "python"), *group], check=True,
                       env=run, timeout=3600)
    for script in (tmp / "bin").glob("activate*"):  # the venv's own path, as a venv made at ``target`` has it
        script.write_text(script.read_text(encoding="utf-8").replace(str(tmp), str(target)), encoding="utf-8")
    (tmp / ".done").write_text("built by tests/e2e/test_envfix_real.py\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def working_copy(src: Path, dst: Path) -> Path:
    """A copy to repair: every file hard-linked (the CUDA wheels are GBs), except bin/ and the small files that a
    fix edits in place, which are real copies; the activation scripts name the copy."""
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True, timeout=600)
    for p in [*(dst / "bin").iterdir(), *dst.glob("*"), *dst.glob("lib/python*/site-packages/*.pth")]:
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            p.unlink()
            p.write_bytes(data)
            shutil.copymode(src / p.relative_to(dst), p)
    for script in (dst / "bin").glob("activate*"):
        script.write_text(script.read_text(encoding="utf-8").replace(str(src), str(dst)), encoding="utf-8")
    return dst


def dist_infos(prefix: Path) -> list[str]:
    """The package list as the installer leaves it: every *.dist-info / *.egg-info directory name."""
    return sorted(p.name for p in prefix.glob("lib/python*/site-packages/*") if p.suffix in (".dist-info", ".egg-info"))


def tfgpu(*argv: str, home: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tfgpu", *argv], capture_output=True, text=True, env=_child_env(home),
                          timeout=timeout, check=False)


def doctor(python: Path, home: Path) -> dict[str, Any]:
    res = tfgpu("doctor", "--python", str(python), "--import", "--json", home=home)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    env: dict[str, Any] = json.loads(res.stdout)["environment"]
    return env


def agreement(env: dict[str, Any]) -> tuple[int, int, list[str]]:
    libs = (env.get("runtime") or {}).get("libraries") or []
    return sum(1 for x in libs if x["agree"]), len(libs), [x["name"] for x in libs if not x["agree"]]


def _row(env: Env, before: dict[str, Any], fix: subprocess.CompletedProcess[str], after: dict[str, Any],
         undone: bool) -> dict[str, Any]:
    a, n, _ = agreement(before)
    b, m, _ = agreement(after)
    loaded = [x["name"] for x in after["runtime"]["libraries"] if x["loaded"] and x["name"] != LIBCUDA]
    return {"env": env.name, "tf": (before.get("tensorflow") or {}).get("version"), "before": before["verdict"],
            "import_before": "failed" if before["runtime"].get("import_error") else "ok",
            "blockers": sorted(f["id"] for f in before["blockers"]), "fix_rc": fix.returncode,
            "after": after["verdict"], "after_blockers": sorted(f["id"] for f in after["blockers"]),
            "agree_before": f"{a}/{n}", "agree_after": f"{b}/{m}",
            "loaded_after": f"{len(loaded)}/{m - 1}", "undo_exact": undone}


def _write_table(row: dict[str, Any]) -> None:
    rows_path = CACHE / "rows.json"
    try:
        rows = json.loads(rows_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rows = {}
    rows[row["env"]] = row
    rows_path.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    head = ("| environment | TF | verdict before (blockers) | fix rc | verdict after (blockers) | loader agrees before | "
            "after | CUDA libraries loaded after (all but libcuda.so.1) | undo: package list exact |")
    lines = [head, "|" + "---|" * 9]
    note = " (import failed: nothing loaded, nothing predicted)"
    for name in [e.name for e in ENVS if e.name in rows]:
        r = rows[name]
        lines.append(f"| {name} | {r['tf']} | {r['before']} ({', '.join(r['blockers'])}) | {r['fix_rc']} | "
                     f"{r['after']} ({', '.join(r['after_blockers'])}) | {r['agree_before']}"
                     f"{note if r.get('import_before') == 'failed' else ''} | {r['agree_after']} | "
                     f"{r['loaded_after']} | {'yes' if r['undo_exact'] else 'NO'} |")
    (CACHE / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("env", ENVS, ids=[e.name for e in ENVS])
def test_verdict_fix_import_and_undo_on_a_real_environment(env: Env, tmp_path: Path) -> None:
    if sys.platform != "linux":
        pytest.skip("the real environments are Linux venvs")
    cached = build(env)
    why = _pypi_unreachable()
    if why:
        pytest.skip(why)
    work = working_copy(cached, tmp_path / env.name)
    python, home = work / "bin" / "python", tmp_path / "home"
    listed = dist_infos(work)
    activate = (work / "bin" / "activate").read_bytes()

    before = doctor(python, home)
    assert before["verdict"] == env.before, before["summary"]
    assert {f["id"] for f in before["blockers"]} == env.blockers, before["blockers"]
    a, n, wrong = agreement(before)
    assert n > 0
    assert a == n, f"the loader simulation disagrees before the fix on {wrong}"

    fix = tfgpu("fix", "--python", str(python), "--yes", home=home)
    assert fix.returncode in ((0,) if env.libs_fixable else (0, 1)), fix.stdout[-3000:] + fix.stderr[-3000:]
    after = doctor(python, home)
    assert {f["id"] for f in after["blockers"]} == env.after_blockers, after["blockers"]
    assert not after["runtime"].get("import_error"), after["runtime"]["import_error"]
    b, m, wrong = agreement(after)
    assert m > 0
    assert b == m, f"the loader simulation disagrees after the fix on {wrong}"
    if env.libs_fixable:  # every CUDA library but the driver's is mapped by TensorFlow's own loader
        missing = [x["name"] for x in after["runtime"]["libraries"] if not x["loaded"] and x["name"] != LIBCUDA]
        assert missing == [], f"not loaded after the fix: {missing}"
    else:  # no pip wheels for this CUDA: the plan says why, and names what to do instead
        assert "no in-place repair" in fix.stdout, fix.stdout[-2000:]

    undo = tfgpu("fix", "--python", str(python), "--undo", "--yes", home=home)
    undone = dist_infos(work) == listed and (work / "bin" / "activate").read_bytes() == activate
    _write_table(_row(env, before, fix, after, undone))
    assert undo.returncode == 0, undo.stdout[-3000:] + undo.stderr[-3000:]
    assert dist_infos(work) == listed
    assert (work / "bin" / "activate").read_bytes() == activate
