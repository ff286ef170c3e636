"""The doctor's last run (tfgpu.facts.lastrun): its facts, judged while the next run probes
(tfgpu.api.doctor._judge_while_probing), and its answer, reused when the next run asks the same of the same machine
with the same code and knowledge (tfgpu.api.doctor.doctor_document). The answer is always the one judging this run's
facts gives."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
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
    assert lastrun.previous(where) == {"facts": FACTS, "answer": None}
    assert oct(where.stat().st_mode & 0o777) == "0o600"


def _record(**answer: object) -> str:
    return json.dumps({"schema": lastrun.SCHEMA, "facts": FACTS, "answer": answer})


def test_what_is_not_a_remembered_run_is_none_and_never_an_error(tmp_path: Path) -> None:
    where = tmp_path / "facts-x.json"
    assert lastrun.previous(None) is None
    assert lastrun.previous(where) is None  # none yet
    for text in ("", "not json", "[]", '{"schema": "tfgpu.facts/1"}', '["d", "schema", "tfgpu.facts/1"]',
                 json.dumps({"schema": lastrun.SCHEMA, "facts": []}),
                 json.dumps({"schema": lastrun.SCHEMA, "facts": {"schema": "tfgpu.doctor/1"}}),
                 json.dumps({"schema": "tfgpu.lastrun/0", "facts": FACTS, "answer": None})):
        where.write_text(text)
        assert lastrun.previous(where) is None, text
    # a symlink (to a record that would do) is not followed
    real = tmp_path / "real.json"
    lastrun.remember(real, FACTS)
    where.unlink()
    where.symlink_to(real)
    assert lastrun.previous(where) is None


def test_an_answer_that_is_not_one_is_dropped_and_the_facts_kept(tmp_path: Path) -> None:
    where = tmp_path / "facts-x.json"
    doc = {"facts": None, "overrides": None, "exit_code": 0}
    for answer in ({"key": 1, "inputs": [], "doc": doc}, {"key": "k", "inputs": [["a", 1, 2]], "doc": doc},
                   {"key": "k", "inputs": [["a", "1", 2, 3]], "doc": doc}, {"key": "k", "inputs": {}, "doc": doc},
                   {"key": "k", "inputs": [["a", 1, 2, 3.0]], "doc": doc},
                   {"key": "k", "inputs": [], "doc": {"facts": None, "exit_code": 0}},
                   {"key": "k", "inputs": [], "doc": {**doc, "exit_code": "0"}}, {"key": "k", "inputs": []}):
        where.write_text(_record(**answer))
        assert lastrun.previous(where) == {"facts": FACTS, "answer": None}, answer
    where.write_text(_record(key="k", inputs=[["a", -1, -1, -1]], doc=doc))
    assert lastrun.previous(where)["answer"] == {"key": "k", "inputs": [["a", -1, -1, -1]], "doc": doc}


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


# -- what a run asks, and what its answer was made from -----------------------------------------------------------

OPTIONS = {"tf": None, "backend": "auto", "require_gpu": False, "strict": False, "overrides": {}, "timeout": 2.0,
           "python": None, "prefix": None, "name": None}
ENV = {"HOME": "/home/u", "TFGPU_CACHE_DIR": "/c", "TERM": "xterm", "PATH": "/usr/bin"}


def test_the_key_is_every_option_the_day_and_the_variables_that_steer_judging() -> None:
    key = lastrun.answer_key(OPTIONS, (2026, 11, 28), ENV)
    assert lastrun.answer_key(dict(OPTIONS), (2026, 11, 28), dict(ENV)) == key
    assert lastrun.answer_key(OPTIONS, (2026, 11, 28), {**ENV, "TERM": "dumb", "COLUMNS": "80"}) == key  # rendering only
    for name, value in (("tf", "2.15"), ("backend", "conda"), ("require_gpu", True), ("strict", True),
                        ("overrides", {"driver": "550.54"}), ("timeout", 9.0), ("python", "/usr/bin/python3"),
                        ("prefix", "/opt/env"), ("name", "tf")):
        assert lastrun.answer_key({**OPTIONS, name: value}, (2026, 11, 28), ENV) != key, name
    assert lastrun.answer_key(OPTIONS, (2026, 11, 29), ENV) != key
    for variable in ("TFGPU_CONFIG", "TFGPU_KB_DATA", "TFGPU_HOME", "XDG_CONFIG_HOME", "APPDATA"):
        assert lastrun.answer_key(OPTIONS, (2026, 11, 28), {**ENV, variable: "x"}) != key, variable
    assert lastrun.answer_key(OPTIONS, (2026, 11, 28), {**ENV, "HOME": "/home/v"}) != key


def test_no_answer_is_kept_from_code_whose_changes_cannot_be_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    zipped = types.ModuleType("zipped")
    zipped.__file__ = "/opt/app.zip/zipped.py"  # zipimport: a path that os.stat cannot see
    monkeypatch.setitem(sys.modules, "zipped", zipped)
    assert lastrun.answer("k", {"facts": None, "overrides": None, "exit_code": 0}, []) is None


def test_another_install_of_tfgpu_in_the_same_environment_asks_something_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its modules come from elsewhere (PYTHONPATH, `python -m tfgpu` in a checkout): the files the last answer
    was made from may all be unchanged, but they are not the code that runs now."""
    key = lastrun.answer_key(OPTIONS, (2026, 11, 28), ENV)
    monkeypatch.setattr(sys, "path", ["/home/u/src/tfgpu/src", *sys.path])
    assert lastrun.answer_key(OPTIONS, (2026, 11, 28), ENV) != key


def test_an_answer_holds_while_every_file_it_was_made_from_is_unchanged(tmp_path: Path) -> None:
    data, gone, later = tmp_path / "cuda.toml", tmp_path / "gone.toml", tmp_path / "later.toml"
    data.write_text("a = 1\n")
    gone.write_text("")
    doc = {"schema": "tfgpu.doctor/1", "facts": FACTS, "overrides": ["driver"], "exit_code": 0}
    answer = lastrun.answer("k", doc, lastrun.signatures([str(data), str(gone), str(later)]))
    assert answer is not None
    assert answer["doc"] == {"schema": "tfgpu.doctor/1", "facts": None, "overrides": None, "exit_code": 0}
    assert doc["facts"] is FACTS  # the document itself is left alone
    signed = {path: rest for path, *rest in answer["inputs"]}
    assert signed[str(later)] == [-1, -1, -1]
    assert str(Path(lastrun.__file__).resolve()) in signed  # the code that judged
    assert not any(p.startswith(os.path.dirname(os.__file__) + os.sep) and "-packages" not in p for p in signed)
    record = {"facts": FACTS, "answer": answer}
    assert lastrun.answer_for(record, "k") == answer["doc"]
    assert lastrun.answer_for(record, "other") is None
    assert lastrun.answer_for(None, "k") is None
    assert lastrun.answer_for({"facts": FACTS, "answer": None}, "k") is None

    def sign_again() -> None:
        answer["inputs"] = lastrun.signatures([str(data), str(gone), str(later)])

    def tick() -> None:  # file times advance with the kernel's clock tick (a few ms): let one pass
        time.sleep(0.03)

    st = data.stat()
    tick()
    data.write_text("a = 2\n")  # the same size, and the modification time set back: the status change time tells
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert lastrun.answer_for(record, "k") is None
    sign_again()
    assert lastrun.answer_for(record, "k") is not None
    tick()
    data.chmod(0o640 if data.stat().st_mode & 0o777 != 0o640 else 0o600)  # a new mode (fetched knowledge in a
    # directory others can write is not used)
    assert lastrun.answer_for(record, "k") is None
    sign_again()
    data.write_text("a = 22\n")
    assert lastrun.answer_for(record, "k") is None
    sign_again()
    gone.unlink()
    assert lastrun.answer_for(record, "k") is None
    sign_again()
    assert lastrun.answer_for(record, "k") is not None  # recorded absent, still absent
    later.write_text("")  # a file that was not there, is now
    assert lastrun.answer_for(record, "k") is None


def test_fetched_knowledge_that_becomes_complete_is_a_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tfgpu kb update` moves a version into the store, then writes its record last (tfgpu.kb.bundles.commit): a run
    between the two judged with the bundled data, and the record's arrival must show as a change."""
    from tfgpu.api.doctor import _signed_inputs
    from tfgpu.kb.bundles import RECORD

    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    before = _signed_inputs()
    assert before is not None
    record = {"facts": FACTS, "answer": {"key": "k", "inputs": before, "doc": {}}}
    assert lastrun.answer_for(record, "k") == {}
    version = tmp_path / "home" / "kb" / "2099.01.01"
    version.mkdir(parents=True)  # the store appears: a change
    assert lastrun.answer_for(record, "k") is None
    record["answer"]["inputs"] = _signed_inputs()
    assert lastrun.answer_for(record, "k") == {}
    (version / RECORD).write_text("{}")  # complete now, in a directory that was already there
    assert lastrun.answer_for(record, "k") is None


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


def test_the_same_facts_are_judged_once_while_probing() -> None:
    now = copy.deepcopy(FACTS)
    now["timings"] = {"total": 0.05}
    judged: list = []
    facts, _, result = _judge_while_probing(_Pending(now), _judge_log(judged), FACTS)
    assert facts is now
    assert result == ("verdict on", FACTS["driver"]["version"])
    assert judged == [FACTS]  # the remembered facts, judged before these arrived; not judged again


def test_changed_facts_get_their_own_verdict() -> None:
    now = copy.deepcopy(FACTS)
    now["driver"]["version"] = "999.99"
    judged: list = []
    _facts, _, result = _judge_while_probing(_Pending(now), _judge_log(judged), FACTS)
    assert result == ("verdict on", "999.99")  # never the verdict on the last run's facts
    assert judged == [FACTS, now]


def test_no_speculation_when_the_facts_are_in_or_there_are_none_to_judge() -> None:
    judged: list = []
    _judge_while_probing(_Pending(copy.deepcopy(FACTS), ready=True), _judge_log(judged), FACTS)
    assert len(judged) == 1  # the probes were done: their facts judged, nothing else
    judged.clear()
    _judge_while_probing(_Pending(copy.deepcopy(FACTS)), _judge_log(judged), None)  # --facts, the library
    assert len(judged) == 1


def test_facts_this_tfgpu_cannot_judge_are_judged_afresh() -> None:
    odd = copy.deepcopy(FACTS)
    odd["driver"] = {}  # e.g. kept by another version of tfgpu
    calls: list = []

    def judge(facts: dict) -> str:
        calls.append(facts)
        if not facts["driver"]:
            raise KeyError("version")
        return "fresh"

    assert _judge_while_probing(_Pending(FACTS), judge, odd)[2] == "fresh"
    assert len(calls) == 2


def test_ctrl_c_while_judging_the_last_runs_facts_stops_the_probe_child() -> None:
    pending = _Pending(FACTS)

    def judge(facts: dict) -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _judge_while_probing(pending, judge, FACTS)
    assert pending.cancelled


# -- the console script's answer, reused ---------------------------------------------------------------------------


@pytest.fixture
def probing(remembered: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict:
    """The console script's doctor (fork_probes) in this process, its probes replaced by facts the test sets, its
    configuration a file of the test's own; ``loads`` counts its judgements."""
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("TFGPU_CONFIG", str(config))
    now = {"facts": copy.deepcopy(FACTS), "loads": 0}

    def start_facts(**_kw: object) -> _Pending:
        return _Pending(copy.deepcopy(now["facts"]))

    from tfgpu.api import doctor

    real_result = doctor.doctor_result

    def doctor_result(*args: object, **kwargs: object) -> object:
        now["loads"] += 1
        return real_result(*args, **kwargs)

    monkeypatch.setattr("tfgpu.facts.gather.start_facts", start_facts)
    monkeypatch.setattr(doctor, "doctor_result", doctor_result)
    now["config"] = config
    return now


def _document(**options: object) -> dict:
    from tfgpu.api.doctor import doctor_document

    return doctor_document(fork_probes=True, **options)


def _fresh(probing: dict, **options: object) -> dict:
    """What the library's doctor (no last run) says of the facts the probes find (not counted as a judgement)."""
    from tfgpu.api.doctor import doctor_report

    where = Path(os.environ["TFGPU_CACHE_DIR"]) / "fresh.json"
    where.write_text(json.dumps(probing["facts"]))
    loads = probing["loads"]
    doc = json.loads(json.dumps(doctor_report(facts_file=str(where), **options)[0]))
    probing["loads"] = loads
    return doc


def test_the_same_question_on_the_same_machine_gets_the_last_answer_without_judging(probing: dict) -> None:
    first = _document()
    assert probing["loads"] == 1
    probing["facts"]["timings"] = {"total": 0.042}
    again = _document()
    assert probing["loads"] == 1  # nothing judged
    assert again["facts"]["timings"] == {"total": 0.042}  # this run's facts, in the last run's answer
    assert {**again, "facts": None} == json.loads(json.dumps({**first, "facts": None}))
    assert again == _fresh(probing)


def test_anything_else_is_judged_again_and_the_new_answer_kept(probing: dict) -> None:
    _document()
    probing["facts"]["driver"]["version"] = "999.99"  # another machine
    assert _document() == _fresh(probing)
    assert probing["loads"] == 2
    assert _document() == _fresh(probing)
    assert probing["loads"] == 2  # kept: the same machine again is answered from it
    assert _document(tf="2.15") == _fresh(probing, tf="2.15")  # another question
    assert probing["loads"] == 3
    probing["config"].write_text('[backends]\nprefer = "conda"\n')  # another configuration
    assert _document(tf="2.15") == _fresh(probing, tf="2.15")
    assert probing["loads"] == 4
    assert _document(tf="2.15", require_gpu=True) == _fresh(probing, tf="2.15", require_gpu=True)
    assert probing["loads"] == 5


def test_another_day_is_judged_again(probing: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    today = _document()
    day = dt.date.today() + dt.timedelta(days=400)
    monkeypatch.setattr("tfgpu.api.doctor.clock", lambda: day)
    aged = _document()
    assert probing["loads"] == 2
    assert aged == _fresh(probing, today=day)
    assert aged["knowledge"] != today["knowledge"]  # the knowledge is older that day


def test_import_is_never_answered_from_the_last_run(probing: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr("tfgpu.api.doctor._environment_verdict", lambda *a, **k: calls.append(k["import_tf"]))
    _document()
    _document(import_tf=True)
    assert calls == [False, True]
    assert probing["loads"] == 2


def test_the_answer_goes_through_json_unchanged_for_every_renderer() -> None:
    """The last run's answer is kept as JSON: for a sample of the casebook, the document read back renders as the
    document itself does (the report, plain and styled, the CI log and annotations, the redacted JSON)."""
    import io

    from tfgpu.api.doctor import doctor_report
    from tfgpu.render import report

    cases = sorted(Path(__file__).resolve().parents[2].glob("cases/*/*.json"))
    assert len(cases) > 300
    for path in cases[::8]:
        doc, _ = doctor_report(facts_file=str(path))
        outputs = []
        for d in (doc, json.loads(json.dumps(doc))):
            plain, styled = io.StringIO(), io.StringIO()
            report.render_human(d, plain, color=False, verbose=False)
            report.render_human(d, styled, color=True, verbose=True)
            outputs.append((plain.getvalue(), styled.getvalue(), report.plain_log(d), list(report.ci_annotations(d)),
                            json.dumps(report.redact(d))))
        assert outputs[0] == outputs[1], path.name


@pytest.mark.real_subprocess
def test_the_console_scripts_answer_is_the_verdict_on_this_runs_facts(tmp_path: Path) -> None:
    """The real doctor, runs sharing a cache: the first is judged and remembered; the second reuses that answer
    without even loading the knowledge base (its cache, removed, is not made again); before the third, the remembered
    facts are swapped for another machine's (an MX150 laptop); the fourth asks another question. Every answer is the
    one a doctor without any last run gives."""
    env = {**os.environ, "TFGPU_CACHE_DIR": str(tmp_path), "TFGPU_PROBE_NVML": "0"}
    env.pop("TFGPU_NO_CACHE", None)

    def doctor(*args: str, **extra: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "tfgpu", "doctor", "--json", *args], capture_output=True,
                              text=True, env={**env, **extra}, check=False, timeout=120)
        assert proc.returncode in (0, 1), proc.stderr
        doc = json.loads(proc.stdout)
        doc["facts"].pop("timings")
        return doc

    fresh = doctor(TFGPU_NO_CACHE="1")
    assert doctor() == fresh
    where = next(tmp_path.glob("facts-*.json"))
    assert lastrun.previous(where)["facts"]["platform"] == fresh["facts"]["platform"]
    for cache in tmp_path.glob("kb-*.json"):
        cache.unlink()
    assert doctor() == fresh
    assert not list(tmp_path.glob("kb-*.json"))  # answered from the last run: no knowledge base loaded
    lastrun.remember(where, FACTS)
    assert doctor() == fresh
    assert lastrun.previous(where)["facts"]["platform"] == fresh["facts"]["platform"]  # this machine's again
    assert doctor("--tf", "2.15") == doctor("--tf", "2.15", TFGPU_NO_CACHE="1")
