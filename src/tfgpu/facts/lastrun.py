"""The doctor's last run on this machine: its facts, and its answer with what that answer was made from, kept so
that the next run can answer without judging again.

Why: the console script's `tfgpu doctor` used to load the knowledge base (~12 ms) while its probe child read the
machine, wait for the child with nothing to do, then judge the facts (~8 ms with 8 GPUs) before it could answer.
Judging is a pure function of the facts, the knowledge base, the configuration and the options, so:

- **the answer** (tfgpu.api.doctor.doctor_document): when this run asks the same (options, the day, the tfgpu and
  environment variables), every file the last answer was made from is unchanged (tfgpu's modules and the other
  code it imported, the knowledge in use, the fetched knowledge's store, the configuration file: their size, their
  modification time and the time their status last changed, which a rewrite, a rename or a chmod moves and no
  program sets back) and the probes find the same facts in every value
  but their timings, the last answer is this run's answer, with this run's facts in it. The machine is still read
  every time; only the judging is skipped, and the knowledge base is not even loaded.
- **the facts**: otherwise the last run's facts are judged while the probes run, and that verdict is used when
  this run's facts are the same (a changed option or configuration, a new day); anything else is judged again.

Either way, what changed is remembered for the next run. The file holds data only (plain JSON, as the probes'
facts and the document are; read only when it is safe to trust, as tfgpu.kb.cache reads, never pickle), one per
Python environment: a pipx install and a project venv
on one machine do not take turns replacing each other's. ``TFGPU_NO_CACHE=1`` turns it off with the knowledge
base's cache; ``TFGPU_CACHE_DIR`` moves it."""

# ruff: noqa: PTH100, PTH116, PTH120 - a hundred files are checked on every run: os calls on text, no Path objects
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path
    from typing import Any

#: The facts' only values that differ between two runs on an unchanged machine: how long each probe took.
VOLATILE = ("timings",)
#: What the file holds: {"schema", "facts", "answer"} (the answer: None, or {"key", "inputs", "doc"}).
SCHEMA = "tfgpu.lastrun/1"
FACTS_SCHEMA = "tfgpu.facts/1"
#: The document's values that are this run's own, not the judging's: put back into a remembered answer.
OWN = ("facts", "overrides")
#: Environment variables that steer judging or say where its inputs are (tfgpu's own, the configuration's and the
#: data's directories); every other one that matters reaches the answer through the facts.
_ENV_PREFIXES = ("TFGPU_", "XDG_")
_ENV_NAMES = ("HOME", "APPDATA", "LOCALAPPDATA", "USERPROFILE")


def facts_file(env: Mapping[str, str] | None = None) -> Path | None:
    """Where this Python environment's doctor keeps its last run (None: caching is off)."""
    import zlib

    from tfgpu.kb.cache import cache_dir

    folder = cache_dir(env)
    if folder is None:
        return None
    return folder / f"facts-{zlib.crc32(sys.prefix.encode('utf-8', 'surrogateescape')):08x}.json"


def previous(path: Path | None) -> dict[str, Any] | None:
    """The last run :func:`remember` kept at ``path``: {"facts": ..., "answer": ... or None}; None when there is
    none, or it cannot be trusted or read (a file of another user, a symlink, a directory others can write, anything
    but what :func:`remember` wrote). Never raises, never prints: without it the doctor judges after probing."""
    if path is None:
        return None
    from tfgpu.kb import cache

    try:
        record = cache.read(path, objects=True)
    except (OSError, ValueError, cache.CacheRefused):
        return None
    if not (isinstance(record, dict) and record.get("schema") == SCHEMA):
        return None
    facts = record.get("facts")
    if not (isinstance(facts, dict) and facts.get("schema") == FACTS_SCHEMA):
        return None
    answer = record.get("answer")
    if not _well_formed(answer):
        answer = None
    return {"facts": facts, "answer": answer}


def same(previous: Mapping[str, Any] | None, facts: Mapping[str, Any]) -> bool:
    """Pure: whether judging ``previous`` answers for ``facts``: every value equal but the probes' timings."""
    if previous is None:
        return False
    return _stable(previous) == _stable(facts)


def remember(path: Path | None, facts: Mapping[str, Any], answer: Mapping[str, Any] | None = None) -> None:
    """Keep ``facts`` and ``answer`` (:func:`answer`) at ``path`` for the next run (written atomically; a read-only
    or full home is fine: the next run judges after probing)."""
    if path is None:
        return
    from tfgpu.kb import cache

    record = {"schema": SCHEMA, "facts": dict(facts), "answer": dict(answer) if answer is not None else None}
    try:
        cache.write(path, record)
    except (OSError, TypeError, ValueError, RecursionError, cache.CacheRefused):
        pass


def answer_key(options: Mapping[str, Any], today: object, env: Mapping[str, str] | None = None) -> str:
    """What a run asks, as text to compare: the doctor's options, the day its knowledge's age is counted on, the
    tfgpu and Python in use, where its modules come from (``sys.path``: another checkout or install of tfgpu in
    the same environment judges with its own code) and the environment variables that steer judging."""
    import json

    from tfgpu import __version__

    env = os.environ if env is None else env
    asked = {
        "options": dict(options), "today": str(today), "tfgpu": __version__, "python": sys.version,
        "executable": sys.executable, "path": list(sys.path),
        "env": {k: v for k, v in env.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES},
    }
    return json.dumps(asked, sort_keys=True, default=repr)


def answer(key: str, doc: Mapping[str, Any], signed: Iterable[list[Any]]) -> dict[str, Any] | None:
    """The answer to keep: ``doc`` (the doctor's document, its own values left out: :data:`OWN`) for ``key``
    (:func:`answer_key`), made from the files ``signed`` (:func:`signatures`, taken before they were read) and the
    modules imported so far outside the standard library (the code that judged: tfgpu and what it uses). None when
    a module's file cannot be found (imported from a zip archive: a change to it could not be seen)."""
    files = {signature[0]: list(signature) for signature in signed}
    code = signatures(sorted(imported_files() - set(files)))
    if any(signature[1] == -1 for signature in code):
        return None
    return {"key": key, "inputs": [*files.values(), *code],
            "doc": {k: (None if k in OWN else v) for k, v in doc.items()}}


def answer_for(record: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    """The remembered document when it answers ``key`` and none of its inputs changed (a new dict, its own values
    still to fill in: :data:`OWN`); else None."""
    found = record.get("answer") if record is not None else None
    if not found or found["key"] != key or not unchanged(found["inputs"]):
        return None
    return dict(found["doc"])


def signatures(paths: Iterable[str]) -> list[list[Any]]:
    """[path, size, modification time, status change time (ns)] of each path ([path, -1, -1, -1] when there is
    none). The status change time (ctime on POSIX) moves with every write, rename, chmod or chown, and no program can
    set it back as it can the modification time; on Windows, where it is the creation time, the modification time
    and the size tell."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append([path, -1, -1, -1])
        else:
            out.append([path, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
    return out


def unchanged(signed: Iterable[list[Any]]) -> bool:
    """Whether every file is as :func:`signatures` found it."""
    for path, size, mtime, ctime in signed:
        try:
            st = os.stat(path)
        except OSError:
            if size != -1:
                return False
            continue
        if st.st_size != size or st.st_mtime_ns != mtime or st.st_ctime_ns != ctime:
            return False
    return True


def imported_files() -> set[str]:
    """The files of the modules imported so far, but the standard library's (it changes with ``sys.version``)."""
    stdlib = os.path.dirname(os.__file__) + os.sep
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and (not path.startswith(stdlib) or "-packages" in path):
            out.add(os.path.abspath(path))
    return out


def _well_formed(answer: Any) -> bool:
    if not isinstance(answer, dict) or not isinstance(answer.get("key"), str) \
            or not isinstance(answer.get("doc"), dict) or not isinstance(answer.get("inputs"), list):
        return False
    doc = answer["doc"]
    if not all(k in doc for k in OWN) or type(doc.get("exit_code")) is not int:
        return False
    return all(isinstance(s, list) and len(s) == 4 and isinstance(s[0], str) and all(type(n) is int for n in s[1:])
               for s in answer["inputs"])


def _stable(facts: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in facts.items() if key not in VOLATILE}
