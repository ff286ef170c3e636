"""The environment cases (tests/cases/environment/, `tfgpu.envcase/1`, tests/cases/README.md): Windows and conda
environments from public threads, which cannot be built here, judged by the environment verdict
(tfgpu.judge.environment) from their recorded facts -- installed packages, TensorFlow's build_info and links, the
activation, the libraries found where -- and scored against what each thread established."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tfgpu.judge.environment import judge_environment
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.sonames import load_sonames

CASES = sorted((TESTS / "cases" / "environment").glob("*.json"))
KEYS = {"case", "id", "url", "reported", "outcome", "expect", "why", "artifacts", "facts"}


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def mismatch(case: dict[str, Any], verdict: dict[str, Any]) -> str | None:
    """None when the verdict agrees with the thread, else what differs."""
    want = case["expect"]
    if verdict["verdict"] != want["verdict"]:
        return f"verdict {verdict['verdict']} ({verdict['summary']}), the thread: {want['verdict']}"
    blockers = {f["id"]: f for f in verdict["blockers"]}
    if "reason" in want and want["reason"] not in blockers:
        return f"no {want['reason']} among the blockers {sorted(blockers)}"
    text = " ".join(f["summary"] for f in verdict["blockers"])
    missing = [s for s in want.get("summary_has", []) if s not in text]
    if missing:
        return f"the blockers do not name {missing}: {text}"
    repair = blockers.get(want.get("reason", ""), {}).get("repair", {})
    if any(repair.get(k) != v for k, v in (want.get("repair") or {}).items()):
        return f"repair {repair}, the thread's fix: {want['repair']}"
    via = {lib["name"]: lib.get("via") for lib in verdict["libraries"]}
    wrong = {n: via.get(n) for n, v in (want.get("libraries") or {}).items() if via.get(n) != v}
    return f"libraries found otherwise: {wrong}" if wrong else None


def test_there_are_windows_and_conda_cases() -> None:
    kinds = {(c["facts"]["platform"]["os"], c["facts"]["environment"]["kind"]) for c in map(load, CASES)}
    assert {os for os, _ in kinds} >= {"windows", "linux"}
    assert any(kind == "conda" for _, kind in kinds)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_environment_case(path: Path) -> None:
    case = load(path)
    assert set(case) == KEYS
    assert case["case"] == "tfgpu.envcase/1"
    assert case["id"] == path.stem
    assert case["url"].startswith("https://github.com/")
    facts = case["facts"]
    verdict = judge_environment(facts["environment"], facts, load_kb(), load_sonames())
    assert mismatch(case, verdict) is None, f"{case['id']}: {mismatch(case, verdict)}"
