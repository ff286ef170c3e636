"""What is installed: the programs a plan can use (detect_*: reads the world, never raises)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tfgpu.backends.runners import CONDA_TOOLS
from tfgpu.core import process as run


def detect_tools(facts: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Paths of uv, mamba, micromamba, conda and of every Python interpreter the facts list ("python3.11")."""
    from tfgpu.backends import rattler as engine

    tools: dict[str, str | None] = {"uv": run.which("uv", env),
                                    "rattler": "embedded" if engine.available() else None}
    for t in CONDA_TOOLS:
        tools[t] = run.which(t, env)
    conda = facts.get("conda") or {}
    if isinstance(conda, Mapping) and conda.get("kind") in CONDA_TOOLS and conda.get("path"):
        tools.setdefault(str(conda["kind"]), None)
        tools[str(conda["kind"])] = tools[str(conda["kind"])] or str(conda["path"])
    py = facts.get("python") or {}
    for it in py.get("interpreters") or []:
        if isinstance(it, Mapping) and it.get("version") and it.get("path"):
            m = re.match(r"(\d+)\.(\d+)", str(it["version"]))
            if m:
                tools.setdefault(f"python{m.group(1)}.{m.group(2)}", str(it["path"]))
    for minor in range(6, 15):  # pythonX.Y on PATH, in case the facts do not list them
        key = f"python3.{minor}"
        if not tools.get(key):
            found = run.which(key, env)
            # pyenv shims exist for every installed version but fail unless that version is selected
            if found and "shims" not in Path(found).parts:
                tools[key] = found
    return tools


def detect_conda_envs_dir(tool: str, exe: str, *, timeout: float = 20.0) -> str | None:
    """Where `TOOL create -n NAME` puts environments (`conda info --json` envs_dirs[0]); None if unknown."""
    res = run.capture([exe, "info", "--json"], timeout=timeout)  # same flag for conda, mamba, micromamba
    if not res.ok:
        return None
    try:
        data = json.loads(res.stdout)
    except ValueError:
        return None
    dirs = data.get("envs_dirs") or data.get("envs directories") or []
    if isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
        return dirs[0]
    root = data.get("root_prefix") or data.get("base environment")
    if isinstance(root, str) and root:
        return root.rstrip("/") + "/envs"
    return None


def cleanup_after_failure(prefix: Path, log: Callable[[str], None]) -> list[Path]:
    """Remove what a failed or interrupted step left next to ``prefix`` (the hook ``create`` calls).

    The embedded engine links into a hidden sibling (``.NAME.tfgpu-partial-PID-XXXX``) and removes it
    itself on an error or a forwarded Ctrl-C; when the runner had to kill it (timeout, or no exit
    within the interrupt grace period) the directory stays, so it is removed here once its process
    is gone. Never raises: a cleanup problem is logged.
    """
    try:
        from tfgpu.backends.rattler import cleanup_partial

        removed = cleanup_partial(prefix)
    except OSError as exc:
        log(f"! could not remove a partial install next to {prefix}: {exc}")
        return []
    for p in removed:
        log(f"# removed the partial install {p}")
    return removed
