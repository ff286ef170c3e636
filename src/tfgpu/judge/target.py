"""The target a user asks for -- a release (2.2.0), a series (2.2) or `latest` -- resolved and judged in one
place: what `latest` means here is the recommendation's release."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfgpu.core.record import replace
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import (
    TargetVerdict,
)
from tfgpu.judge.recommend import Recommendation, recommend_for

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.judge.verdict import judge_requested


def resolve_latest(facts: Facts, kb: KnowledgeBase, *, backend: str = "auto",
                   machine: Machine | None = None) -> tuple[str, Recommendation | None]:
    """What ``latest`` means, everywhere (doctor, plan, create, lock): the release the doctor recommends here,
    and that recommendation; when nothing will use a GPU, the newest GPU series and None (its verdict says why)."""
    m = machine or Machine.from_facts(facts, kb)
    rec = recommend_for(facts, kb, backend=backend, machine=m)
    return (rec.tf, rec) if rec is not None and rec.backend != "cpu" else (kb.series(m.tf_os)[0], None)


def judge_target(facts: Facts, kb: KnowledgeBase, tf: str, *, backend: str = "auto") -> TargetVerdict:
    """A release, a series or ``latest`` -> the target's verdict; ``requested`` is the release or series
    judged (``latest`` resolved)."""
    m = Machine.from_facts(facts, kb)
    if tf == "latest":
        tf, _ = resolve_latest(facts, kb, backend=backend, machine=m)
    return replace(judge_requested(facts, kb, tf, backend=backend, machine=m), requested=tf)
