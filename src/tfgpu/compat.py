"""Load the knowledge base in compat/ (TOML data files shipped inside the package)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from tfgpu.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib


@functools.lru_cache(maxsize=1)
def compat_dir() -> Path:
    """Where the data lives: inside the installed package, or compat/ of a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "compat", here.parent.parent / "compat"):
        if (candidate / "meta.toml").is_file():
            return candidate
    msg = f"tfgpu's knowledge base is missing (looked in {here / 'compat'})"
    raise DataError(msg, hint="reinstall tfgpu: python3 -m pip install --force-reinstall tfgpu")


@functools.cache
def load_toml(name: str) -> dict[str, Any]:
    """Parse one data file, e.g. ``load_toml("cuda")`` for compat/cuda.toml."""
    path = compat_dir() / f"{name}.toml"
    try:
        with path.open("rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
            return data
    except FileNotFoundError as exc:
        msg = f"knowledge-base file {path} is missing"
        raise DataError(msg) from exc
    except tomllib.TOMLDecodeError as exc:
        msg = f"knowledge-base file {path} is malformed: {exc}"
        raise DataError(msg) from exc


def data_version() -> str:
    return str(load_toml("meta")["data_version"])
