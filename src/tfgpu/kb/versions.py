"""Version helpers shared by the knowledge base (tfgpu.kb.knowledge) and the verdicts (tfgpu.judge.verdict), in a module
of their own so that neither has to import the other for them."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def version(text: str) -> Version:
    """Parse a version such as "12.4" or "550.54.15" (raises InvalidVersion). Memoized: versions are
    immutable, and the verdicts parse the same few dozen strings hundreds of times."""
    key = str(text).strip()
    found = _PARSED.get(key)
    if found is None:
        if len(key) > 64:  # no real version is this long; a 5,000-digit number would not even convert
            msg = f"Invalid version: {key[:20]!r}... ({len(key)} characters)"
            raise InvalidVersion(msg)
        found = Version(key)
        if len(_PARSED) < 4096:  # bounded: user input passes through here too
            _PARSED[key] = found
    return found


_PARSED: dict[str, Version] = {}


def series_of(v: Version) -> str:
    """2.15.1 -> "2.15" (memoized: the verdicts ask for the same few dozen versions thousands of times)."""
    found = _SERIES.get(v)
    if found is None:
        release = v.release
        found = _SERIES[v] = f"{release[0]}.{release[1] if len(release) > 1 else 0}"
    return found


_SERIES: dict[Version, str] = {}


def version_text(v: Version | str) -> str:
    """str(v), memoized: packaging builds the string anew on every call, and the knowledge base's indexes are
    keyed by it (a doctor run on a GPU machine formats the same few dozen versions thousands of times)."""
    if isinstance(v, str):
        return v
    found = _TEXT.get(v)
    if found is None:
        found = str(v)
        if len(_TEXT) < 4096:
            _TEXT[v] = found
    return found


_TEXT: dict[Version, str] = {}


def normalize_cuda(text: str) -> str:
    """TensorFlow's table writes CUDA "8", "9", "10.0": make it MAJOR.MINOR."""
    text = str(text).strip()
    return text if "." in text else f"{text}.0"


#: The kinds of target `--tf` takes (Target.kind).
RELEASE, SERIES, LATEST = "release", "series", "latest"


class Target:
    """What `--tf` asks for, parsed once: a release ("2.2.0"), a series ("2.2") or ``latest``. Only the syntax
    is checked here; whether the knowledge base knows it is the knowledge base's answer (KnowledgeBase.resolve_tf),
    and what ``latest`` means here is the recommendation's (tfgpu.judge.target.resolve_latest)."""

    __slots__ = ("kind", "text")

    def __init__(self, text: str, kind: str) -> None:
        self.text, self.kind = text, kind

    @classmethod
    def parse(cls, text: str) -> Target:
        """``text`` as typed (surrounding spaces ignored) -> a Target; InvalidVersion when it is none of the three."""
        raw = str(text).strip()
        if raw == LATEST:
            return cls(raw, LATEST)
        version(raw)  # raises InvalidVersion (too long, not PEP 440)
        return cls(raw, SERIES if len(raw.split(".")) == 2 else RELEASE)

    @property
    def is_series(self) -> bool:
        return self.kind == SERIES

    @property
    def is_latest(self) -> bool:
        return self.kind == LATEST

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and (self.text, self.kind) == (other.text, other.kind)

    def __hash__(self) -> int:
        return hash((self.text, self.kind))

    def __repr__(self) -> str:
        return f"Target({self.text!r}, {self.kind!r})"

    def __str__(self) -> str:
        return self.text
