"""Issue 28 (safety, round four): a fleet merge no report can break. `tfgpu fleet merge` reads reports that
every node of a cluster wrote (and anyone with access to a node can forge); each report must be judged by
this tfgpu against its knowledge base, bounded by its real size, and never crash the merge. Run through the
command line (the `cli` fixture, or `python -m tfgpu` where the output encoding matters)."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.helpers import M60, m60_facts, tfgpu, write_facts

pytestmark = [pytest.mark.safety]

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))


@pytest.fixture
def genuine(cli: Cli) -> dict[str, Any]:
    """A real, current `tfgpu doctor --json` report of the Tesla M60 server (2.20 blocked there)."""
    rc, out, err = cli("doctor", "--facts", str(M60), "--json")
    assert rc in (0, 1), err
    doc: dict[str, Any] = json.loads(out)
    assert {t.get("series"): t["verdict"] for t in doc["targets"]}["2.20"] == "blocked"
    return doc


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the merge runs in-process, its workers are forks):
    a bound on time that other load on the machine does not move."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _reports(tmp_path: Path, *docs: dict[str, Any]) -> Path:
    d = tmp_path / "reports"
    d.mkdir(parents=True, exist_ok=True)
    for i, doc in enumerate(docs):
        (d / f"node{i:02d}.json").write_text(json.dumps(doc))
    return d


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


# --------------------------------------------------------------------------- Medium: forged verdicts


@pytest.mark.parametrize("forged", [{"targets": [1, "x"]}, {"checks": [None, 7]}, {"targets": [None], "checks": ["x"]}],
                         ids=["targets", "checks", "both"])
def test_medium_fleet_report_with_non_object_targets_or_checks_never_ends_the_merge(
        cli: Cli, tmp_path: Path, genuine: dict[str, Any], forged: dict[str, Any]) -> None:
    """Medium. The attacker controls one node's report: it claims this tfgpu's version and knowledge base, with
    `targets`/`checks` lists whose items are not objects. Today the merge trusts it as already judged and
    `t.get(...)` ends the whole merge: "internal error", rc 3, no report for any node. Instead each report is
    validated against the schema (or judged again from its facts); the merge finishes (rc 0 or 2)."""
    rc, _out, err = cli("fleet", "merge", str(_reports(tmp_path, dict(genuine, **forged), genuine)), "--json")
    assert rc in (0, 2), err
    assert "internal error" not in err


def test_medium_one_forged_report_cannot_show_a_blocked_fleet_as_ready(cli: Cli, tmp_path: Path,
                                                                       genuine: dict[str, Any]) -> None:
    """Medium. The attacker forges one report (this tfgpu's version, the same facts as every other node) whose
    verdicts say "ready" everywhere. Today the first report of a machine decides the verdicts of every node
    with identical facts: the matrix shows 2.20 ready on the whole fleet and "every node" runs 2.21, while
    the knowledge base blocks both on a Tesla M60. Instead the merge judges every report itself; no report's
    verdicts are trusted over the knowledge base."""
    forged = json.loads(json.dumps(genuine))
    for t in forged["targets"]:
        t.update(verdict="ready", blockers=[])
    rc, out, err = cli("fleet", "merge", str(_reports(tmp_path, forged, genuine, genuine)), "--json")
    assert rc in (0, 2), err
    doc = json.loads(out)
    assert {g["verdicts"]["2.20"]["verdict"] for g in doc["groups"]} == {"blocked"}
    assert (doc["common"]["every_node"] or {}).get("series") not in ("2.21", "2.20")


# --------------------------------------------------------------------------- Medium: bounded work and memory


def _marker_lines(path: Path, facts: dict[str, Any], names: Iterator[str]) -> Path:
    """`kubectl logs` output of `tfgpu fleet k8s` pods: one `TFGPU-REPORT node=NAME {facts}` line per node."""
    body = json.dumps(facts)
    with path.open("w") as fh:
        for name in names:
            fh.write(f"[pod/tfgpu-{name}] TFGPU-REPORT node={name} {body}\n")
    return path


@pytest.mark.faults
def test_medium_16000_reports_with_one_node_name_merge_in_linear_time(cli: Cli, tmp_path: Path) -> None:
    """Medium. The attacker sends many reports under one node name (a re-run, or on purpose). Today each new
    name is found by counting up from #2 through every name already taken: 16,000 same-named reports take
    ~28 s here against ~2 s for 16,000 distinct names (100,000 take about 10 minutes). Instead duplicates are
    numbered in linear time: one name costs about what distinct names cost."""
    facts = m60_facts()
    distinct = _marker_lines(tmp_path / "distinct.log", facts, (f"gpu{i:05d}" for i in range(16_000)))
    same = _marker_lines(tmp_path / "same.log", facts, ("gpu01" for _ in range(16_000)))
    took = {}
    for label, path in (("distinct", distinct), ("same", same)):
        start = _cpu()
        rc, out, err = cli("fleet", "merge", str(path), "--json")
        took[label] = _cpu() - start
        assert rc == 0, err
        assert json.loads(out)["nodes"] == 16_000
    assert took["same"] < 2.5 * took["distinct"] + 0.5, took


def _tiny_distinct(path: Path, n: int) -> Path:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"schema": "tfgpu.facts/1", "platform": {"os": "linux", "hostname": f"n{i:05d}"}}) + "\n")
    return path


@pytest.mark.faults
def test_medium_tiny_distinct_reports_cost_memory_and_time_bounded_by_their_size(cli: Cli, tmp_path: Path) -> None:
    """Medium. The attacker sends lines of ~77 bytes, each a distinct facts document (only the host name
    differs). Today each one is judged on its own (~6-12 ms) and keeps a whole doctor document (~105 KB):
    400 lines cost ~40 MB and ~5 s. Instead memory per report is bounded by its real size (here: < 16 KB kept
    per 77-byte report) and such reports merge at more than 200 a second."""
    cli("fleet", "merge", str(_tiny_distinct(tmp_path / "warm.jsonl", 2)), "--json")  # imports, caches
    path = _tiny_distinct(tmp_path / "tiny200.jsonl", 200)
    start = _cpu()
    rc, _out, err = cli("fleet", "merge", str(path), "--json")
    took = _cpu() - start
    assert rc == 0, err
    peaks = {}
    for n in (40, 160):
        tracemalloc.start()
        try:
            cli("fleet", "merge", str(_tiny_distinct(tmp_path / f"tiny{n}.jsonl", n)), "--json")
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    per_report = (peaks[160] - peaks[40]) / 120
    assert per_report < 16 * 1024, f"{per_report / 1024:.0f} KB kept per 77-byte report"
    assert took < 1.0, f"200 tiny reports took {took:.1f} s"


@pytest.mark.faults
def test_medium_a_huge_sparse_report_file_costs_memory_bounded_by_the_report_cap(cli: Cli, tmp_path: Path) -> None:
    """Medium. The attacker leaves a 64 MB sparse file (no disk used: a hole of NUL bytes) among the reports.
    Today it is read whole (up to the 4 GB stream cap), decoded, stripped and copied into a StringIO before
    the 16 MB report cap refuses its one line: ~450 MB traced for 64 MB here, 3.6 GB for 512 MB, ~28 GB at
    the cap. Instead memory stays bounded by the per-report cap (< 48 MB traced) and the file is skipped."""
    path = tmp_path / "reports" / "huge.json"
    path.parent.mkdir()
    with path.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    tracemalloc.start()
    try:
        rc, _out, err = cli("fleet", "merge", str(path.parent), "--json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 2, err
    assert peak < 48 * 1024 * 1024, f"{peak / 2**20:.0f} MB"


class _EndlessLine(io.RawIOBase):
    """A pipe that sends ``size`` bytes with no newline (what `cat /dev/zero | tr` or a hostile pod sends)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = b"x" * n
        self.left -= n
        return n


@pytest.mark.faults
def test_medium_fleet_merge_from_stdin_holds_no_endless_line(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Medium. `fleet merge -` reads `kubectl logs` piped in; the attacker's pod prints one line that never
    ends. Today the line is read whole before the 16 MB cap is checked (96 MB here: ~190 MB traced; an
    endless one until memory runs out). Instead stdin is streamed in bounded pieces: the line is refused
    once it passes the cap, in bounded memory (< 48 MB traced)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(_EndlessLine(96 * 1024 * 1024)), encoding="utf-8"))
    tracemalloc.start()
    try:
        rc, _out, err = cli("fleet", "merge", "-", "--json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 2, err
    assert peak < 48 * 1024 * 1024, f"{peak / 2**20:.0f} MB"


# --------------------------------------------------------------------------- Medium: output encoding


def test_medium_lone_surrogate_in_a_gpu_name_with_json_under_a_utf8_locale(tmp_path: Path,
                                                                           genuine: dict[str, Any]) -> None:
    """Medium. JSON allows "\\udcff" (a lone surrogate) in a string; the attacker's report names its GPU so.
    Today `fleet merge --json` writes it with ensure_ascii=False to a strict UTF-8 stdout (a UTF-8 locale):
    UnicodeEncodeError, rc 3, nothing merged. Instead it is written escaped (as the --html page already
    does) and the merge ends normally."""
    bad = json.loads(json.dumps(genuine))
    bad["facts"]["gpus"][0]["name"] = "Tesla \udcff M60"
    reports = _reports(tmp_path, bad)
    res = tfgpu("fleet", "merge", str(reports), "--json",
                env={**os.environ, "TFGPU_HOME": str(tmp_path / "home"), "PYTHONIOENCODING": "utf-8"})
    assert res.returncode in (0, 2), res.stderr
    assert json.loads(res.stdout)["nodes"] == 1


# --------------------------------------------------------------------------- Low: NaN and Infinity


def test_low_nan_in_a_forged_check_never_makes_invalid_json_nor_a_broken_page(cli: Cli, tmp_path: Path,
                                                                              genuine: dict[str, Any]) -> None:
    """Low. Python's json reads NaN and Infinity; the attacker's report carries them in a failing check. Today
    `fleet merge --json` prints `NaN` (not JSON: jq, browsers and other JSON readers refuse the document) and
    the --html page's data block holds it too, so its script dies and the page shows nothing. Instead the
    document and the page's data are strict JSON (the value dropped, nulled or the report refused)."""
    forged = json.loads(json.dumps(genuine))
    failing = next(c for c in forged["checks"] if c["status"] in ("fail", "warn"))
    failing["score"] = float("nan")
    failing["extra"] = {"limit": float("inf")}
    page = tmp_path / "fleet.html"
    rc, out, err = cli("fleet", "merge", str(_reports(tmp_path, forged)), "--json", "--html", str(page))
    assert rc in (0, 2), err
    _strict_json(out)
    data = re.search(r'<script[^>]*type="application/json"[^>]*>(.*?)</script>', page.read_text(), re.S)
    assert data is not None, "the page's data block was not found"
    _strict_json(data.group(1).replace("\\u003c", "<"))


def test_low_nan_under_unknown_facts_keys_never_makes_invalid_doctor_json(cli: Cli, tmp_path: Path) -> None:
    """Low. The attacker's facts file (or a report passed to `doctor --facts`) has NaN and -Infinity under keys
    the validator does not know. Today `doctor --json` copies them into the report as `NaN`/`-Infinity`:
    not JSON. Instead the report is strict JSON (or the file is refused, rc 2)."""
    facts = m60_facts()
    facts["zz_vendor"] = float("nan")
    facts["platform"]["zz_uptime"] = float("-inf")
    path = write_facts(tmp_path, facts)
    rc, out, err = cli("doctor", "--facts", str(path), "--json")
    assert rc in (0, 1, 2), err
    if rc != 2:
        _strict_json(out)
    else:
        assert "not JSON" in err, err


# --------------------------------------------------------------------------- new


@pytest.mark.faults
def test_new_a_report_with_120000_gpus_is_merged_within_the_doctors_bound(cli: Cli, tmp_path: Path) -> None:
    """New (R4-N17). The attacker's report (10 MB, under the 16 MB cap, schema-valid) lists 120,000 GPUs.
    `doctor --facts` caps GPUs at 1,024 and judges such a file in 0.4 s (issue 16's bound: 2 s); today
    `fleet merge` has no cap and takes ~5.5 s for this one report (a directory of them, minutes). Instead the
    merge applies a cap and the same bound: within 2 s, the report merged or refused in one line that says why
    (the merge refuses a report of more GPUs than one machine has: rc 2 when nothing else is left to merge)."""
    facts = m60_facts()
    facts["gpus"] = [{"index": i, "name": "Tesla M60", "compute_capability": "5.2", "memory_mib": 8129}
                     for i in range(120_000)]
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "big.json").write_text(json.dumps(facts))
    cli("fleet", "merge", str(_reports(tmp_path / "warm", facts | {"gpus": facts["gpus"][:2]})))
    start = _cpu()
    rc, _out, err = cli("fleet", "merge", str(reports))
    took = _cpu() - start
    assert rc in (0, 2), err
    if rc == 2:
        assert "120000 GPUs" in err + _out, err + _out
    assert took < 2.0, f"{took:.1f} s"


def test_new_escapes_and_markup_in_report_versions_and_gpu_names_never_reach_the_terminal(
        tmp_path: Path, genuine: dict[str, Any]) -> None:
    """New (R4-N21), held today. The attacker's report carries escape sequences (a screen clear, an OSC title,
    an OSC 8 link), rich markup and a bidi override in its tfgpu version, knowledge-base version and GPU
    name; `fleet merge` prints "re-judged from tfgpu VERSION" and the GPU names, with colours forced on (CI).
    Held: every value reaches the terminal as text (no ESC, no BEL, no bidi control; markup shown literally)."""
    bad = json.loads(json.dumps(genuine))
    bad["tfgpu_version"] = "9.9\x1b[2J\x1b]0;pwn\x07[link=https://evil.example]v[/link]"
    bad["data_version"] = "0\u202e1"
    bad["facts"]["gpus"][0]["name"] = "[bold]Tesla[/] \x1b]8;;http://evil.example\x07M60\x1b]8;;\x07"
    res = tfgpu("fleet", "merge", str(_reports(tmp_path, bad)),
                env={**os.environ, "TFGPU_HOME": str(tmp_path / "home"), "FORCE_COLOR": "1", "TERM": "xterm"})
    assert res.returncode == 0, res.stderr
    text = res.stdout + res.stderr
    assert "9.9" in text
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\u202e"):
        assert raw not in text
    assert "[link=https://evil.example]" in text  # shown as text, not made a link
