"""The facts of the doctor's last run on this machine, kept so that the next run can judge them while it probes.

Why: the console script's `tfgpu doctor` loads the knowledge base while its probe child reads the machine, then
waits for the child with nothing to do, then judges the facts (~8 ms with 8 GPUs, ~5 ms without a GPU) before it
can answer. It now judges the facts of its last run in that wait (tfgpu.api.doctor) and answers with that
judgement when this run's facts are the same in every value but the probes' timings. Judging is a pure function of
the facts, the knowledge base and the options, and it runs in this process on this run's knowledge base and
options, so the answer is exactly the one judging this run's facts gives; when anything differs (a new driver, an
environment variable, an installed package) the facts are judged again and remembered for the next run.

The file holds data only (tfgpu.kb.cache's tagged JSON, read only when it is safe to trust, never pickle), one per
Python environment: a pipx install and a project venv on one machine do not take turns replacing each other's.
``TFGPU_NO_CACHE=1`` turns it off with the knowledge base's cache; ``TFGPU_CACHE_DIR`` moves it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

#: The facts' only values that differ between two runs on an unchanged machine: how long each probe took.
VOLATILE = ("timings",)


def facts_file(env: Mapping[str, str] | None = None) -> Path | None:
    """Where this Python environment's doctor keeps the facts of its last run (None: caching is off)."""
    import sys
    import zlib

    from tfgpu.kb.cache import cache_dir

    folder = cache_dir(env)
    if folder is None:
        return None
    return folder / f"facts-{zlib.crc32(sys.prefix.encode('utf-8', 'surrogateescape')):08x}.json"


def previous(path: Path | None) -> dict[str, Any] | None:
    """The facts the last run remembered at ``path``; None when there are none, or they cannot be trusted or read
    (a file of another user, a symlink, a directory others can write, anything but what :func:`remember` wrote).
    Never raises, never prints: without them the doctor judges after probing, as it always did."""
    if path is None:
        return None
    from tfgpu.kb import cache

    try:
        facts = cache.decode(cache.read(path), {}, _refuse, _refuse)
    except (OSError, ValueError, cache.CacheRefused):
        return None
    return facts if isinstance(facts, dict) and facts.get("schema") == "tfgpu.facts/1" else None


def same(previous: Mapping[str, Any] | None, facts: Mapping[str, Any]) -> bool:
    """Pure: whether judging ``previous`` answers for ``facts``: every value equal but the probes' timings."""
    if previous is None:
        return False
    return _stable(previous) == _stable(facts)


def remember(path: Path | None, facts: Mapping[str, Any]) -> None:
    """Keep ``facts`` at ``path`` for the next run (written atomically; a read-only or full home is fine: the next
    run judges after probing)."""
    if path is None:
        return
    from tfgpu.kb import cache

    try:
        cache.write(path, cache.encode(dict(facts), {}))
    except (OSError, TypeError, ValueError, RecursionError, cache.CacheRefused):
        pass


def _stable(facts: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in facts.items() if key not in VOLATILE}


def _refuse(text: str) -> Any:
    """The facts hold no versions nor ranges: a file that does is not one :func:`remember` wrote."""
    raise ValueError(text)
