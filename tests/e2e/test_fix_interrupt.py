"""An interrupted `tfgpu fix` changes nothing (issue 26): a real venv made with uv from a local wheel index (a fake
`tensorflow` 2.15.1 that requires numpy<2, beside numpy 2.0.0), its verdict and fix plan (pin numpy, write
TF_FORCE_GPU_ALLOW_GROWTH into bin/activate), run by build.envfix.run_fix with a last step that waits to be
signalled. SIGINT or SIGTERM arrives after the install and the file edit have happened: the package list and
bin/activate must be exactly as before. Offline; a few seconds."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import isolate_installers
from tests.fake_programs.wheels import build_wheel
from tfgpu.backends.steps import Step
from tfgpu.build import envfix
from tfgpu.core.errors import Interrupted
from tfgpu.core.record import replace
from tfgpu.facts.environment import probe_environment
from tfgpu.judge.environment import judge_environment
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.sonames import load_sonames
from tfgpu.plan.envfix import plan_fix
from tfgpu.plan.model import Plan

UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
BASE_PY = str(getattr(sys, "_base_executable", sys.executable))
BUILD_INFO = (b"build_info = collections.OrderedDict([('cuda_compute_capabilities', ['sm_60', 'compute_80']), "
              b"('cuda_version', '12.2'), ('cudnn_version', '8'), ('is_cuda_build', True), ('is_rocm_build', False)])\n")
SMALL_GPU = {"platform": {"os": "linux"}, "driver": {"version": "550.54.15"},
             "gpus": [{"index": 0, "name": "MX150", "compute_capability": "6.1", "memory_mib": 2048}]}

pytestmark = [pytest.mark.real_subprocess,
              pytest.mark.skipif(not Path(UV).exists() or sys.platform != "linux", reason="needs uv, on Linux")]


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_installers(monkeypatch, tmp_path)
    wheels, index = tmp_path / "wheels", tmp_path / "empty-index"
    index.mkdir()
    build_wheel(wheels, "tensorflow", "2.15.1", {"tensorflow/__init__.py": b"__version__ = '2.15.1'\n",
                                                 "tensorflow/python/platform/build_info.py": BUILD_INFO},
                requires=("numpy<2",))
    for version in ("2.0.0", "1.26.4"):
        build_wheel(wheels, "numpy", version, {"numpy/__init__.py": f"__version__ = {version!r}\n".encode()})
    monkeypatch.setenv("UV_INDEX_URL", index.as_uri())
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_OFFLINE", "1")
    prefix = tmp_path / "env"
    subprocess.run([UV, "venv", "-q", "--python", BASE_PY, str(prefix)], check=True, timeout=120)
    subprocess.run([UV, "pip", "install", "-q", "--python", str(prefix / "bin" / "python"), "--no-deps",
                    "tensorflow==2.15.1", "numpy==2.0.0"], check=True, timeout=120)
    return prefix


def dist_infos(prefix: Path) -> list[str]:
    return sorted(p.name for p in prefix.glob("lib/python*/site-packages/*.dist-info"))


def _plan_with_a_last_step_to_interrupt(prefix: Path, flag: Path) -> Plan:
    doc = probe_environment(str(prefix), how="--prefix", shell_env={}, explicit=True, ld_cache=b"")
    assert doc is not None
    verdict = judge_environment(doc, SMALL_GPU, load_kb(), load_sonames())
    assert {f["id"] for f in verdict["blockers"]} >= {"python.numpy"}
    plan = plan_fix(verdict, doc, uv=UV)
    assert [s.kind for s in plan.steps] == ["run", "append-file"]  # numpy<2, then TF_FORCE_GPU_ALLOW_GROWTH
    wait = Step((sys.executable, "-c", "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(120)",
                 str(flag)), "a last step that waits for the signal")
    return replace(plan, steps=(*plan.steps, wait))


@pytest.mark.parametrize("signals", [(signal.SIGINT,), (signal.SIGTERM,),
                                     (signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGINT)],
                         ids=["SIGINT", "SIGTERM", "Ctrl-C-again-during-the-restore"])
def test_a_signal_mid_fix_leaves_the_package_list_and_files_as_they_were(venv: Path, tmp_path: Path,
                                                                          signals: tuple[signal.Signals, ...]) -> None:
    listed, activate = dist_infos(venv), (venv / "bin" / "activate").read_bytes()
    flag = tmp_path / "waiting"
    plan = _plan_with_a_last_step_to_interrupt(venv, flag)

    def send_when_waiting() -> None:
        deadline = time.monotonic() + 120
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        changed["numpy"] = dist_infos(venv)
        changed["activate"] = (venv / "bin" / "activate").read_bytes()
        for sig in signals:  # the later ones land while the restore runs: counted, never acted on
            os.kill(os.getpid(), sig)
            time.sleep(0.15)

    changed: dict[str, object] = {}
    sender = threading.Thread(target=send_when_waiting, daemon=True)
    # signals that land after run_fix has returned (a fast restore) must not stop the test run itself
    late = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        sender.start()
        with pytest.raises(Interrupted) as exc:
            envfix.run_fix(plan, uv=UV, timeout=300)
        sender.join(timeout=30)
    finally:
        for sig, handler in late.items():
            signal.signal(sig, handler)
    assert "restored as recorded" in str(exc.value) + str(exc.value.hint)
    assert changed["numpy"] != listed  # the fix had changed both
    assert changed["activate"] != activate
    assert dist_infos(venv) == listed
    assert (venv / "bin" / "activate").read_bytes() == activate


def test_undo_after_a_finished_fix_restores_the_package_list_exactly(venv: Path, tmp_path: Path) -> None:
    listed, activate = dist_infos(venv), (venv / "bin" / "activate").read_bytes()
    plan = _plan_with_a_last_step_to_interrupt(venv, tmp_path / "unused")
    plan = replace(plan, steps=plan.steps[:-1])
    envfix.run_fix(plan, uv=UV, timeout=300)
    assert "numpy-1.26.4.dist-info" in dist_infos(venv)
    assert envfix.restore(envfix.load_record(str(venv)), uv=UV, timeout=300) == []
    assert dist_infos(venv) == listed
    assert (venv / "bin" / "activate").read_bytes() == activate
