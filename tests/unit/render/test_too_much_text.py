"""Too much text (issue 29, item 7; explain's own part is tested with explain): the doctor and `plan` show what the
user must act on; the details (recipes' verification, caveats a backend choice handles, long notes) are behind
--verbose and in the JSON, and the output says where."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.unit.cli.test_userpath import rtx_3080

Cli = Callable[..., tuple[int, str, str]]
MX150 = str(Path(__file__).resolve().parents[2] / "data" / "facts" / "mx150-laptop-ubuntu1804.json")


def _rtx(tmp_path: Path) -> str:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(rtx_3080("535.54.03")))
    return str(path)


def test_the_doctor_shows_what_to_act_on_and_says_where_the_rest_is(cli: Cli, tmp_path: Path) -> None:
    facts = _rtx(tmp_path)
    _, doc, _ = cli("doctor", "--facts", facts, "--tf", "2.20", "--json")
    (caveat,) = [c for c in json.loads(doc)["targets"][0]["caveats"] if not c.get("mitigated_by")]
    assert len(caveat["summary"]) > 400
    _, out, _ = cli("doctor", "--facts", facts, "--tf", "2.20")
    assert caveat["summary"] not in out  # shortened to what matters ...
    assert caveat["summary"][:100] in out, (caveat["summary"], out)
    assert f"fix: {caveat['fix']}" in out  # ... and the fix is whole
    assert "every detail: tfgpu doctor --tf 2.20.0 --verbose (or --json)" in out
    _, verbose, _ = cli("doctor", "--facts", facts, "--tf", "2.20", "--verbose")
    assert caveat["summary"] in verbose
    assert "install verified" in verbose
    assert "install verified" not in out


def test_caveats_a_backend_choice_handles_are_details(cli: Cli) -> None:
    _, out, _ = cli("doctor", "--facts", MX150, "--tf", "2.2.0")
    assert "handled:" not in out
    assert "the pip way (pip-system-cuda) would not work" not in out
    _, verbose, _ = cli("doctor", "--facts", MX150, "--tf", "2.2.0", "--verbose")
    assert "handled: tfgpu uses the conda backend" in verbose


def test_plan_notes_are_short_unless_verbose(cli: Cli, tmp_path: Path) -> None:
    facts = _rtx(tmp_path)
    _, plan_json, _ = cli("plan", "--tf", "2.2.0", "--facts", facts, "--json", "--force")
    notes = json.loads(plan_json)["notes"]
    long_notes = [n for n in notes if len(n) > 240]
    assert long_notes
    _, out, _ = cli("plan", "--tf", "2.2.0", "--facts", facts, "--force")
    note_lines = [line for line in out.splitlines() if line.startswith("  note: ")]
    assert note_lines
    assert all(len(line) <= 260 for line in note_lines), note_lines
    assert "every note in full: --verbose (or --json)" in out
    _, verbose, _ = cli("plan", "--tf", "2.2.0", "--facts", facts, "--force", "--verbose")
    for n in long_notes:
        assert n in verbose


def test_brief_keeps_whole_clauses() -> None:
    from tfgpu.render.output import brief

    text = "first part; second part; " + "x" * 300
    assert brief(text, 40) == "first part; second part …"
    assert brief("short", 40) == "short"
    assert len(brief("word " * 100, 60)) <= 61
