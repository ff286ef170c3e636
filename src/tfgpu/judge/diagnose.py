"""Everything `tfgpu doctor` says, as data: the machine's checks, a verdict per series (or the one target asked
for) and the recommendation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfgpu.core.record import field, record
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
from tfgpu.judge.recommend import Recommendation, no_gpu_reasons, recommend_for
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
    """Everything `tfgpu doctor` says, as data; its recommendation is tfgpu.judge.recommend.recommend_for's."""
    m = Machine.from_facts(facts, kb)
    checks = machine_checks(m, kb)
    if tf is None:
        targets = judge_series(facts, kb, backend=backend, machine=m)
        rec = recommend_for(facts, kb, series_verdicts=targets, backend=backend, machine=m)
        return DoctorResult(checks, targets, rec, machine=m, no_gpu=no_gpu_reasons(targets))
    tf_resolved = resolve_latest(facts, kb, backend=backend, machine=m)[0] if tf == "latest" else tf
    target = judge_requested(facts, kb, tf_resolved, backend=backend, machine=m)
    rec = recommend_for(facts, kb, target=target, backend=backend, machine=m)
    no_gpu = no_gpu_reasons([target]) if target.verdict == BLOCKED else []
    return DoctorResult(checks, [target], rec, target_requested=tf, machine=m, no_gpu=no_gpu)
