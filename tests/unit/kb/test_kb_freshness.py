"""The doctor's one note about its knowledge (issue 31, part 4): older than 90 days, or an installed TensorFlow newer
than any release it knows; the doctor says so once, and never fetches anything on its own."""

from __future__ import annotations

import datetime as dt
import json
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from tests import REPO
from tests.conftest import DATA
from tfgpu.api.doctor import doctor_report
from tfgpu.kb import freshness
from tfgpu.kb.knowledge import load_kb

SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/doctor.schema.json").read_text())
KB = load_kb()
MADE = dt.date.fromisoformat(KB.date)


@pytest.mark.parametrize(("days", "stale"), [(0, False), (90, False), (91, True), (400, True)])
def test_knowledge_is_stale_after_90_days(days: int, stale: bool) -> None:
    doc = freshness.knowledge_json(data_version="2026.11.22", date="2026-11-22", source="bundled",
                                   tf_versions=[Version("2.21.0")], installed=[],
                                   today=dt.date(2026, 11, 22) + dt.timedelta(days=days))
    assert doc["age_days"] == days
    assert doc["stale"] is stale
    assert (doc["note"] is not None) is stale
    if stale:
        assert f"{days} days old" in doc["note"]
        assert "tfgpu kb update" in doc["note"]


@pytest.mark.parametrize(("installed", "newer"), [
    ([{"distribution": "tensorflow", "version": "2.22.0"}], "tensorflow 2.22.0"),
    ([{"distribution": "tf-nightly", "version": "2.22.0.dev20261120"}], "tf-nightly 2.22.0.dev20261120"),
    ([{"distribution": "tensorflow", "version": "2.21.0"}], None),
    ([{"distribution": "tensorflow", "version": "2.21.1rc0"}], "tensorflow 2.21.1rc0"),  # its release is past 2.21.0
    ([{"distribution": "keras", "version": "9.0.0"}], None),
    ([{"distribution": "tensorflow", "version": "not a version"}, "junk", None], None),
])
def test_a_newer_installed_tensorflow_is_named(installed: list[object], newer: str | None) -> None:
    assert freshness.newer_installed(installed, Version("2.21.0")) == newer


def test_both_reasons_make_one_note() -> None:
    note = freshness.knowledge_note(date="2026-01-01", age=200, newer="tensorflow 2.30.0", known=Version("2.21.0"))
    assert note is not None
    assert note.count("tfgpu kb update") == 1
    assert "200 days old" in note
    assert "tensorflow 2.30.0 is installed here" in note


def _facts_with_tf(tmp_path, version: str):  # type: ignore[no-untyped-def]
    doc = json.loads((DATA / "facts" / "mx150-laptop-ubuntu1804.json").read_text(encoding="utf-8"))
    doc["tensorflow"] = [{"distribution": "tensorflow", "version": version}]
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_the_doctor_says_it_once_and_its_document_validates(tmp_path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    facts = _facts_with_tf(tmp_path, "2.99.0")
    doc, _ = doctor_report(facts_file=facts, today=MADE + dt.timedelta(days=120))
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, SCHEMA)
    assert doc["knowledge"]["stale"] is True
    assert doc["knowledge"]["newer_tf_installed"] == "tensorflow 2.99.0"
    assert doc["knowledge"]["source"] == "bundled"
    from tfgpu.render import report

    monkeypatch.setattr("tfgpu.api.doctor.clock", lambda: MADE + dt.timedelta(days=120))
    code, out, _ = cli("doctor", "--facts", str(facts))
    assert code == 0
    assert out.count("tfgpu kb update") == 1
    assert out.index("note: tfgpu's knowledge is 120 days old") > out.index("Recommendation")  # at the end
    assert report.plain_log(doc).count("tfgpu kb update") == 1
    assert report.step_summary(doc).count("tfgpu kb update") == 1


def test_fresh_knowledge_and_a_known_tensorflow_say_nothing(tmp_path, cli) -> None:  # type: ignore[no-untyped-def]
    doc, _ = doctor_report(facts_file=_facts_with_tf(tmp_path, "2.15.0"), today=MADE)
    assert doc["knowledge"]["note"] is None
    _, out, _ = cli("doctor", "--facts", str(_facts_with_tf(tmp_path, "2.15.0")))
    assert "kb update" not in out


def test_the_doctor_never_touches_the_network(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Old knowledge is only reported: no socket is ever opened for it."""
    def no_network(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the doctor opened a network connection")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    doc, _ = doctor_report(facts_file=_facts_with_tf(tmp_path, "2.99.0"), today=MADE + dt.timedelta(days=1000))
    assert doc["knowledge"]["stale"] is True


@given(then=st.dates(), now=st.dates())
def test_age_days_counts_as_datetime_does(then: dt.date, now: dt.date) -> None:
    # the doctor counts days without importing datetime (~1.5 ms a run): the same answer, for a date and a tuple
    assert freshness.age_days(then.isoformat(), now) == (now - then).days
    assert freshness.age_days(then.isoformat(), (now.year, now.month, now.day)) == (now - then).days
    assert freshness.day_number(then.year, then.month, then.day) == then.toordinal()


@given(text=st.text(alphabet="0123456789-", min_size=8, max_size=12) | st.text(max_size=12))
def test_age_days_reads_only_real_dates_as_fromisoformat_reads_yyyy_mm_dd(text: str) -> None:
    try:
        expected: int | None = (dt.date(2026, 11, 28) - dt.date.fromisoformat(text)).days
    except ValueError:
        expected = None
    if len(text) != 10 or text[4:5] != "-" or text[7:8] != "-":
        expected = None  # only the YYYY-MM-DD form (Python 3.11 also reads YYYYMMDD and week dates)
    assert freshness.age_days(text, dt.date(2026, 11, 28)) == expected


def test_today_is_local_today() -> None:
    before = dt.date.today()
    from tfgpu.core.sysio import local_today

    got = local_today()
    assert got in ((before.year, before.month, before.day), tuple(dt.date.today().timetuple()[:3]))
