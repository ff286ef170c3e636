"""Merge many `tfgpu doctor --json` reports into one fleet view (tfgpu.fleet/1).

Reports are streamed (tfgpu.tools.fleet.reading) and parsed once, up to their facts. Each report's facts
are split into the judged machine and the node's identity (tfgpu.tools.fleet.machines); nodes of one
machine share its judgement, so memory grows with the number of distinct machines and time linearly with
the reports. Every machine is judged here, with this knowledge base: no report's own verdicts are read, so
no report can speak for another node (a report of another tfgpu or knowledge-base version is counted as
re-judged).

Every report is someone else's output: it is bounded in size, validated against the facts schema, and
never executed; names taken from it are escaped by the renderers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu import __version__
from tfgpu.facts.document import as_facts
from tfgpu.tools.fleet.judging import Judge, JudgePool
from tfgpu.tools.fleet.machines import (
    SIGNATURE_LABELS,
    DistinctMachine,
    Judgement,
    NodeNames,
    _container_toolkit,
    machine_key,
    signature,
)
from tfgpu.tools.fleet.preparing import DOCTOR_SCHEMA, Prepared, prepare
from tfgpu.tools.fleet.reading import (
    FACTS_SCHEMA,
    MARKER,
    MAX_REPORT_BYTES,
    Problem,
    iter_reports,
    read_file,
    split_stream,
    targets,
)

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase

__all__ = ["DOCTOR_SCHEMA", "FACTS_SCHEMA", "MARKER", "MAX_REPORT_BYTES", "SCHEMA", "SIGNATURE_LABELS", "USABLE",
           "DistinctMachine", "Fleet", "Problem", "_container_toolkit", "exit_code", "fleet_document",
           "iter_reports", "merge", "signature"]

SCHEMA = "tfgpu.fleet/1"

USABLE = ("ready", "caveats")

@dataclass
class Fleet:
    """What `fleet merge` found: machines, problems, and how many reports were re-judged."""

    machines: dict[str, DistinctMachine]
    problems: list[Problem]
    reports: int
    rejudged: int
    foreign_versions: Counter[str]
    tf: str | None
    data_version: str


# --------------------------------------------------------------------------- merge


def merge(args: Iterable[str], *, kb: KnowledgeBase, tf: str | None = None, stdin: Any = None,
          judge: Judge | None = None, workers: int = 0) -> Fleet:
    """Read every report and group the nodes by machine. ``judge(facts, tf)`` returns a doctor document
    for facts judged with this knowledge base (default: tfgpu's own doctor); it runs once per distinct
    machine (twice with a --tf target), in up to ``workers`` worker processes for a fleet of many kinds
    (tfgpu.tools.fleet.judging; 0: all in this process)."""
    pool = JudgePool(judge or doctor_judge(kb), tf, workers)
    try:
        fleet, pending = _read_all(args, kb=kb, tf=tf, stdin=stdin, pool=pool)
        for machine, result in pending:
            machine.judgement = pool.judgements.intern(result())
    finally:
        pool.close()
    return fleet


def _prepared(args: Iterable[str], *, stdin: Any, data_version: str,
              pool: JudgePool) -> Iterator[Prepared | Problem]:
    """Every report prepared, in order: runs of files in the pool's workers where that pays, standard
    input here."""
    seen: set[bytes] = set()
    files: list[Path] = []

    def flush() -> Iterator[Prepared | Problem]:
        if files:
            yield from pool.map_files(list(files), data_version) if pool.reads_in_workers(len(files)) else \
                (prepare(r, data_version, seen) for f in files for r in read_file(f))
            files.clear()

    for target in targets(args):
        if isinstance(target, Path):
            files.append(target)
            continue
        yield from flush()
        if isinstance(target, Problem):
            yield target
        elif stdin is None:
            yield Problem("-", "standard input is not available")
        else:
            yield from (prepare(r, data_version, seen) for r in split_stream("-", getattr(stdin, "buffer", stdin)))
    yield from flush()


def _read_all(args: Iterable[str], *, kb: KnowledgeBase, tf: str | None, stdin: Any,
              pool: JudgePool) -> tuple[Fleet, list[tuple[DistinctMachine, Callable[[], Judgement]]]]:
    from tfgpu.facts.document import validate_facts

    pending: list[tuple[DistinctMachine, Callable[[], Judgement]]] = []
    machines: dict[bytes, DistinctMachine] = {}
    invalid: dict[bytes, str] = {}
    problems: list[Problem] = []
    foreign: Counter[str] = Counter()
    names = NodeNames()
    reports = rejudged = 0
    for item in _prepared(args, stdin=stdin, data_version=kb.data_version, pool=pool):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        machine = machines.get(item.digest)
        if machine is None:
            reason = invalid.get(item.digest)
            if reason is None and item.facts is not None and item.key_text is not None:
                bad = validate_facts(dict(item.facts, schema=FACTS_SCHEMA))
                if not bad:
                    machine = DistinctMachine(key=machine_key(item.key_text), signature=signature(item.facts))
                    pending.append((machine, pool.submit(item.facts)))
                    machines[item.digest] = machine
                else:
                    reason = invalid[item.digest] = f"facts: {bad[0]}"
            if machine is None:
                problems.append(Problem(item.source, reason or "facts: not validated"))
                continue
        reports += 1
        if item.why is not None:
            foreign[item.why] += 1
            rejudged += 1
            machine.rejudged = True
        machine.nodes.append(names.add(item.name or f"report-{reports}"))
        machine.identities.append(item.identity)
    fleet = Fleet(machines={m.key: m for m in machines.values()}, problems=problems, reports=reports,
                  rejudged=rejudged, foreign_versions=foreign, tf=tf, data_version=kb.data_version)
    return fleet, pending


def doctor_judge(kb: KnowledgeBase) -> Judge:
    """tfgpu's own doctor as the merge's judge: the targets and checks of `tfgpu doctor --json`."""
    from tfgpu.judge.diagnose import diagnose

    def judge(facts: Mapping[str, Any], tf: str | None) -> dict[str, Any]:
        result = diagnose(as_facts(facts), kb, tf=tf)
        return {"checks": [c.to_json() for c in result.checks], "targets": [t.to_json() for t in result.targets]}

    return judge


# --------------------------------------------------------------------------- the fleet document


def _group_key(m: DistinctMachine) -> str:
    """Machines an administrator sees as the same: same signature and the same verdicts."""
    return json.dumps([m.signature, sorted(m.verdicts().items()), m.judged.target_verdict],
                      sort_keys=True, default=str)


def _series_order(machines: Iterable[DistinctMachine]) -> list[str]:
    """Every series any machine was judged on, newest first (a foreign name sorts last)."""
    from packaging.version import InvalidVersion, Version

    found: set[str] = set()
    for m in machines:
        found.update(m.verdicts())

    def order(s: str) -> tuple[int, Version | str]:
        try:
            return (1, Version(s))
        except InvalidVersion:
            return (0, s)

    return sorted(found, key=lambda s: (order(s)[0], order(s)[1] if order(s)[0] else Version("0"), s), reverse=True)


def fleet_document(fleet: Fleet) -> dict[str, Any]:
    """The merged view as plain data (schema tfgpu.fleet/1)."""
    groups: dict[str, list[DistinctMachine]] = {}
    for m in fleet.machines.values():
        groups.setdefault(_group_key(m), []).append(m)
    ordered = sorted(groups.values(), key=lambda ms: (-sum(len(m.nodes) for m in ms), min(min(m.nodes) for m in ms)))
    series = _series_order(fleet.machines.values())
    out_groups: list[dict[str, Any]] = []
    for i, ms in enumerate(ordered, 1):
        first = ms[0]  # every machine of a group has the same signature and verdicts
        nodes = sorted(n for m in ms for n in m.nodes)
        cells = first.judged.cells
        out_groups.append({
            "id": f"g{i}",
            "count": len(nodes),
            "nodes": nodes,
            "machine": first.signature,
            "verdicts": {s: cells.get(s) for s in series},
            "target": first.judged.target if fleet.tf is not None else None,
            "checks": first.judged.checks,
            "machines": [m.key for m in ms],
            "rejudged": any(m.rejudged for m in ms),
        })
    largest = out_groups[0] if out_groups else None
    outliers = []
    if largest:
        for g in out_groups[1:]:
            outliers.append({"group": g["id"], "count": g["count"], "nodes": g["nodes"][:50],
                             "differs": _differences(g, largest, series)})
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "tfgpu_version": __version__,
        "data_version": fleet.data_version,
        "nodes": fleet.reports,
        "machines": len(fleet.machines),
        "series": series,
        "groups": out_groups,
        "outliers": outliers,
        "common": {
            "every_node": _newest_usable(out_groups, series),
            "largest_group": _newest_usable(out_groups[:1], series),
        },
        "rejudged": {"reports": fleet.rejudged, "from": dict(sorted(fleet.foreign_versions.items()))},
        "problems": [p.to_json() for p in fleet.problems],
    }
    if fleet.tf is not None:
        not_ready = sorted(n for g in out_groups if (g["target"] or {}).get("verdict") not in USABLE
                           for n in g["nodes"])
        doc["target"] = {"tf": fleet.tf, "ready_nodes": fleet.reports - len(not_ready),
                         "not_ready_nodes": not_ready, "ready_everywhere": not not_ready and fleet.reports > 0}
    return doc


def _differences(group: Mapping[str, Any], largest: Mapping[str, Any], series: list[str]) -> list[dict[str, Any]]:
    """What sets a group apart from the largest one: machine facts first, then verdicts."""
    out = []
    mine, theirs = group["machine"], largest["machine"]
    for key, label in SIGNATURE_LABELS.items():
        if mine.get(key) != theirs.get(key):
            out.append({"field": key, "label": label, "value": mine.get(key), "largest_group": theirs.get(key)})
    for s in series:
        a, b = group["verdicts"].get(s), largest["verdicts"].get(s)
        va, vb = (a or {}).get("verdict"), (b or {}).get("verdict")
        if va != vb:
            out.append({"field": f"tf {s}", "label": f"TensorFlow {s}", "value": va, "largest_group": vb,
                        "why": (a or {}).get("why", "")})
    return out


def _newest_usable(groups: Sequence[Mapping[str, Any]], series: list[str]) -> dict[str, Any] | None:
    """The newest series usable (ready or caveats) on every node of ``groups``, with its release(s)."""
    if not groups:
        return None
    for s in series:
        cells = [g["verdicts"].get(s) for g in groups]
        if all(c and c.get("verdict") in USABLE for c in cells):
            releases = sorted({str(c["tf"]) for c in cells if c and c.get("tf")})
            verdict = "ready" if all(c and c.get("verdict") == "ready" for c in cells) else "caveats"
            return {"series": s, "releases": releases, "verdict": verdict}
    return None


def exit_code(doc: Mapping[str, Any]) -> int:
    """0 report produced; 1 with --tf when the target is not usable on every node; 2 on bad input."""
    if doc["problems"]:
        return 2
    target = doc.get("target")
    if target is not None and not target["ready_everywhere"]:
        return 1
    return 0

