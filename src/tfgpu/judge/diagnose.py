"""Everything `tfgpu doctor` says, as data: the machine's checks, a verdict per series (or the one target asked
for) and the recommendation."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tfgpu.core.record import field, record, replace
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import (
    BLOCKED,
    ERROR,
    FAIL,
    READY,
    WARN,
    Check,
    TargetVerdict,
)

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.judge.checks import machine_checks
from tfgpu.judge.recommend import (
    Recommendation,
    _recommendation,
    cpu_recommendation,
    no_gpu_reasons,
    recommend,
    recommend_instead,
)
from tfgpu.judge.target import resolve_latest
from tfgpu.judge.verdict import judge_requested, judge_series


@record(frozen=False)
class DoctorResult:
    checks: list[Check]
    targets: list[TargetVerdict]
    recommendation: Recommendation | None
    target_requested: str | None = None
    notes: list[str] = field(default_factory=list)
    machine: Machine | None = None  # what the verdicts were judged on
    no_gpu: list[str] = field(default_factory=list)  # why no release can use a GPU here (each reason once)

    def exit_code(self, *, require_gpu: bool, strict: bool, machine: Machine | None = None) -> int:
        machine = machine or self.machine
        assert machine is not None
        if require_gpu and not (machine.has_gpu() and machine.driver is not None):
            return 1
        if self.target_requested is not None and any(t.verdict == BLOCKED for t in self.targets):
            return 1
        if strict:
            if any(c.status in (FAIL, WARN, ERROR) for c in self.checks):
                return 1
            if self.target_requested is not None and any(t.verdict != READY for t in self.targets):
                return 1
        return 0


def diagnose(facts: Facts, kb: KnowledgeBase, *, tf: str | None = None, backend: str = "auto") -> DoctorResult:
    """Everything `tfgpu doctor` says, as data."""
    m = Machine.from_facts(facts, kb)
    checks = machine_checks(m, kb)
    if tf is None:
        targets = judge_series(facts, kb, backend=backend, machine=m)
        rec = recommend(facts, kb, targets, m)
        reasons = no_gpu_reasons(targets)
        if rec is None and reasons:
            rec = cpu_recommendation(kb, m, reasons)
        return DoctorResult(checks, targets, rec, machine=m, no_gpu=reasons)
    if tf == "latest":
        tf_resolved, _ = resolve_latest(facts, kb, backend=backend, machine=m)
    else:
        tf_resolved = tf
    target = judge_requested(facts, kb, tf_resolved, backend=backend, machine=m)
    if target.verdict != BLOCKED:
        return DoctorResult(checks, [target], _recommendation(target, m), target_requested=tf, machine=m)
    # blocked: the best release that works here instead, with one line on why this one does not
    rec = recommend_instead(facts, kb, target.tf, m, backend=backend)
    if rec is not None and target.blockers:
        rec = replace(rec, why_not=re.sub(r"^\[[^\]]*\] ", "", target.blockers[0].summary))  # without the "[pip: recipe]" tag
    no_gpu = no_gpu_reasons([target])
    return DoctorResult(checks, [target], rec, target_requested=tf, machine=m, no_gpu=no_gpu)
