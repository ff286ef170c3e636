"""Mild caveats do not demote a release (issue 27, section 1, rule 7): every caveat has a severity, informational
(the release runs as is) or risky; the recommendation is the newest release whose caveats are all
informational, else the newest with caveats."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests import TESTS
from tfgpu.api.doctor import doctor_result
from tfgpu.judge.findings import (
    BLOCKED,
    CAVEATS,
    INFORMATIONAL,
    READY,
    RISKY,
    Finding,
    TargetVerdict,
    usable_rank,
)
from tfgpu.judge.recommend import best_verdict
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version
from tfgpu.render import report

KB = load_kb()
SEED = TESTS / "data" / "facts" / "mx150-laptop-ubuntu1804.json"


def _machine(driver: str, name: str, cc: str) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads(SEED.read_text())
    facts["platform"] = {"os": "linux", "arch": "x86_64", "glibc": "2.35"}
    facts["python"] = {"current": "3.11.9", "interpreters": [{"version": "3.11.9", "path": "/usr/bin/python3.11"}]}
    facts["driver"] = {"version": driver, "cuda": None, "source": "nvidia-smi"}
    facts["gpus"] = [{"index": 0, "name": name, "compute_capability": cc, "memory_mib": 24564, "uuid": None}]
    facts["cuda_toolkits"], facts["cudnn"], facts["conda"] = [], [], None
    return facts


def test_rtx_4090_on_driver_550_gets_the_newest_release_whose_wheels_carry_its_sass() -> None:
    # was: 2.17.1, because 2.18-2.21 (CUDA 12.5 wheels) run on driver 550 (CUDA 12.4) through minor-version
    # compatibility, which is a caveat although their sm_89 SASS needs no PTX JIT
    facts = _machine("550.54.15", "NVIDIA GeForce RTX 4090", "8.9")
    result = doctor_result(facts, KB)
    rec = result.recommendation
    assert rec is not None
    newest_with_sass = max(r.version for r in KB.gpu_releases("linux")
                           if "8.9" in (KB.archs_for(r.version, "linux").sass if KB.archs_for(r.version, "linux") else ()))
    assert version(rec.tf) == newest_with_sass
    row = next(t for t in result.targets if t.tf == rec.tf)
    assert row.verdict == CAVEATS
    assert {c.check for c in row.caveats} == {"driver.cuda"}
    assert all(c.severity == INFORMATIONAL for c in row.caveats)


def test_the_same_release_on_a_driver_that_supports_its_cuda_is_ready() -> None:
    facts = _machine("560.28.03", "NVIDIA GeForce RTX 4090", "8.9")
    rec = doctor_result(facts, KB).recommendation
    assert rec is not None
    assert rec.verdict == READY


def test_ptx_jit_is_a_risky_caveat() -> None:
    # an H100 (9.0) on TF 2.15 (SASS up to 8.0, compute_80 PTX): minutes of JIT at start-up
    facts = _machine("550.54.15", "NVIDIA H100 80GB HBM3", "9.0")
    row = doctor_result(facts, KB, tf="2.15.1").targets[0]
    jit = [c for c in row.caveats if c.check == "gpu.ptx_jit"]
    assert jit
    assert all(c.severity == RISKY for c in jit)


def test_every_caveat_in_the_json_has_a_severity_and_no_blocker_has_one() -> None:
    for driver, gpu, cc in (("550.54.15", "NVIDIA GeForce RTX 4090", "8.9"), ("450.80.02", "Tesla T4", "7.5"),
                            ("470.82.01", "NVIDIA H100 80GB HBM3", "9.0")):
        facts = _machine(driver, gpu, cc)
        doc = report.doctor_document(facts, doctor_result(facts, KB), data_version=KB.data_version)
        for t in doc["targets"]:
            assert all(c.get("severity") in (INFORMATIONAL, RISKY) for c in t["caveats"])
            assert all("severity" not in b for b in t["blockers"])
            for b in t["backends"]:
                assert all(c.get("severity") in (INFORMATIONAL, RISKY) for c in b["caveats"])


_finding = st.builds(Finding, st.sampled_from(("driver.cuda", "gpu.ptx_jit", "gpu.memory")), st.just("s"),
                     st.just(""), st.sampled_from(("", "tfgpu sets it")), st.sampled_from((INFORMATIONAL, RISKY)))
_verdict = st.builds(lambda v, caveats: TargetVerdict("2.0.0", v, "pip", "r", (), tuple(caveats)),
                     st.sampled_from((READY, CAVEATS, BLOCKED)), st.lists(_finding, max_size=3))


@settings(max_examples=200, deadline=None)
@given(st.lists(_verdict, max_size=6))
def test_the_pick_is_the_newest_of_the_best_rank(verdicts: list[TargetVerdict]) -> None:
    best = best_verdict(verdicts)
    ranks = [usable_rank(t) for t in verdicts]
    if all(r == 2 for r in ranks):
        assert best is None
        return
    assert best is not None
    i = verdicts.index(best)
    assert ranks[i] == min(ranks)
    assert all(r > ranks[i] for r in ranks[:i])  # nothing newer is as good


def test_a_release_is_rank_0_when_ready_or_every_caveat_is_informational() -> None:
    mild = Finding("driver.cuda", "s", severity=INFORMATIONAL)
    risky = Finding("gpu.ptx_jit", "s", severity=RISKY)
    assert usable_rank(TargetVerdict("2.0.0", READY, "pip", "r", (), ())) == 0
    assert usable_rank(TargetVerdict("2.0.0", CAVEATS, "pip", "r", (), (mild,))) == 0
    assert usable_rank(TargetVerdict("2.0.0", CAVEATS, "pip", "r", (), (mild, risky))) == 1
    assert usable_rank(TargetVerdict("2.0.0", BLOCKED, "pip", "r", (risky,), ())) == 2
