"""The explain engine's rules (issue 15, section 2) on real lines (tests/data/explain/lines, SOURCES.md):
generic findings for unknown error lines, the summary choice, context across lines, `\\r` splitting,
the real end of large inputs, and cause texts that agree with the log's library versions."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import DATA
from tfgpu.judge import explain as ex
from tfgpu.judge import explain_catalog as excat
from tfgpu.judge import explain_refine as exref
from tfgpu.tools import explain as exread

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

LINES: dict[str, Any] = tomllib.loads((DATA / "explain" / "lines" / "lines.toml").read_text(encoding="utf-8"))
LOGS = DATA / "logs"
#: An empty catalog: what the engine does with lines nobody has catalogued, independent of compat/.
EMPTY = excat.build_catalog({"schema": excat.CATALOG_SCHEMA, "entries": []})


def lines(name: str) -> list[str]:
    out: list[str] = LINES[name]["lines"]
    return out


def catalog_sample(entry_id: str) -> str:
    return next(e.sample for e in excat.load_catalog().entries if e.id == entry_id)


# ------------------------------------------------------------------------ nothing fatal passes silently


@pytest.mark.parametrize(
    ("name", "index", "kind", "severity", "key"),
    [
        ("illegal_address", 0, "cuda_error", "error", "CUDA_ERROR_ILLEGAL_ADDRESS"),
        ("illegal_address", 2, "tf_log", "fatal", "Unexpected Event status: 1"),
        ("check_failed", 1, "check_failed", "fatal", "Check failed: status == CUDNN_STATUS_SUCCESS (7 vs. 0)Failed"),
        ("exception", 0, "exception", "error", "InternalError: CUDA runtime implicit initialization on GPU:0 failed"),
        ("numpy_exception", 0, "exception", "error", "AttributeError: module 'numpy' has no attribute 'object'"),
        ("nvrm", 0, "nvrm", "error", "NVRM: GPU RmInitAdapter failed!"),
        ("xid", 0, "nvrm", "error", "NVRM: Xid 13"),
        ("tf_log", 0, "tf_log", "error", "layout failed: INVALID_ARGUMENT: Size of values 0 does not match size of"),
        ("llvm_error", 0, "tool_error", "fatal", "LLVM ERROR: ptx87 is required for target sm_120"),
        ("uv_error", 0, "tool_error", "error", "error: Distribution tensorflow-cpu==2.15.0 @"),
        ("pip_error", 0, "tool_error", "error", "ERROR: pip's dependency resolver does not currently take into account"),
    ],
)
def test_unknown_error_lines_get_a_generic_finding(name: str, index: int, kind: str, severity: str, key: str) -> None:
    line = lines(name)[index]
    (f,) = ex.explain_lines([line], catalog=EMPTY)
    assert f.id == f"unrecognised.{kind}"
    assert f.severity == severity
    assert f.key.startswith(key)
    assert f.text == ex._cut(line)  # the line itself (cut to TEXT_CHARS)
    assert "tfgpu does not know" in f.meaning
    assert f.key in f.fix  # what to search for
    assert f.to_json()["key"] == f.key


def test_info_warning_and_ordinary_lines_get_no_generic_finding() -> None:
    quiet = [lines("driver_hint")[0], lines("progress_glued")[1], catalog_sample("info.gpu_device_created")]
    assert ex.explain_lines(quiet, catalog=EMPTY) == []


def test_known_lines_are_not_reported_twice() -> None:
    # a catalog entry that knows the line wins; the generic finding is only for what nobody knows
    known = ex.explain_lines([catalog_sample("cudnn.handle_error")])
    assert [f.id for f in known] == ["cudnn.handle_error"]


def test_generic_findings_are_bounded_and_counted() -> None:
    many = [f"E tensorflow/core/x.cc:1] problem number {word}" for word in
            ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "one", "two", "three"]]
    col = ex._Collector(EMPTY, None)
    for n, line in enumerate([*many, many[0]], 1):
        col.feed(n, line)
    found = col.result()
    assert len(found) == ex.MAX_UNRECOGNISED
    assert found[0].count == 2
    assert col.notes() == [f"{len(many) - ex.MAX_UNRECOGNISED} more unrecognised error line(s) are not listed "
                           f"(at most {ex.MAX_UNRECOGNISED} distinct ones are)"]


def test_search_key_drops_what_differs_between_machines() -> None:
    assert ex._search_key("failed at 0x00007FFA1C753DA5 in /home/u/x.py line 1234567") == "failed at in line"
    assert ex._search_key("GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)") == "GPU RmInitAdapter failed!"
    assert ex._search_key("on gpu-node-17.example: x") == "on gpu-node-17.example: x"  # names stay whole


# ------------------------------------------------------------------------------------- the summary


def test_good_sign_is_never_the_summary_when_an_error_exists() -> None:
    log = [catalog_sample("info.gpu_device_created"), *lines("illegal_address")]
    findings = ex.explain_lines(log)
    top = ex.top_finding(findings)
    assert top is not None
    assert top.severity in ("fatal", "error")
    assert "Good sign" not in top.meaning
    assert findings[0] is top  # the table's first row is the summary
    assert exread.explain_file(io.BytesIO("\n".join(log).encode())).to_json()["summary"] == top.id


def _findings(ids: list[str], severities: tuple[str, ...]) -> st.SearchStrategy[ex.LogFinding]:
    return st.builds(
        ex.LogFinding, id=st.sampled_from(ids), severity=st.sampled_from(severities),
        rank=st.integers(1, 210), line=st.integers(1, 9), text=st.just("t"), meaning=st.just("m"),
        cause=st.just("c"), fix=st.just("f"), source=st.just("s"),
    )


finding_strategy = st.one_of(
    _findings(["a.x", "b.y", "info.gpu_device_created", "harmless.z"], excat.SEVERITIES),
    _findings(["unrecognised.tf_log", "unrecognised.cuda_error"], ("fatal", "error")),
)


@given(st.lists(finding_strategy, max_size=8))
def test_top_finding_prefers_problems(findings: list[ex.LogFinding]) -> None:
    top = ex.top_finding(findings)
    if not findings:
        assert top is None
        return
    assert top is not None
    problems = [f for f in findings if f.problem]
    if problems:
        assert top.problem
        known = [f for f in problems if not f.unrecognised]
        if known:
            assert not top.unrecognised
            assert top.rank == min(f.rank for f in known)
    elif any(f.severity == "info" for f in findings):
        assert top.severity == "info"


# ------------------------------------------------------------------------------------- log context


def test_driver_hint_turns_a_cudnn_failure_into_a_driver_cause() -> None:
    findings = ex.explain_lines(lines("driver_hint"))
    cudnn = next(f for f in findings if "cudnn handle" in f.text)
    assert "possibly insufficient driver version: 384.145.0" in cudnn.cause
    assert "driver 384.145.0 is too old" in cudnn.cause
    assert "memory" not in cudnn.fix
    assert not any(f.id == "unrecognised.tf_log" and "insufficient driver" in f.text for f in findings)
    top = ex.top_finding(findings)  # whichever finding sums the log up, it names the driver, not memory
    assert top is not None
    assert "driver 384.145.0 is too old" in top.cause


def test_driver_hint_alone_is_still_reported() -> None:
    findings = ex.explain_lines(lines("driver_hint_alone"), catalog=EMPTY)
    assert [f.id for f in findings] == ["unrecognised.tf_log"]


def test_cudnn_mismatch_names_both_versions_and_the_loaded_one() -> None:
    mismatch = next(x for x in (LOGS / "cudnn_version_mismatch_tf26.log").read_text(encoding="utf-8").splitlines()
                    if "Loaded runtime CuDNN library" in x)
    findings = ex.explain_lines([catalog_sample("info.cudnn_loaded"), mismatch])
    f = next(f for f in findings if mismatch.strip().startswith(f.text[:100]))
    assert f.cause.startswith("In this log cuDNN 8.0.4 is loaded at run time while TensorFlow was compiled with "
                              "cuDNN 8.1.0 (the loaded one is older). Line 1 reports cuDNN 8.2.0 loaded.")


@pytest.mark.parametrize(
    ("text", "version"),
    [("8.1.0", (8, 1, 0)), ("7301", (7, 3, 1)), ("5110", (5, 1, 10)), ("8904", (8, 9, 4)), ("9", (9,))],
)
def test_cudnn_versions_in_both_wordings(text: str, version: tuple[int, ...]) -> None:
    assert exref.cudnn_version(text) == version


@given(st.integers(1, 9), st.integers(0, 9), st.integers(0, 99))
def test_cudnn_integer_form_round_trips(major: int, minor: int, patch: int) -> None:
    assert exref.cudnn_version(str(major * 1000 + minor * 100 + patch)) == (major, minor, patch)


def test_cause_texts_agree_with_the_library_version_in_the_log() -> None:
    (f,) = ex.explain_lines(lines("cusolver_10"))
    assert "libcusolver.so.10" in f.meaning
    for text in (f.meaning, f.cause, f.fix):
        assert "libcusolver.so.11" not in text
    line = lines("cusolver_10")[0]
    kept = exref.consistent_with_line("It wants libcusolver.so.10 here. Newer ones ask for libcusolver.so.11 instead.", line)
    assert kept == "It wants libcusolver.so.10 here."


# --------------------------------------------------------------------------------- reading the input


def test_error_glued_after_a_long_progress_bar_is_found() -> None:
    head = lines("progress_glued")
    bar = head[1]
    redrawn = "\r".join([bar] * (2 * ex.MAX_LINE_CHARS // len(bar) + 1))  # Keras redraws with \r
    assert len(redrawn) > ex.MAX_LINE_CHARS
    data = "\n".join([head[0], redrawn + "\r" + head[3], "done"]).encode()
    report = exread.explain_stream(io.BytesIO(data))
    hit = [f for f in report.findings if "CUDA_ERROR_ILLEGAL_ADDRESS" in f.text]
    assert hit
    assert hit[0].line == 2  # \r splits segments, not lines
    assert report.lines == 3
    assert not any("cut" in n for n in report.notes)


# ------------------------------------------------------------------- TensorFlow >= 2.16 on this machine


@pytest.mark.parametrize("name", ["tf221_no_gpu_import.log", "tf220_no_gpu_import.log"])
def test_recorded_tf_without_gpu_is_explained(name: str) -> None:
    """The cuInit 303 line of TF 2.20/2.21 (recorded here, tests/data/explain/recorded/SOURCES.md) is known,
    nothing is left unrecognised, and with this machine's facts the cause names the missing driver."""
    facts = {"driver": {"version": None, "error": "no NVIDIA driver"}, "gpus": []}
    report = exread.explain_file(DATA / "explain" / "recorded" / name, facts=facts)
    assert not [f for f in report.findings if f.unrecognised]
    cuinit = [f for f in report.findings if "cuInit" in f.text]
    assert cuinit
    assert "No NVIDIA driver is loaded on this machine" in cuinit[0].cause
    top = ex.top_finding(report.findings)
    assert top is not None
    assert top.problem


def test_word_index_finds_exactly_what_trying_every_entry_finds() -> None:
    """The catalog's word index is only a shortcut: on every real line we have (the catalog's samples,
    the whole logs, these rule lines) it matches the same entries as trying each pattern."""
    cat = excat.load_catalog()
    corpus = [e.sample for e in cat.entries]
    corpus += [x for p in sorted(LOGS.glob("*.log")) for x in p.read_text(encoding="utf-8").splitlines()]
    corpus += [x for table in LINES.values() if isinstance(table, dict) for x in table["lines"]]
    for line in corpus:
        brute = sorted(e.id for e in cat.entries if e.pattern.search(line))
        assert sorted(e.id for e, *_ in ex._match_line(cat, line)) == brute, line


def test_redact_also_cleans_the_search_key(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import json
    import socket

    host = "gpu-node-17.example"
    monkeypatch.setattr(socket, "gethostname", lambda: host)
    monkeypatch.setattr(ex, "load_catalog", lambda: EMPTY)  # the line stays unrecognised whatever compat/ knows
    # the real line of tensorflow#59578 with a host name in its message
    line = lines("tf_log")[0].replace("layout failed:", f"layout failed on {host}:")
    log = tmp_path / "tf.log"
    log.write_text(line + "\n", encoding="utf-8")
    code, out, _ = cli("explain", str(log), "--json", "--no-probe", "--redact")
    assert code == 0
    doc = json.loads(out)
    assert doc["findings"][0]["id"] == "unrecognised.tf_log"
    assert host not in out
    assert "<host>" in doc["findings"][0]["key"]


def test_alternation_entries_are_indexed_per_branch_and_tried_once() -> None:
    """A pattern that is a top-level alternation has no literal common to all matches: it is indexed under
    one word per branch (or pre-filtered by one literal per branch) instead of being tried on every line,
    and a line that has the words of several branches still yields the entry once."""
    cat = excat.load_catalog()
    entry = next(e for e in cat.entries if e.id == "container.unknown_runtime_nvidia")
    assert entry.needle is None
    assert len(entry.needles) == 2
    assert entry.id in cat.multi
    assert entry not in cat.always
    both = ("docker: Error response from daemon: unknown or invalid runtime name: nvidia. "
            "docker: Error response from daemon: Unknown runtime specified nvidia.")
    assert [e.id for e, *_ in ex._match_line(cat, both)].count(entry.id) == 1
    sigill = next(e for e in cat.entries if e.id == "cpu.illegal_instruction")
    assert sigill.needles  # no index word in 'exit code 132', but a literal per branch
    assert not ex._match_line(cat, "Process finished with exit code 0")
