"""A Plan in the formats `tfgpu plan --format` prints: a shell script and a conda environment.yml."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from tfgpu.plan.model import Plan

if TYPE_CHECKING:
    pass


def render_sh(plan: Plan, *, header: str = "") -> str:
    """A POSIX shell script a user can read and run by hand. Every value is quoted, comments included
    (a newline in a channel or a path must not start a command), and a heredoc's delimiter never
    occurs in what it wraps."""
    from tfgpu.core.process import quote
    from tfgpu.core.safety import comment_safe as c

    out = ["#!/bin/sh", c(f"# tfgpu plan: TensorFlow {plan.tf} with {plan.tool} ({plan.backend}), recipe {plan.recipe_id}")]
    if header:
        out.append(c(f"# {header}"))
    out.append(c(f"# backend: {plan.backend_reason}"))
    out.append(c(f"# environment: {plan.prefix}"))
    out.append("set -eu")
    for i, step in enumerate(plan.steps, 1):
        out.append("")
        out.append(c(f"# {i}. {step.why}"))
        if step.kind == "run":
            prefix = " ".join(f"{k}={quote([v])}" for k, v in step.env)
            out.append((prefix + " " if prefix else "") + quote(step.argv))
        else:
            assert step.path is not None
            op = ">>" if step.kind == "append-file" else ">"
            content = (step.content or "").rstrip("\n")
            eof = "TFGPU_EOF"
            while eof in content.splitlines():
                eof += "_"
            out.append(f"mkdir -p {quote([posixpath.dirname(step.path)])}")
            out.append(f"cat {op} {quote([step.path])} <<'{eof}'")
            out.append(content)
            out.append(eof)
    if plan.env_vars:
        out.append("")
        out.append(c("# activation sets: " + ", ".join(f"{k}={v}" for k, v in plan.env_vars.items())))
    for n in plan.notes:
        out.append(c(f"# note: {n}"))
    return "\n".join(out) + "\n"


def render_environment_yml(plan: Plan) -> str:
    """conda's environment.yml for the plan (`conda env create -f` on any machine; none is needed here). A pip
    plan becomes conda-forge's Python and pip with the same PyPI requirements."""
    import json

    from tfgpu.core.safety import comment_safe

    def q(s: str) -> str:  # a YAML double-quoted scalar is a JSON string: every character escaped
        return json.dumps(s)

    pip_only = not plan.conda_specs
    channels = ("conda-forge",) if pip_only else plan.channels
    specs = (f"python={plan.python}", "pip") if pip_only else plan.conda_specs
    out = [comment_safe(f"# tfgpu: TensorFlow {plan.tf}, recipe {plan.recipe_id}"
                        + (" (its PyPI packages in a conda-made Python)" if pip_only else "")),
           f"name: {q(plan.name or 'tf' + plan.tf)}", "channels:"]
    out += [f"  - {q(c)}" for c in channels]
    if channels:
        out.append("  - nodefaults" if "defaults" not in channels else "  # (defaults listed explicitly)")
    out.append("dependencies:")
    out += [f"  - {q(s)}" for s in specs]
    if plan.pip_requirements:
        out.append("  - pip:")
        out += [f"    - {q(r)}" for r in plan.pip_requirements]
    simple = {k: v for k, v in plan.env_vars.items() if "$" not in v and "(" not in v}
    if simple:
        out.append("variables:")
        out += [f"  {q(k)}: {q(v)}" for k, v in simple.items()]
    return "\n".join(out) + "\n"
