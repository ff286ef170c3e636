"""`tfgpu fix` decides: an environment verdict (tfgpu.judge.environment) -> a Plan of Steps that repairs that
environment in place, the same Plan that `tfgpu plan` prints and the step runner runs. Pure. What cannot be
repaired in place becomes a note naming the step that must happen elsewhere (a driver, `tfgpu create`)."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from tfgpu.backends import pip as pip_backend
from tfgpu.backends.steps import Step
from tfgpu.plan.model import Plan

MARK = "# added by tfgpu fix"


def nvidia_snippet(python_xy: str) -> str:
    """The lines bin/activate gets so that TensorFlow finds its nvidia-* wheels (tensorflow#63362); the
    environment reader (tfgpu.facts.environment.parse_activation) follows exactly this form."""
    return (f"\n{MARK}: TensorFlow does not find the CUDA libraries of its nvidia-* wheels that its loader's "
            "RUNPATH does not name unless they are on LD_LIBRARY_PATH (tensorflow/tensorflow#63362)\n"
            f"for _tfgpu_d in \"$VIRTUAL_ENV\"/lib/python{python_xy}/site-packages/nvidia/*/lib; do\n"
            "  [ -d \"$_tfgpu_d\" ] && LD_LIBRARY_PATH=\"$_tfgpu_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"\n"
            "done\nexport LD_LIBRARY_PATH\nunset _tfgpu_d\n")


def _merge_requirements(reqs: Sequence[str]) -> list[str]:
    """One requirement per distribution (the later finding's wins: a pin after the wheel's own range)."""
    out: dict[str, str] = {}
    for r in reqs:
        name = re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-")
        out[name] = r
    return list(out.values())


def activation_steps(kind: str, prefix: str, xy: str, *, nvidia_path: bool, lines: Sequence[str]) -> list[Step]:
    """What a fix writes into the activation: a venv's bin/activate gets lines appended (venvs have no activate.d),
    a conda environment an etc/conda/activate.d script."""
    if not (nvidia_path or lines):
        return []
    if kind != "conda":
        content = nvidia_snippet(xy) if nvidia_path else ""
        content += "".join(f"\n{MARK}\nexport {line}\n" for line in lines)
        return [Step((), "venvs have no activate.d: tfgpu appends the variables to bin/activate",
                     kind="append-file", path=posixpath.join(prefix, "bin", "activate"), content=content)]
    text = "".join(f"export {line}\n" for line in lines)
    if nvidia_path:
        text += (f"for _tfgpu_d in \"$CONDA_PREFIX\"/lib/python{xy}/site-packages/nvidia/*/lib; do\n"
                 "  [ -d \"$_tfgpu_d\" ] && LD_LIBRARY_PATH=\"$_tfgpu_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"\n"
                 "done\nexport LD_LIBRARY_PATH\nunset _tfgpu_d\n")
    return [Step((), "activation script: conda runs etc/conda/activate.d/*.sh on `conda activate`",
                 kind="write-file", path=posixpath.join(prefix, "etc", "conda", "activate.d", "tfgpu_fix.sh"),
                 content=f"{MARK}\n{text}")]


def plan_fix(verdict: Mapping[str, Any], env: Mapping[str, Any], *, uv: str | None, conda: str | None = None,
             break_system: bool = False) -> Plan:
    """The repair of the environment ``env`` (its facts) for its ``verdict``."""
    exe = str(env.get("python") or "")
    prefix = str(env.get("prefix") or "")
    pyver = str(env.get("python_version") or "")
    xy = ".".join(pyver.split(".")[:2])
    kind = str(env.get("kind") or "venv")
    tf = verdict.get("tensorflow") or {}
    extra = ["--break-system-packages"] if break_system else []
    steps: list[Step] = []
    notes: list[str] = []
    env_vars: dict[str, str] = {}
    reqs: list[str] = []
    activation_lines: list[str] = []
    nvidia_path = False
    findings = [*(verdict.get("blockers") or []), *(verdict.get("caveats") or [])]
    for f in findings:
        rep = f.get("repair") or {"kind": "none"}
        k = rep.get("kind")
        if k == "replace":
            if uv:
                steps.append(Step((uv, "pip", "uninstall", "--python", exe, *extra, *rep["remove"]),
                                  f"remove {', '.join(rep['remove'])}: it overwrote TensorFlow's files"))
            else:
                steps.append(Step((exe, "-m", "pip", "uninstall", "-y", *extra, *rep["remove"]),
                                  f"remove {', '.join(rep['remove'])}: it overwrote TensorFlow's files"))
            steps.append(pip_backend.pip_install_step(
                exe, [*extra, "--reinstall" if uv else "--force-reinstall", "--no-deps", rep["reinstall"]], uv=uv,
                why=f"put {rep['reinstall']}'s own files back"))
        elif k == "pip":
            reqs += list(rep["requirements"])
            nvidia_path = nvidia_path or bool(rep.get("nvidia_libpath"))  # a wheel whose directory is not searched
        elif k == "activation":
            if rep.get("nvidia_libpath") and not rep.get("optional"):
                nvidia_path = True
            if rep.get("prefix_libpath"):  # the environment's own lib/ (conda's cudatoolkit, cudnn)
                var = "$CONDA_PREFIX" if kind == "conda" else "$VIRTUAL_ENV"
                activation_lines.append(f'LD_LIBRARY_PATH="{var}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"')
            for key, value in (rep.get("vars") or {}).items():
                activation_lines.append(f"{key}={value}")
        elif k == "cuda":
            cuda, cudnn = tf.get("cuda"), tf.get("cudnn")
            if kind == "conda" and conda:
                steps.append(Step((conda, "install", "-y", "-p", prefix, "-c", "conda-forge",
                                   f"cudatoolkit={cuda}", f"cudnn>={cudnn}"),
                                  f"CUDA {cuda} + cuDNN >= {cudnn} from conda-forge into this conda environment"))
            else:
                notes.append(f"no in-place repair: CUDA {cuda} + cuDNN >= {cudnn} are not published as pip wheels "
                             f"(NVIDIA's nvidia-*-cu11/cu12 wheels start with CUDA 11). Install CUDA {cuda} and cuDNN "
                             f"{cudnn} system-wide (NVIDIA's archive) and put their lib64 on LD_LIBRARY_PATH, or build "
                             f"a new environment that brings them: tfgpu create --tf {tf.get('version')}")
        else:
            instead = rep.get("instead")
            if instead:
                notes.append(f"not repairable in place: {f['summary']} -> {instead}")
    if reqs:
        merged = _merge_requirements(reqs)
        steps.append(pip_backend.pip_install_step(exe, [*extra, *merged], uv=uv,
                                                  why="install what this TensorFlow needs: " + ", ".join(merged)))
    steps += activation_steps(kind, prefix, xy, nvidia_path=nvidia_path, lines=activation_lines)
    if nvidia_path and kind != "conda":
        env_vars["LD_LIBRARY_PATH"] = f"{prefix}/lib/python{xy}/site-packages/nvidia/*/lib (each, prepended)"
    for line in activation_lines:
        k, _, v = line.partition("=")
        env_vars[k] = v
    return Plan(tf=str(tf.get("version") or "unknown"), backend="conda" if kind == "conda" else "pip",
                backend_reason=f"tfgpu fix: repair {prefix} in place ({verdict.get('how') or 'named'})",
                prefix=prefix, name=None, python=xy, steps=tuple(steps), env_vars=env_vars, notes=tuple(notes),
                recipe_id="fix", tool="uv" if uv else "pip", env_python=exe, verdict=str(verdict.get("verdict")),
                sources=tuple(sorted({str(f["source"]) for f in findings if f.get("source")})))


def plan_sh(plan: Plan) -> str:
    """The plan as a POSIX sh script (`tfgpu fix --format sh`): every value quoted."""
    out = ["#!/bin/sh", f"# tfgpu fix: {plan.backend_reason}", "set -eu"]
    for step in plan.steps:
        out.append(f"# {step.why}")
        if step.kind == "run":
            out.append(shlex.join(step.argv))
        else:
            op = ">>" if step.kind == "append-file" else ">"
            out.append(f"cat {op} {shlex.quote(str(step.path))} <<'TFGPU_EOF'\n{step.content or ''}TFGPU_EOF")
    out += [f"# note: {n}" for n in plan.notes]
    return "\n".join(out) + "\n"
