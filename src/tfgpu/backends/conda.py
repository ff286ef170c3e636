"""conda-family backend steps: mamba / micromamba / conda CLIs, and tfgpu's embedded engine (rattler).

Every create uses `--override-channels` with explicit `-c` channels, so the user's .condarc channels
cannot change what is installed, and a fresh prefix (or `-n NAME`), so `base` is never modified.
Semantics of the flags: https://docs.conda.io/projects/conda/en/stable/commands/create.html
(recorded in tests/data/conda/).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfgpu.backends.steps import Step

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase

#: Channels as Anaconda's `defaults` multichannel is named by tools that do not know `defaults`.
_DEFAULTS_FOR = {"micromamba": "anaconda", "rattler": "anaconda"}


def _channels(tool: str, channels: Sequence[str]) -> list[str]:
    out: list[str] = []
    for c in channels:
        c = _DEFAULTS_FOR.get(tool, c) if c == "defaults" else c
        if c not in out:
            out.append(c)
    return out


def _cuda_override(specs: Sequence[str], facts: Mapping[str, Any], kb: KnowledgeBase, tf: Any, os_name: str) -> tuple[tuple[str, str], ...]:
    """CONDA_OVERRIDE_CUDA for a `cuda*` build when no driver was detected (the solver needs __cuda)."""
    if not any("=cuda" in s for s in specs):
        return ()
    driver = facts.get("driver") or {}
    if isinstance(driver, Mapping) and driver.get("cuda"):
        return ()
    rows = [r for r in kb.conda_packages("tensorflow", tf, os_name) if r.channel == "conda-forge" and r.cuda]
    if rows:
        newest = max(rows, key=lambda r: tuple(int(x) for x in r.cuda.split(".")))
        return (("CONDA_OVERRIDE_CUDA", newest.cuda),)
    build = kb.build_for(tf, os_name)
    return (("CONDA_OVERRIDE_CUDA", build.cuda),) if build is not None else ()


def conda_create_steps(
    tool: str,
    exe: str,
    *,
    prefix: str,
    name: str | None,
    channels: Sequence[str],
    specs: Sequence[str],
    facts: Mapping[str, Any],
    kb: KnowledgeBase,
    tf: Any,
    os_name: str,
) -> list[Step]:
    where = ["-n", name] if name else ["-p", prefix]
    chan_args: list[str] = []
    for c in _channels(tool, channels):
        chan_args += ["-c", c]
    argv = [exe, "create", "--yes", *where, "--override-channels", *chan_args, *specs]
    env = _cuda_override(specs, facts, kb, tf, os_name)
    why = (f"create a new conda environment with {tool} from {', '.join(_channels(tool, channels))} only "
           f"(--override-channels): {' '.join(specs)}")
    if env:
        why += f"; no driver detected, so CONDA_OVERRIDE_CUDA={env[0][1]} lets the solver pick the CUDA build"
    return [Step(tuple(argv), why, env=env)]


def rattler_create_steps(
    engine_python: str,
    prefix: str,
    channels: Sequence[str],
    specs: Sequence[str],
    *,
    facts: Mapping[str, Any],
    kb: KnowledgeBase,
    tf: Any,
    os_name: str,
    driver_cuda: str | None = None,
) -> list[Step]:
    """The embedded engine's create step. ``driver_cuda`` is the newest CUDA the driver supports as the
    verdict derives it (tfgpu.plan.planner.engine_driver_cuda: "none" when the facts show no driver, None when they
    do not say): given, the engine child does not probe the machine again."""
    platform = {"windows": "win-64", "macos": "osx-64"}.get(os_name, "linux-64")
    argv = [engine_python or sys.executable, "-m", "tfgpu.backends.rattler", "create", "--prefix", prefix]
    for c in _channels("rattler", channels):
        argv += ["--channel", c]
    argv += ["--platform", platform]
    driver = facts.get("driver") or {}
    cuda = driver.get("cuda") if isinstance(driver, Mapping) else None
    override = _cuda_override(specs, facts, kb, tf, os_name)
    if driver_cuda is not None:  # the facts know the driver: the engine child does not probe the machine again
        argv += ["--driver-cuda", driver_cuda]
    if cuda:
        argv += ["--virtual-package", f"__cuda={cuda}"]
    elif override:
        argv += ["--virtual-package", f"__cuda={override[0][1]}"]
    argv += list(specs)
    why = (f"solve and install {' '.join(specs)} from {', '.join(_channels('rattler', channels))} with tfgpu's "
           "embedded conda engine (py-rattler; no conda needed)")
    return [Step(tuple(argv), why)]
