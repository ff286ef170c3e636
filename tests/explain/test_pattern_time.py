"""Every catalog pattern runs in linear time (issue 28): each is searched on 64 KB hostile lines built from its own
literals and must finish within 50 ms. A 4 KB line once took `loader.static_tls_other` 31 s (its nested ``\\S*``
runs backtracked cubically); the engine cuts lines at MAX_LINE_CHARS, the patterns must not rely on that."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tfgpu.judge import explain_catalog as excat

#: The longest hostile line and the time a pattern may take on it.
LINE_BYTES = 64 * 1024
BUDGET_S = 0.050


def literal_runs(pattern: str) -> list[str]:
    """Every run of literal characters anywhere in ``pattern`` (inside groups, branches, repeats, lookarounds)."""
    parser = excat._parser()
    runs: list[str] = []

    def walk(ops: object) -> None:
        run: list[str] = []
        for op, arg in ops:  # type: ignore[attr-defined]
            if op == parser.LITERAL:
                run.append(chr(arg))
                continue
            if run:
                runs.append("".join(run))
                run = []
            if op == parser.SUBPATTERN:
                walk(arg[-1])
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT", None)):
                walk(arg[2])
            elif op == parser.BRANCH:
                for branch in arg[1]:
                    walk(branch)
            elif op in (parser.ASSERT, parser.ASSERT_NOT):
                walk(arg[1])
            elif op == getattr(parser, "ATOMIC_GROUP", None):
                walk(arg)
        if run:
            runs.append("".join(run))

    walk(parser.parse(pattern))
    return runs


def hostile_pieces(entry: excat.Entry) -> list[str]:
    """What a hostile line repeats: each literal run, each run but its last character (a near miss), each of its
    characters alone, all runs glued together, and the entry's real sample with each run taken out in turn."""
    runs = [r for r in literal_runs(entry.pattern.pattern) if r]
    pieces = set(runs)
    pieces.update(r[:-1] for r in runs if len(r) > 1)
    pieces.update(c for r in runs for c in r)
    pieces.add("".join(runs))
    pieces.add(" ".join(runs))
    if entry.sample:
        pieces.add(entry.sample)
        pieces.add(entry.sample[:-1])
        pieces.update(entry.sample.replace(r, "", 1) for r in runs if r in entry.sample)
    return sorted(p for p in pieces if p.strip(" "))


def growing(piece: str) -> Iterator[str]:
    """``piece`` repeated to 16 bytes, then doubling up to LINE_BYTES: a pattern that is exponential or cubic fails on
    a short line long before a 64 KB one would hang the test run."""
    size = 16
    while True:
        yield (piece * (size // len(piece) + 1))[:size]
        if size >= LINE_BYTES:
            return
        size *= 2


def slowest(rx: re.Pattern[str], piece: str) -> tuple[float, int]:
    """(seconds, length) of the first line of ``growing(piece)`` that takes longer than the budget, else of the last."""
    took, size = 0.0, 0
    for line in growing(piece):
        best = float("inf")
        for _ in range(3):  # CPU time, the best of three runs: a busy machine must not fail a linear pattern
            start = time.process_time()
            rx.search(line)
            best = min(best, time.process_time() - start)
            if best <= BUDGET_S:
                break
        took, size = best, len(line)
        if took > BUDGET_S:
            break
    return took, size


ENTRIES = excat.load_catalog().entries


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_pattern_is_linear_on_hostile_lines(entry: excat.Entry) -> None:
    slow = []
    for piece in hostile_pieces(entry):
        took, size = slowest(entry.pattern, piece)
        if took > BUDGET_S:
            slow.append(f"{took * 1000:.0f} ms on {size} bytes of {piece[:40]!r}")
    assert not slow, f"{entry.id}: {'; '.join(slow[:3])}"


def test_hostile_lines_catch_a_cubic_pattern() -> None:
    """The test above catches what issue 28 found: the old `loader.static_tls_other` pattern."""
    old = r"(?P<lib>\S*/(?!\S*libgomp)\S+\.so[\d.]*): cannot allocate memory in static TLS block"
    entry = excat.build_catalog({"schema": excat.CATALOG_SCHEMA, "entries": [{
        "id": "old", "severity": "fatal", "rank": 1, "pattern": old, "meaning": "m", "cause": "c", "fix": "f",
        "source": "s", "sample": "x"}]}).entries[0]
    assert "/" in hostile_pieces(entry)
    took, size = slowest(entry.pattern, "/")
    assert took > BUDGET_S
    assert size < LINE_BYTES  # caught on a short line, so the test never hangs
