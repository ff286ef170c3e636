"""Findings that say the same thing, grouped for reading (issue 29): six missing CUDA 10.0 libraries are one problem with
one fix, four GPUs registered are one good sign. Pure: findings in, groups out; the JSON keeps every finding."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from tfgpu.core.record import record


class LogFinding(Protocol):
    """What grouping reads of a finding (tfgpu.judge.explain.LogFinding, which imports this module)."""

    @property
    def id(self) -> str: ...

    @property
    def severity(self) -> str: ...

    @property
    def line(self) -> int: ...

    @property
    def count(self) -> int: ...

    @property
    def text(self) -> str: ...

    @property
    def meaning(self) -> str: ...

    @property
    def cause(self) -> str: ...

    @property
    def fix(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def groups(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def harmless(self) -> bool: ...

    @property
    def unrecognised(self) -> bool: ...

    @property
    def problem(self) -> bool: ...


@record
class FindingGroup:
    """Findings of one family with one fix (problems) or of one id (information), in the order of the first."""

    members: tuple[LogFinding, ...]

    @property
    def head(self) -> LogFinding:
        return self.members[0]

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({f.line for f in self.members}))

    @property
    def count(self) -> int:
        return sum(f.count for f in self.members)

    @property
    def meaning(self) -> str:
        """The first finding's meaning, and what the others add: the values their groups differ in (the libraries
        of six dlopen lines), else their ids."""
        head = self.head
        others = self.members[1:]
        if not others:
            return head.meaning
        keys = [k for k, _ in head.groups]
        varying = [k for k in keys if all(any(k == k2 for k2, _ in f.groups) for f in others)
                   and len({dict(f.groups)[k] for f in self.members}) > 1]
        if varying:
            key = varying[0]
            values = list(dict.fromkeys(dict(f.groups)[key] for f in others if dict(f.groups)[key] != dict(head.groups)[key]))
            return f"{head.meaning} The same for {_join(values)}."
        return f"{head.meaning} Also: {_join(list(dict.fromkeys(f.id for f in others if f.id != head.id)))}."

    def lines_text(self) -> str:
        return _ranges(self.lines)

    def to_json(self, number: int) -> dict[str, Any]:
        return {"group": number, "ids": list(dict.fromkeys(f.id for f in self.members)), "lines": list(self.lines),
                "count": self.count, "severity": self.head.severity, "meaning": self.meaning, "fix": self.head.fix}


def _join(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "the other lines"


def _ranges(numbers: Sequence[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5"."""
    out: list[str] = []
    start = prev = None
    for n in numbers:
        if prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    if start is not None:
        out.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def _family(fid: str) -> str:
    return fid.split(".", 1)[0]


def group_key(f: LogFinding) -> tuple[str, ...]:
    """Problems of one family whose fix is the same text are one group; information of one id is one group; every
    unrecognised line and every harmless id stays a group of its own."""
    if f.unrecognised:
        return ("u", f.id, f.key)
    if f.problem:
        return ("p", _family(f.id), re.sub(r"\s+", " ", f.fix))
    return ("i", f.id)


def group_findings(findings: Iterable[LogFinding]) -> list[FindingGroup]:
    """The findings (already in explain's order) as groups, each where its first member is."""
    order: dict[tuple[str, ...], list[LogFinding]] = {}
    for f in findings:
        order.setdefault(group_key(f), []).append(f)
    return [FindingGroup(tuple(members)) for members in order.values()]


def first_sentence(text: str) -> str:
    """The first sentence of a cause (up to the first full stop followed by a capital), for the short notes."""
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z(])", text)
    return text[: m.start()] if m else text
