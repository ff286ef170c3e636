"""`tfgpu plan`'s small wrong outputs (issue 29, item 9): a `--format sh` script that runs on another host (no
path of tfgpu's own installation in it), the same exit code for the same blocked route whatever the format, a
note that names the blockers where nothing was printed above, no "(Python )" for a container plan, and an
image that works here given as a suggestion, not as a ✗ blocker."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tests.unit.cli.test_userpath import rtx_3080
from tfgpu.verify.runner import SCRIPT

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def rtx(tmp_path: Path) -> str:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(rtx_3080("535.54.03")))  # 2.15's image runs; 2.20's image needs driver >= 555
    return str(path)


@pytest.mark.parametrize("backend", ["docker", "podman", "apptainer"])
def test_a_shell_script_names_nothing_of_this_installation(cli: Cli, rtx: str, backend: str) -> None:
    code, out, err = cli("plan", "--tf", "2.15", "--backend", backend, "--format", "sh", "--facts", rtx)
    assert code == 0, err
    assert str(SCRIPT) not in out
    assert "site-packages" not in out
    assert "tfgpu-smoke.py" not in out
    assert str(Path.home()) not in out  # apptainer's .sif goes beside the script, not into tfgpu's home
    assert "--volume" not in out
    assert "--bind" not in out


def _gpu_check(cli: Cli, rtx: str) -> list[str]:
    _, out, _ = cli("plan", "--tf", "2.15", "--backend", "docker", "--format", "sh", "--facts", rtx)
    line = next(line for line in out.splitlines() if line.startswith("docker run "))
    argv = shlex.split(line)
    return argv[argv.index("python3"):]


@pytest.mark.real_subprocess
@pytest.mark.parametrize(("version", "gpus", "code"), [("2.15.0", "1", 0), ("2.15.0", "0", 1), ("1.15.0", "1", 0),
                                                        ("1.15.0", "0", 1)])
def test_the_scripts_gpu_check_runs_with_only_tensorflow(cli: Cli, rtx: str, version: str, gpus: str,
                                                         code: int) -> None:
    """The check step as the image's python3 runs it: the fake TensorFlow (tests/fake_tf) of each API generation."""
    argv = _gpu_check(cli, rtx)
    env = {**os.environ, "PYTHONPATH": str(TESTS / "fake_tf"), "FAKE_TF_VERSION": version, "FAKE_TF_GPUS": gpus}
    res = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert res.returncode == code, res.stderr
    assert f"TensorFlow {version} GPUs:" in res.stdout


def test_the_same_blocked_route_exits_1_in_every_format_and_names_why(cli: Cli, rtx: str) -> None:
    codes = {}
    for fmt in ("sh", "dockerfile", "apptainer", None):
        args = ["plan", "--tf", "2.20", "--backend", "docker", "--facts", rtx, *(("--format", fmt) if fmt else ())]
        code, _, err = cli(*args)
        codes[fmt] = code
        if fmt is not None:  # a document: nothing "above" to point at, so the note names the blockers
            assert "see ✗ above" not in err
            assert "needs host driver >= 555" in err
    assert set(codes.values()) == {1}, codes
    code, _, _ = cli("plan", "--tf", "2.20", "--backend", "docker", "--facts", rtx, "--format", "dockerfile", "--force")
    assert code == 0


def test_a_container_plan_shows_no_empty_python(cli: Cli, rtx: str) -> None:
    code, out, err = cli("plan", "--tf", "2.15", "--backend", "docker", "--facts", rtx)
    assert code == 0, err
    assert "(Python )" not in out
    assert "environment: tensorflow/tensorflow:2.15.1-gpu" in out


def test_an_image_that_works_is_a_suggestion_not_a_blocker(cli: Cli, rtx: str) -> None:
    _code, out, _err = cli("doctor", "--tf", "2.20", "--backend", "docker", "--facts", rtx, "--json")
    (target,) = json.loads(out)["targets"]
    blockers: list[dict[str, Any]] = target["blockers"]
    assert not [b for b in blockers if "runs on this GPU" in b["summary"] or "can run on this GPU" in b["summary"]]
    (route,) = [b for b in target["backends"] if b["backend"] == "container"]
    assert any("nvcr.io/nvidia/tensorflow:" in c["summary"] for c in route["caveats"])
    _, plan, _ = cli("plan", "--tf", "2.20", "--backend", "docker", "--facts", rtx)
    assert any(line.strip().startswith("! NVIDIA's nvcr.io/nvidia/tensorflow:") for line in plan.splitlines()), plan
    _, human, _ = cli("doctor", "--tf", "2.20", "--backend", "docker", "--facts", rtx)
    for line in human.splitlines():
        if "nvcr.io/nvidia/tensorflow:" in line:
            assert "✗" not in line, line
