"""`tfgpu kb update`: fetch newer knowledge (the compat/ data, one bundle per data version), verify it, keep it under
$TFGPU_HOME/kb; `tfgpu kb status`: which knowledge is in use and how old it is.

What is trusted, in order: the index (``index.json``, tfgpu.kb-index/1) comes over HTTPS from the URL given (or
the project's), or is pinned by its sha256 (``--sha256``, from the release notes); plain http only to this
machine (loopback), and a local file or directory as given. The index names each bundle's size and sha256; a
bundle whose bytes differ in any way is refused. A bundle is data only: a gzip'd tar of the knowledge base's own
TOML files (names from the loader's list, regular files, bounded sizes), never code, never extracted by tarfile
itself. Before it is used, the knowledge base's own loader reads it, the explain catalog is built from it and the
verdicts run on it; anything they refuse is refused. An older data version than the one in use is refused (no
downgrade). Nothing here runs unless asked: the doctor never fetches (tfgpu.kb.freshness only says when to).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import ipaddress
import json
import os
import re
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlparse

from tfgpu.core.errors import InputError, StepFailed, UsageError
from tfgpu.kb import bundles as store
from tfgpu.kb import parse

INDEX_SCHEMA = "tfgpu.kb-index/1"
STATUS_SCHEMA = "tfgpu.kb-status/1"
UPDATE_SCHEMA = "tfgpu.kb-update/1"
#: Where the project publishes its knowledge bundles (a release asset); TFGPU_KB_URL or --from name another.
DEFAULT_INDEX_URL = "https://github.com/tfgpu/tfgpu/releases/download/knowledge/index.json"
MAX_INDEX_BYTES = 1024 * 1024
#: The bundled compat/ is ~1 MB of TOML, ~0.2 MB gzip'd: these bounds are far above any real bundle.
MAX_BUNDLE_BYTES = 32 * 1024 * 1024
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
TIMEOUT = 60.0
_SHA256 = re.compile(r"[0-9a-f]{64}")


class UpdateRefused(InputError):
    """The index or the bundle cannot be used (tampered, truncated, a downgrade, data the loader refuses): exit 2,
    and the knowledge in use stays as it was."""


# ------------------------------------------------------------------------------------------------ fetching


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str) -> str:
    """``url`` when tfgpu may fetch from it: https anywhere, http to this machine only, file: and paths."""
    parts = urlparse(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and _loopback(parts.hostname):
        return url
    if parts.scheme == "file" or (parts.scheme == "" and url):
        return url
    msg = f"refusing to fetch knowledge from {url!r}: only https, http on this machine, or a local file"
    raise UsageError(msg, hint="use an https:// URL (or a local directory made by scripts/build_kb_bundle.py)")


def _opener() -> Any:
    """urllib with redirects checked like the first URL (an https index redirected to plain http is refused)."""
    import urllib.request

    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
            check_url(newurl)
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(Redirects)


def _local_path(url: str) -> Path | None:
    parts = urlparse(url)
    if parts.scheme == "file":
        from urllib.request import url2pathname

        return Path(url2pathname(parts.path))
    return Path(url) if parts.scheme == "" else None


def fetch(url: str, *, limit: int, timeout: float = TIMEOUT) -> bytes:
    """The bytes at ``url`` (at most ``limit``: more is refused). Unreachable: StepFailed (exit 1)."""
    check_url(url)
    local = _local_path(url)
    try:
        if local is not None:
            with local.open("rb") as fh:
                data = fh.read(limit + 1)
        else:
            import urllib.request

            request = urllib.request.Request(url, headers={"User-Agent": "tfgpu-kb-update"})
            with _opener().open(request, timeout=timeout) as resp:
                try:
                    data = resp.read(limit + 1)
                except http.client.IncompleteRead as cut:  # the connection closed early: what came is checked
                    data = cut.partial  # (verify() then says "truncated")
    except UsageError:
        raise
    except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError, HTTPError, timeouts, refused
        reason = getattr(exc, "reason", None) or exc
        msg = f"cannot fetch {url}: {reason}"
        raise StepFailed(msg, hint="check the network and the URL; the knowledge in use stays as it is "
                                   "(tfgpu kb status)") from None
    if len(data) > limit:
        msg = f"{url} is larger than {limit} bytes: not a tfgpu knowledge file"
        raise UpdateRefused(msg)
    return data


# ------------------------------------------------------------------------------------------------ the index


def parse_index(data: bytes, *, url: str, pinned: str | None = None) -> list[dict[str, Any]]:
    """The index's bundles, newest first, each checked (data version, sha256, size, where it is). ``pinned``: the
    sha256 the index itself must have."""
    if pinned is not None:
        pinned = pinned.strip().lower()
        if not _SHA256.fullmatch(pinned):
            msg = f"--sha256 {pinned[:80]!r} is not a sha256 (64 hex digits)"
            raise UsageError(msg)
        if hashlib.sha256(data).hexdigest() != pinned:
            msg = f"the index at {url} does not have the pinned sha256 {pinned}"
            raise UpdateRefused(msg, hint="it was changed, or the pin is for another index: check both")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        msg = f"{url} is not a knowledge index (not JSON)"
        raise UpdateRefused(msg) from None
    if not isinstance(doc, dict) or doc.get("schema") != INDEX_SCHEMA or not isinstance(doc.get("bundles"), list):
        msg = f"{url} is not a knowledge index ({INDEX_SCHEMA})"
        raise UpdateRefused(msg)
    bundles = [_bundle_entry(entry, url) for entry in doc["bundles"]]
    if not bundles:
        msg = f"the index at {url} lists no bundle"
        raise UpdateRefused(msg)
    return sorted(bundles, key=lambda b: store.version_key(b["data_version"]) or (), reverse=True)


def _bundle_entry(entry: Any, url: str) -> dict[str, Any]:
    ok = isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("data_version", "url", "sha256")) \
        and isinstance(entry.get("size"), int) and not isinstance(entry.get("size"), bool)
    if ok and store.version_key(entry["data_version"]) is not None and _SHA256.fullmatch(entry["sha256"]) \
            and 0 < entry["size"] <= MAX_BUNDLE_BYTES:
        where = urljoin(url, entry["url"]) if urlparse(url).scheme else str(Path(url).parent / entry["url"])
        return {**entry, "url": check_url(where)}
    msg = f"the index at {url} has a malformed bundle entry: {json.dumps(entry)[:200]}"
    raise UpdateRefused(msg)


# ------------------------------------------------------------------------------------------------ the bundle


def verify(data: bytes, entry: Mapping[str, Any]) -> None:
    """The bundle's bytes against its index entry: the size first (a truncated download says so), then sha256."""
    if len(data) != entry["size"]:
        what = "truncated" if len(data) < entry["size"] else "longer than the index says"
        msg = f"the bundle {entry['url']} is {what}: {len(data)} bytes, the index says {entry['size']}"
        raise UpdateRefused(msg, hint="fetch it again; if this persists the mirror is damaged")
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        msg = f"the bundle {entry['url']} does not match the index: sha256 {digest}, expected {entry['sha256']}"
        raise UpdateRefused(msg, hint="it was changed after the index was made: do not use this mirror")


def unpack(data: bytes, allowed: frozenset[str]) -> dict[str, bytes]:
    """The files of a bundle (a gzip'd tar), read into memory: only regular files named in ``allowed`` at the top
    level, each once, with bounded sizes. tarfile never writes anything (no paths, links or devices from it)."""
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                if not member.isreg() or member.name not in allowed or member.name in files:
                    msg = f"the bundle holds {member.name!r}, which is not one of the knowledge base's files"
                    raise UpdateRefused(msg)
                if member.size > MAX_FILE_BYTES or total + member.size > MAX_UNPACKED_BYTES:
                    msg = f"the bundle's {member.name} is too large ({member.size} bytes)"
                    raise UpdateRefused(msg)
                fh = tar.extractfile(member)
                content = fh.read(MAX_FILE_BYTES + 1) if fh is not None else b""
                total += len(content)
                files[member.name] = content
    except (tarfile.TarError, OSError, EOFError) as exc:  # not gzip, a cut tar, a bad header
        msg = f"the bundle is not a readable knowledge bundle ({type(exc).__name__}: {exc})"
        raise UpdateRefused(msg) from None
    return files


@contextlib.contextmanager
def _loading(directory: Path) -> Iterator[None]:
    """The knowledge base's loader pointed at ``directory`` (tfgpu.kb.bundles.checking), its caches cleared before
    and after: the process then reads the knowledge in use again."""
    store.checking = directory
    _clear_caches()
    try:
        yield
    finally:
        store.checking = None
        _clear_caches()


def _clear_caches() -> None:
    from tfgpu.judge import explain_catalog
    from tfgpu.kb import knowledge

    for cached in (parse.compat_dir, parse.load_toml, knowledge.load_kb, knowledge.load_explain_data,
                   knowledge.load_gpu_devices, explain_catalog.load_catalog):
        cached.cache_clear()


#: A machine the verdicts are run for on a new bundle's data: they must run without an error on it.
_PROBE_MACHINE = {
    "schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.35"},
    "python": {"current": "3.11.4", "interpreters": [{"version": "3.11.4", "path": "/usr/bin/python3.11"}]},
    "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3080", "compute_capability": "8.6", "memory_mib": 10240}],
    "driver": {"version": "550.54.15", "cuda": None},
}


def check_with_loader(directory: Path) -> str:
    """Load ``directory`` as the knowledge base's loader loads compat/, build the explain catalog from it and run
    the verdicts on it; its data version, or UpdateRefused with what the loader said."""
    from tfgpu.facts.document import as_facts
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.judge.explain_catalog import load_catalog
    from tfgpu.kb.knowledge import load_kb

    with _loading(directory):
        try:
            kb = load_kb()
            kb.gpu_devices()
            load_catalog()
            diagnose(as_facts(_PROBE_MACHINE), kb)
            diagnose(as_facts(_PROBE_MACHINE), kb, tf="latest")
        except Exception as exc:  # whatever the data makes the loader or the verdicts raise
            text = getattr(exc, "message", None) or str(exc)
            msg = f"the bundle's data does not load: {type(exc).__name__}: {str(text)[:300]}"
            raise UpdateRefused(msg, hint="it was made for another tfgpu version, or it is damaged; "
                                          "the knowledge in use stays as it is") from None
        return kb.data_version


# ------------------------------------------------------------------------------------------------ the command


def index_url(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The index to read: --from (a URL, an index file, or a directory holding index.json), else TFGPU_KB_URL, else
    the project's."""
    env = os.environ if environ is None else environ
    url = given or env.get("TFGPU_KB_URL") or DEFAULT_INDEX_URL
    local = _local_path(url)
    if local is not None and local.is_dir():
        return str(local / "index.json")
    return url


def _files_required(bundled: Path) -> frozenset[str]:
    """Every data file the bundled knowledge has: an update never drops a table."""
    from tfgpu.kb.parse import SCHEMAS

    return frozenset(f"{name}.toml" for name in SCHEMAS if (bundled / f"{name}.toml").is_file())


def update(given: str | None = None, *, pinned: str | None = None) -> dict[str, Any]:
    """Fetch the newest bundle the index lists, verify it, have the loader read it, and keep it: the record of what
    happened (``updated`` False when the knowledge in use is that version already)."""
    from tfgpu.kb.freshness import knowledge_in_use
    from tfgpu.kb.parse import SCHEMAS, bundled_compat_dir

    url = index_url(given)
    newest = parse_index(fetch(url, limit=MAX_INDEX_BYTES), url=url, pinned=pinned)[0]
    source, path = knowledge_in_use()
    in_use = store.read_meta(Path(path))[0]
    result = {"schema": UPDATE_SCHEMA, "index": url, "data_version": newest["data_version"],
              "previous": {"source": source, "data_version": in_use}, "updated": False}
    have, offered = store.version_key(in_use) or (), store.version_key(newest["data_version"]) or ()
    if offered < have:
        msg = (f"the index's newest knowledge ({newest['data_version']}) is older than the knowledge in use "
               f"({in_use}, {source}): refusing to downgrade")
        raise UpdateRefused(msg, hint="the index is stale or was rolled back; the knowledge in use stays")
    if offered == have:
        return result
    data = fetch(newest["url"], limit=MAX_BUNDLE_BYTES)
    verify(data, newest)
    files = unpack(data, frozenset(f"{name}.toml" for name in SCHEMAS))
    missing = sorted(_files_required(bundled_compat_dir()) - set(files))
    if missing:
        msg = f"the bundle lacks {', '.join(missing)}: an update must carry every table the bundled data has"
        raise UpdateRefused(msg)
    return {**result, **_install(files, newest, url), "updated": True}


def _install(files: Mapping[str, bytes], entry: Mapping[str, Any], url: str) -> dict[str, Any]:
    """Write the files into a private staging directory, have the loader read them, then move them into place."""
    import shutil

    staged = store.stage_dir()
    try:
        for name, content in files.items():
            (staged / name).write_bytes(content)
        version = check_with_loader(staged)
        if version != entry["data_version"]:
            msg = f"the bundle's data is version {version}, the index says {entry['data_version']}"
            raise UpdateRefused(msg, hint="the index and the bundle do not belong together: do not use this mirror")
        record = {"data_version": version, "url": entry["url"], "index": url, "sha256": entry["sha256"],
                  "size": entry["size"], "fetched": _now()}
        final = store.commit(staged, version, record)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    for key, older in store.fetched_versions(final.parent):  # never used again: the newest wins
        if key < (store.version_key(version) or ()):
            shutil.rmtree(older, ignore_errors=True)
    return {"path": str(final), "sha256": entry["sha256"], "url": entry["url"]}


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def status(today: Any) -> dict[str, Any]:
    """Which knowledge is in use (bundled or fetched), how old each is, and what was fetched (tfgpu.kb-status/1)."""
    from tfgpu.kb.freshness import STALE_DAYS, age_days, knowledge_in_use
    from tfgpu.kb.parse import bundled_compat_dir

    def describe(directory: Path) -> dict[str, Any]:
        version, date = store.read_meta(directory)
        age = age_days(date, today)
        return {"data_version": version, "date": date, "age_days": age,
                "stale": age is not None and age > STALE_DAYS, "path": str(directory)}

    source, path = knowledge_in_use()
    fetched = []
    for _, directory in store.fetched_versions():
        record = store.record_of(directory)
        fetched.append({**describe(directory), **{k: record.get(k) for k in ("url", "sha256", "fetched")}})
    return {"schema": STATUS_SCHEMA, "in_use": {"source": source, **describe(Path(path))},
            "bundled": describe(bundled_compat_dir()), "fetched": fetched, "store": str(store.store_dir()),
            "index": index_url(None), "only_bundled": os.environ.get(store.ONLY_BUNDLED, "") == "bundled"}
