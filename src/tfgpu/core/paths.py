"""Where tfgpu keeps what it makes: its home ($TFGPU_HOME) and the environments directory. One place: plan,
create, the registry and `smoke --name` all ask here."""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu.core.errors import UsageError
from tfgpu.core.sysio import user_dir


def home() -> Path:
    """tfgpu's data directory: $TFGPU_HOME, else platformdirs.user_data_dir("tfgpu") (~/.local/share/tfgpu on Linux)."""
    override = os.environ.get("TFGPU_HOME")
    if override:
        if any(ord(c) < 32 or ord(c) == 127 for c in override):
            msg = f"TFGPU_HOME {override!r} contains control characters"
            raise UsageError(msg, hint="set TFGPU_HOME to a plain directory path")
        try:
            path = Path(override).expanduser().resolve()
        except (RuntimeError, OSError) as exc:  # ~nouser/x, a loop of symlinks
            msg = f"TFGPU_HOME {override!r} cannot be used: {exc}"
            raise UsageError(msg, hint="set TFGPU_HOME to an absolute directory path") from None
        if path.exists() and not path.is_dir():
            msg = f"TFGPU_HOME {override!r} is not a directory"
            raise UsageError(msg, hint="set TFGPU_HOME to a directory (it is created if missing)")
        return path
    return user_dir("data")


def envs_dir() -> Path:
    """Where tfgpu's own environments live (plan, create and `smoke --name` all use this one place)."""
    return home() / "envs"
