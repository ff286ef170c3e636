"""Version specifiers as the knowledge base writes them (">=2.5,<2.12", "2.4.*", "any"): a small, memoised
replacement for packaging's SpecifierSet on the doctor's path, and Python version ranges."""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion, Version

from tfgpu.core.record import record
from tfgpu.kb.versions import version


class InvalidSpecifier(ValueError):
    """A version range in compat/ that is not a PEP 440 specifier set."""


_SPEC_RE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([0-9][0-9a-zA-Z.*+!-]*)\s*$")


#: The versions a knowledge-base range may name: final releases (N, N.N, N.N.N ...), optionally ==/!= X.*.
_FINAL_RE = re.compile(r"^[0-9]+(\.[0-9]+)*(\.\*)?$")


class VersionSpec:
    """A PEP 440 specifier set such as ">=2.4,<2.5" for the knowledge base's version ranges.

    packaging.specifiers would do, but importing it pulls packaging.tags and logging (~20 ms) into
    every `tfgpu doctor`; the tables only need comparisons of final releases, which this does.

    Its grammar is narrower than PEP 440's, so that it agrees with packaging.specifiers on everything it
    accepts: the versions in a range are final releases (no pre-, post-, dev-release, local version or
    epoch), and ``===`` (arbitrary equality) is refused (InvalidSpecifier). A version tested against a range
    that is not a plain final release (2.15.0.post1, 2.16.0rc0, 2.1+local) is decided by
    packaging.specifiers itself, imported only then (its rules for those are subtle: pre-releases are
    excluded, ``>V`` excludes V's post-releases, ``<V`` excludes V's pre-releases, ...)."""

    __slots__ = ("_clauses", "_memo", "_parsed", "_text")

    def __init__(self, text: str) -> None:
        clauses: list[tuple[str, str]] = []
        parsed: list[tuple[str, Version, bool]] = []
        for part in str(text).split(","):
            if not part.strip():
                continue
            m = _SPEC_RE.match(part)
            if not m:
                msg = f"{part.strip()!r} is not a version specifier"
                raise InvalidSpecifier(msg)
            op, ver = m.groups()
            if op == "===" or not _FINAL_RE.match(ver):
                msg = (f"{part.strip()!r}: tfgpu's ranges name final releases only (no ===, pre-, post- or "
                       "dev-release, local version or epoch)")
                raise InvalidSpecifier(msg)
            if op == "~=" and "." not in ver:
                msg = f"{part.strip()!r}: ~= needs at least two release components (~=2.0)"
                raise InvalidSpecifier(msg)
            if "*" in ver and (op not in ("==", "!=") or not ver.endswith(".*")):
                msg = f"{part.strip()!r}: a wildcard is only allowed as ==X.* or !=X.*"
                raise InvalidSpecifier(msg)
            try:
                parsed.append((op, version(ver[:-2] if ver.endswith(".*") else ver), ver.endswith(".*")))
            except InvalidVersion:
                msg = f"{part.strip()!r} is not a version specifier"
                raise InvalidSpecifier(msg) from None
            clauses.append((op, ver))
        self._clauses = tuple(clauses)
        self._text = ",".join(op + ver for op, ver in clauses)
        self._parsed = tuple(parsed)
        self._memo: dict[Version, bool] = {}

    def __contains__(self, item: object) -> bool:
        v = item if isinstance(item, Version) else Version(str(item))
        found = self._memo.get(v)
        if found is None:
            # post-releases (TF 2.15.0.post1 is a real release) follow the same ordering, with one PEP 440
            # exception handled in _clause_holds; pre/dev/local/epoch versions go to packaging itself
            if v.pre is None and v.dev is None and v.local is None and not v.epoch:
                found = all(_clause_holds(op, spec, wild, v) for op, spec, wild in self._parsed)
            else:
                from packaging.specifiers import SpecifierSet

                found = SpecifierSet(self._text).contains(v)
            self._memo[v] = found
        return found

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<VersionSpec({self._text!r})>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionSpec) and sorted(self._clauses) == sorted(other._clauses)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._clauses)))

    def __getstate__(self) -> tuple[str]:
        return (self._text,)

    def __setstate__(self, state: tuple[str]) -> None:
        self.__init__(state[0])  # type: ignore[misc]


def _release(v: Version, n: int) -> tuple[int, ...]:
    rel = tuple(v.release) + (0,) * max(0, n - len(v.release))
    return rel[:n]


def _clause_holds(op: str, spec: Version, wildcard: bool, v: Version) -> bool:
    if wildcard:  # ==X.Y.* / !=X.Y.*: spec is X.Y
        same = _release(v, len(spec.release)) == tuple(spec.release)
        return same if op == "==" else not same
    if op in ("==", "==="):
        return v == spec
    if op == "!=":
        return v != spec
    if op == ">=":
        return v >= spec
    if op == "<=":
        return v <= spec
    if op == ">":  # PEP 440: >V does not admit a post-release of V itself
        return v > spec and not (v.post is not None and spec.post is None and Version(v.base_version) == spec)
    if op == "<":
        return v < spec
    # ~=X.Y(.Z): >= X.Y(.Z) and == X.* (one release component less)
    n = max(1, len(spec.release) - 1)
    return v >= spec and _release(v, n) == _release(spec, n)


@record
class PyRange:
    """A Python range as the official tables write it, e.g. "2.7,3.3-3.7"."""

    text: str
    parts: tuple[tuple[Version, Version], ...]

    @classmethod
    def parse(cls, text: str) -> PyRange:
        parts = []
        for piece in _split(text):
            lo, _, hi = piece.partition("-")
            parts.append((version(lo), version(hi or lo)))
        if not parts:
            msg = f"empty Python range {text!r}"
            raise ValueError(msg)
        return cls(text, tuple(parts))

    @property
    def min(self) -> Version:
        return min(lo for lo, _ in self.parts)

    @property
    def max(self) -> Version:
        return max(hi for _, hi in self.parts)

    def contains(self, v: Version | str) -> bool:
        vv = version(str(v))
        key = Version(f"{vv.major}.{vv.minor}")
        return any(lo <= key <= hi for lo, hi in self.parts)

    def versions(self) -> list[str]:
        out: list[str] = []
        for lo, hi in self.parts:
            if lo.major != hi.major:
                msg = f"Python range {self.text!r} spans majors"
                raise ValueError(msg)
            out.extend(f"{lo.major}.{m}" for m in range(lo.minor, hi.minor + 1))
        return out


def _split(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(p.strip() for p in str(value or "").split(",") if p.strip())
