"""conda backend: argv checked against conda's documented `create` usage (tests/data/conda/), activation
scripts against the documented activate.d layout, and the execution path against a fake conda on PATH."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tfgpu.build.execute import run_plan
from tfgpu.core.errors import StepFailed
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
DATA = TESTS / "data" / "conda"
FAKE = TESTS / "fake_programs" / "fake_conda.py"


def documented_options() -> set[str]:
    text = (DATA / "conda-create-usage-23.7.txt").read_text()
    usage = text[text.index("usage:"):text.index("-n, --name:")]
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", usage)) - {"-h"}


def facts(gpu_mib: int = 2048) -> dict[str, Any]:
    return {"platform": {"os": "linux"}, "python": {"interpreters": []},
            "driver": {"version": "550.54.15", "cuda": "12.4"}, "gpus": [{"memory_mib": gpu_mib}]}


@pytest.mark.parametrize("tool", ["mamba", "micromamba", "conda"])
@pytest.mark.parametrize("tf", ["1.15.0", "2.2.0", "2.10.0", "2.12.0", "2.18.0"])
def test_create_argv_uses_only_documented_options(tool: str, tf: str) -> None:
    tools = {"uv": None, "mamba": None, "micromamba": None, "conda": None, tool: f"/opt/bin/{tool}"}
    plan = plan_environment(KB, facts(), BuildRequest(tf=tf, backend="conda"), tools=tools, home="/h")
    argv = plan.steps[0].argv
    assert argv[:3] == (f"/opt/bin/{tool}", "create", "--yes")
    options = {a for a in argv[1:] if a.startswith("-")}
    assert options <= documented_options() | {"--yes"}
    # (-n ENVIRONMENT | -p PATH): exactly one; --override-channels "Requires --channel"
    assert ("-n" in argv) != ("-p" in argv)
    assert "--override-channels" in argv
    assert "-c" in argv
    # every -c is followed by a channel, and the specs come after the options
    for i, a in enumerate(argv):
        if a == "-c":
            assert not argv[i + 1].startswith("-")
    assert list(argv[-len(plan.conda_specs):]) == list(plan.conda_specs)
    assert not any(a.startswith("-") for a in plan.conda_specs)
    if tool == "micromamba":
        assert "defaults" not in argv  # micromamba has no `defaults` multichannel: anaconda instead


def test_activation_script_matches_the_documented_layout() -> None:
    doc = (DATA / "activate-d.txt").read_text()
    assert "./etc/conda/activate.d" in doc
    assert "./etc/conda/deactivate.d" in doc
    plan = plan_environment(KB, facts(), BuildRequest(tf="2.10.0", backend="conda", name="t"), tools={"mamba": "/m"}, home="/h")
    writes = {s.path: s.content or "" for s in plan.steps if s.kind == "write-file"}
    act = writes["/h/envs/t/etc/conda/activate.d/tfgpu_env_vars.sh"]
    deact = writes["/h/envs/t/etc/conda/deactivate.d/tfgpu_env_vars.sh"]
    # the same export TensorFlow's pip.md wrote into activate.d/env_vars.sh
    assert "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CONDA_PREFIX/lib/" in act
    assert "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CONDA_PREFIX/lib/" in doc
    assert "export TF_FORCE_GPU_ALLOW_GROWTH=true" in act
    assert "unset TF_FORCE_GPU_ALLOW_GROWTH" in deact


@pytest.mark.real_subprocess
def test_activation_and_deactivation_scripts_run_in_a_real_shell(tmp_path: Path) -> None:
    plan = plan_environment(KB, facts(), BuildRequest(tf="2.10.0", backend="conda", name="t"), tools={"mamba": "/m"}, home="/h")
    writes = [s for s in plan.steps if s.kind == "write-file"]
    for s in writes:
        p = tmp_path / Path(s.path or "").name.replace(".sh", "") / "x.sh"
        p.parent.mkdir(exist_ok=True)
    act, deact = (s.content or "" for s in writes)
    script = (f"{act}\necho \"A:$LD_LIBRARY_PATH:$TF_FORCE_GPU_ALLOW_GROWTH\"\n{deact}\n"
              "echo \"D:${LD_LIBRARY_PATH-unset}:${TF_FORCE_GPU_ALLOW_GROWTH-unset}\"\n")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "CONDA_PREFIX": "/envs/t", "LD_LIBRARY_PATH": "/old"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["A:/old:/envs/t/lib/:true", "D:/old:unset"]


def install_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "mamba") -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / name
    exe.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CONDA_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("FAKE_CONDA_ENVS", str(tmp_path / "conda-envs"))
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    return exe


def calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


@pytest.mark.real_subprocess
def test_conda_execution_path_with_a_fake_mamba(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = install_fake(tmp_path, monkeypatch)
    prefix = tmp_path / "envs" / "tf22"
    plan = plan_environment(KB, facts(), BuildRequest(tf="2.2.0", backend="conda", prefix=str(prefix)), tools={"mamba": str(exe)}, home="/h")
    result = run_plan(plan)
    assert (prefix / "conda-meta" / "history").is_file()
    assert (prefix / "etc" / "conda" / "activate.d" / "tfgpu_env_vars.sh").is_file()
    (call,) = calls(tmp_path)
    assert call == ["mamba", *plan.steps[0].argv[1:]]
    assert "+ " + str(exe) in result.log_path.read_text()


@pytest.mark.real_subprocess
def test_named_env_in_conda_envs_dir_via_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any) -> None:
    install_fake(tmp_path, monkeypatch)
    ff = tmp_path / "facts.json"
    ff.write_text(json.dumps(facts()))
    code, out, err = cli("plan", "--tf", "2.2.0", "--backend", "conda", "--name", "tf22", "--facts", str(ff), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prefix"] == str(tmp_path / "conda-envs" / "tf22")
    assert doc["steps"][0]["argv"][3:5] == ["-n", "tf22"]
    code, out, err = cli("plan", "--tf", "2.2.0", "--backend", "conda", "--name", "tf22", "--facts", str(ff),
                         "--format", "environment.yml")
    assert code == 0
    assert '  - "tensorflow-gpu=2.2.0"' in out


@pytest.mark.real_subprocess
def test_conda_failure_removes_the_partial_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = install_fake(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_CONDA_FAIL", "1")
    prefix = tmp_path / "envs" / "bad"
    plan = plan_environment(KB, facts(), BuildRequest(tf="2.2.0", backend="conda", prefix=str(prefix)), tools={"mamba": str(exe)}, home="/h")
    with pytest.raises(StepFailed) as exc:
        run_plan(plan)
    assert not prefix.exists()
    assert any("PackagesNotFoundError" in line for line in exc.value.log_tail)  # type: ignore[attr-defined]
