"""The registry of environments tfgpu made (a JSON file in the tfgpu home), and path safety checks."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tfgpu.errors import InputError, UsageError
from tfgpu.plan import check_name

REGISTRY_SCHEMA = "tfgpu.envs/1"

__all__ = [
    "check_name", "check_prefix", "find", "home", "is_environment", "load", "record", "remove", "update_smoke",
]


def home() -> Path:
    """tfgpu's data directory: $TFGPU_HOME, else platformdirs.user_data_dir("tfgpu") (~/.local/share/tfgpu on Linux)."""
    override = os.environ.get("TFGPU_HOME")
    if override:
        return Path(override).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("tfgpu", appauthor=False))


def registry_path() -> Path:
    return home() / "envs.json"


def is_environment(path: Path) -> bool:
    """A venv (pyvenv.cfg) or a conda environment (conda-meta/)."""
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


def check_prefix(prefix: str | os.PathLike[str]) -> Path:
    """An environment prefix that is safe to create (or, with --force, to replace)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in os.fspath(prefix)):
        # a newline in a prefix would start a new line in `tfgpu plan --format sh` and in logs
        msg = f"refusing the prefix {os.fspath(prefix)!r}: it contains control characters"
        raise UsageError(msg, hint="choose a directory name without newlines or tabs")
    try:
        raw = Path(prefix).expanduser()
    except RuntimeError:  # ~name of a user that does not exist
        msg = f"refusing the prefix {os.fspath(prefix)!r}: its home directory is unknown"
        raise UsageError(msg, hint="give an absolute path") from None
    if not raw.is_absolute():
        raw = Path.cwd() / raw
    try:
        return _check_resolved(raw.resolve())
    except OSError as exc:  # e.g. a name longer than the filesystem allows
        msg = f"cannot use {raw} as an environment prefix: {exc.strerror or exc}"
        raise UsageError(msg, hint="choose another --prefix") from None


def _check_resolved(p: Path) -> Path:
    if p == Path(p.anchor) or p == Path.home().resolve():
        msg = f"refusing to use {p} as an environment prefix"
        raise UsageError(msg, hint="choose a new directory, e.g. --prefix ~/envs/tf")
    if any(part in ("site-packages", "dist-packages") for part in p.parts):
        msg = f"{p} is inside a Python installation's site-packages"
        raise UsageError(msg, hint="choose a directory outside any environment")
    for parent in p.parents:
        if parent != Path(parent.anchor) and is_environment(parent):
            msg = f"{p} is inside another environment ({parent})"
            raise UsageError(msg, hint="choose a directory outside any environment")
    if p.exists() and not p.is_dir():
        msg = f"{p} exists and is not a directory"
        raise UsageError(msg, hint="choose another --prefix")
    return p


def load() -> list[dict[str, Any]]:
    path = registry_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        msg = f"tfgpu's environment registry {path} is unreadable: {exc}"
        raise InputError(msg, hint=f"move it aside (mv {path} {path}.bak); tfgpu starts a new one") from exc
    envs = data.get("envs") if isinstance(data, dict) else None
    return [e for e in envs if isinstance(e, dict)] if isinstance(envs, list) else []


def _save(envs: list[dict[str, Any]]) -> None:
    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".envs.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"schema": REGISTRY_SCHEMA, "envs": envs}, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def find(name_or_prefix: str) -> dict[str, Any] | None:
    for e in load():
        if e.get("name") == name_or_prefix or e.get("prefix") == name_or_prefix:
            return e
    return None


def record(*, name: str | None, prefix: str, backend: str, tool: str, tf: str, python: str,
           recipe: str, env_python: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name, "prefix": prefix, "backend": backend, "tool": tool, "tf": tf, "python": python,
        "recipe": recipe, "env_python": env_python,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "smoke": None,
    }
    envs = [e for e in load() if e.get("prefix") != prefix]
    envs.append(entry)
    _save(envs)
    return entry


def update_smoke(prefix: str, smoke: dict[str, Any] | None) -> None:
    envs = load()
    for e in envs:
        if e.get("prefix") == prefix:
            e["smoke"] = smoke
    _save(envs)


def remove(name_or_prefix: str) -> dict[str, Any]:
    """Delete a registered environment's directory and its registry entry."""
    entry = find(name_or_prefix)
    if entry is None:
        msg = f"{name_or_prefix!r} is not an environment tfgpu made"
        raise UsageError(msg, hint="`tfgpu envs` lists them; tfgpu only removes what it created")
    prefix = Path(str(entry["prefix"]))
    if prefix.exists():
        check_prefix(prefix)
        if not is_environment(prefix):
            msg = f"{prefix} does not look like an environment (no pyvenv.cfg or conda-meta/); not deleting it"
            raise UsageError(msg, hint="delete it by hand if you are sure")
        shutil.rmtree(prefix)
    _save([e for e in load() if e.get("prefix") != entry["prefix"]])
    return entry
