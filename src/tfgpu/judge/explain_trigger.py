"""The literals a line must contain to be worth matching: for every catalog pattern the clauses (sets of strings of
which each match contains one) read from the parsed regex, and the few regexes (one per starting character) that
find, in a large log, the lines that can give a finding, so the rest are only counted.

Why several regexes: Python's regex engine scans for a single literal first character with a tight loop (several
GB/s) but for a set of first characters with a per-character call (about 70 MB/s here). So each trigger string
starts with one of a few characters, chosen to be rare in logs and to cover every clause (a greedy set cover), and
each of those characters gets its own regex: that character, then a trie of what may follow it.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: A literal every match contains: (text, ignore case).
Literal = tuple[str, bool]
#: Alternatives: each match contains at least one of them.
Clause = tuple[Literal, ...]

#: A trigger string is at least this long (or the whole literal when that is shorter), at most TRIGGER_MAX.
TRIGGER_MIN = 5
TRIGGER_MAX = 16
#: Literals shorter than this filter too little to be a clause of their own.
LITERAL_MIN = 3
#: Occurrences per 10,000 characters of the real logs under tests/data (TensorFlow, CUDA and NVIDIA lines) and
#: Keras progress lines: how often a character makes a regex that starts with it try a match. Unlisted: 1.
CHAR_FREQ = {
    " ": 982, "\t": 100, '"': 11, "'": 9, "(": 13, ")": 14, "*": 18, ",": 27, "-": 207, ".": 213, "/": 225,
    ":": 272, ";": 5, "=": 477, ">": 8, "[": 17, "\\": 10, "]": 46, "_": 157,
    **dict.fromkeys("0123456789", 150),
    "A": 37, "B": 9, "C": 26, "D": 23, "E": 39, "F": 24, "G": 15, "H": 5, "I": 35, "K": 2, "L": 18, "M": 18,
    "N": 37, "O": 17, "P": 19, "R": 26, "S": 19, "T": 33, "U": 28, "V": 7, "W": 8, "X": 13, "Y": 10,
    "a": 392, "b": 74, "c": 400, "d": 200, "e": 508, "f": 120, "g": 59, "h": 88, "i": 293, "j": 13, "k": 22,
    "l": 342, "m": 148, "n": 280, "o": 466, "p": 151, "q": 1, "r": 381, "s": 355, "t": 346, "u": 232, "v": 89,
    "w": 59, "x": 41, "y": 95, "z": 7,
}
#: What one more regex costs the scan, in the same unit (a pass over the text that finds nothing).
PASS_COST = 40


def _parser() -> Any:
    if sys.version_info >= (3, 11):
        import re._parser as parser
    else:  # pragma: no cover - Python < 3.11
        import sre_parse as parser
    return parser


def required_clauses(pattern: str) -> list[Clause]:
    """Clauses every match of ``pattern`` satisfies (it contains one literal of each); [] when none is known.
    Literals of a part that ignores case are lower-cased and marked so."""
    parser = _parser()
    parsed = parser.parse(pattern)
    icase = bool(parsed.state.flags & re.IGNORECASE)
    return [c for c in _clauses(parsed, icase, parser) if all(len(text) >= LITERAL_MIN for text, _ in c)]


def _clauses(ops: Iterable[tuple[Any, Any]], icase: bool, parser: Any) -> list[Clause]:
    out: list[Clause] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            text = "".join(run)
            out.append((((text.lower() if icase else text), icase),))
            run.clear()

    for op, arg in ops:
        if op == parser.LITERAL:
            run.append(chr(arg))
            continue
        flush()
        if op == parser.SUBPATTERN:
            inner = (icase or bool(arg[1] & re.IGNORECASE)) and not arg[2] & re.IGNORECASE
            out += _clauses(arg[-1], inner, parser)
        elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT", None)):
            if arg[0] >= 1:
                out += _clauses(arg[2], icase, parser)
        elif op == parser.ASSERT and arg[0] == 1:  # a lookahead's text is in the line too
            out += _clauses(arg[1], icase, parser)
        elif op == parser.BRANCH:
            options: list[Literal] = []
            for branch in arg[1]:
                inner_clauses = [c for c in _clauses(branch, icase, parser)
                                 if all(len(text) >= LITERAL_MIN for text, _ in c)]
                if not inner_clauses:
                    options = []
                    break
                options += max(inner_clauses, key=lambda c: min(len(text) for text, _ in c))
            if options:
                out.append(tuple(dict.fromkeys(options)))
    flush()
    return out


@functools.lru_cache(maxsize=4096)
def _starts(lit: Literal) -> dict[frozenset[str], str]:
    """Where a trigger for ``lit`` may start: the characters (both cases of a letter when the literal ignores case)
    -> the trigger string that starts there (TRIGGER_MIN to TRIGGER_MAX characters of the literal)."""
    text, icase = lit
    need = min(TRIGGER_MIN, len(text))
    out: dict[frozenset[str], str] = {}
    for k in range(len(text) - need + 1):
        c = text[k]
        key = frozenset({c.lower(), c.upper()}) if icase and c.isalpha() else frozenset({c})
        out.setdefault(key, text[k:k + TRIGGER_MAX])
    return out


def _covered(unit: Sequence[Clause], chars: set[str] | frozenset[str]) -> bool:
    return any(all(any(key <= chars for key in _starts(lit)) for lit in clause) for clause in unit)


def choose_starts(units: Sequence[Sequence[Clause]]) -> frozenset[str]:
    """The characters the triggers start with: a greedy cover of every unit (a unit is covered when one of its
    clauses has a start among the characters for each of its literals), cheapest per unit covered first."""
    chosen: frozenset[str] = frozenset()
    left = {i for i, u in enumerate(units) if u}
    by_char: dict[str, set[int]] = {}  # character -> the units one of whose literals can start with it
    for i in left:
        for clause in units[i]:
            for lit in clause:
                for key in _starts(lit):
                    for c in key:
                        by_char.setdefault(c, set()).add(i)
    options = {key for i in left for clause in units[i] for lit in clause for key in _starts(lit)}
    while left:
        best: tuple[float, frozenset[str], set[int]] | None = None
        for key in options:
            new = key - chosen
            if not new:
                continue
            now = chosen | new
            near = set().union(*(by_char.get(c, set()) for c in new)) & left
            covers = {i for i in near if _covered(units[i], now)}
            cost = sum(PASS_COST + CHAR_FREQ.get(c, 1) for c in new)
            if covers and (best is None or (len(covers) / cost, sorted(key)) > (best[0], sorted(best[1]))):
                best = (len(covers) / cost, key, covers)
        if best is None:  # pragma: no cover - every literal has a start of its own
            break
        chosen |= best[1]
        left -= best[2]
    return chosen


def _trie_regex(words: Iterable[str]) -> str:
    """One alternation for ``words`` with shared prefixes factored out."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def emit(node: Mapping[str, Any]) -> str:
        if "" in node:  # a shorter word ends here: the line already qualifies
            return ""
        parts = [re.escape(c) + emit(child) for c, child in sorted(node.items())]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return emit(trie)


def trigger_patterns(units: Sequence[Sequence[Clause]], extra: Iterable[str] = ()) -> tuple[re.Pattern[str], ...]:
    """One regex per start character (:func:`choose_starts`): every unit's clause of the cheapest starts, as a trie of
    trigger strings, plus the ``extra`` regexes (each starts with a literal character: it joins that character's)."""
    starts = choose_starts(units)
    words: dict[str, set[str]] = {}  # start character -> the rest of each trigger string
    folded: dict[str, set[str]] = {}
    for unit in units:
        clause = next((c for c in unit if _covered([c], starts)), None)
        for lit in clause or ():
            key, text = min(((k, t) for k, t in _starts(lit).items() if k <= starts),
                            key=lambda kt: (sum(CHAR_FREQ.get(c, 1) for c in kt[0]), -len(kt[1])))
            if len(key) == 2:  # a letter of an ignore-case literal: both cases, the rest ignoring case too
                for c in key:
                    folded.setdefault(c, set()).add(text[1:])
            else:
                words.setdefault(text[0], set()).add(text[1:])
    by_start: dict[str, list[str]] = {}
    for c, rests in words.items():
        by_start.setdefault(c, []).append(_trie_regex(rests))
    for c, rests in folded.items():
        by_start.setdefault(c, []).append(f"(?i:{_trie_regex(rests)})")
    for rx in extra:
        by_start.setdefault(rx[0], []).append(rx[1:])
    out = []
    for c, tails in sorted(by_start.items()):
        body = "" if "" in tails else (tails[0] if len(tails) == 1 else "(?:" + "|".join(tails) + ")")
        out.append(re.compile(re.escape(c) + body))
    return tuple(out)
