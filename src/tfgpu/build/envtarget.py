"""Which environment `tfgpu doctor --python/--prefix/--name` and `tfgpu fix` mean: one the user named, or the
active one ($VIRTUAL_ENV, $CONDA_PREFIX). Never another: a repair must not touch an environment nobody chose."""

# Paths here are strings from the facts and the environment.
# ruff: noqa: PTH112
from __future__ import annotations

import os
from typing import Any

from tfgpu.core.errors import UsageError


def named_environment(*, python: str | None = None, prefix: str | None = None,
                      name: str | None = None) -> dict[str, Any]:
    """``{"prefix", "how", "explicit": True, "python"}`` for the environment named (exactly one of the three);
    refused (exit 2) with the fix when it does not exist or has no Python."""
    from tfgpu.facts.environment import locate
    from tfgpu.verify.runner import resolve_python

    exe = resolve_python(prefix=prefix, name=name, python=python)
    root, _ = locate(python=exe)
    if root is None:
        msg = f"{python or prefix or name}: no Python environment there"
        raise UsageError(msg, hint="give the interpreter (--python EXE) or the environment's directory (--prefix DIR)")
    how = f"--python {python}" if python else f"--prefix {prefix}" if prefix else f"--name {name}"
    return {"prefix": root, "how": how, "explicit": True, "python": exe}


def active_environment(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The activated environment ($VIRTUAL_ENV, then $CONDA_PREFIX); refused when none is active."""
    env = dict(os.environ if environ is None else environ)
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if env.get(var) and os.path.isdir(env[var]):
            return {"prefix": env[var], "how": f"${var}", "explicit": True, "python": None}
    msg = "no environment is active and none was named"
    raise UsageError(msg, hint="activate it, or name it: tfgpu fix --python ENV/bin/python (or --prefix DIR, --name N)")
