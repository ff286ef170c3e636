"""The notebook API (issue 31, part 1): `tfgpu.doctor()`, `tfgpu.explain(text)`, `tfgpu.smoke()` return what the
CLI renders, show themselves as escaped HTML in Jupyter and as the command's plain text elsewhere, and `import
tfgpu` stays cheap."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfgpu
from tests import REPO
from tests.conftest import DATA
from tfgpu.api import notebook
from tfgpu.core.errors import InputError, UsageError
from tfgpu.render import html as render_html

FACTS = DATA / "facts" / "windows-gtx1080.json"
MX150 = DATA / "facts" / "mx150-laptop-ubuntu1804.json"
LOG = DATA / "logs" / "cudnn_version_mismatch_tf26.log"
FAKE_TF = REPO / "tests" / "fake_tf"


def test_the_api_is_reached_from_the_package_and_lazily() -> None:
    assert tfgpu.doctor is notebook.doctor
    assert tfgpu.explain is notebook.explain
    assert tfgpu.smoke is notebook.smoke
    assert {"doctor", "explain", "smoke", "__version__"} <= set(dir(tfgpu))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tfgpu.nope  # noqa: B018 - the lookup is the test


@pytest.mark.real_subprocess
def test_import_tfgpu_and_the_doctor_never_import_typer_or_rich() -> None:
    """`import tfgpu` loads nothing of the API; doctor() and its HTML need neither typer, click nor rich; plain text
    (str) is where rich comes in."""
    code = (
        "import sys, json, tfgpu\n"
        "seen = {'import': sorted(m for m in sys.modules if m.startswith('tfgpu'))}\n"
        "heavy = ('typer', 'click', 'rich', 'tfgpu.cli', 'tfgpu.api')\n"
        "seen['import_heavy'] = sorted(m for m in heavy if m in sys.modules)\n"
        f"r = tfgpu.doctor(facts={str(FACTS)!r})\n"
        "r._repr_html_()\n"
        "seen['doctor_heavy'] = sorted(m for m in ('typer', 'click', 'rich', 'tfgpu.cli') if m in sys.modules)\n"
        "str(r)\n"
        "seen['text_rich'] = 'rich' in sys.modules\n"
        "seen['text_typer'] = 'typer' in sys.modules\n"
        "print(json.dumps(seen))\n"
    )
    env = {**os.environ, "TFGPU_PROBE_NVML": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["import"] == ["tfgpu"]
    assert seen["import_heavy"] == []
    assert seen["doctor_heavy"] == []
    assert seen["text_rich"] is True  # rendering plain text needs rich, and only then
    assert seen["text_typer"] is False


def test_doctor_returns_the_document_the_cli_prints(cli) -> None:  # type: ignore[no-untyped-def]
    report = tfgpu.doctor(tf="2.10", facts=FACTS)
    code, out, err = cli("doctor", "--json", "--facts", str(FACTS), "--tf", "2.10")
    assert code == report.exit_code, err
    assert json.loads(out) == json.loads(json.dumps(report.document))
    assert report.document["schema"] == "tfgpu.doctor/1"
    assert report.result.targets[0].tf == report.document["targets"][0]["tf"]
    assert report.ok is (report.exit_code == 0)


def test_doctor_plain_text_is_the_human_report(cli) -> None:  # type: ignore[no-untyped-def]
    report = tfgpu.doctor(facts=MX150)
    _, out, _ = cli("doctor", "--facts", str(MX150))
    assert str(report) == out  # the command's own output, unstyled (no terminal here)
    assert repr(report) == str(report)
    assert "\x1b[" not in str(report)
    assert report.recommendation is not None
    assert report.recommendation["command"] in str(report)


def test_doctor_html_shows_every_check_and_the_recommendation() -> None:
    report = tfgpu.doctor(facts=MX150)
    page = report._repr_html_()
    for check in report.document["checks"]:
        assert render_html.esc(check["id"]) in page
    assert render_html.esc(report.document["recommendation"]["command"]) in page
    assert page.startswith('<div class="tfgpu-report">')
    assert page.endswith("</div>")


def test_doctor_bad_input_raises_a_usage_error_not_a_traceback_of_ours() -> None:
    with pytest.raises(UsageError, match="--backend 'nope' is not one of"):
        tfgpu.doctor(backend="nope", facts=FACTS)
    with pytest.raises(InputError):
        tfgpu.doctor(facts=DATA / "no-such-facts.json")


def _hostile_facts(tmp_path: Path, value: str) -> Path:
    doc = json.loads(FACTS.read_text(encoding="utf-8"))
    doc["gpus"][0]["name"] = value
    doc["platform"]["distro"] = value
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_doctor_html_escapes_values_from_the_facts(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    report = tfgpu.doctor(facts=_hostile_facts(tmp_path, evil))
    page = report._repr_html_()
    assert "<script" not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


_TAG = re.compile(r"<(/?)([a-z0-9]+)")
#: The only tags tfgpu's HTML is made of: anything else came from a value.
_OWN_TAGS = {"div", "p", "b", "table", "thead", "tbody", "tr", "th", "td", "span", "code", "small", "br", "ul", "li"}


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_no_value_ever_becomes_markup(value: str) -> None:
    finding = {"id": value, "severity": "error", "line": 1, "text": value, "count": 1, "meaning": value,
               "cause": value, "fix": value, "source": value}
    docs = [
        render_html.explain_html({"input": {"name": value}, "findings": [finding], "notes": [value]}),
        render_html.doctor_html({"tfgpu_version": value, "data_version": value, "facts": {"platform": {"os": value}},
                                 "overrides": [value], "checks": [{"id": value, "status": "fail", "summary": value,
                                                                    "fix": value}],
                                 "targets": [{"tf": value, "verdict": "blocked", "backend": None,
                                              "blockers": [{"summary": value, "fix": value}], "caveats": []}],
                                 "recommendation": {"tf": value, "backend": value, "command": value},
                                 "knowledge": {"note": value}}),
        render_html.smoke_html({"tensorflow": {"version": value}, "python": {"executable": value},
                                "gpus": {"devices": [{"name": value}]}, "summary": value, "passed": False,
                                "ops": [{"name": value, "status": "fail", "error": value}], "findings": [finding]}),
    ]
    for page in docs:
        assert {m.group(2) for m in _TAG.finditer(page)} <= _OWN_TAGS
        assert "<" not in re.sub(r"</?[a-z0-9]+( [^<>]*)?>", "", page)  # every < left is part of one of our tags


def test_explain_text_gives_the_findings_the_cli_gives(cli) -> None:  # type: ignore[no-untyped-def]
    text = LOG.read_text(encoding="utf-8")
    result = tfgpu.explain(text, probe=False)
    code, out, err = cli("explain", str(LOG), "--json", "--no-probe")
    assert code == 0, err
    assert result.document["findings"] == json.loads(out)["findings"]
    assert result.findings
    assert not result.findings[0].harmless
    assert result.document["input"]["name"] == "<text>"
    # a file, and bytes, say the same
    assert tfgpu.explain(LOG, probe=False).document["findings"] == result.document["findings"]
    assert tfgpu.explain(text.encode(), probe=False).findings == result.findings


def test_explain_shows_itself_as_html_and_as_the_commands_text(cli) -> None:  # type: ignore[no-untyped-def]
    result = tfgpu.explain(LOG, probe=False)
    _, out, _ = cli("explain", str(LOG), "--no-probe")
    assert str(result) == out
    page = result._repr_html_()
    top = result.findings[0]
    assert render_html.esc(top.id) in page
    assert render_html.esc(top.fix) in page


def test_explain_uses_the_facts_given_for_machine_specific_causes() -> None:
    result = tfgpu.explain(LOG, facts=MX150)
    assert any("facts in" in n for n in result.report.notes)


@pytest.mark.real_subprocess
def test_smoke_runs_this_python_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no environment named, the notebook's own interpreter (sys.executable) is tested, in a child process."""
    spawned: list[tuple[str, ...]] = []
    from tfgpu.core import process

    real = process._spawn

    def spy(argv, *args, **kwargs):  # type: ignore[no-untyped-def]
        spawned.append(tuple(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(process, "_spawn", spy)
    monkeypatch.setenv("PYTHONPATH", str(FAKE_TF))
    monkeypatch.setenv("FAKE_TF_GPUS", "1")
    result = tfgpu.smoke(probe=False)
    assert spawned
    assert spawned[0][0] == sys.executable
    assert result.passed is True
    assert result.document["mode"] == "gpu"
    assert "GPU OK" in str(result)
    assert "GPU OK" in result._repr_html_()


@pytest.mark.real_subprocess
def test_smoke_without_a_gpu_fails_unless_cpu_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FAKE_TF))
    monkeypatch.setenv("FAKE_TF_GPUS", "0")
    assert tfgpu.smoke(sys.executable, probe=False).passed is False
    allowed = tfgpu.smoke(sys.executable, probe=False, allow_cpu=True)
    assert allowed.passed is True
    assert "CPU only (allowed)" in str(allowed)


def test_plain_text_is_captured_inside_a_jupyter_kernel_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich sends a console's text to the notebook as display data when it detects a kernel, even for a console
    writing to a file: str() was empty in a real kernel (tests/unit/api/test_kernel.py found it)."""
    import rich.console

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    text = str(tfgpu.explain(LOG, probe=False))
    assert "cudnn.version_mismatch" in text
    assert "tfgpu doctor" in str(tfgpu.doctor(facts=MX150))
