"""Issue 30: the fleet merge keys machines by their judged facts without per-node identity, keeps each
node's identity in a compact record, judges each machine once (in workers for a fleet of many kinds) and
names nodes uniquely in linear time."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests import TESTS
from tfgpu.judge.diagnose import diagnose
from tfgpu.kb.knowledge import load_kb
from tfgpu.render import report
from tfgpu.tools.fleet import judging, machines
from tfgpu.tools.fleet import merge as fm

FACTS = TESTS / "data" / "facts"


def _recorded() -> list[dict[str, Any]]:
    """Every recorded machine: the seeds' facts and the casebook's."""
    out = [json.loads(p.read_text()) for p in sorted(FACTS.glob("*.json"))]
    for p in sorted((TESTS / "cases").rglob("*.json")):
        doc = json.loads(p.read_text())
        if isinstance(doc, dict) and isinstance(doc.get("facts"), dict):
            out.append(doc["facts"])
    return out


class _Reads(dict):  # type: ignore[type-arg]
    """A facts document that records which top-level sections are read."""

    seen: ClassVar[set[str]] = set()

    def __getitem__(self, key: Any) -> Any:
        _Reads.seen.add(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        _Reads.seen.add(key)
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        _Reads.seen.add(str(key))
        return dict.__contains__(self, key)


def test_the_verdict_reads_no_facts_section_outside_the_machine_key() -> None:
    """The key leaves out every section not in JUDGED: judging must not read one (else two nodes with the
    same key could deserve different verdicts). Checked on every recorded machine (--tf on some of them)."""
    kb = load_kb()
    _Reads.seen = set()
    for i, facts in enumerate(_recorded()):
        tracked = _Reads(facts)
        for tf in (None, "2.15", "latest") if i % 25 == 0 else (None,):  # every series; a --tf now and then
            diagnose(tracked, kb, tf=tf)  # type: ignore[arg-type]
    assert _Reads.seen, "the tracking dict saw no read"
    assert _Reads.seen <= set(machines.JUDGED), sorted(_Reads.seen - set(machines.JUDGED))


def _node(facts: dict[str, Any], i: int) -> dict[str, Any]:
    """One node of a model: its own GPU UUIDs, bus ids, host name, boot id and probe timings."""
    f = copy.deepcopy(facts)
    for n, g in enumerate(f["gpus"]):
        g.update(uuid=f"GPU-{i:08x}-0000-0000-0000-{n:012x}", pci_bus_id=f"00000000:{0x1A + n:02X}:00.0",
                 serial=f"03234180{i:05d}")
    f["platform"].update(hostname=f"gpu{i:04d}", boot_id=f"b{i:031x}")
    f["timings"] = {"platform": 0.001 * i, "total": 0.2 + i}
    f["provenance"] = {"driver.version": "nvml"}
    f["notes"] = [f"probed at {i}"]
    return f


def _report(facts: dict[str, Any]) -> str:
    kb = load_kb()
    return json.dumps(report.doctor_document(facts, diagnose(facts, kb), data_version=kb.data_version))


def test_nodes_that_differ_only_in_identity_are_one_machine_and_keep_their_identity() -> None:
    base = json.loads((FACTS / "r740-4x-tesla-m60.json").read_text())
    lines = "".join(f"{fm.MARKER} node=gpu{i} {_report(_node(base, i))}\n" for i in range(5))
    fleet = fm.merge(["-"], kb=load_kb(), stdin=io.StringIO(lines))
    (machine,) = fleet.machines.values()
    assert machine.nodes == [f"gpu{i}" for i in range(5)]
    ids = [json.loads(x or "{}") for x in machine.identities]
    assert ids[3]["hostname"] == "gpu0003"
    assert ids[3]["gpus"][1] == {"uuid": "GPU-00000003-0000-0000-0000-000000000001",
                                 "serial": "0323418000003", "pci_bus_id": "00000000:1B:00.0"}
    assert len({json.dumps(i) for i in ids}) == 5


def test_identity_never_changes_the_verdict_it_is_removed_from() -> None:
    """The split facts judge as the node's own facts do, on every recorded machine given an identity."""
    kb = load_kb()
    for i, facts in enumerate(_recorded()[:60]):
        if not isinstance(facts.get("gpus"), list) or not isinstance(facts.get("platform"), dict):
            continue
        node = _node(facts, i)
        split = machines.split_facts(node)
        own = [t.to_json() for t in diagnose(node, kb).targets]
        assert [t.to_json() for t in diagnose(split.facts, kb).targets] == own  # type: ignore[arg-type]


def test_a_uuid_in_cuda_visible_devices_keeps_the_uuids_in_the_key() -> None:
    facts = json.loads((FACTS / "r740-4x-tesla-m60.json").read_text())
    a, b = _node(facts, 1), _node(facts, 2)
    for f in (a, b):
        f["env"]["CUDA_VISIBLE_DEVICES"] = f["gpus"][2]["uuid"]
    sa, sb = machines.split_facts(a), machines.split_facts(b)
    assert sa.key_text != sb.key_text, "which GPU is visible depends on the UUIDs: two machines"
    assert sa.facts["gpus"][2]["uuid"] == a["gpus"][2]["uuid"]
    assert sa.facts["gpus"][2]["pci_bus_id"] is None
    for f in (a, b):
        f["env"]["CUDA_VISIBLE_DEVICES"] = "0,2"
    assert machines.split_facts(a).key_text == machines.split_facts(b).key_text


@pytest.mark.parametrize(("where", "value"), [("uuid", 7), ("uuid", "G" * 300), ("pci_bus_id", ["x"]),
                                              ("serial", {"a": 1})])
def test_an_identity_value_that_is_not_a_short_string_is_named(where: str, value: Any) -> None:
    facts = json.loads((FACTS / "r740-4x-tesla-m60.json").read_text())
    facts["gpus"][0][where] = value
    fleet = fm.merge(["-"], kb=load_kb(), stdin=io.StringIO(json.dumps(facts) + "\n"))
    assert fleet.reports == 0
    (problem,) = fleet.problems
    assert f"gpus[0].{where}" in problem.reason


def test_a_report_listing_more_gpus_than_a_machine_is_named() -> None:
    facts = json.loads((FACTS / "r740-4x-tesla-m60.json").read_text())
    facts["gpus"] = [dict(facts["gpus"][0], index=i) for i in range(machines.MAX_GPUS + 1)]
    fleet = fm.merge(["-"], kb=load_kb(), stdin=io.StringIO(json.dumps(facts) + "\n"))
    assert "not one machine" in fleet.problems[0].reason


def test_node_names_are_numbered_once_each() -> None:
    names = machines.NodeNames()
    got = [names.add(n) for n in ["a", "a", "a#3", "a", "a", "b", "a#2"]]
    assert got == ["a", "a#2", "a#3", "a#4", "a#5", "b", "a#2#2"]


def test_workers_judge_as_this_process_does(tmp_path: Path) -> None:
    """The worker pool (forked) gives the same document as judging in this process."""
    if judging.default_workers() == 0:
        pytest.skip("fork or a second CPU is not available here")
    base = json.loads((FACTS / "r740-4x-tesla-m60.json").read_text())
    for i, driver in enumerate(["418.87.00", "450.80.02", "470.82.01", "525.60.13", "550.54.15"]):
        f = _node(base, i)
        f["driver"].update(version=driver, kernel_module=driver, cuda=None)
        (tmp_path / f"n{i}.json").write_text(_report(f))
    kb = load_kb()
    here = fm.fleet_document(fm.merge([str(tmp_path)], kb=kb, tf="2.4"))
    pool = judging.JudgePool(fm.doctor_judge(kb), "2.4", workers=2, first=1)
    try:
        results = [pool.submit(json.loads(p.read_text())["facts"]) for p in sorted(tmp_path.glob("*.json"))]
        found = [r() for r in results]
    finally:
        pool.close()
    assert len(found) == 5
    forked = fm.fleet_document(fm.merge([str(tmp_path)], kb=kb, tf="2.4", workers=2))
    assert forked == here
    assert [j.verdicts() for j in found] == [m.verdicts() for m in fm.merge([str(tmp_path)], kb=kb).machines.values()]


def test_a_number_beyond_a_float_in_the_judged_facts_is_named() -> None:
    line = '{"schema": "tfgpu.facts/1", "gpus": [{"index": 0, "memory_mib": 1e999}]}\n'
    fleet = fm.merge(["-"], kb=load_kb(), stdin=io.StringIO(line))
    assert fleet.reports == 0
    assert "out of range" in fleet.problems[0].reason


def test_reading_in_workers_merges_as_this_process_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files read by the forked workers (in chunks, in order) give the same document, problems and names."""
    if judging.default_workers() == 0:
        pytest.skip("fork or a second CPU is not available here")
    monkeypatch.setattr(judging, "READ_HERE", 2)
    monkeypatch.setattr(judging, "READ_CHUNK", 3)
    base = json.loads((FACTS / "r740-4x-tesla-m60.json").read_text())
    sub = tmp_path / "b"
    sub.mkdir()
    for i in range(10):
        f = _node(base, i)
        if i % 3 == 0:
            f["driver"].update(version="450.80.02", kernel_module="450.80.02", cuda=None)
        folder = sub if i % 2 else tmp_path
        (folder / f"n{i % 5}.json").write_text(_report(f) if i != 7 else "{broken")
    (tmp_path / "old.json").write_text(json.dumps(dict(json.loads(_report(base)), tfgpu_version="0.0.1")))
    kb = load_kb()
    here = fm.fleet_document(fm.merge([str(tmp_path)], kb=kb))
    forked = fm.fleet_document(fm.merge([str(tmp_path)], kb=kb, workers=2))
    assert forked == here
    assert here["nodes"] == 10
    assert "n0#2" in [n for g in here["groups"] for n in g["nodes"]]
    assert len(here["problems"]) == 1
