"""`tfgpu doctor --import`: the runtime truth about an environment. Imports TensorFlow in a child of that
environment's interpreter (envprobe_script.py), has TensorFlow's own loader (its DsoLoader functions, called
in libtensorflow_framework) open each library the verdict predicted, and compares: library by library, the file the loader simulation named with the one the process
mapped; TensorFlow's log explained by tfgpu.judge.explain."""

# Paths here are strings from the facts and the environment.
# ruff: noqa: PTH119
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("envprobe_script.py")
BEGIN, END = "@@TFGPU-ENVPROBE-BEGIN@@", "@@TFGPU-ENVPROBE-END@@"
_LEAKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")


def probe_env(env_facts: Mapping[str, Any], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the child runs with: the caller's, with the environment's activation applied (as read
    statically by tfgpu.facts.environment), without the caller's Python path."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _LEAKS}
    act = env_facts.get("activation") or {}
    for key in ("LD_LIBRARY_PATH", "TF_FORCE_GPU_ALLOW_GROWTH", "TF_USE_LEGACY_KERAS"):
        if act.get(key):
            env[key] = str(act[key])
    env["PYTHONNOUSERSITE"] = "1"
    return env


def parse_output(stdout: str) -> dict[str, Any] | None:
    start, end = stdout.rfind(BEGIN), stdout.rfind(END)
    if start < 0 or end < start:
        return None
    try:
        doc = json.loads(stdout[start + len(BEGIN):end])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def compare(libraries: list[Mapping[str, Any]], probe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per predicted library: what was predicted, what TensorFlow's loader did, and whether they agree.
    libcuda.so.1 is compared too (its absence is what a machine without a driver predicts)."""
    mapped = probe.get("mapped") or []
    loads: Mapping[str, Any] = probe.get("loads") or {}
    out = []
    for lib in libraries:
        name = str(lib["name"])
        real = next((p for p in mapped if os.path.basename(p) == name), None)
        error = loads.get(name) if name in loads else "not tried"
        predicted = lib.get("path") if lib.get("status") == "found" else None
        if real is None and error is None:  # loaded, but under another name (a symlink's target)
            real = next((p for p in mapped if os.path.basename(os.path.realpath(p)) ==
                         os.path.basename(os.path.realpath(str(predicted or "")))), None)
        if predicted and real:
            agree = os.path.realpath(predicted) == os.path.realpath(real)
        else:
            agree = predicted is None and real is None
        out.append({"name": name, "predicted": predicted, "loaded": real, "error": error, "agree": agree,
                    "opened_with": (probe.get("how") or {}).get(name)})
    return out


def import_check(env_facts: Mapping[str, Any], verdict: Mapping[str, Any], *, timeout: float = 300) -> dict[str, Any]:
    """Run the probe in the environment; the runtime section of the doctor's `environment` object."""
    from tfgpu.core import process as run
    from tfgpu.judge.explain import explain_lines

    exe = str(env_facts.get("python") or "")
    if not exe:
        return {"ran": False, "error": "no interpreter found in the environment"}
    names = [str(lib["name"]) for lib in verdict.get("libraries") or []]
    res = run.capture([exe, str(SCRIPT), *names], timeout=timeout, env=probe_env(env_facts))
    probe = parse_output(res.stdout or "")
    if probe is None:
        return {"ran": False, "error": res.describe() if not res.ok else "no result from the probe",
                "stderr_tail": (res.stderr or "")[-2000:]}
    findings = [f for f in explain_lines((res.stderr or "").splitlines()) if not f.harmless]
    libs = compare(verdict.get("libraries") or [], probe)
    return {"ran": True, "import_error": probe.get("import_error"), "tensorflow": probe.get("version"),
            "gpus": probe.get("gpus"), "gpu_error": probe.get("gpu_error"), "mapped": probe.get("mapped"),
            "libraries": libs, "disagree": [x["name"] for x in libs if not x["agree"]],
            "log": [{"id": f.id, "line": f.text, "meaning": f.meaning, "fix": f.fix} for f in findings[:8]]}
