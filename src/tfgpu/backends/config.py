"""tfgpu's config file: conda channels and the preferred backend (load_*: reads the world).

Where: ``$TFGPU_CONFIG`` if set, else ``platformdirs.user_config_dir("tfgpu")/config.toml``
(~/.config/tfgpu/config.toml on Linux). Keys::

    channels = ["conda-forge"]        # conda channels for conda recipes, replacing the recipe's

    [backends]
    prefer = "pip"                    # tried first by --backend auto: pip, conda or rattler

Precedence for channels: ``--channel`` (repeatable) beats the config file, which beats each recipe's
channels from the knowledge base (compat/recipes.toml). A missing default file is normal; a file
named by TFGPU_CONFIG that does not exist, bad TOML, an unknown key or a wrong type is an InputError
(exit 2) naming the file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfgpu.core.errors import InputError
from tfgpu.core.record import record

CONFIG_ENV = "TFGPU_CONFIG"
PREFER = ("pip", "conda", "rattler")
_TOP_KEYS = {"channels", "backends"}
_BACKEND_KEYS = {"prefer"}


@record
class Config:
    """What the config file says (empty when there is none)."""

    path: Path | None = None
    channels: tuple[str, ...] = ()
    prefer: str | None = None

    @property
    def source(self) -> str:
        return f"config {self.path}" if self.path else "config"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    from tfgpu.core.sysio import user_dir

    return user_dir("config") / "config.toml"


def parse_config(data: Mapping[str, Any], path: Path) -> Config:
    """Pure: validated config from parsed TOML."""
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        msg = f"config {path}: unknown key(s) {', '.join(unknown)}"
        raise InputError(msg, hint="tfgpu reads `channels = [...]` and `[backends] prefer = ...`")
    chans = data.get("channels", [])
    if not isinstance(chans, list) or not all(isinstance(c, str) and c.strip() for c in chans):
        msg = f"config {path}: channels must be a list of channel names or URLs"
        raise InputError(msg, hint='e.g. channels = ["conda-forge"]')
    if any(ord(ch) < 32 or ord(ch) == 127 for c in chans for ch in c.strip()):
        msg = f"config {path}: a channel contains control characters (a newline or an escape)"
        raise InputError(msg, hint='channels are names or URLs, e.g. channels = ["conda-forge"]')
    backends = data.get("backends", {})
    if not isinstance(backends, dict):
        msg = f"config {path}: [backends] must be a table"
        raise InputError(msg, hint='e.g. [backends] then prefer = "pip"')
    unknown = sorted(set(backends) - _BACKEND_KEYS)
    if unknown:
        msg = f"config {path}: unknown key(s) in [backends]: {', '.join(unknown)}"
        raise InputError(msg, hint='[backends] knows only prefer = "pip" | "conda" | "rattler"')
    prefer = backends.get("prefer")
    if prefer is not None and prefer not in PREFER:
        msg = f"config {path}: [backends] prefer = {prefer!r} is not a backend"
        raise InputError(msg, hint=f"use one of: {', '.join(PREFER)}")
    return Config(path=path, channels=tuple(c.strip() for c in chans), prefer=prefer)


def load_config(env: Mapping[str, str] | None = None) -> Config:
    """Read the config file (no file at the default place: an empty Config)."""
    env = os.environ if env is None else env
    path = config_path(env)
    if not path.is_file():
        if env.get(CONFIG_ENV):
            msg = f"config file {path} (from {CONFIG_ENV}) does not exist"
            raise InputError(msg, hint=f"create it, or unset {CONFIG_ENV}")
        return Config()
    from tfgpu.core.sysio import untrusted_why

    why = untrusted_why(path)
    if why:  # its channels replace every recipe's: whoever can write it chooses what everyone installs
        msg = f"config {path} is not trusted: {why}"
        raise InputError(msg, hint=f"chmod go-w {path.parent} {path}, or point {CONFIG_ENV} at a file of your own")
    if sys.version_info >= (3, 11):  # imported here: most machines have no config file
        import tomllib
    else:  # pragma: no cover - Python < 3.11
        import tomli as tomllib
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        msg = f"config {path} cannot be read: {' '.join(str(exc).split())[:200]}"
        raise InputError(msg, hint="fix the TOML (channels = [\"conda-forge\"]) or move the file aside") from None
    return parse_config(data, path)
