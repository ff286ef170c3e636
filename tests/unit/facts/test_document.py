"""Facts files, overrides, the shipped JSON Schema, and `tfgpu doctor --facts/--json`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tfgpu.core.errors import InputError, UsageError
from tfgpu.facts.document import (
    apply_overrides,
    facts_schema,
    load_facts_file,
    overrides_from_env,
    validate_facts,
)

#: Seed 002 (tests/data/probe/machines/windows-gtx1080-anaconda.toml): Windows, GeForce GTX 1080
#: (CC 6.1 per NVIDIA's list), Anaconda env with tensorflow-gpu (tensorflow_core path => 2.0/2.1).
WINDOWS_GTX1080: dict[str, Any] = {
    "schema": "tfgpu.facts/1",
    "platform": {"os": "windows", "arch": "AMD64", "distro": None, "glibc": None, "wsl": None, "container": False},
    "gpus": [{"index": 0, "name": "GeForce GTX 1080", "compute_capability": "6.1", "memory_mib": None, "uuid": None}],
    "conda": {"kind": "conda", "path": None, "version": None},
    "tensorflow": [{"distribution": "tensorflow-gpu", "version": "2.1.0"}],
}


def _write(tmp_path: Path, doc: Any, name: str = "facts.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def test_schema_is_valid_json_schema_and_accepts_windows_seed() -> None:
    jsonschema.Draft202012Validator.check_schema(facts_schema())
    jsonschema.validate(WINDOWS_GTX1080, facts_schema())
    assert validate_facts(WINDOWS_GTX1080) == []


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"schema": "tfgpu.facts/1", "driver": {"version": 550}}, "facts.driver.version: expected string or null"),
        ({"schema": "tfgpu.facts/1", "platform": {"wsl": 3}}, "facts.platform.wsl: 3 is not one of"),
        ({"schema": "tfgpu.facts/1", "gpus": [{"compute_capability": "sm_86"}]}, "facts.gpus[0].compute_capability"),
        ({"schema": "tfgpu.facts/1", "gpus": {}}, "facts.gpus: expected array"),
        ({"schema": "tfgpu.facts/2"}, "facts.schema: expected"),
    ],
)
def test_validator_agrees_with_jsonschema(doc: dict[str, Any], problem: str) -> None:
    (ours,) = validate_facts(doc)
    assert ours.startswith(problem)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, facts_schema())


def test_load_partial_document_and_whole_report(tmp_path: Path) -> None:
    partial = load_facts_file(_write(tmp_path, {"schema": "tfgpu.facts/1", "gpus": []}))
    assert "driver" not in partial  # missing = unknown, not absent
    report = {"schema": "tfgpu.doctor/1", "tfgpu_version": "0.1.0", "facts": WINDOWS_GTX1080}
    loaded = load_facts_file(_write(tmp_path, report, "report.json"))
    assert loaded["platform"]["os"] == "windows"
    assert loaded["provenance"]["file"].endswith("report.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON (line 1, column 2"),
        ("[1, 2]", "does not hold a JSON object"),
        (json.dumps({"schema": "other/1"}), "has schema 'other/1'"),
        (json.dumps({"schema": "tfgpu.facts/1", "cpu": {"avx": "yes"}}), "facts.cpu.avx: expected boolean or null"),
    ],
)
def test_malformed_files_raise_input_error(tmp_path: Path, content: str, message: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(InputError) as info:
        load_facts_file(path)
    assert message in info.value.message
    assert str(path) in info.value.message
    assert "\n" not in info.value.one_line()


def test_non_utf8_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match="not UTF-8"):
        load_facts_file(bad)
    with pytest.raises(InputError, match="does not exist"):
        load_facts_file(tmp_path / "nope.json")


def test_overrides_apply_and_are_recorded() -> None:
    env = {"TFGPU_DRIVER_VERSION": "550.54.15", "TFGPU_GPU_CC": "8.6,7.5", "TFGPU_OS": "wsl2",
           "TFGPU_PYTHONS": "3.8,3.11", "TFGPU_NO_AVX": "1", "TFGPU_GLIBC": "2.17", "TFGPU_GPU_MEMORY_MIB": "2048"}
    facts, active = apply_overrides(WINDOWS_GTX1080, overrides_from_env(env))
    assert facts["driver"]["version"] == "550.54.15"
    assert facts["driver"]["source"] == "override"
    assert [g["compute_capability"] for g in facts["gpus"]] == ["8.6", "7.5"]
    assert facts["gpus"][0]["name"] == "GeForce GTX 1080"
    assert facts["gpus"][1]["memory_mib"] == 2048
    assert (facts["platform"]["os"], facts["platform"]["wsl"], facts["platform"]["glibc"]) == ("linux", 2, "2.17")
    assert [i["version"] for i in facts["python"]["interpreters"]] == ["3.8", "3.11"]
    assert facts["cpu"]["avx"] is False
    assert facts["overrides"] == active
    assert len(active) == 7
    assert "driver=550.54.15 (driver)" in active
    assert WINDOWS_GTX1080.get("driver") is None  # the input is not modified
    assert validate_facts(facts) == []


def test_without_overrides_the_facts_are_the_same_and_the_input_keeps_its_keys() -> None:
    import copy

    before = copy.deepcopy(WINDOWS_GTX1080)
    facts, active = apply_overrides(WINDOWS_GTX1080, {})
    assert active == list(WINDOWS_GTX1080.get("overrides") or [])
    assert facts["overrides"] == active
    assert {k: v for k, v in facts.items() if k != "overrides"} == {k: v for k, v in before.items() if k != "overrides"}
    assert before == WINDOWS_GTX1080  # no key added to the input either
    facts, _ = apply_overrides(WINDOWS_GTX1080, {"driver": "550.54.15"})
    assert facts["driver"]["version"] == "550.54.15"
    assert before == WINDOWS_GTX1080  # an override changes a copy, never the input's sections


def test_conda_override_cuda_like_conda() -> None:
    facts, active = apply_overrides({"schema": "tfgpu.facts/1"}, overrides_from_env({"CONDA_OVERRIDE_CUDA": "12.4"}))
    assert facts["driver"]["cuda"] == "12.4"
    assert active == ["cuda_driver=12.4 (CONDA_OVERRIDE_CUDA)"]
    facts, _ = apply_overrides({"schema": "tfgpu.facts/1"}, overrides_from_env({"CONDA_OVERRIDE_CUDA": ""}))
    assert facts["driver"]["cuda"] is None
    assert "no CUDA driver" in facts["driver"]["error"]
    facts, _ = apply_overrides({}, overrides_from_env({"CONDA_OVERRIDE_CUDA": "11.8", "TFGPU_CUDA_DRIVER": "12.2"}))
    assert facts["driver"]["cuda"] == "12.2"  # tfgpu's own variable wins


@pytest.mark.parametrize(("key", "value"), [("driver", "latest"), ("gpu_cc", "sm_86"), ("os", "bsd"),
                                            ("pythons", "three"), ("gpu_memory_mib", "2GB"), ("nope", "1")])
def test_bad_override_values(key: str, value: str) -> None:
    with pytest.raises(UsageError):
        apply_overrides({}, {key: value})


def test_doctor_facts_file_json(tmp_path: Path, cli: Callable[..., tuple[int, str, str]],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    path = _write(tmp_path, WINDOWS_GTX1080)
    code, out, _ = cli("doctor", "--facts", str(path), "--json", "--driver", "441.22")
    assert code == 0
    doc = json.loads(out)
    assert doc["facts"]["gpus"][0]["name"] == "GeForce GTX 1080"
    assert doc["facts"]["driver"]["version"] == "441.22"
    assert doc["facts"]["overrides"] == ["driver=441.22 (driver)"]
    jsonschema.validate(doc["facts"], facts_schema())


def test_doctor_bad_facts_file_exits_2(tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    code, _, err = cli("doctor", "--facts", str(_write(tmp_path, "{oops")))
    assert code == 2
    assert "is not valid JSON" in err
    assert "Traceback" not in err
