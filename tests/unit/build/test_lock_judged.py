"""`tfgpu lock` from a fresh install (issue 29, item 3): uv comes with tfgpu, `lock --cpu` locks the doctor's CPU
recommendation, and the target is judged on the machine the lock is for as `create` judges it: a blocked target
is exit 1 (unless --force), so a GPU-less machine never quietly writes an [and-cuda] lock that
`create --from-lock` then refuses."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import REPO
from tests.conftest import RTX3080_FACTS, isolate_installers

Cli = Callable[..., tuple[int, str, str]]

NO_GPU: dict[str, Any] = {
    "schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.35"},
    "python": {"current": "3.11.4", "interpreters": [{"version": "3.11.4", "path": sys.executable}]},
    "gpus": [], "driver": {"version": None, "cuda": None}}

#: A `uv pip compile` stand-in: each requirement of the input becomes a pinned line with a (fake) hash, and
#: the input is copied beside it, so a test sees what tfgpu asked uv to lock.
ECHO_UV = """\
while [ $# -gt 0 ]; do
  case "$1" in -o) out="$2"; shift ;; *.in) req="$1" ;; esac
  shift
done
cp "$req" "$FAKE_UV_SEEN"
sed -e 's/\\[and-cuda\\]//' -e 's/^\\([A-Za-z0-9_.-]*\\)==\\([^ ;]*\\).*/\\1==\\2 \\\\/' "$req" | grep '==' |
  while read -r line; do printf '%s\\n    --hash=sha256:%064d\\n' "$line" 0; done > "$out"
"""


@pytest.fixture
def echo_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_installers(monkeypatch, tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "uv").write_text("#!/bin/sh\n" + ECHO_UV)
    (bindir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    seen = tmp_path / "uv-saw.in"
    monkeypatch.setenv("FAKE_UV_SEEN", str(seen))
    return seen


def _facts(tmp_path: Path, facts: dict[str, Any], name: str = "facts.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(facts))
    return str(path)


def test_uv_is_a_dependency_and_is_found_without_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh `pip install .` brings uv; tfgpu finds it through the uv package even where neither PATH nor
    the interpreter's directory has it (pip install --user: ~/.local/bin off PATH)."""
    from tfgpu.build.lock import find_uv

    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.split(">")[0].split("=")[0].strip() == "uv" for d in deps), deps
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sys, "executable", str(empty / "python"))
    uv = find_uv({})
    assert uv is not None
    assert Path(uv).is_file()


def test_lock_has_cpu_and_force_says_what_it_allows(cli: Cli) -> None:
    code, out, _ = cli("lock", "--help")
    assert code == 0
    assert "--cpu" in out
    assert "blocked" in " ".join(out.split())


@pytest.mark.real_subprocess
def test_a_gpu_less_machine_gets_no_quiet_and_cuda_lock(cli: Cli, tmp_path: Path, echo_uv: Path) -> None:
    facts = _facts(tmp_path, NO_GPU)
    out = tmp_path / "requirements.lock.txt"
    code, _stdout, err = cli("lock", "--tf", "2.21", "--backend", "pip", "--facts", facts, "-o", str(out))
    assert code == 1, err
    assert not out.exists()
    assert not echo_uv.exists()  # refused before uv ran
    assert "blocked" in err
    assert "instead: tfgpu lock --tf " in err
    assert " --cpu" in err  # the doctor's CPU recommendation, as a lock
    code, _, err = cli("lock", "--tf", "2.21", "--backend", "pip", "--facts", facts, "-o", str(out), "--force")
    assert code == 0, err
    assert "locking it anyway (--force)" in err
    assert "tensorflow[and-cuda]==2.21" in echo_uv.read_text()


@pytest.mark.real_subprocess
def test_the_auto_backend_is_judged_too(cli: Cli, tmp_path: Path, echo_uv: Path) -> None:
    code, _, err = cli("lock", "--tf", "latest", "--facts", _facts(tmp_path, NO_GPU), "-o", str(tmp_path / "l.txt"))
    assert code == 1, err
    assert not (tmp_path / "l.txt").exists()


@pytest.mark.real_subprocess
def test_facts_name_the_gpu_machine_a_lock_is_for(cli: Cli, tmp_path: Path, echo_uv: Path) -> None:
    """A CI runner without a GPU locks for the GPU machine its --facts file describes."""
    out = tmp_path / "requirements.lock.txt"
    code, _, err = cli("lock", "--tf", "latest", "--facts", _facts(tmp_path, RTX3080_FACTS), "-o", str(out))
    assert code == 0, err
    assert "[and-cuda]" in echo_uv.read_text()


@pytest.mark.real_subprocess
def test_lock_cpu_then_create_from_lock_on_a_gpu_less_machine(cli: Cli, tmp_path: Path, echo_uv: Path) -> None:
    facts = _facts(tmp_path, NO_GPU)
    code, doctor, _ = cli("doctor", "--facts", facts, "--json")
    rec = json.loads(doctor)["recommendation"]
    assert rec["backend"] == "cpu"
    out = tmp_path / "requirements.lock.txt"
    # the doctor's own recommendation, locked
    argv = rec["command"].replace("tfgpu create ", "", 1).split()
    code, _stdout, err = cli("lock", *argv, "--facts", facts, "-o", str(out))
    assert code == 0, err
    asked = echo_uv.read_text()
    assert asked.startswith(f"tensorflow-cpu=={rec['tf']}")
    assert "nvidia" not in asked
    assert "[and-cuda]" not in asked
    text = out.read_text()
    assert text.startswith("# Locked by tfgpu (recipe cpu) for linux-64, Python ")
    # create --from-lock takes it on the same machine: the CPU route, no GPU verdict to refuse it
    code, _plan, err = cli("create", "--from-lock", str(out), "--facts", facts, "--dry-run")
    assert code == 0, err
    code, plan_json, err = cli("plan", "--from-lock", str(out), "--facts", facts, "--json")
    assert code == 0, err
    assert json.loads(plan_json)["cpu"] is True
    code, _, err = cli("lock", "--tf", "2.21", "--cpu", "--backend", "rattler", "--facts", facts,
                       "-o", str(tmp_path / "x.yml"))
    assert code == 2
    assert "--cpu locks the CPU route" in err


def test_a_header_alone_does_not_make_a_cuda_lock_a_cpu_lock(tmp_path: Path) -> None:
    from tfgpu.backends.lockfiles import read_lock

    zero = "0" * 64
    lock = tmp_path / "l.txt"
    lock.write_text("# Locked by tfgpu (recipe cpu) for linux-64, Python 3.11.\n"
                    f"tensorflow==2.21.0 --hash=sha256:{zero}\nnvidia-cudnn-cu12==9.3.0.75 --hash=sha256:{zero}\n")
    assert not read_lock(lock).is_cpu()
    lock.write_text(f"tensorflow-cpu==2.21.0 --hash=sha256:{zero}\n")
    assert read_lock(lock).is_cpu()
