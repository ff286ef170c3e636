"""`tfgpu doctor`: read this machine and say which TensorFlow releases will use its GPU."""

from __future__ import annotations

from typing import Optional

import typer

from tfgpu.doctor import run_doctor
from tfgpu.options import overrides, typer_option


def doctor(
    tf: Optional[str] = typer.Option(
        None, "--tf", help="Judge one target: a release (2.2.0), a series (2.2) or 'latest'. Exit 1 if not ready."
    ),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.doctor/1)."),
    facts_file: Optional[str] = typer_option("facts"),
    backend: str = typer_option(
        "backend", help="Judge one backend: auto, pip, conda, rattler, or the container route (container, docker, "
                        "podman, apptainer)."),
    require_gpu: bool = typer.Option(False, "--require-gpu", help="Exit 1 when no usable NVIDIA GPU is found."),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    ci: bool = typer.Option(
        False, "--ci", help="JSON on stdout, a plain log on stderr, GitHub annotations and step summary when available."
    ),
    redact_out: bool = typer.Option(False, "--redact", help="Remove user names, the host name and tokens from the output."),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help="Seconds each probe may take (env TFGPU_PROBE_TIMEOUT; default 2)."),
) -> int:
    """Probe driver, GPUs, CUDA, cuDNN, Python and OS; say which TensorFlow versions will use the GPU."""
    return run_doctor(tf=tf, json_out=json_out, facts_file=facts_file, backend=backend, require_gpu=require_gpu,
                      strict=strict, ci=ci, redact_out=redact_out,
                      overrides=overrides(driver, gpu_cc, os_name), timeout=timeout)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
