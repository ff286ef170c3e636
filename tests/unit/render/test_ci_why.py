"""CI mode says why (issue 29, item 4): `doctor --ci --tf 2.20` fills the step summary's "why" cell and
annotates each caveat with `::warning`; every value is escaped for workflow commands and Markdown."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.cli.test_userpath import rtx_3080
from tfgpu.render.report import ci_annotations, step_summary

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def ci_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return summary


def test_ci_mode_says_why_a_target_has_caveats(cli: Cli, tmp_path: Path, ci_env: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(rtx_3080("535.54.03")))  # CUDA 12.2: 2.20's CUDA 12.5 by minor-version compatibility
    code, out, err = cli("doctor", "--ci", "--tf", "2.20", "--facts", str(facts))
    assert code == 0, err
    (target,) = json.loads(out)["targets"]
    assert target["verdict"] == "caveats"
    caveat = next(c for c in target["caveats"] if not c.get("mitigated_by"))
    row = next(line for line in ci_env.read_text().splitlines() if line.startswith("| 2.20"))
    why = row.split(" | ")[3].rstrip(" |")
    assert why.strip()  # the "why" cell is filled
    assert why.startswith("built with CUDA 12.5")
    warnings = [line for line in err.splitlines() if line.startswith("::warning ")]
    assert any(line.startswith("::warning title=tfgpu TensorFlow 2.20.0 caveat::") and caveat["summary"][:40] in line
               for line in warnings), err
    assert f"TensorFlow 2.20.0: caveats (pip): {caveat['summary'][:40]}" in err  # the plain log says it too


def _doc(summary: str, fix: str, *, verdict: str = "caveats", tf: str = "2.20.0") -> dict[str, Any]:
    finding = {"check": "x", "summary": summary, "fix": fix}
    return {"tfgpu_version": "0", "data_version": "0", "checks": [], "recommendation": None,
            "targets": [{"tf": tf, "verdict": verdict, "backend": "pip",
                         "blockers": [finding] if verdict == "blocked" else [],
                         "caveats": [] if verdict == "blocked" else [finding]}]}


def test_every_value_is_escaped_for_workflow_commands_and_markdown() -> None:
    hostile = "50%\r\n::error::owned | <img src=x> [link](http://x) `code`"
    (line,) = ci_annotations(_doc(hostile, "a\nb"))
    assert "\n" not in line
    assert "\r" not in line
    assert line.startswith("::warning title=tfgpu TensorFlow 2.20.0 caveat::50%25%0D%0A::error::owned")
    assert line.endswith("— fix: a%0Ab")
    (blocked,) = ci_annotations(_doc("x", "", verdict="blocked", tf="2.20.0:a,b"))
    assert blocked.startswith("::error title=tfgpu TensorFlow 2.20.0%3Aa%2Cb blocked::x")  # a title is a property
    md = step_summary(_doc(hostile, ""))
    row = next(r for r in md.splitlines() if r.startswith("| 2.20.0"))
    assert "<img" not in row
    assert "\\|" in row
    assert row.count(" | ") == 3  # four cells: the value's own | is escaped
    assert "\\`code\\`" in row
