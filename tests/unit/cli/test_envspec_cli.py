"""`tfgpu export` and `tfgpu validate` on environment trees (a fake tensorflow dist-info, build_info.py and
libtensorflow_framework as tests/unit/judge/test_environment_verdict.py builds them; a real venv made with the venv
module for one of them) and a facts file for the machine: the round trip, each exit code, the two formats against
their JSON Schemas, --force, and every bad input as one line with exit 2."""

from __future__ import annotations

import json
import shutil
import sys
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import REPO
from tests.conftest import RTX3080_FACTS
from tests.unit.judge.test_environment_verdict import ALL_NVIDIA_RUNPATH, CU12, make_env
from tests.unit.judge.test_envspec import base_spec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CLI = Callable[..., tuple[int, str, str]]
SCHEMAS = REPO / "src" / "tfgpu" / "core" / "schemas"
REQUIRES = ("numpy <2.0.0,>=1.23.5", "nvidia-cudnn-cu12 ==8.9.7.29 ; extra == 'and-cuda'")
DISTS = {"numpy": "1.26.4", "ml_dtypes": "0.3.2", "nvidia_cuda_runtime_cu12": "12.3.101"}


def schema_check(doc: Any, name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


def working_env(root: Path, *, tf: str = "2.16.1", dists: dict[str, str] | None = None, py: str = "3.11") -> Path:
    """A TF [and-cuda] environment whose libraries are all on libtensorflow_framework's RUNPATH, beside a
    directory holding libcuda.so.1 (the driver's library, as the machine in the facts file has it)."""
    driver_dir = root.parent / f"{root.name}-driver"
    driver_dir.mkdir(parents=True)
    (driver_dir / "libcuda.so.1").write_bytes(b"")
    return make_env(root, tf=tf, py=py, runpath=f"{ALL_NVIDIA_RUNPATH}:{driver_dir}", nvidia=CU12,
                    cudnn_wheel="8.9.7.29", requires=REQUIRES, dists={**DISTS, **(dists or {})})


@pytest.fixture
def facts(tmp_path: Path) -> str:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(RTX3080_FACTS))
    return str(path)


def test_export_then_validate_round_trip(tmp_path: Path, cli: CLI, facts: str) -> None:
    env = working_env(tmp_path / "env")
    spec = tmp_path / "spec.toml"
    rc, out, err = cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec))
    assert (rc, out) == (0, ""), err
    assert f"wrote {spec}: tensorflow 2.16.1, CUDA 12.3.101, cuDNN 8.9.7.29, driver >= " in err
    text = spec.read_text()
    assert text.startswith("# A TensorFlow environment spec (tfgpu.envspec/1)")
    assert 'schema = "tfgpu.envspec/1"' in text
    rc, out, err = cli("validate", str(spec), "--prefix", str(env), "--facts", facts)
    assert rc == 0, out + err
    assert out.startswith(f"MATCHES: {env} against {spec} (tensorflow 2.16.1): 0 blocking, 0 risky, 0 informational")


def test_export_json_to_stdout_and_to_a_json_file(tmp_path: Path, cli: CLI, facts: str) -> None:
    env = working_env(tmp_path / "env")
    rc, out, err = cli("export", "--prefix", str(env), "--facts", facts, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    schema_check(doc, "envspec.schema.json")
    assert doc["verdict"] == "gpu"
    assert doc["gpu"]["sass"] == ["5.0", "6.0", "7.0", "8.0", "9.0"]
    assert doc["pins"]["numpy"] == {"version": "1.26.4", "range": "<2,>=1.23.5",
                                    "from": "tensorflow 2.16.1's Requires-Dist; compat/pins.toml (pypi-tf-2-14-0)"}
    path = tmp_path / "out" / "spec.json"
    assert cli("export", "--prefix", str(env), "--facts", facts, "-o", str(path))[0] == 0
    assert json.loads(path.read_text()) == doc
    rc, out, _ = cli("validate", str(path), "--prefix", str(env), "--facts", facts, "--json")
    assert rc == 0
    schema_check(json.loads(out), "validate.schema.json")


def test_an_existing_file_is_kept_without_force(tmp_path: Path, cli: CLI, facts: str) -> None:
    env = working_env(tmp_path / "env")
    spec = tmp_path / "spec.toml"
    spec.write_text("mine\n")
    rc, _, err = cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec))
    assert rc == 2
    assert err.strip() == (f"tfgpu: error: {spec} exists; not replacing it without --force (pass --force to replace "
                           "it, or give another -o FILE)")
    assert spec.read_text() == "mine\n"
    assert cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec), "--force")[0] == 0
    assert spec.read_text().startswith("# A TensorFlow environment spec")


def test_blocking_differences_exit_1(tmp_path: Path, cli: CLI, facts: str) -> None:
    env = working_env(tmp_path / "env")
    spec = tmp_path / "spec.toml"
    assert cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec))[0] == 0
    rc, out, _ = cli("validate", str(spec), "--prefix", str(env), "--facts", facts, "--driver", "470.82.01",
                     "--gpu-cc", "3.7", "--json")
    assert rc == 1
    doc = json.loads(out)
    schema_check(doc, "validate.schema.json")
    assert [(d["id"], d["severity"]) for d in doc["differences"]] == [("driver.below_floor", "blocking"),
                                                                       ("gpu.arch", "blocking")]
    assert (doc["result"], doc["exit_code"]) == ("blocked", 1)
    rc, out, _ = cli("validate", str(spec), "--prefix", str(env), "--facts", facts, "--driver", "470.82.01")
    assert rc == 1
    assert out.startswith("BLOCKED: ")
    assert "  ✗ driver 470.82.01 is below the spec's floor" in out


def test_another_environment_risky_and_informational(tmp_path: Path, cli: CLI, facts: str) -> None:
    spec = tmp_path / "spec.toml"
    assert cli("export", "--prefix", str(working_env(tmp_path / "a")), "--facts", facts, "-o", str(spec))[0] == 0
    patch = working_env(tmp_path / "b", tf="2.16.2")
    rc, out, _ = cli("validate", str(spec), "--prefix", str(patch), "--facts", facts)
    assert rc == 0
    assert out.startswith("COMPATIBLE: ")
    assert "· TensorFlow 2.16.2 here, 2.16.1 in the spec: another patch of the same series  [tf.patch]" in out
    moved = working_env(tmp_path / "c", dists={"ml_dtypes": "0.4.0"})
    rc, out, _ = cli("validate", str(spec), "--prefix", str(moved), "--facts", facts)
    assert rc == 0
    assert out.startswith("RISKY: ")
    assert "! ml-dtypes 0.4.0 here, 0.3.2 in the spec: outside the spec's range ==0.3.*" in out
    assert cli("validate", str(spec), "--prefix", str(moved), "--facts", facts, "--strict")[0] == 1


def test_an_environment_without_tensorflow(tmp_path: Path, cli: CLI, facts: str) -> None:
    empty = tmp_path / "empty"
    (empty / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (empty / "bin").mkdir()
    (empty / "bin" / "python3").write_text("#!/bin/sh\n")
    (empty / "pyvenv.cfg").write_text("version = 3.11.7\n")
    rc, out, err = cli("export", "--prefix", str(empty), "--facts", facts)
    assert (rc, out) == (2, "")
    assert err.startswith(f"tfgpu: error: no TensorFlow in {empty} (--prefix {empty}): nothing to export")
    spec = tmp_path / "spec.toml"
    assert cli("export", "--prefix", str(working_env(tmp_path / "env")), "--facts", facts, "-o", str(spec))[0] == 0
    rc, out, _ = cli("validate", str(spec), "--prefix", str(empty), "--facts", facts, "--json")
    assert rc == 1
    assert [d["id"] for d in json.loads(out)["differences"]] == ["tf.missing"]


def test_the_environment_in_a_doctor_report(tmp_path: Path, cli: CLI, facts: str) -> None:
    """CI on a runner without a GPU: the production machine's `tfgpu doctor --json` report holds its machine and
    its environment; validate judges both from the file."""
    from tfgpu.facts.environment import probe_environment

    env = working_env(tmp_path / "env")
    spec = tmp_path / "spec.toml"
    assert cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec))[0] == 0
    recorded = probe_environment(str(env), how="$VIRTUAL_ENV", shell_env={}, explicit=True, ld_cache=b"")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "tfgpu.doctor/1", "facts": {**RTX3080_FACTS, "environment": recorded}}))
    shutil.rmtree(env)  # nothing is read here
    rc, out, err = cli("validate", str(spec), "--facts", str(report))
    assert rc == 0, out + err
    assert out.startswith(f"MATCHES: {env} against {spec}")


@pytest.mark.parametrize(("content", "message"), [
    (None, "spec file {path} does not exist (give the file `tfgpu export -o FILE` wrote"),
    ("schema = [", "spec file {path} is not valid TOML ("),
    ("[1, 2]", "spec file {path} is not valid TOML ("),
    ('{"schema": NaN}', "spec file {path} is not valid JSON: NaN is not JSON"),
    ('{"schema": "tfgpu.envspec/1"', "spec file {path} is not valid JSON (line 1"),
    ('schema = "tfgpu.doctor/1"\n', "spec file {path} has schema 'tfgpu.doctor/1'; tfgpu reads 'tfgpu.envspec/1'"),
    ('schema = "tfgpu.envspec/1"\n', "spec file {path}: spec: missing 'tensorflow'"),
    ('schema = "tfgpu.envspec/1"\nwhen = 2026-01-01\n', "spec file {path} does not hold an environment spec"),
    ("x" * (1024 * 1024 + 1), "spec file {path} is larger than 1 MB: not an environment spec"),
    (b"\xff\xfe", "spec file {path} is not UTF-8 text"),
])
def test_a_bad_spec_is_one_line_and_exit_2(tmp_path: Path, cli: CLI, facts: str, content: str | bytes | None,
                                           message: str) -> None:
    path = tmp_path / "spec.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    rc, out, err = cli("validate", str(path), "--prefix", str(working_env(tmp_path / "env")), "--facts", facts)
    assert (rc, out) == (2, "")
    assert err.startswith("tfgpu: error: " + message.format(path=path)), err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_range_and_a_directory(tmp_path: Path, cli: CLI, facts: str) -> None:
    env = working_env(tmp_path / "env")
    spec = tmp_path / "spec.toml"
    assert cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec))[0] == 0
    spec.write_text(spec.read_text().replace('range = "<2,>=1.23.5"', 'range = "about 1.26"'))
    rc, _, err = cli("validate", str(spec), "--prefix", str(env), "--facts", facts)
    assert rc == 2
    assert err.startswith(f"tfgpu: error: spec file {spec}: spec.pins.numpy.range: 'about 1.26' is not a version "
                          "range (PEP 440")
    rc, _, err = cli("validate", str(tmp_path), "--prefix", str(env), "--facts", facts)
    assert rc == 2
    assert err.startswith(f"tfgpu: error: spec file {tmp_path} is a directory")


def test_json_with_a_toml_file_name_is_refused(tmp_path: Path, cli: CLI, facts: str) -> None:
    rc, _, err = cli("export", "--prefix", str(working_env(tmp_path / "env")), "--facts", facts, "--json", "-o",
                     str(tmp_path / "spec.toml"))
    assert rc == 2
    assert "--json writes JSON, but" in err
    assert not (tmp_path / "spec.toml").exists()


def test_export_from_a_real_venv(tmp_path: Path, cli: CLI, facts: str) -> None:
    """A venv the venv module makes (no pip: nothing is downloaded), with a fake TensorFlow in its site-packages,
    exported through its interpreter (--python) and validated against itself, then against a venv without it."""
    real = tmp_path / "venv"
    venv.create(real, with_pip=False, symlinks=True)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    fake = working_env(tmp_path / "fake", py=py)
    shutil.copytree(fake / "lib" / f"python{py}" / "site-packages", real / "lib" / f"python{py}" / "site-packages",
                    dirs_exist_ok=True)
    spec = tmp_path / "spec.toml"
    rc, _, err = cli("export", "--python", str(real / "bin" / "python"), "--facts", facts, "-o", str(spec))
    assert rc == 0, err
    doc = tomllib.loads(spec.read_text())
    assert doc["python"]["version"] == ".".join(map(str, sys.version_info[:3]))  # the venv's pyvenv.cfg
    assert doc["tensorflow"]["version"] == "2.16.1"
    rc, out, _ = cli("validate", str(spec), "--python", str(real / "bin" / "python"), "--facts", facts)
    assert rc == 0, out
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False, symlinks=True)
    rc, out, _ = cli("validate", str(spec), "--python", str(bare / "bin" / "python"), "--facts", facts)
    assert rc == 1
    assert "no TensorFlow in this environment (tensorflow==2.16.1 in the spec)  [tf.missing]" in out


def test_an_environment_that_does_not_work_is_exported_as_it_is(tmp_path: Path, cli: CLI, facts: str) -> None:
    env = working_env(tmp_path / "env", tf="2.15.1", dists={"numpy": "2.1.0"})  # NumPy 2 under TF 2.15: broken
    spec = tmp_path / "spec.json"
    rc, _, err = cli("export", "--prefix", str(env), "--facts", facts, "-o", str(spec))
    assert rc == 0
    assert "note: here this environment does not use the GPU (tensorflow 2.15.1: broken" in err
    doc = json.loads(spec.read_text())
    assert (doc["verdict"], [b["id"] for b in doc["blockers"]]) == ("broken", ["python.numpy"])
    assert doc["pins"]["numpy"] == {"version": "2.1.0", "range": "==2.1.*", "from": "the installed version's series "
                                    "(<2,>=1.23.5 from tensorflow 2.15.1's Requires-Dist; compat/pins.toml "
                                    "(pypi-tf-2-14-0) does not hold it)"}
    rc, out, _ = cli("validate", str(spec), "--prefix", str(env), "--facts", facts)
    assert rc == 0  # the same environment: its blocker is said, as the exported one had it
    assert "(the exported environment had this too)  [environment.python.numpy]" in out


_text = st.text(max_size=12)
_strs = st.lists(_text, max_size=3)
_odd_environments = st.fixed_dictionaries({}, optional={
    "prefix": st.none() | _text, "python": st.none() | _text, "python_version": st.none() | _text,
    "kind": st.none() | st.sampled_from(["venv", "conda", "system"]),
    "distributions": st.dictionaries(st.sampled_from(["numpy", "keras", "nvidia-cudnn-cu12", "tf-keras"]), _text),
    "tensorflow": st.lists(st.fixed_dictionaries(
        {"distribution": st.sampled_from(["tensorflow", "tensorflow-cpu", "tf-nightly", "x"])},
        optional={"version": st.none() | st.sampled_from(["2.16.1", "1.14.0", "2.99", "x", "9" * 40]),
                  "requires": st.lists(st.sampled_from(["numpy<2", "numpy<<", "nvidia-cudnn-cu12==8.9 ; extra == 'and-cuda'",
                                                        "keras ; python_version >= '3'"]), max_size=3)}), max_size=2),
    "build_info": st.none() | st.dictionaries(st.sampled_from(["is_cuda_build", "cuda_version", "cudnn_version",
                                                               "cuda_compute_capabilities"]),
                                              st.booleans() | st.sampled_from(["12.3", "8", "", "x.y", "99999.1"]) | _strs),
    "objects": st.lists(st.fixed_dictionaries({"path": _text}, optional={"needed": _strs, "rpath": st.none() | _text,
                                                                         "runpath": st.none() | _text}), max_size=2),
    "activation": st.fixed_dictionaries({}, optional={"LD_LIBRARY_PATH": st.none() | _text,
                                                      "TF_USE_LEGACY_KERAS": st.none() | _text}),
    "ld_cache": st.lists(st.lists(_text, min_size=2, max_size=2), max_size=2),
    "dirs": st.dictionaries(_text, _strs, max_size=2),
    "versions": st.dictionaries(_text, st.dictionaries(_text, _text, max_size=2), max_size=2),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_odd_environments)
def test_property_any_recorded_environment_is_judged_or_refused(tmp_path: Path, cli: CLI, environment: dict[str, Any]
                                                                ) -> None:
    """A report's environment is someone else's file: whatever its values, validate and export answer (0, 1) or
    refuse it (2), never an internal error."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(base_spec()))
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "tfgpu.doctor/1", "facts": {**RTX3080_FACTS, "environment": environment}}))
    rc, _, err = cli("validate", str(spec), "--facts", str(report))
    assert rc in ((0, 1) if not err.startswith("tfgpu: error: facts file") else (2,)), err
    rc, _, err = cli("export", "--facts", str(report))
    assert rc in (0, 2), err
    assert "internal error" not in err


def test_a_malformed_environment_in_a_facts_file_is_bad_input_for_the_doctor_too(tmp_path: Path, cli: CLI) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({**RTX3080_FACTS, "environment": {"tensorflow": "x", "distributions": [1]}}))
    rc, out, err = cli("doctor", "--facts", str(report), "--json")
    assert (rc, out) == (2, "")
    assert err.strip() == f"tfgpu: error: facts file {report}: facts.environment.tensorflow: expected array, got str \"x\""
