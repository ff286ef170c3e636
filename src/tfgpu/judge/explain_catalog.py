"""compat/explain.toml -> the catalog explain matches with: entries, their compiled patterns, and the literal
words that let a line skip every pattern it cannot match."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tfgpu.core.errors import DataError
from tfgpu.core.record import field, record
from tfgpu.judge.explain_trigger import Clause, required_clauses

CATALOG_SCHEMA = "tfgpu.compat.explain/1"
SEVERITIES = ("fatal", "error", "warning", "info", "harmless")


@record
class Entry:
    """One catalog row, with its pattern compiled."""

    id: str
    severity: str
    rank: int
    pattern: re.Pattern[str]
    meaning: str
    cause: str
    fix: str
    sample: str
    source: str
    source_url: str
    source_title: str
    #: A literal every match contains (lower-cased when the pattern ignores case): a cheap prefilter.
    needle: str | None
    ignore_case: bool
    #: For a pattern that is a top-level alternation (``a|b|c``): one literal per branch; a line must contain
    #: one of them (``needle`` is None then, since no literal is common to every match).
    needles: tuple[str, ...] = ()


@record
class Catalog:
    entries: tuple[Entry, ...]
    #: Entries by a whole word every matching line contains (lower-cased), so a line is only tried
    #: against the entries whose word it has; ``always`` holds the entries without such a word.
    index: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict, compare=False, repr=False)
    always: tuple[Entry, ...] = field(default=(), compare=False, repr=False)
    words: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    #: Entries indexed under several words (one per branch of an alternation): tried once per line.
    multi: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    #: The clauses each entry's pattern requires (tfgpu.judge.explain_trigger): a line that satisfies no clause of an
    #: entry cannot match it. ``untriggered``: the entries without a clause (every line must be tried for them).
    clauses: tuple[tuple[Clause, ...], ...] = field(default=(), compare=False, repr=False)
    untriggered: tuple[str, ...] = field(default=(), compare=False, repr=False)


def _parser() -> Any:
    if sys.version_info >= (3, 11):
        import re._parser as parser
    else:  # pragma: no cover - Python < 3.11
        import sre_parse as parser
    return parser


def _literal_runs(pattern: str, flags: int = 0) -> list[str]:
    """The literal runs at the top level of a regex: every match contains each of them."""
    parser = _parser()
    try:
        parsed = parser.parse(pattern, flags)
    except Exception:  # pragma: no cover - re.compile already accepted it
        return []
    return _runs_of(parsed, parser.LITERAL)


def _runs_of(ops: Iterable[tuple[Any, Any]], literal: Any) -> list[str]:
    """The runs of consecutive literal characters in a parsed (sub)pattern."""
    runs, run = [], []
    for op, arg in ops:
        if op == literal:
            run.append(chr(arg))
            continue
        if run:
            runs.append("".join(run))
        run = []
    if run:
        runs.append("".join(run))
    return runs


def _branch_runs(pattern: str, flags: int = 0) -> list[list[str]] | None:
    """For a pattern that is one top-level alternation, the literal runs of each branch; else None."""
    parser = _parser()
    try:
        parsed = list(parser.parse(pattern, flags))
    except Exception:  # pragma: no cover - re.compile already accepted it
        return None
    if len(parsed) != 1 or parsed[0][0] != parser.BRANCH:
        return None
    return [_runs_of(branch, parser.LITERAL) for branch in parsed[0][1][1]]


def _needle(pattern: str, flags: int) -> str | None:
    """The longest literal run at the top level of a regex, if it is long enough to filter on."""
    best = max(_literal_runs(pattern, flags), key=len, default="")
    return best if len(best) >= 4 else None


def _format(template: str, groups: Mapping[str, str]) -> str:
    """Substitute ``{name}`` from the regex groups; unknown names stay as written."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        return groups.get(key, m.group(0)) if groups.get(key) is not None else m.group(0)

    return re.sub(r"\{(\w+)\}", sub, template)


def build_catalog(data: Mapping[str, Any], *, origin: str = "compat/explain.toml") -> Catalog:
    """Turn the parsed TOML into a :class:`Catalog`; refuses a malformed row naming it."""
    if data.get("schema") != CATALOG_SCHEMA:
        msg = f"{origin}: schema is {data.get('schema')!r}, expected {CATALOG_SCHEMA!r}"
        raise DataError(msg)
    sources = data.get("sources", {})
    out: list[Entry] = []
    seen: set[str] = set()
    for i, row in enumerate(data.get("entries", [])):
        where = f"{origin}: entry {i + 1} ({row.get('id', '?') if isinstance(row, dict) else '?'})"
        if not isinstance(row, dict):
            msg = f"{where}: not a table"
            raise DataError(msg)
        missing = [k for k in ("id", "severity", "rank", "pattern", "meaning", "cause", "fix", "source")
                   if k not in row]
        if missing:
            msg = f"{where}: missing {', '.join(missing)}"
            raise DataError(msg)
        if row["severity"] not in SEVERITIES:
            msg = f"{where}: severity {row['severity']!r} is not one of {', '.join(SEVERITIES)}"
            raise DataError(msg)
        if row["id"] in seen:
            msg = f"{where}: duplicate id"
            raise DataError(msg)
        seen.add(row["id"])
        try:
            rx = re.compile(row["pattern"])
        except re.error as exc:
            msg = f"{where}: bad pattern: {exc}"
            raise DataError(msg) from exc
        src = sources.get(row["source"], {})
        icase = bool(rx.flags & re.IGNORECASE)
        needle = _needle(row["pattern"], 0)
        needles: tuple[str, ...] = ()
        branches = _branch_runs(row["pattern"]) if needle is None else None
        if branches:
            best = [max(runs, key=len, default="") for runs in branches]
            if all(len(b) >= 4 for b in best):
                needles = tuple(b.lower() if icase else b for b in best)
        out.append(Entry(
            id=str(row["id"]), severity=str(row["severity"]), rank=int(row["rank"]), pattern=rx,
            meaning=str(row["meaning"]), cause=str(row["cause"]), fix=str(row["fix"]),
            sample=str(row.get("sample", "")), source=str(row["source"]),
            source_url=str(src.get("url", "")) if isinstance(src, dict) else "",
            source_title=str(src.get("title", "")) if isinstance(src, dict) else "",
            needle=(needle.lower() if icase and needle else needle), ignore_case=icase, needles=needles,
        ))
    entries = tuple(sorted(out, key=lambda e: (e.rank, e.id)))
    # how common each word is in real log lines (the entries' own samples): index by the rarest word
    common: dict[str, int] = {}
    for e in entries:
        for w in set(_WORD.findall(e.sample.lower())):
            common[w] = common.get(w, 0) + 1
    index: dict[str, list[Entry]] = {}
    always: list[Entry] = []
    multi: set[str] = set()
    for e in entries:
        word = _index_word(_literal_runs(e.pattern.pattern), common)
        if word is not None:
            index.setdefault(word, []).append(e)
            continue
        branches = _branch_runs(e.pattern.pattern)
        words = [_index_word(runs, common) for runs in branches] if branches else [None]
        if any(w is None for w in words):
            always.append(e)
            continue
        for w in dict.fromkeys(w for w in words if w is not None):
            index.setdefault(w, []).append(e)
        multi.add(e.id)
    clauses = tuple(tuple(required_clauses(e.pattern.pattern)) for e in entries)
    untriggered = tuple(e.id for e, c in zip(entries, clauses) if not c)
    return Catalog(entries, {w: tuple(es) for w, es in index.items()}, tuple(always), frozenset(index),
                   frozenset(multi), clauses, untriggered)


_WORD = re.compile(r"[a-z0-9_]+")


def _index_word(runs: Sequence[str], common: Mapping[str, int] | None = None) -> str | None:
    """A whole word inside one of the literal ``runs`` (lower-cased): one bounded by non-word characters
    of the run itself, so every line the entry matches has it as a token of ``_WORD``. The rarest such
    word in ``common`` (word -> how many sample lines have it), then the longest: "tensorflow" is in
    most lines."""
    inner = []
    for run in runs:
        low = run.lower()
        inner += [m.group() for m in _WORD.finditer(low) if m.start() > 0 and m.end() < len(low)]
    inner = [w for w in inner if len(w) >= 3]
    if not inner:
        return None
    freq = common or {}
    return min(inner, key=lambda w: (freq.get(w, 0), -len(w), w))


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped in compat/explain.toml (cached)."""
    from tfgpu.kb.knowledge import load_explain_data

    return build_catalog(load_explain_data())
