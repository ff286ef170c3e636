"""The environment verdict as human text: what `tfgpu doctor` prints first when a TensorFlow is installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STYLE = {"gpu": "bold green", "cpu-only": "bold yellow", "broken": "bold red", "no-tensorflow": "bold"}
WORDS = {"gpu": "USES THE GPU", "cpu-only": "CPU ONLY", "broken": "BROKEN", "no-tensorflow": "NO TENSORFLOW"}


def environment_lines(env: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(text, style) lines: the verdict, each reason with its evidence and fix, the libraries, the repair."""
    tf = env.get("tensorflow") or {}
    where = f"{env.get('prefix')} (Python {env.get('python_version') or '?'}, {env.get('how')})"
    head = (f"TensorFlow in this environment: {tf.get('distribution')} {tf.get('version')}: "
            if tf else "TensorFlow in this environment: ")
    out = [(head + WORDS.get(str(env.get("verdict")), str(env.get("verdict"))), STYLE.get(str(env.get("verdict")), "")),
           (f"  environment: {where}", "dim")]
    for f in env.get("blockers") or []:
        out.append((f"  ✗ {f['summary']}", "red"))
        if f.get("evidence"):
            out.append((f"      evidence: {f['evidence']}", "dim"))
        out.append((f"      fix: {f['fix']}", "cyan"))
    for f in env.get("caveats") or []:
        out.append((f"  ! {f['summary']}", "yellow"))
        out.append((f"      fix: {f['fix']}", "cyan"))
    libs = env.get("libraries") or []
    if libs:
        out.append(("  libraries (the loader's search, simulated):", "bold"))
        for lib in libs:
            if lib.get("path"):
                ver = f" {lib['version']}" if lib.get("version") else ""
                out.append((f"    {lib['name']} -> {lib['path']}{ver} (via {lib['via']})",
                            "green" if lib.get("status") == "found" else "yellow"))
            else:
                instead = f"; found instead: {', '.join(lib['found_instead'][:3])}" if lib.get("found_instead") else ""
                other = f" (on {lib['runpath_of']}'s RUNPATH, not searched)" if lib.get("runpath_of") else ""
                out.append((f"    {lib['name']} -> not found{other}{instead}", "red"))
    rt = env.get("runtime")
    if rt:
        out += runtime_lines(rt)
    if env.get("fix"):
        out.append((f"  repair in place: {env['fix']}  (tfgpu fix --dry-run shows the plan)", "bold"))
    return out


def runtime_lines(rt: Mapping[str, Any]) -> list[tuple[str, str]]:
    if not rt.get("ran"):
        return [(f"  import tensorflow (in the environment): did not run: {rt.get('error')}", "red")]
    out = []
    if rt.get("import_error"):
        out.append((f"  import tensorflow (in the environment): FAILED: {rt['import_error']}", "red"))
    else:
        gpus = rt.get("gpus")
        out.append((f"  import tensorflow (in the environment): {rt.get('tensorflow')}, GPUs: "
                    + (", ".join(gpus) if gpus else "none"), "green" if gpus else "yellow"))
    for lib in rt.get("libraries") or []:
        mark = "=" if lib["agree"] else "≠"
        out.append((f"    {mark} {lib['name']}: predicted {lib['predicted'] or 'not found'}, loaded "
                    f"{lib['loaded'] or 'none'}" + (f" ({lib['error']})" if lib.get("error") and not lib["agree"] else ""),
                    "dim" if lib["agree"] else "red"))
    for f in rt.get("log") or []:
        out.append((f"    log: {f['id']}: {f['meaning']}", "yellow"))
    return out
