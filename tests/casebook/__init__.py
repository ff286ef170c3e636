"""The casebook of real machines (tests/cases/): load the cases and judge each one exactly as
`tfgpu doctor --facts CASE.json --tf X [--backend B] --json` does.

A case file is a JSON object, documented in tests/cases/README.md. Its "facts" member is a
tfgpu.facts/1 document, so the case file itself can be given to `tfgpu doctor --facts` (a document
without a top-level "schema" but with a "facts" object is read through that object).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tests import TESTS

CASES_DIR = TESTS / "cases"
CASE_SCHEMA = "tfgpu.case/1"
VERDICTS = ("ready", "caveats", "blocked")
#: The two parts of the casebook: "tuning" cases may be looked at while fixing verdict code, "heldout"
#: cases are only scored (tests/cases/README.md, "Measuring honestly").
PARTS = ("tuning", "heldout")


@dataclass(frozen=True)
class Case:
    id: str
    part: str  # "tuning" | "heldout"
    path: Path
    url: str
    tf: str
    backend: str
    verdicts: tuple[str, ...]
    reason: str | None
    xfail: str | None
    doc: dict[str, Any] = field(repr=False, compare=False)
    #: expect.recommend (optional): what the doctor's recommendation must be, as the thread established it
    #: (tests/cases/README.md): {"gpu": bool, "tf": PEP 440 specifier, "backend": [names]}, each key optional.
    recommend: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = self.doc["facts"]
        return facts


def load_case(path: Path) -> Case:
    """One case file -> Case; a malformed file raises ValueError naming the file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    problems = []
    if doc.get("case") != CASE_SCHEMA:
        problems.append(f"case: expected {CASE_SCHEMA!r}")
    for key in ("id", "url", "reported", "outcome", "why"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            problems.append(f"{key}: a non-empty string is required")
    if doc.get("id") != path.stem:
        problems.append("id must equal the file name without .json")
    if not str(doc.get("url", "")).startswith("https://"):
        problems.append("url must be an https:// address")
    target = doc.get("target") or {}
    backends = ("auto", "pip", "conda", "rattler", "container", "docker", "podman", "apptainer")
    if not isinstance(target.get("tf"), str) or target.get("backend") not in backends:
        problems.append("target: {tf: release or series, backend: auto|pip|conda|rattler, or a container route "
                        "(container|docker|podman|apptainer)} is required")
    expect = doc.get("expect") or {}
    verdicts = expect.get("verdict")
    if not isinstance(verdicts, list) or not verdicts or not set(verdicts) <= set(VERDICTS):
        problems.append(f"expect.verdict: a non-empty list drawn from {VERDICTS}")
    if expect.get("reason") is not None and verdicts not in (["blocked"], ["caveats"]):
        problems.append("expect.reason only goes with expect.verdict ['blocked'] or ['caveats']")
    problems.extend(_recommend_problems(expect.get("recommend")))
    facts = doc.get("facts")
    if not isinstance(facts, dict) or facts.get("schema") != "tfgpu.facts/1":
        problems.append("facts: a tfgpu.facts/1 document is required")
    if problems:
        msg = f"{path}: " + "; ".join(problems)
        raise ValueError(msg)
    return Case(id=doc["id"], part=path.parent.name, path=path, url=doc["url"], tf=target["tf"],
                backend=target["backend"], verdicts=tuple(verdicts), reason=expect.get("reason"),
                xfail=doc.get("xfail"), doc=doc, recommend=expect.get("recommend"))


#: The keys expect.recommend may hold (tests/cases/README.md, "Format").
RECOMMEND_KEYS = ("gpu", "tf", "backend")


def _recommend_problems(recommend: object) -> list[str]:
    """What is wrong with an expect.recommend member (none when it is absent)."""
    if recommend is None:
        return []
    if not isinstance(recommend, dict) or not recommend or not set(recommend) <= set(RECOMMEND_KEYS):
        return [f"expect.recommend: a non-empty object with keys drawn from {RECOMMEND_KEYS}"]
    problems = []
    if "gpu" in recommend and not isinstance(recommend["gpu"], bool):
        problems.append("expect.recommend.gpu: true or false")
    if "tf" in recommend and not _is_specifier(recommend["tf"]):
        problems.append("expect.recommend.tf: a PEP 440 version specifier such as '<2.16'")
    backends = recommend.get("backend")
    if "backend" in recommend and (not isinstance(backends, list) or not backends
                                   or not all(isinstance(b, str) and b for b in backends)):
        problems.append("expect.recommend.backend: a non-empty list of backend names ('cpu' is the CPU route)")
    return problems


def _is_specifier(value: object) -> bool:
    if not isinstance(value, str) or not value:
        return False
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return False
    return True


def load_cases(root: Path = CASES_DIR) -> list[Case]:
    """Every case, tuning part first, each part sorted by id."""
    return [load_case(p) for part in PARTS for p in sorted((root / part).glob("*.json"))]


def judge_document(case: Case) -> dict[str, Any]:
    """The doctor's JSON document for this case, computed as `tfgpu doctor --facts FILE --tf X --backend B
    --json` computes it (tfgpu.cli.doctor.run_doctor: gather_facts, then doctor_result, then
    report.doctor_document), with no config file steering the recipe. Environment overrides (TFGPU_*) apply
    as they would on the command line, so callers clear them."""
    from tfgpu.api.doctor import doctor_result
    from tfgpu.facts.gather import gather_facts
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import report

    kb = load_kb()
    facts, active = gather_facts(facts_file=case.path, overrides={})
    result = doctor_result(facts, kb, tf=case.tf, backend=case.backend)
    doc: dict[str, Any] = report.doctor_document(facts, result, data_version=kb.data_version, overrides=active)
    return doc


def judge(case: Case) -> dict[str, Any]:
    """The target of the doctor's JSON document for this case (see :func:`judge_document`)."""
    target: dict[str, Any] = judge_document(case)["targets"][0]
    return target


#: mismatch()'s default for `recommendation`: not passed (a case with expect.recommend then cannot be judged).
_NOT_GIVEN: dict[str, Any] = {}


def mismatch(case: Case, target: dict[str, Any],
             recommendation: dict[str, Any] | None = _NOT_GIVEN) -> str | None:
    """None when tfgpu's verdict (and, for a case with expect.recommend, the document's recommendation) agrees
    with the thread's outcome, else what differs. ``recommendation`` is the document's "recommendation" member
    (None when the doctor recommends nothing); a case with expect.recommend needs it."""
    problem = _verdict_mismatch(case, target)
    if problem is None and case.recommend is not None:
        if recommendation is _NOT_GIVEN:
            msg = f"{case.id}: expect.recommend needs the document's recommendation (judge_document)"
            raise ValueError(msg)
        problem = recommend_mismatch(case.recommend, recommendation)
    return problem


def recommend_mismatch(want: dict[str, Any], rec: dict[str, Any] | None) -> str | None:
    """None when the doctor's recommendation ``rec`` is what expect.recommend ``want`` asks for, else what
    differs. gpu: true = a recommendation that uses the GPU (any backend but the CPU route), false = the CPU
    route or none; tf: the recommended release lies in the specifier; backend: its backend is one listed."""
    shown = "none" if rec is None else f"{rec.get('command') or rec.get('tf')} (backend {rec.get('backend')})"
    uses_gpu = rec is not None and rec.get("backend") != "cpu"
    if "gpu" in want and want["gpu"] != uses_gpu:
        return f"expected a recommendation {'on the GPU' if want['gpu'] else 'of the CPU route'}, tfgpu recommends {shown}"
    if "tf" in want:
        try:
            ok = rec is not None and Version(str(rec.get("tf"))) in SpecifierSet(str(want["tf"]))
        except InvalidVersion:
            ok = False
        if not ok:
            return f"expected a recommended release {want['tf']}, tfgpu recommends {shown}"
    if "backend" in want and (rec is None or rec.get("backend") not in want["backend"]):
        return f"expected a recommendation with backend {'/'.join(want['backend'])}, tfgpu recommends {shown}"
    return None


def _verdict_mismatch(case: Case, target: dict[str, Any]) -> str | None:
    verdict = target.get("verdict")
    if verdict not in case.verdicts:
        why = "; ".join(f"{b['check']}: {b['summary']}" for b in target.get("blockers", []))[:300]
        return f"expected {'/'.join(case.verdicts)}, tfgpu says {verdict}" + (f" ({why})" if why else "")
    if case.reason:
        want = case.reason.lower()
        kind = "blockers" if verdict == "blocked" else "caveats"
        findings = target.get(kind, [])
        if not any(want in str(f.get("check", "")).lower() or want in str(f.get("summary", "")).lower()
                   for f in findings):
            got = ", ".join(sorted({str(f.get("check")) for f in findings}))
            return f"{verdict}, but none of the {kind} names {case.reason!r} ({kind}: {got or 'none'})"
    return None


#: Results of this test session, case id -> (part, right): filled by tests/casebook/test_casebook.py and printed by
#: the terminal summary hook in tests/conftest.py ("casebook: N/M right").
RESULTS: dict[str, tuple[str, bool]] = {}


def summary_lines(results: dict[str, tuple[str, bool]]) -> list[str]:
    """The score lines of a run: all cases, the tuning part, the held-out part."""
    lines = []
    for label, part in (("casebook", None), ("casebook tuning", "tuning"), ("casebook held-out", "heldout")):
        rows = [right for p, right in results.values() if part is None or p == part]
        if rows:
            lines.append(f"{label}: {sum(rows)}/{len(rows)} right")
    return lines
