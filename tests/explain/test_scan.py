"""`tfgpu explain` reads every byte of a log (issue 27, section 4): no window at the start and end any more. The catalog's
triggers pick the lines worth matching; these tests prove the shortcut changes nothing (the same findings as matching
every line), that an error in the middle of a large log is found, and that memory stays bounded."""

from __future__ import annotations

import io
import random
import re
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from tfgpu.judge import explain as ex
from tfgpu.judge import explain_catalog as excat
from tfgpu.kb.parse import load_toml
from tfgpu.tools import explain as exread

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

LOGS = DATA / "logs"
EXPLAIN = DATA / "explain"
LINES = tomllib.loads((EXPLAIN / "lines" / "lines.toml").read_text(encoding="utf-8"))
#: The real cuDNN failure of tensorflow#40646 (tests/data/logs/SOURCES.md).
CUDNN_LOG = LOGS / "cudnn_internal_error_940mx_tf22.log"


def real_lines() -> list[str]:
    """Every real log line of the repository: catalog samples and also-lines, whole logs, rule lines, the excerpts of
    every explain batch (held-out ones too: the engine runs on them here, nobody reads them)."""
    out = [e.sample for e in excat.load_catalog().entries]
    for row in load_toml("explain")["entries"]:
        out += [item if isinstance(item, str) else item[0] for item in row.get("also", [])]
    for path in sorted([*LOGS.glob("*.log"), *(EXPLAIN / "recorded").glob("*.log")]):
        out += path.read_text(encoding="utf-8").splitlines()
    out += [x for table in LINES.values() if isinstance(table, dict) for x in table["lines"]]
    for path in sorted([*EXPLAIN.glob("batch*.toml"), *(EXPLAIN / "heldout").glob("heldout*.toml")]):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for excerpt in data.get("excerpt", []):
            out += excerpt["log"].splitlines()
    return [x for x in out if x.strip()]


REAL = real_lines()


def test_every_real_line_that_gives_a_finding_is_triggered() -> None:
    """The triggers are necessary conditions: a line any catalog entry, context fact or unrecognised kind acts on has
    a trigger in it (otherwise a large log would lose it)."""
    cat = excat.load_catalog()
    triggers = ex.line_triggers(cat)
    assert triggers is not None, f"entries without a literal to find them by: {cat.untriggered}"
    for raw in REAL:
        line = ex.normalize_line(raw)
        if ex.explain_lines([raw]) or any(needle in line for needle, _ in ex._CONTEXT.values()):
            assert any(rx.search(raw) for rx in triggers), raw


def test_every_entry_has_a_literal_to_be_found_by() -> None:
    assert not excat.load_catalog().untriggered


def test_each_trigger_starts_with_one_literal_character() -> None:
    """So the regex engine scans for it with a fast loop rather than a character set (tfgpu.judge.explain_trigger)."""
    from tfgpu.judge.explain_trigger import _parser

    parser = _parser()
    triggers = ex.line_triggers(excat.load_catalog())
    assert triggers
    for rx in triggers:
        assert parser.parse(rx.pattern)[0][0] == parser.LITERAL, rx.pattern[:40]
    assert len(triggers) <= 24


def _whole_and_line_by_line(text: str, chunk: int) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    old = exread._CHUNK
    try:
        exread._CHUNK = chunk
        report = exread.explain_stream(io.BytesIO(text.encode()))
    finally:
        exread._CHUNK = old
    lines = re.split(r"\r\n|\n", text)
    slow = ex.explain_lines(lines)
    return [(f.id, f.line, f.count) for f in report.findings], [(f.id, f.line, f.count) for f in slow]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(REAL), min_size=1, max_size=60), st.integers(1, 4096), st.sampled_from(["\n", "\r\n"]),
       st.randoms(use_true_random=False))
def test_triggered_reading_gives_what_matching_every_line_gives(lines: list[str], chunk: int, newline: str,
                                                                rnd: random.Random) -> None:
    # real lines, some with a time stamp of their own, some repeated: the remembered analyses must not leak
    stamped = [f"2024-0{rnd.randint(1, 9)}-1{rnd.randint(0, 9)} 0{rnd.randint(0, 9)}:1{rnd.randint(0, 9)}:00.{rnd.randint(0, 999999):06d}: {x}"
               if rnd.random() < 0.3 else x for x in lines]
    fast, slow = _whole_and_line_by_line(newline.join(stamped) + newline, chunk)
    assert fast == slow


def filler_lines(rnd: random.Random) -> Iterator[str]:
    """A training log from real harmless lines: Keras progress lines of tensorflow#47249 with the epoch and loss
    advancing, and the harmless TensorFlow start-up lines of tests/data/logs/harmless_only_tf215.log now and then."""
    epoch_line, step_line = LINES["progress_glued"]["lines"][0], LINES["progress_glued"]["lines"][1]
    startup = (LOGS / "harmless_only_tf215.log").read_text(encoding="utf-8").splitlines()
    epoch = 0
    while True:
        epoch += 1
        yield epoch_line.replace("739", str(epoch))
        yield step_line.replace("0.0245", f"0.{rnd.randint(0, 9999):04d}")
        if epoch % 500 == 0:
            yield from startup


def write_log(path: Path, size: int, error_at: int) -> int:
    """A log of ``size`` bytes with the real cuDNN failure at byte ``error_at``; returns that failure's line number."""
    rnd = random.Random(27)
    failure = CUDNN_LOG.read_text(encoding="utf-8")
    written, lineno, error_line = 0, 0, 0
    with path.open("w", encoding="utf-8") as fh:
        for line in filler_lines(rnd):
            if not error_line and written >= error_at:
                fh.write(failure)
                error_line = lineno + 1 + failure.splitlines().index(
                    next(x for x in failure.splitlines() if "CUDNN_STATUS_INTERNAL_ERROR" in x))
                written += len(failure)
                lineno += failure.count("\n")
            if written >= size:
                break
            fh.write(line + "\n")
            written += len(line) + 1
            lineno += 1
    return error_line


def _error_in_the_middle(tmp_path: Path, size: int) -> None:
    path = tmp_path / "train.log"
    error_line = write_log(path, size, size // 2)
    tracemalloc.start()
    try:
        report = exread.explain_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    hit = next(f for f in report.findings if f.id == "cudnn.handle_error")
    assert hit.line == error_line  # real line numbers: every line before it was counted
    assert hit.count == 2
    assert ex.top_finding(report.findings) is hit
    assert report.bytes_read == path.stat().st_size
    assert report.lines == path.read_bytes().count(b"\n")
    assert not report.notes
    assert peak < 32 * 1024 * 1024, f"peak {peak / 1048576:.0f} MB"


def test_error_in_the_middle_of_a_log_is_found(tmp_path: Path) -> None:
    _error_in_the_middle(tmp_path, 8 * 1024 * 1024)


@pytest.mark.slow
def test_error_at_50_mb_of_a_100_mb_log_is_found(tmp_path: Path) -> None:
    """Issue 27: a real cuDNN error at 50 MB of a 100 MB log once gave "No problem: only harmless lines"."""
    _error_in_the_middle(tmp_path, 100 * 1024 * 1024)


class _Pipe(io.BytesIO):
    def seekable(self) -> bool:
        return False


def test_a_pipe_is_read_up_to_its_bound_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exread, "MAX_READ_BYTES", 64 * 1024)
    failure = CUDNN_LOG.read_bytes()
    early = exread.explain_stream(_Pipe(failure + b"x\n" * 64 * 1024))
    assert early.bytes_read == 64 * 1024
    assert "cudnn.handle_error" in [f.id for f in early.findings]
    assert any("stopped reading" in n for n in early.notes)
    exact = exread.explain_stream(_Pipe(b"x\n" * 32 * 1024))  # exactly the bound: nothing was left unread
    assert not exact.notes


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_large_utf16_log_is_read_whole(encoding: str) -> None:
    """PowerShell's `>` writes UTF-16 with a BOM; its middle is read like the rest."""
    text = "".join(line + "\r\n" for line, _ in zip(filler_lines(random.Random(1)), range(20_000)))
    text += CUDNN_LOG.read_text(encoding="utf-8").replace("\n", "\r\n")
    text += "".join(line + "\r\n" for line, _ in zip(filler_lines(random.Random(2)), range(20_000)))
    raw = text.encode("utf-16") if encoding == "utf-16" else b"\xfe\xff" + text.encode("utf-16-be")
    report = exread.explain_stream(io.BytesIO(raw))
    hit = next(f for f in report.findings if f.id == "cudnn.handle_error")
    assert text.splitlines()[hit.line - 1] == hit.text
    assert report.lines == text.count("\n")


def test_a_long_line_in_the_middle_of_a_chunk_is_noted() -> None:
    """The note says lines were cut wherever the long line falls, also inside a chunk read at once."""
    text = "short line\n" + "y" * (ex.MAX_LINE_CHARS + 1) + "\nanother\n"
    report = exread.explain_stream(io.BytesIO(text.encode()))
    assert any("were cut" in n for n in report.notes)
    redrawn = "short line\n" + "\r".join(["z" * 100] * 200) + "\nanother\n"  # a progress bar: segments are short
    assert not exread.explain_stream(io.BytesIO(redrawn.encode())).notes


def test_an_unknown_error_line_of_another_tool_is_found_inside_a_chunk() -> None:
    """uv's `error:` has no capital to trigger on: its trigger starts with the newline before it, and the line after
    that newline is the one fed (not the one before)."""
    filler = "".join(line + "\n" for line, _ in zip(filler_lines(random.Random(5)), range(2000)))
    text = filler + "error: the lock file is stale, run uv lock again\n" + filler  # no other trigger in it
    report = exread.explain_stream(io.BytesIO(text.encode()))
    (hit,) = [f for f in report.findings if f.id == "unrecognised.tool_error"]
    assert hit.line == filler.count("\n") + 1
    assert hit.text.startswith("error: the lock file")
