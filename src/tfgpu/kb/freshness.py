"""Pure: how old the knowledge in use is, and whether this machine has a TensorFlow newer than it knows. The
doctor says so once (one note), and never fetches anything itself: `tfgpu kb update` does, when asked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import datetime as _dt

from packaging.version import InvalidVersion, Version

#: Knowledge older than this is worth updating: TensorFlow, CUDA, cuDNN and the driver branches move monthly.
STALE_DAYS = 90
#: The distributions whose installed version says which TensorFlow this environment has.
_TF_DISTS = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-intel", "tf-nightly")


def age_days(date: str, today: _dt.date | tuple[int, int, int]) -> int | None:
    """Days from the data's date (YYYY-MM-DD, compat/meta.toml) to ``today`` (a date, or its (year, month, day));
    None when the date is unreadable. (Counted here rather than with :mod:`datetime`, whose import was ~1.5 ms of
    every `tfgpu doctor`: the same answer as ``(today - date.fromisoformat(date)).days``, a property test checks.)"""
    try:
        if len(date) != 10 or date[4] != "-" or date[7] != "-" or not date.replace("-", "").isdigit():
            return None
        then = day_number(int(date[:4]), int(date[5:7]), int(date[8:]))
        now = day_number(*today) if isinstance(today, tuple) else day_number(today.year, today.month, today.day)
    except (TypeError, ValueError, AttributeError):
        return None
    return now - then


def day_number(year: int, month: int, day: int) -> int:
    """The proleptic Gregorian ordinal of a date (``datetime.date.toordinal``); ValueError for a date that is none."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not (1 <= year <= 9999 and 1 <= month <= 12 and 1 <= day <= _MONTH_DAYS[month] + (month == 2 and leap)):
        msg = f"no such date: {year}-{month}-{day}"
        raise ValueError(msg)
    before = year - 1
    days_before_year = before * 365 + before // 4 - before // 100 + before // 400
    return days_before_year + _DAYS_BEFORE_MONTH[month] + (month > 2 and leap) + day


_MONTH_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DAYS_BEFORE_MONTH = (0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def newest_known(versions: Iterable[Version]) -> Version | None:
    """The newest TensorFlow release the knowledge has a row for."""
    return max(versions, default=None)


def newer_installed(installed: Iterable[Any], known: Version | None) -> str | None:
    """"tensorflow 2.22.0" when an installed TensorFlow (facts["tensorflow"]) is newer than ``known``."""
    if known is None:
        return None
    for item in installed:
        if not isinstance(item, Mapping):  # a facts file is someone else's: anything may be there
            continue
        dist = str(item.get("distribution") or "")
        try:
            v = Version(str(item.get("version") or ""))
        except InvalidVersion:
            continue
        if dist in _TF_DISTS and Version(v.base_version) > known:
            return f"{dist} {v}"
    return None


def knowledge_note(*, date: str, age: int | None, newer: str | None, known: Version | None) -> str | None:
    """The one note the doctor gives about its knowledge, or None when nothing needs saying."""
    reasons = []
    if age is not None and age > STALE_DAYS:
        reasons.append(f"tfgpu's knowledge is {age} days old (data of {date})")
    if newer is not None:
        reasons.append(f"{newer} is installed here, newer than any release it knows ({known})")
    if not reasons:
        return None
    return "; ".join(reasons) + ": its verdicts may miss newer TensorFlow, CUDA, cuDNN or driver releases. " \
        "Fetch newer knowledge with `tfgpu kb update` (tfgpu never does on its own)"


def knowledge_json(*, data_version: str, date: str, source: str, tf_versions: Iterable[Version],
                   installed: Iterable[Any], today: _dt.date | tuple[int, int, int]) -> dict[str, Any]:
    """The doctor document's ``knowledge`` object: which data is in use, how old it is, and the note."""
    known = newest_known(tf_versions)
    age = age_days(date, today)
    newer = newer_installed(installed, known)
    return {
        "data_version": data_version,
        "date": date,
        "source": source,
        "age_days": age,
        "stale": age is not None and age > STALE_DAYS,
        "newest_tf": str(known) if known is not None else None,
        "newer_tf_installed": newer,
        "note": knowledge_note(date=date, age=age, newer=newer, known=known),
    }


def knowledge_in_use() -> tuple[str, str]:
    """("bundled" | "fetched", the directory) of the knowledge this process uses (tfgpu.kb.knowledge.compat_dir)."""
    from tfgpu.kb.parse import bundled_compat_dir, compat_dir

    path = compat_dir()
    return ("bundled" if path == bundled_compat_dir() else "fetched"), str(path)
