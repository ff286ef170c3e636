"""Machine profiles (tmp_path trees + recorded outputs) all the way through probes, verdicts and the
doctor's JSON document, which must validate against its schema on every profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import REPO
from tests.probe_helpers import PROBE, FakeGpu, FakeNvmlLib, Profile, fake_nvml, r740_profile
from tfgpu.facts.probe import detect_facts
from tfgpu.judge.diagnose import diagnose
from tfgpu.judge.findings import BLOCKED, READY
from tfgpu.judge.target import judge_target
from tfgpu.kb.knowledge import load_kb
from tfgpu.render.report import doctor_document

pytestmark = pytest.mark.real_subprocess

SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/doctor.schema.json").read_text())
KB = load_kb()


def check_document(facts: dict, tf: str | None = None) -> dict:
    jsonschema = pytest.importorskip("jsonschema")
    result = diagnose(facts, KB, tf=tf)
    doc = json.loads(json.dumps(doctor_document(facts, result, data_version=KB.data_version)))
    jsonschema.validate(doc, SCHEMA)
    return doc


def r740(tmp_path: Path) -> Profile:
    """Seed 001 (tests.probe_helpers.r740_profile); driver 418.87.00 through a faked NVML (the seed shows
    no driver text: tests/data/facts/SOURCES.md)."""
    p = r740_profile(tmp_path)
    p.env["TFGPU_PROBE_NVML"] = "1"
    return p


def test_r740_profile_tf114_by_pip_wants_libcudart_10_0_and_conda_is_the_way(tmp_path):
    p = r740(tmp_path)
    gpus = [FakeGpu("Tesla M60", f"GPU-m60-{i}", 8129, (5, 2)) for i in range(4)]
    with fake_nvml(FakeNvmlLib(driver="418.87.00", cuda=10010, gpus=gpus)):
        facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    doc = check_document(facts, "1.14.0")
    assert doc["targets"][0]["verdict"] == READY
    assert doc["targets"][0]["backend"] == "conda"
    pip = judge_target(facts, KB, "1.14.0", backend="pip")
    assert pip.verdict == BLOCKED
    assert any("libcudart.so.10.0" in b.summary and "10.1" in b.summary for b in pip.blockers)
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["env.ld_library_path"]["status"] == "warn"


def test_mx150_profile_tf22_conda_ready_with_memory_growth(tmp_path):
    p = Profile(tmp_path)
    p.file("/etc/os-release", fixture=PROBE / "os" / "os-release-ubuntu-22.04.5.txt")
    p.env["TFGPU_PROBE_NVML"] = "1"
    with fake_nvml(FakeNvmlLib(driver="440.64", cuda=10020, gpus=[FakeGpu("GeForce MX150", "GPU-mx", 2002, (6, 1))])):
        facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    doc = check_document(facts, "2.2.0")
    target = doc["targets"][0]
    assert target["verdict"] == READY
    assert any(c["check"] == "gpu.memory" and c.get("mitigated_by") for c in target["caveats"])


@pytest.mark.parametrize("fixture", sorted((PROBE / "nvidia-smi").glob("*")), ids=lambda p: p.name)
def test_every_recorded_nvidia_smi_output_yields_a_valid_report(tmp_path, fixture):
    p = Profile(tmp_path)
    p.program("nvidia-smi", default=(fixture, 0))
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    check_document(facts)


def test_hung_nvidia_smi_still_gives_a_valid_report_in_bounded_time(tmp_path):
    import time

    p = Profile(tmp_path)
    p.program("nvidia-smi", script="#!/bin/sh\nsleep 30\n")
    start = time.monotonic()
    facts = detect_facts(root=tmp_path, env=p.env, timeout=0.5)
    assert time.monotonic() - start < 5
    doc = check_document(facts)
    assert doc["facts"]["driver"]["version"] is None
