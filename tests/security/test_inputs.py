"""Red-team attacks through files and values tfgpu reads from elsewhere: fleet reports (huge numbers,
HTML/JS in node and GPU names), and other untrusted documents. Each attack either held already (the test
guards the promise) or broke and was fixed (named in the test's comment)."""

from __future__ import annotations

import html.parser
import json
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tests.security.test_inputs3 import Cli

pytestmark = pytest.mark.safety

FACTS = TESTS / "data" / "facts"


def _facts(name: str = "r740-4x-tesla-m60.json") -> dict[str, Any]:
    return json.loads((FACTS / name).read_text())


def _report(facts: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "tfgpu.doctor/1", "tfgpu_version": "0.0.0", "data_version": "0", "facts": facts}


def test_attack_fleet_report_with_a_100000_digit_number_is_skipped_not_rc_3(cli: Cli, tmp_path: Path) -> None:
    # before: int() of the number raised ValueError inside the merge: rc 3 "internal error"
    (tmp_path / "bad.json").write_text('{"schema": "tfgpu.doctor/1", "x": ' + "9" * 100_000 + "}")
    (tmp_path / "good.json").write_text(json.dumps(_report(_facts())))
    rc, out, err = cli("fleet", "merge", str(tmp_path))
    assert rc in (0, 1, 2), err
    assert "internal error" not in err
    assert "bad.json" in out + err


def test_attack_fleet_number_after_the_facts_is_skipped(cli: Cli, tmp_path: Path) -> None:
    doc = json.dumps(_report(_facts()))[:-1] + ', "targets": ' + "1" * 50_000 + "}"
    (tmp_path / "a.json").write_text(doc)
    rc, _out, err = cli("fleet", "merge", str(tmp_path))
    assert rc != 3, err


class _Scripts(html.parser.HTMLParser):
    """Every element and attribute a browser would see in the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [k for k, _v in attrs]


def test_attack_fleet_html_carries_no_markup_from_node_or_gpu_names(cli: Cli, tmp_path: Path) -> None:
    # held: every value is escaped, the data block is JSON with <, > and & escaped
    facts = _facts()
    evil = '</script><script>alert(1)</script><img src=x onerror=alert(2)>"\'&\u2028'
    facts["gpus"][0]["name"] = evil
    facts.setdefault("platform", {})["hostname"] = evil
    (tmp_path / "n1.json").write_text(json.dumps(_report(facts)))
    page = tmp_path / "fleet.html"
    rc, _out, err = cli("fleet", "merge", str(tmp_path), "--html", str(page))
    assert rc in (0, 1), err
    parser = _Scripts()
    parser.feed(page.read_text())
    assert parser.tags.count("script") == 2  # the inert data block and tfgpu's own script
    assert "img" not in parser.tags
    assert "onerror" not in parser.attrs


def test_attack_fleet_html_temp_name_is_not_predictable(cli: Cli, tmp_path: Path) -> None:
    # before: --html wrote through `.NAME.<pid>.tmp`; a file already there made the write fail (rc 1) and
    # tfgpu then deleted that file, which it had not made
    import os

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "n1.json").write_text(json.dumps(_report(_facts())))
    page = tmp_path / "fleet.html"
    planted = tmp_path / f".fleet.html.{os.getpid()}.tmp"
    planted.write_text("someone else's file\n")
    rc, _out, err = cli("fleet", "merge", str(tmp_path / "reports"), "--html", str(page))
    assert rc in (0, 1), err
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert planted.read_text() == "someone else's file\n"
