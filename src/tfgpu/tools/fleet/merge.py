"""Merge many `tfgpu doctor --json` reports into one fleet view (tfgpu.fleet/1).

Reports are read one at a time and reduced at once to (node name, machine key): a report's facts and
verdicts are kept once per distinct machine, so memory grows with the number of distinct machines, not
with the number of nodes. Reports written by another tfgpu or knowledge-base version are re-judged from
their facts with this knowledge base (once per distinct machine).

Every report is someone else's output: it is bounded in size, validated against the facts schema, and
never executed; names taken from it are escaped by the renderers.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu import __version__
from tfgpu.facts.document import as_facts

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase

SCHEMA = "tfgpu.fleet/1"
DOCTOR_SCHEMA = "tfgpu.doctor/1"
FACTS_SCHEMA = "tfgpu.facts/1"
#: The line prefix `tfgpu fleet k8s` pods print before their one-line report (`kubectl logs` output).
MARKER = "TFGPU-REPORT"
#: One report is a few tens of kB; a file far larger than this is not a report (same cap as --facts).
MAX_REPORT_BYTES = 16 * 1024 * 1024
#: A stream (stdin, a concatenated file) may hold many reports.
MAX_STREAM_BYTES = 4 * 1024 * 1024 * 1024

USABLE = ("ready", "caveats")
#: Facts sections that say how or when a report was made, not what the machine is.
_VOLATILE = ("probe", "provenance", "timings")


@dataclass(frozen=True)
class Problem:
    """A report that could not be merged: where it came from and why."""

    source: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason}


@dataclass
class DistinctMachine:
    """One distinct machine (identical facts): its judgement and the nodes that reported it."""

    key: str
    facts: dict[str, Any]
    signature: dict[str, Any]
    checks: list[dict[str, Any]]
    targets: list[dict[str, Any]]
    target: dict[str, Any] | None  # the --tf X verdict, when asked
    rejudged: bool
    nodes: list[str] = field(default_factory=list)

    def verdicts(self) -> dict[str, str]:
        return {t.get("series") or t.get("tf", "?"): t.get("verdict", "?") for t in self.targets}


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


# --------------------------------------------------------------------------- reading

_DECODER = json.JSONDecoder()
_LINE_SOURCE = re.compile(r":[0-9]+$")  # "FILE:LINE" or "-:LINE": a report inside a stream
_WS = re.compile(r"[ \t\n\r]*")


class Report:
    """One report's text, parsed lazily: its head (schema, versions, facts) at once, the rest (the
    verdicts, most of a doctor report) only when this machine has not been seen yet."""

    __slots__ = ("_full", "head", "node", "source", "text")

    def __init__(self, source: str, text: str, node: str | None = None) -> None:
        self.source, self.text, self.node = source, text, node
        self._full: Any = None
        self.head = _head(text)

    def full(self) -> Any:
        if self._full is None:
            self._full = json.loads(self.text)
        return self._full


def _head(text: str) -> dict[str, Any] | None:
    """The top-level keys of a JSON object up to and including "facts", without parsing what follows
    (tfgpu's reports put schema, versions and facts first). None when the text is not such an object."""
    try:
        i = _WS.match(text, 0).end()  # type: ignore[union-attr]
        if text[i:i + 1] != "{":
            return None
        i += 1
        out: dict[str, Any] = {}
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text[i:i + 1] == "}":
                return out
            if text[i:i + 1] == ",":
                i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            key, i = _DECODER.raw_decode(text, i)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or text[i:i + 1] != ":":
                return None
            value, i = _DECODER.raw_decode(text, _WS.match(text, i + 1).end())  # type: ignore[union-attr]
            out[key] = value
            if key == "facts":
                return out
    except (ValueError, RecursionError):
        return None


def iter_reports(args: Iterable[str], stdin: Any = None) -> Iterator[Report | Problem]:
    """Every report named by the arguments: files, directories (their *.json, recursively, sorted), or
    '-' for standard input (read line by line). A Problem stands in for what cannot be read."""
    for arg in args:
        if arg == "-":
            if stdin is None:
                yield Problem("-", "standard input is not available")
            else:
                yield from _split_stream("-", stdin)
            continue
        path = Path(arg)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not files:
                yield Problem(arg, "directory holds no *.json reports")
            for p in files:
                yield from _read_file(p)
        else:
            yield from _read_file(path)


def _read_file(path: Path) -> Iterator[Report | Problem]:
    try:
        if not path.is_file():
            yield Problem(str(path), "does not exist" if not path.exists() else "is not a regular file")
            return
        with path.open("rb") as fh:
            # Sized by the file (read(4 GB) would allocate that much); bounded for a file that grows.
            data = fh.read(min(os.fstat(fh.fileno()).st_size, MAX_STREAM_BYTES) + 1)
    except OSError as exc:
        yield Problem(str(path), f"cannot read: {exc.strerror or exc}")
        return
    if len(data) > MAX_STREAM_BYTES:
        yield Problem(str(path), "larger than 4 GB: not a report")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield Problem(str(path), "not UTF-8 text: not a tfgpu report")
        return
    body = text.strip()
    # One document (the common case) unless a top-level "{" starts a line after the first: `cat *.json`,
    # JSON lines, or `kubectl logs` output with marker lines.
    if MARKER not in text and "\n{" not in body and body.endswith("}"):
        yield _one(str(path), body)
    else:
        yield from _split_stream(str(path), io.StringIO(text))


def _one(source: str, text: str, node: str | None = None, *, complete: bool = True) -> Report | Problem:
    """A report from one document's text; ``complete=False`` when its end was not seen (parsed in full)."""
    if len(text) > MAX_REPORT_BYTES:
        return Problem(source, "a report larger than 16 MB: not a tfgpu report")
    report = Report(source, text, node)
    if report.head is None or not complete:  # the full parse names the problem, if there is one
        try:
            report.full()
        except json.JSONDecodeError as exc:
            return Problem(source, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
        except RecursionError:
            return Problem(source, "JSON nested too deeply to be a report")
        except ValueError as exc:  # an integer of more than 4,300 digits
            return Problem(source, f"not a tfgpu report: {' '.join(str(exc).split())[:100]}")
    return report


def _split_stream(source: str, stream: Any) -> Iterator[Report | Problem]:
    """Reports in a stream, read a line at a time: `kubectl logs` marker lines
    (`[pod/...] TFGPU-REPORT node=NAME {...}`, other lines ignored), JSON lines, or pretty-printed
    documents one after another. Only one document is held in memory at a time."""
    buffer: list[str] = []
    size = 0
    try:
        for lineno, line in enumerate(stream, 1):
            if isinstance(line, bytes):
                line = line.decode("utf-8", "replace")
            at = line.find(MARKER + " ")
            if at >= 0:
                rest = line[at + len(MARKER) + 1:].strip()
                node = None
                if rest.startswith("node="):
                    node, _, rest = rest[5:].partition(" ")
                yield _one(f"{source}:{lineno}", rest, node or None)
                continue
            if not buffer and not line.strip():
                continue
            buffer.append(line)
            size += len(line)
            if size > MAX_REPORT_BYTES:
                yield Problem(f"{source}:{lineno}", "a report larger than 16 MB: not a tfgpu report")
                return
            stripped = line.rstrip()
            # A document ends with a line that is itself one (JSON lines) or a "}" in column 0 (pretty).
            if stripped.endswith("}") and (len(buffer) == 1 or stripped == "}"):
                result = _one(f"{source}:{lineno}", "".join(buffer).strip())
                if isinstance(result, Problem) and len(buffer) > 1:
                    continue  # a formatter that puts a nested "}" in column 0: read on
                yield result
                buffer, size = [], 0
    except (OSError, ValueError) as exc:  # a closed or unreadable stream
        yield Problem(source, f"cannot read: {exc}")
        return
    if buffer:  # what is left at the end was never closed: the full parse says where it breaks
        yield _one(source, "".join(buffer).strip(), complete=False)


# --------------------------------------------------------------------------- machines


def machine_key(facts: Mapping[str, Any]) -> str:
    """A digest of what the machine is: the facts without how or when they were gathered."""
    stable = {k: v for k, v in facts.items() if k not in _VOLATILE}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def signature(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts an administrator compares across nodes: driver, GPUs, OS, the runtime around them."""
    gpus: list[Any] = facts["gpus"] if isinstance(facts.get("gpus"), list) else []
    gpu_names = []
    for g in gpus:
        if isinstance(g, Mapping):
            name = g.get("name") or f"GPU cc {g.get('compute_capability') or '?'}"
            gpu_names.append(str(name))
    counted = Counter(gpu_names)
    platform: Mapping[str, Any] = facts["platform"] if isinstance(facts.get("platform"), Mapping) else {}
    os_text = " ".join(str(platform.get(k)) for k in ("os", "distro", "arch") if platform.get(k))
    if platform.get("wsl"):
        os_text += " (WSL2)"
    driver = _dig(facts, "driver", "version")
    kernel, user = _dig(facts, "driver", "kernel_module"), _dig(facts, "driver", "user_library")
    sig: dict[str, Any] = {
        "driver": str(driver) if driver else None,
        "gpus": ", ".join(f"{n} × {name}" for name, n in sorted(counted.items())) or None,
        "gpu_count": len(gpu_names),
        "os": os_text or None,
        "glibc": platform.get("glibc"),
        "driver_mismatch": (f"kernel module {kernel} ≠ user library {user}"
                            if _dig(facts, "driver", "mismatch") and kernel and user else None),
        "avx": _dig(facts, "cpu", "avx"),
    }
    toolkit = _container_toolkit(facts)
    if toolkit is not None:
        sig["container_toolkit"] = toolkit
    return sig


def _container_toolkit(facts: Mapping[str, Any]) -> str | None:
    """'present' / 'missing' from the container probes, when the report has them."""
    section = facts.get("containers")
    if not isinstance(section, Mapping):
        return None
    toolkit = section.get("toolkit") or section.get("nvidia_container_toolkit")
    if isinstance(toolkit, Mapping):
        found = toolkit.get("present")
        if found is None:
            found = any(bool(v) for k, v in toolkit.items() if k in ("nvidia_ctk", "nvidia_container_cli", "runtime"))
        return "present" if found else "missing"
    if isinstance(toolkit, bool):
        return "present" if toolkit else "missing"
    return None


SIGNATURE_LABELS = {
    "driver": "driver", "gpus": "GPUs", "gpu_count": "GPU count", "os": "OS", "glibc": "glibc",
    "driver_mismatch": "driver kernel/user mismatch", "avx": "CPU AVX", "container_toolkit": "container toolkit",
}


# --------------------------------------------------------------------------- merge


def _node_name(facts: Mapping[str, Any], marker_node: str | None, source: str, index: int, seen: set[str]) -> str:
    """A marker's node=NAME, else the file name (slurm/ansible write <node>.json), else a number."""
    name = marker_node
    if not name and source != "-" and not _LINE_SOURCE.search(source):
        stem = Path(source).name
        name = stem[:-5] if stem.endswith(".json") else stem
    if not name:
        host = _dig(facts, "platform", "hostname")
        name = str(host) if host and host != "<host>" else f"report-{index}"
    name = "".join(ch if ch.isprintable() else "?" for ch in str(name))[:120]
    base, n = name, 2
    while name in seen:  # two reports from the same name (a re-run): both kept, told apart
        name = f"{base}#{n}"
        n += 1
    seen.add(name)
    return name


def merge(
    args: Iterable[str], *, kb: KnowledgeBase, tf: str | None = None, stdin: Any = None,
    judge: Callable[[Mapping[str, Any], str | None], dict[str, Any]] | None = None,
) -> Fleet:
    """Read every report and group the nodes by machine. ``judge(facts, tf)`` returns a doctor document
    for facts judged with this knowledge base (default: tfgpu's own doctor); it runs once per distinct
    machine that needs it (another version's report, a bare facts document, or a --tf target)."""
    from tfgpu.facts.document import validate_facts

    judge = judge or _doctor_judge(kb)
    machines: dict[str, DistinctMachine] = {}
    problems: list[Problem] = []
    foreign: Counter[str] = Counter()
    seen: set[str] = set()
    reports = rejudged = 0
    for item in iter_reports(args, stdin):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        head = item.head if item.head is not None else item.full()
        if not isinstance(head, dict):
            problems.append(Problem(item.source, "not a JSON object: not a tfgpu report"))
            continue
        schema = head.get("schema")
        facts: Any
        if schema == FACTS_SCHEMA:
            facts, current = head if item.head is None else item.full(), False
        elif schema == DOCTOR_SCHEMA:
            facts = head.get("facts")
            current = head.get("tfgpu_version") == __version__ and head.get("data_version") == kb.data_version
        else:
            problems.append(Problem(item.source, f"schema {str(schema)[:60]!r} is not {DOCTOR_SCHEMA!r} "
                                                 "(the output of `tfgpu doctor --json`)"))
            continue
        if not isinstance(facts, dict):
            problems.append(Problem(item.source, "the report has no facts"))
            continue
        key = machine_key(facts)
        machine = machines.get(key)
        if machine is None:
            bad = validate_facts(dict(facts, schema=FACTS_SCHEMA))
            if bad:
                problems.append(Problem(item.source, f"facts: {bad[0]}"))
                continue
            judged: Any = None
            if current:
                try:
                    judged = item.full()
                except (ValueError, RecursionError):
                    problems.append(Problem(item.source, "not valid JSON after its facts (a truncated report?)"))
                    continue
                if not (isinstance(judged.get("targets"), list) and isinstance(judged.get("checks"), list)):
                    current, judged = False, None
            judged = judged or judge(facts, None)
            target = None
            if tf is not None:
                target_doc = judge(facts, tf)
                target = target_doc["targets"][0] if target_doc.get("targets") else None
            machine = DistinctMachine(key=key, facts=facts, signature=signature(facts), checks=judged["checks"],
                              targets=judged["targets"], target=target, rejudged=not current)
            machines[key] = machine
        reports += 1
        if not current:
            version = f"tfgpu {head.get('tfgpu_version', '?')}, knowledge base {head.get('data_version', '?')}"
            foreign[version if schema == DOCTOR_SCHEMA else "a facts document (never judged)"] += 1
            rejudged += 1
        machine.nodes.append(_node_name(facts, item.node, item.source, reports, seen))
    return Fleet(machines=machines, problems=problems, reports=reports, rejudged=rejudged,
                 foreign_versions=foreign, tf=tf, data_version=kb.data_version)


def _doctor_judge(kb: KnowledgeBase) -> Callable[[Mapping[str, Any], str | None], dict[str, Any]]:
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.render import report

    def judge(facts: Mapping[str, Any], tf: str | None) -> dict[str, Any]:
        return report.doctor_document(facts, diagnose(as_facts(facts), kb, tf=tf), data_version=kb.data_version)

    return judge


# --------------------------------------------------------------------------- the fleet document


def _group_key(m: DistinctMachine) -> str:
    """Machines an administrator sees as the same: same signature and the same verdicts."""
    return json.dumps([m.signature, sorted(m.verdicts().items()), (m.target or {}).get("verdict")],
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
        first = ms[0]
        nodes = sorted(n for m in ms for n in m.nodes)
        targets = {t.get("series") or t.get("tf"): t for t in first.targets}
        out_groups.append({
            "id": f"g{i}",
            "count": len(nodes),
            "nodes": nodes,
            "machine": first.signature,
            "verdicts": {s: _cell(targets.get(s)) for s in series},
            "target": _cell(first.target) if fleet.tf is not None else None,
            "checks": [c for c in first.checks if c.get("status") in ("fail", "warn", "error")],
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


def _cell(t: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not t:
        return None
    why = ""
    if t.get("verdict") == "blocked" and t.get("blockers"):
        why = str(t["blockers"][0].get("summary", ""))
    elif t.get("verdict") == "caveats" and t.get("caveats"):
        why = str(t["caveats"][0].get("summary", ""))
    return {"tf": t.get("tf"), "verdict": t.get("verdict"), "backend": t.get("backend"), "why": why}


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

