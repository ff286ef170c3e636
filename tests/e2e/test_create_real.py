"""Real `create` runs on this machine: real venvs (uv and the stdlib), a real local wheel index of a fake
`tensorflow` (tests/fake_tf packaged by tests/fake_programs/wheels.py), real failures and interrupts."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import isolate_installers
from tests.fake_programs.wheels import build_fake_tensorflow
from tfgpu.backends.steps import Step
from tfgpu.build import registry
from tfgpu.build.execute import prefix_lock, run_plan
from tfgpu.core.errors import Interrupted, NotReady, StepFailed, UsageError
from tfgpu.core.record import replace
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.model import Plan
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
BASE_PY = str(getattr(sys, "_base_executable", sys.executable))
PY_XY = ".".join(platform.python_version_tuple()[:2])
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
HAVE_UV = Path(UV).exists()

pytestmark = pytest.mark.real_subprocess


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("wheels")
    build_fake_tensorflow(d, "2.20.0")
    return d


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_installers(monkeypatch, tmp_path)


def facts() -> dict[str, Any]:
    return {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "wsl": None},
            "python": {"current": platform.python_version(),
                       "interpreters": [{"version": platform.python_version(), "path": BASE_PY}]},
            "gpus": [], "driver": {"version": None, "cuda": None}}


def make_plan(prefix: Path, wheelhouse: Path, *, uv: bool) -> Plan:
    tools: dict[str, str | None] = {"uv": UV if uv else None, f"python{PY_XY}": BASE_PY}
    return plan_environment(KB, facts(), BuildRequest(tf="2.20.0", backend="pip", prefix=str(prefix), find_links=(str(wheelhouse),), offline=True), tools=tools, home=str(prefix.parent))


def env_tf_version(prefix: Path) -> str:
    out = subprocess.run([str(prefix / "bin" / "python"), "-c", "import tensorflow; print(tensorflow.__version__)"],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


needs_uv = pytest.mark.skipif(not HAVE_UV, reason="uv is not installed")


@needs_uv
def test_uv_create_real_venv_from_local_index(tmp_path: Path, wheelhouse: Path) -> None:
    prefix = tmp_path / "envs" / "tf"
    plan = make_plan(prefix, wheelhouse, uv=True)
    assert plan.tool == "uv"
    result = run_plan(plan)
    assert result.prefix == prefix.resolve()
    assert (prefix / "pyvenv.cfg").is_file()
    assert env_tf_version(prefix) == "2.20.0"
    assert result.log_path.is_file()
    assert "+ " in result.log_path.read_text()
    entry = registry.find(str(prefix.resolve()))
    assert entry is not None
    assert entry["tf"] == "2.20.0"
    assert entry["tool"] == "uv"


@pytest.mark.slow
def test_stdlib_venv_and_pip_create_real_venv(tmp_path: Path, wheelhouse: Path) -> None:
    prefix = tmp_path / "envs" / "tfvenv"
    plan = make_plan(prefix, wheelhouse, uv=False)
    assert plan.tool == "venv"
    assert "--no-index" in plan.steps[1].argv
    run_plan(plan)
    assert env_tf_version(prefix) == "2.20.0"


@needs_uv
def test_failing_step_leaves_nothing_behind(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "broken"
    empty = tmp_path / "empty-index"
    empty.mkdir()
    plan = make_plan(prefix, empty, uv=True)  # tensorflow is not in the (empty) index: the install fails
    with pytest.raises(StepFailed) as exc:
        run_plan(plan)
    assert not prefix.exists()
    assert exc.value.log_path.is_file()  # type: ignore[attr-defined]
    assert any("tensorflow" in line for line in exc.value.log_tail)  # type: ignore[attr-defined]
    assert "full log" in (exc.value.hint or "")
    assert registry.find(str(prefix.resolve())) is None


def _sleep_plan(plan: Plan) -> Plan:
    sleeper = Step((sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(60)"),
                   "a long step to interrupt")
    return replace(plan, steps=(plan.steps[0], sleeper, *plan.steps[1:]))


@needs_uv
def test_sigint_mid_run_removes_the_partial_environment(tmp_path: Path, wheelhouse: Path) -> None:
    prefix = tmp_path / "envs" / "interrupted"
    plan = _sleep_plan(make_plan(prefix, wheelhouse, uv=True))

    def on_step(i: int, n: int, step: Step) -> None:
        if step.why == "a long step to interrupt":
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

    with pytest.raises(Interrupted) as exc:
        run_plan(plan, on_step=on_step)
    assert not prefix.exists()
    assert exc.value.exit_code == 130


@needs_uv
def test_force_rebuild_that_fails_keeps_the_old_environment(tmp_path: Path, wheelhouse: Path) -> None:
    prefix = tmp_path / "envs" / "keep"
    run_plan(make_plan(prefix, wheelhouse, uv=True))
    marker = prefix / "old-marker"
    marker.write_text("old")
    with pytest.raises(UsageError, match="already exists"):
        run_plan(make_plan(prefix, wheelhouse, uv=True))
    assert marker.exists()
    empty = tmp_path / "empty-index"
    empty.mkdir()
    with pytest.raises(StepFailed, match="previous environment"):
        run_plan(make_plan(prefix, empty, uv=True), force=True)
    assert marker.read_text() == "old"
    assert env_tf_version(prefix) == "2.20.0"  # the old one still works where it was
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["keep"]  # nothing left aside
    # and a --force rebuild that succeeds replaces it
    result = run_plan(make_plan(prefix, wheelhouse, uv=True), force=True)
    assert result.replaced
    assert not marker.exists()
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["keep"]


def test_second_creator_of_the_same_prefix_is_refused(tmp_path: Path, wheelhouse: Path) -> None:
    prefix = tmp_path / "envs" / "locked"
    plan = make_plan(prefix, wheelhouse, uv=HAVE_UV)
    with prefix_lock(prefix.resolve()), pytest.raises(NotReady, match="being created by tfgpu pid"):
        run_plan(plan)
    assert not prefix.exists()


def test_lock_is_held_across_processes(tmp_path: Path) -> None:
    prefix = (tmp_path / "envs" / "x").resolve()
    code = ("import sys; from pathlib import Path; from tfgpu.build.execute import prefix_lock\n"
            "try:\n    cm = prefix_lock(Path(sys.argv[1])); cm.__enter__()\n"
            "except Exception as e:\n    print(type(e).__name__, e); sys.exit(1)\n")
    with prefix_lock(prefix):
        other = subprocess.run([sys.executable, "-c", code, str(prefix)], capture_output=True, text=True,
                               timeout=60, env=os.environ.copy())
    assert other.returncode == 1
    assert "NotReady" in other.stdout
    assert f"tfgpu pid {os.getpid()}" in other.stdout
    free = subprocess.run([sys.executable, "-c", code, str(prefix)], capture_output=True, text=True, timeout=60)
    assert free.returncode == 0


@needs_uv
def test_cli_create_runs_the_real_smoke_test_and_registers(
    tmp_path: Path, wheelhouse: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    monkeypatch.setenv("PATH", f"{Path(UV).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts()))
    prefix = tmp_path / "envs" / "cli"
    args = ["create", "--tf", "2.20.0", "--backend", "pip", "--prefix", str(prefix), "--facts", str(facts_file),
            "--find-links", str(wheelhouse), "--offline", "--yes", "--timeout", "120"]
    # no driver here: the verdict engine blocks the target before anything is built
    code, out, err = cli(*args)
    assert code == 1, (out, err)
    assert "blocked" in err
    assert not prefix.exists()
    # --force builds anyway; the fake TensorFlow sees no GPU, so the smoke result is CPU-only -> exit 1
    code, out, err = cli(*args, "--force")
    assert code == 1, (out, err)
    assert (prefix / "pyvenv.cfg").is_file(), (out, err)
    assert "allow-cpu" in err
    code, out, err = cli("envs", "--json")
    assert code == 0
    (entry,) = json.loads(out)["envs"]
    assert entry["smoke"]["mode"] == "cpu"
    assert entry["smoke"]["passed"] is False
    code, out, err = cli(*args, "--allow-cpu", "--force")
    assert code == 0, (out, err)
    assert "smoke test:" in out
    code, out, _ = cli("envs", "--json")
    assert json.loads(out)["envs"][0]["smoke"]["passed"] is True
    # remove needs --yes without a terminal, then deletes only what tfgpu made
    code, _, err = cli("remove", str(prefix.resolve()))
    assert code == 2
    assert "--yes" in err
    code, _, _ = cli("remove", str(prefix.resolve()), "--yes")
    assert code == 0
    assert not prefix.exists()


def test_cli_create_without_yes_and_without_terminal_exits_2(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts()))
    code, _, err = cli("create", "--tf", "2.20.0", "--backend", "pip", "--prefix", str(tmp_path / "e"),
                       "--facts", str(facts_file), "--allow-cpu")
    assert code == 2
    assert "pass --yes" in err
    assert not (tmp_path / "e").exists()


def test_cli_plan_sh_and_json(tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts()))
    code, out, err = cli("plan", "--tf", "2.20", "--backend", "pip", "--facts", str(facts_file), "--format", "sh")
    # blocked on a machine without a driver: the plan is printed and exits 1, as create would refuse it
    assert code == 1, err
    assert out.startswith("#!/bin/sh")
    assert "set -eu" in out
    code, out, _ = cli("plan", "--tf", "2.20", "--backend", "pip", "--facts", str(facts_file), "--json")
    doc = json.loads(out)
    assert doc["schema"] == "tfgpu.plan/1"
    assert doc["tf"] == "2.20.0"
    assert doc["prefix"] == str(Path(os.environ["TFGPU_HOME"]).resolve() / "envs" / "tf2.20.0")
    code, out, err = cli("plan", "--tf", "2.20", "--backend", "pip", "--facts", str(facts_file),
                         "--format", "environment.yml", "--force")
    assert code == 0, err  # a pip plan is written as conda-forge's Python + pip (issue 18); no conda needed here
    assert '    - "tensorflow[and-cuda]==2.20.0"' in out
    code, _, err = cli("plan", "--tf", "2.20", "--name", "../evil", "--facts", str(facts_file))
    assert code == 2
    assert "invalid environment name" in err


@pytest.mark.e2e
def test_e2e_real_tensorflow_from_pypi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       cli: Callable[..., tuple[int, str, str]]) -> None:
    """A real TensorFlow 2.20 from PyPI into a real venv; the real smoke test explains why no GPU was used."""
    if not os.environ.get("TFGPU_E2E"):
        pytest.skip("set TFGPU_E2E=1 (nox -s e2e)")
    if HAVE_UV:
        monkeypatch.setenv("PATH", f"{Path(UV).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    prefix = tmp_path / "tf220"
    code, out, err = cli("create", "--tf", "2.20", "--backend", "pip", "--prefix", str(prefix), "--yes",
                         "--allow-cpu", "--timeout", "1800")
    assert code == 0, (out, err)
    from tfgpu.verify.runner import run_smoke

    report = run_smoke(str(prefix / "bin" / "python"), timeout=600)
    doc = report.to_json(allow_cpu=True)
    assert doc["tensorflow"]["version"].startswith("2.20")
    assert doc["tensorflow"]["build_info"]  # the real build info (cuda_version, cudnn_version, ...)
    assert doc["mode"] == "cpu"
    assert doc["findings"], "the smoke test must explain why no GPU was used"
