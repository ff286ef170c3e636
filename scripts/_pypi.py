"""PyPI's JSON API for the scripts that keep compat/ fresh: fetch a project, and its final releases.

https://pypi.org/pypi/NAME/json lists every release of a project with its files (`upload_time_iso_8601`,
`yanked`). A release counts here when it is final (PEP 440: no a/b/rc/dev part; a .postN is final) and has at
least one file that is not yanked. Standard library + packaging.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

PYPI_JSON = "https://pypi.org/pypi/{name}/json"
USER_AGENT = "tfgpu-compat-scripts/1 (+stdlib urllib)"


class SourceError(Exception):
    """An upstream could not be read: the scripts exit 2 with this message, never 0."""


def fetch_json(name: str, *, tries: int = 3, timeout: float = 60.0) -> dict[str, Any]:
    """PyPI's JSON document of project ``name``; SourceError when it cannot be read."""
    url = PYPI_JSON.format(name=name)
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "application/json"})
    last = ""
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                doc = json.loads(resp.read())
            if not isinstance(doc, dict) or not isinstance(doc.get("releases"), dict):
                msg = f"{url}: not a PyPI project document"
                raise SourceError(msg)
            return doc
        except urllib.error.HTTPError as exc:  # 404 and friends: asking again will not help
            msg = f"{url}: HTTP {exc.code}"
            raise SourceError(msg) from exc
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
            last = f"{url}: {exc}"
            if attempt < tries - 1:
                time.sleep(2 * (attempt + 1))
    raise SourceError(last)


def fetch_all(names: list[str], fetch: Callable[[str], dict[str, Any]] = fetch_json) -> dict[str, dict[str, Any]]:
    """Every project's document; one SourceError naming all that failed (so a CI log shows them together)."""
    docs, failed = {}, []
    for name in names:
        try:
            docs[name] = fetch(name)
        except SourceError as exc:
            failed.append(str(exc))
    if failed:
        raise SourceError("; ".join(failed))
    return docs


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _live_files(files: Any) -> list[Mapping[str, Any]]:
    return [f for f in files or () if isinstance(f, Mapping) and not f.get("yanked")]


def uploaded(files: Any) -> str:
    """The date (YYYY-MM-DD) of a release's earliest file that is not yanked, "" when it has none."""
    times = sorted(str(f.get("upload_time_iso_8601") or f.get("upload_time") or "")[:10] for f in _live_files(files))
    return next((t for t in times if t), "")


def finals(doc: Mapping[str, Any]) -> list[tuple[Version, str]]:
    """(version, upload date) of every final release with a file that is not yanked, oldest first."""
    out = []
    for text, files in (doc.get("releases") or {}).items():
        v = _version(text)
        if v is None or v.is_prerelease or v.is_devrelease or not _live_files(files):
            continue
        out.append((v, uploaded(files)))
    return sorted(out)


def prereleases(doc: Mapping[str, Any]) -> list[tuple[Version, str]]:
    """(version, upload date) of every a/b/rc/dev release with a file that is not yanked, oldest first."""
    out = []
    for text, files in (doc.get("releases") or {}).items():
        v = _version(text)
        if v is not None and (v.is_prerelease or v.is_devrelease) and _live_files(files):
            out.append((v, uploaded(files)))
    return sorted(out)


def newest_per_minor(doc: Mapping[str, Any]) -> dict[tuple[int, int], tuple[Version, str]]:
    """(major, minor) -> (its newest final release, the upload date of that release)."""
    out: dict[tuple[int, int], tuple[Version, str]] = {}
    for v, day in finals(doc):
        out[(v.major, v.minor)] = (v, day)  # finals() is sorted: the last one of a minor wins
    return out
