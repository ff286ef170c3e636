"""`tfgpu doctor`: read this machine and say which TensorFlow releases will use its GPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from tfgpu.errors import UsageError

BACKENDS = ("auto", "pip", "conda", "rattler")


def doctor(
    tf: Optional[str] = typer.Option(
        None, "--tf", help="Judge one target: a release (2.2.0), a series (2.2) or 'latest'. Exit 1 if not ready."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the versioned JSON document (tfgpu.doctor/1)."),
    facts_file: Optional[str] = typer.Option(
        None, "--facts", metavar="PATH",
        help="Read facts (or an earlier `tfgpu doctor --json` report) from a file instead of probing.",
    ),
    backend: str = typer.Option("auto", "--backend", help="Judge one backend: auto, pip, conda or rattler."),
    require_gpu: bool = typer.Option(False, "--require-gpu", help="Exit 1 when no usable NVIDIA GPU is found."),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    ci: bool = typer.Option(
        False, "--ci", help="JSON on stdout, a plain log on stderr, GitHub annotations and step summary when available."
    ),
    redact_out: bool = typer.Option(False, "--redact", help="Remove user names, the host name and tokens from the output."),
    driver: Optional[str] = typer.Option(
        None, "--driver", help="Override the NVIDIA driver version (env TFGPU_DRIVER_VERSION)."),
    gpu_cc: Optional[str] = typer.Option(
        None, "--gpu-cc", help='Override GPU compute capabilities, e.g. "8.6" or "8.6,7.5" (env TFGPU_GPU_CC).'),
    os_name: Optional[str] = typer.Option(
        None, "--os", help="Override the OS: linux, windows, macos or wsl2 (env TFGPU_OS)."),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help="Seconds each probe may take (env TFGPU_PROBE_TIMEOUT; default 2)."),
) -> int:
    """Probe driver, GPUs, CUDA, cuDNN, Python and OS; say which TensorFlow versions will use the GPU."""
    return run_doctor(tf=tf, json_out=json_out, facts_file=facts_file, backend=backend, require_gpu=require_gpu,
                      strict=strict, ci=ci, redact_out=redact_out,
                      overrides={"driver": driver, "gpu_cc": gpu_cc, "os": os_name}, timeout=timeout)


def gather_facts(
    *, facts_file: str | Path | None = None, overrides: dict[str, str | None] | None = None,
    timeout: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Facts from a file or from probing, then single-fact overrides: flags beat TFGPU_* variables."""
    from tfgpu.facts import apply_overrides, load_facts_file, overrides_from_env

    if facts_file is not None:
        facts: dict[str, Any] = load_facts_file(facts_file)
    else:
        from tfgpu.probe import DEFAULT_TIMEOUT, detect_facts

        facts = detect_facts(timeout=timeout if timeout and timeout > 0 else DEFAULT_TIMEOUT)
    merged = overrides_from_env(os.environ)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return apply_overrides(facts, merged)


def run_doctor(
    *, tf: str | None = None, json_out: bool = False, facts_file: str | Path | None = None, backend: str = "auto",
    require_gpu: bool = False, strict: bool = False, ci: bool = False, redact_out: bool = False,
    overrides: dict[str, str | None] | None = None, timeout: float | None = None,
) -> int:
    import json

    from tfgpu import report
    from tfgpu.compat import load_kb
    from tfgpu.verdict import Machine, diagnose

    if backend not in BACKENDS:
        msg = f"--backend {backend!r} is not one of {', '.join(BACKENDS)}"
        raise UsageError(msg)
    # Load the knowledge base while the probes run: both are needed, neither needs the other.
    import threading

    loader = threading.Thread(target=_warm_kb, daemon=True)
    loader.start()
    facts, active = gather_facts(facts_file=facts_file, overrides=overrides, timeout=timeout)
    loader.join()
    kb = load_kb()
    result = diagnose(facts, kb, tf=tf, backend=backend)
    doc = report.doctor_document(facts, result, data_version=kb.data_version, overrides=active)
    code = result.exit_code(require_gpu=require_gpu, strict=strict, machine=Machine.from_facts(facts))
    doc["exit_code"] = code
    if redact_out:
        doc = report.redact(doc)
    if ci:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stderr.write(report.plain_log(doc))
        if os.environ.get("GITHUB_ACTIONS") == "true":
            for line in report.ci_annotations(doc):
                sys.stderr.write(line + "\n")
        report.write_step_summary(doc, os.environ)
    elif json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        report.render_human(doc, sys.stdout, color=None if sys.stdout.isatty() else False)
    return code


def _warm_kb() -> None:
    from tfgpu.compat import load_kb
    from tfgpu.errors import TfgpuError

    try:
        load_kb()
    except TfgpuError:
        pass  # the main thread calls load_kb() again and reports the error


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
