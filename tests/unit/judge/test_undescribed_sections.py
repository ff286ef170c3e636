"""A facts document that leaves out the driver or the GPUs (a hand-written --facts file; the probe always writes
both) is judged with a caveat saying what was not checked, as an undescribed CUDA or cuDNN is: never a plain
"ready" (casebook batch 5: tensorflow#56690's facts, with neither, came out ready with nothing said)."""

from __future__ import annotations

import pytest

from tests.unit.judge.test_verdict import base_facts
from tfgpu.judge.findings import BLOCKED, CAVEATS, READY
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb

KB = load_kb()


def checks(tv: object) -> set[str]:
    return {f.check for f in (*tv.blockers, *tv.caveats)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("tf", ["2.15", "2.21"])
def test_described_machine_has_no_such_caveat(tf: str) -> None:
    tv = judge_release(base_facts(), KB, KB.resolve_tf(tf), backend="pip")
    assert tv.verdict == READY
    assert not checks(tv) & {"driver.unknown", "gpu.unknown"}


@pytest.mark.parametrize(("leave_out", "check", "fix"), [
    ("driver", "driver.unknown", "--driver VERSION"),
    ("gpus", "gpu.unknown", "--gpu-cc X.Y"),
])
def test_an_undescribed_driver_or_gpu_is_said(leave_out: str, check: str, fix: str) -> None:
    facts = base_facts()
    del facts[leave_out]
    tv = judge_release(facts, KB, KB.resolve_tf("2.15"), backend="pip")
    assert tv.verdict == CAVEATS
    (finding,) = [f for f in tv.caveats if f.check == check]
    assert "not checked" in finding.summary
    assert fix in finding.fix


def test_a_known_missing_driver_is_still_a_blocker_not_a_caveat() -> None:
    tv = judge_release(base_facts(driver={"version": None, "error": "NVIDIA driver not loaded"}), KB,
                       KB.resolve_tf("2.15"), backend="pip")
    assert tv.verdict == BLOCKED
    assert "driver.installed" in checks(tv)
    assert "driver.unknown" not in checks(tv)
