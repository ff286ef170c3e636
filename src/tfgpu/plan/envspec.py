"""The environment a plan makes, in small pure pieces: its name, directory layout, interpreter and the pins of
its release. Shared by every planner (the recipe, the CPU route, a lockfile)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from tfgpu.core.errors import UsageError
from tfgpu.core.tfnames import SMALL_GPU_MIB
from tfgpu.kb.queries import load_pins
from tfgpu.kb.records import Pin

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts




_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_name(name: str) -> str:
    """An environment name: safe as a directory name and as a conda `-n` value."""
    if not _NAME_RE.fullmatch(name) or ".." in name:
        msg = f"invalid environment name {name!r}"
        raise UsageError(msg, hint="use letters, digits, '.', '_' or '-', starting with a letter or digit, "
                                   "at most 64 characters, no '..'")
    return name


def _xy(text: str) -> str:
    if len(str(text)) > 64:  # a 5,000-digit number would not even convert to int
        raise InvalidVersion(str(text)[:20])
    v = Version(str(text))
    return f"{v.major}.{v.minor}"


def _join(os_name: str, *parts: str) -> str:
    if os_name == "windows":
        return "\\".join(p.rstrip("\\/") for p in parts)
    return posixpath.join(*parts)


def env_python(prefix: str, os_name: str, *, conda: bool) -> str:
    """The interpreter inside an environment (venv: bin/python or Scripts\\python.exe; conda: python.exe at the root)."""
    if os_name == "windows":
        return _join(os_name, prefix, "python.exe" if conda else "Scripts\\python.exe")
    return _join(os_name, prefix, "bin", "python")


def series_of_str(text: str) -> str:
    return _xy(text)


def pins_for(tf: Version) -> list[Pin]:
    """The pins of compat/pins.toml that apply to release ``tf``."""
    return [p for p in load_pins() if tf in p.tf]


def small_gpu(facts: Facts) -> bool:
    for gpu in facts.get("gpus") or []:
        mem = gpu.get("memory_mib") if isinstance(gpu, Mapping) else None
        if isinstance(mem, (int, float)) and 0 < mem <= SMALL_GPU_MIB:
            return True
    return False


def _split_specs(text: str, python: str, tf: str) -> list[str]:
    return [s.strip().format(python=python, tf=tf) for s in text.split(",") if s.strip()]


def _recipe_parts(packages: str) -> tuple[str, str]:
    conda_part, _, pip_part = packages.partition("; pip:")
    return conda_part.strip(), pip_part.strip()


def _interpreters(facts: Facts, tools: Mapping[str, str | None]) -> dict[str, str]:
    from tfgpu.plan.choose import interpreters

    return interpreters(facts, tools)


def _newest(candidates: Sequence[str]) -> str:
    return max(candidates, key=Version)


def _python_range(text: str) -> list[str]:
    """"3.7-3.10" -> ["3.7", ..., "3.10"]; free text ("2.7-3.9 depending on version") -> []."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)-(\d+)\.(\d+)\s*", text or "")
    if not m or m.group(1) != m.group(3):
        return []
    return [f"{m.group(1)}.{n}" for n in range(int(m.group(2)), int(m.group(4)) + 1)]


def _check_python_and_name(python: str | None, name: str | None) -> str | None:
    """--python as X.Y (refused when it is not a version) and --name checked; returns the X.Y."""
    if name is not None:
        check_name(name)
    if python is None:
        return None
    try:
        return _xy(python)
    except InvalidVersion:
        msg = f"--python {python!r} is not a Python version"
        raise UsageError(msg, hint="use X.Y, e.g. --python 3.11") from None
