"""`tfgpu fix` plans (tfgpu.plan.envfix) from environment verdicts, and its undo (tfgpu.build.envfix): pure."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tfgpu.build import envfix
from tfgpu.plan.envfix import plan_fix, plan_sh

ENV = {"python": "/e/bin/python3", "prefix": "/e", "python_version": "3.11.7", "kind": "venv"}


def finding(fid: str, repair: dict[str, Any], effect: str = "cpu-only") -> dict[str, Any]:
    return {"id": fid, "summary": fid, "fix": "", "effect": effect, "repair": repair}


def verdict(*blockers: dict[str, Any], caveats: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"tensorflow": {"distribution": "tensorflow", "version": "2.16.1", "cuda": "12.3", "cudnn": "8.9"},
            "verdict": "cpu-only", "blockers": list(blockers), "caveats": list(caveats), "how": "--python"}


def test_wheels_pins_and_the_library_path_in_one_plan() -> None:
    v = verdict(finding("libs.cudnn_too_old", {"kind": "pip", "requirements": ["nvidia-cudnn-cu12==8.9.7.29"]}),
                finding("libs.not_on_search_path", {"kind": "activation", "nvidia_libpath": True}),
                finding("python.numpy", {"kind": "pip", "requirements": ["numpy<2"]}, "broken"),
                finding("driver.libcuda", {"kind": "none", "instead": "install the NVIDIA driver"}),
                caveats=(finding("gpu.memory_growth", {"kind": "activation",
                                                       "vars": {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}}, "caveat"),))
    plan = plan_fix(v, ENV, uv="/usr/bin/uv")
    assert [s.kind for s in plan.steps] == ["run", "append-file"]
    assert plan.steps[0].argv == ("/usr/bin/uv", "pip", "install", "--python", "/e/bin/python3",
                                  "nvidia-cudnn-cu12==8.9.7.29", "numpy<2")
    content = plan.steps[1].content or ""
    assert plan.steps[1].path == "/e/bin/activate"
    assert "site-packages/nvidia/*/lib" in content
    assert "export TF_FORCE_GPU_ALLOW_GROWTH=true" in content
    assert any("install the NVIDIA driver" in n for n in plan.notes)
    script = plan_sh(plan)
    assert shlex.split(script.splitlines()[4]) == list(plan.steps[0].argv)


def test_a_conflicting_tensorflow_cpu_is_removed_and_tensorflow_put_back() -> None:
    v = verdict(finding("python.tf_conflict", {"kind": "replace", "remove": ["tensorflow-cpu"],
                                               "reinstall": "tensorflow==2.21.0"}))
    plan = plan_fix(v, ENV, uv=None, break_system=True)
    assert plan.steps[0].argv == ("/e/bin/python3", "-m", "pip", "uninstall", "-y", "--break-system-packages",
                                  "tensorflow-cpu")
    assert plan.steps[1].argv[-3:] == ("--force-reinstall", "--no-deps", "tensorflow==2.21.0")


def test_cuda_without_wheels_is_refused_in_a_venv_and_installed_in_a_conda_env() -> None:
    v = verdict(finding("libs.missing", {"kind": "cuda", "families": ["cudart"]}))
    v["tensorflow"] = {"distribution": "tensorflow-gpu", "version": "1.14.0", "cuda": "10.0", "cudnn": "7.4"}
    venv = plan_fix(v, ENV, uv="uv")
    assert venv.steps == ()
    assert "tfgpu create --tf 1.14.0" in venv.notes[0]
    assert "CUDA 10.0" in venv.notes[0]
    conda = plan_fix(v, {**ENV, "kind": "conda"}, uv="uv", conda="/opt/conda/bin/conda")
    assert conda.steps[0].argv == ("/opt/conda/bin/conda", "install", "-y", "-p", "/e", "-c", "conda-forge",
                                   "cudatoolkit=10.0", "cudnn>=7.4")


def _site(prefix: Path, pkgs: dict[str, str]) -> None:
    sp = prefix / "lib" / "python3.11" / "site-packages"
    sp.mkdir(parents=True, exist_ok=True)
    for d in sp.glob("*.dist-info"):
        (d / "METADATA").unlink()
        d.rmdir()
    for name, ver in pkgs.items():
        d = sp / f"{name.replace('-', '_')}-{ver}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Name: {name}\nVersion: {ver}\n\n")


def test_undo_removes_what_was_added_and_puts_back_the_versions(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    prefix = tmp_path / "env"
    _site(prefix, {"tensorflow": "2.16.1", "numpy": "2.1.0", "keras": "3.15.1"})
    (prefix / "bin").mkdir()
    (prefix / "bin" / "activate").write_text("# venv\n")
    plan = plan_fix(verdict(finding("x", {"kind": "activation", "nvidia_libpath": True})),
                    {**ENV, "prefix": str(prefix), "python": str(prefix / "bin" / "python3")}, uv="uv")
    rec = envfix.take_record(plan)
    envfix.save_record(rec)
    assert envfix.load_record(str(prefix))["packages"] == {"tensorflow": "2.16.1", "numpy": "2.1.0", "keras": "3.15.1"}
    _site(prefix, {"tensorflow": "2.16.1", "numpy": "1.26.4", "keras": "3.4.1", "nvidia-cudnn-cu12": "8.9.7.29"})
    undo = envfix.undo_plan(rec, uv="uv")
    assert undo.steps[0].argv[-1] == "nvidia-cudnn-cu12"
    assert undo.steps[1].argv[-3:] == ("--no-deps", "keras==3.15.1", "numpy==2.1.0")
    assert (undo.steps[2].kind, undo.steps[2].content) == ("write-file", "# venv\n")


def test_undo_without_a_record_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfgpu.core.errors import UsageError

    monkeypatch.setenv("TFGPU_HOME", str(tmp_path))
    with pytest.raises(UsageError, match="no record"):
        envfix.load_record(str(tmp_path / "nowhere"))


def test_a_conda_environments_own_lib_goes_on_the_path_in_activate_d(tmp_path: Path) -> None:
    from tfgpu.facts.environment import parse_activation

    conda = {**ENV, "prefix": "/c", "python": "/c/bin/python3", "kind": "conda"}
    v = verdict(finding("libs.not_on_search_path", {"kind": "activation", "prefix_libpath": True}))
    plan = plan_fix(v, conda, uv=None)
    assert [(s.kind, s.path) for s in plan.steps] == [("write-file", "/c/etc/conda/activate.d/tfgpu_fix.sh")]
    values = {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64", "CONDA_PREFIX": "/c"}
    assert parse_activation(plan.steps[0].content or "", values, []) == []
    assert values["LD_LIBRARY_PATH"] == "/c/lib:/usr/local/nvidia/lib64"  # read back as conda would set it
    values = {"LD_LIBRARY_PATH": "", "CONDA_PREFIX": "/c"}
    parse_activation(plan.steps[0].content or "", values, [])
    assert values["LD_LIBRARY_PATH"] == "/c/lib"  # no empty entry (the current directory) when it was unset
