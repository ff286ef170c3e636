"""The facts of the doctor's last run (tfgpu.facts.lastrun), and the doctor judging them while it probes
(tfgpu.api.doctor._judge_while_probing): the answer is always the verdict on this run's facts."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from tfgpu.api.doctor import _judge_while_probing
from tfgpu.facts import lastrun

FACTS = json.loads((DATA / "facts" / "mx150-laptop-ubuntu1804.json").read_text())


def test_the_file_is_one_per_python_environment_and_follows_the_cache_settings(tmp_path: Path) -> None:
    here = lastrun.facts_file({"TFGPU_CACHE_DIR": str(tmp_path)})
    assert here is not None
    assert here.parent == tmp_path
    assert here.name.startswith("facts-")
    assert lastrun.facts_file({"TFGPU_CACHE_DIR": str(tmp_path), "TFGPU_NO_CACHE": "1"}) is None
    assert lastrun.facts_file({"TFGPU_CACHE_DIR": str(tmp_path), "TFGPU_NO_CACHE": "0"}) == here


def test_remembered_facts_come_back_equal(tmp_path: Path) -> None:
    where = tmp_path / "facts-x.json"
    lastrun.remember(where, FACTS)
    assert lastrun.previous(where) == FACTS
    assert oct(where.stat().st_mode & 0o777) == "0o600"


def test_what_is_not_remembered_facts_is_none_and_never_an_error(tmp_path: Path) -> None:
    where = tmp_path / "facts-x.json"
    assert lastrun.previous(None) is None
    assert lastrun.previous(where) is None  # none yet
    for text in ("", "not json", "[]", '{"schema": "tfgpu.facts/1"}', '["d", "schema", "tfgpu.doctor/1"]',
                 '["l", ["v", "2.15"]]', '["d", "schema", "tfgpu.facts/1", "x", ["r", "Build"]]'):
        where.write_text(text)
        assert lastrun.previous(where) is None, text
    # a symlink (to facts that would do) is not followed
    real = tmp_path / "real.json"
    lastrun.remember(real, FACTS)
    where.unlink()
    where.symlink_to(real)
    assert lastrun.previous(where) is None


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to make another user's file")
def test_another_users_facts_are_not_read(tmp_path: Path) -> None:
    where = tmp_path / "facts-x.json"
    lastrun.remember(where, FACTS)
    os.chown(where, 12345, 12345)
    assert lastrun.previous(where) is None


def test_a_home_that_cannot_be_written_is_fine(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    lastrun.remember(blocker / "facts-x.json", FACTS)  # its directory is a file: nothing written, nothing raised
    lastrun.remember(None, FACTS)


def test_only_the_probes_timings_may_differ() -> None:
    other = copy.deepcopy(FACTS)
    other["timings"] = {"total": 9.9}
    assert lastrun.same(FACTS, other)
    assert not lastrun.same(None, FACTS)
    for key in FACTS:
        if key == "timings":
            continue
        changed = copy.deepcopy(FACTS)
        changed[key] = "changed"
        assert not lastrun.same(FACTS, changed), key
    missing = {k: v for k, v in FACTS.items() if k != "driver"}
    assert not lastrun.same(FACTS, missing)
    assert not lastrun.same(missing, FACTS)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                     max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(section=st.sampled_from(sorted(k for k in FACTS if k != "timings")), value=_json)
def test_any_change_outside_the_timings_is_a_change(section: str, value: object) -> None:
    changed = copy.deepcopy(FACTS)
    changed[section] = value
    assert lastrun.same(FACTS, changed) == (value == FACTS[section])


# -- the doctor judging while it probes ----------------------------------------------------------------------


class _Pending:
    """What tfgpu.facts.gather.start_facts returns: facts when called, and whether they are in yet."""

    def __init__(self, facts: dict, *, ready: bool = False) -> None:
        self.facts, self._ready, self.cancelled = facts, ready, False

    def __call__(self) -> tuple[dict, list[str]]:
        return self.facts, []

    def ready(self) -> bool:
        return self._ready

    def cancel(self) -> None:
        self.cancelled = True


def _judge_log(judged: list) -> object:
    def judge(facts: dict) -> tuple:
        judged.append(facts)
        return ("verdict on", facts["driver"].get("version"))

    return judge


@pytest.fixture
def remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TFGPU_NO_CACHE", raising=False)
    where = lastrun.facts_file()
    assert where is not None
    return where


def test_the_same_facts_are_judged_once_while_probing(remembered: Path) -> None:
    lastrun.remember(remembered, FACTS)
    now = copy.deepcopy(FACTS)
    now["timings"] = {"total": 0.05}
    judged: list = []
    facts, _, result = _judge_while_probing(_Pending(now), _judge_log(judged), speculate=True)
    assert facts is now
    assert result == ("verdict on", FACTS["driver"]["version"])
    assert judged == [FACTS]  # the remembered facts, judged before these arrived; not judged again


def test_changed_facts_get_their_own_verdict_and_are_remembered(remembered: Path) -> None:
    lastrun.remember(remembered, FACTS)
    now = copy.deepcopy(FACTS)
    now["driver"]["version"] = "999.99"
    judged: list = []
    _facts, _, result = _judge_while_probing(_Pending(now), _judge_log(judged), speculate=True)
    assert result == ("verdict on", "999.99")  # never the verdict on the last run's facts
    assert judged == [FACTS, now]
    assert lastrun.previous(remembered) == now


def test_no_speculation_when_the_facts_are_in_or_not_asked_for(remembered: Path) -> None:
    lastrun.remember(remembered, FACTS)
    judged: list = []
    _judge_while_probing(_Pending(copy.deepcopy(FACTS), ready=True), _judge_log(judged), speculate=True)
    assert len(judged) == 1  # the probes were done: their facts judged, nothing else
    judged.clear()
    _judge_while_probing(_Pending(copy.deepcopy(FACTS)), _judge_log(judged), speculate=False)  # --facts, the library
    assert len(judged) == 1


def test_facts_this_tfgpu_cannot_judge_are_judged_afresh(remembered: Path) -> None:
    odd = copy.deepcopy(FACTS)
    odd["driver"] = {}  # e.g. kept by another version of tfgpu
    lastrun.remember(remembered, odd)
    calls: list = []

    def judge(facts: dict) -> str:
        calls.append(facts)
        if not facts["driver"]:
            raise KeyError("version")
        return "fresh"

    assert _judge_while_probing(_Pending(FACTS), judge, speculate=True)[2] == "fresh"
    assert len(calls) == 2


def test_ctrl_c_while_judging_the_last_runs_facts_stops_the_probe_child(remembered: Path) -> None:
    lastrun.remember(remembered, FACTS)
    pending = _Pending(FACTS)

    def judge(facts: dict) -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _judge_while_probing(pending, judge, speculate=True)
    assert pending.cancelled


@pytest.mark.real_subprocess
def test_the_console_scripts_answer_is_the_verdict_on_this_runs_facts(tmp_path: Path) -> None:
    """The real doctor, three runs sharing a cache: the second judges the first's facts while it probes; before the
    third, the remembered facts are swapped for another machine's (an MX150 laptop). Every answer is the one a
    doctor without any remembered facts gives."""
    env = {**os.environ, "TFGPU_CACHE_DIR": str(tmp_path), "TFGPU_PROBE_NVML": "0"}
    env.pop("TFGPU_NO_CACHE", None)

    def doctor(**extra: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "tfgpu", "doctor", "--json"], capture_output=True, text=True,
                              env={**env, **extra}, check=False, timeout=120)
        assert proc.returncode in (0, 1), proc.stderr
        doc = json.loads(proc.stdout)
        doc["facts"].pop("timings")
        return doc

    fresh = doctor(TFGPU_NO_CACHE="1")
    assert doctor() == fresh
    where = next(tmp_path.glob("facts-*.json"))
    assert lastrun.previous(where)["platform"] == fresh["facts"]["platform"]
    assert doctor() == fresh
    lastrun.remember(where, FACTS)
    assert doctor() == fresh
    assert lastrun.previous(where)["platform"] == fresh["facts"]["platform"]  # this machine's again
