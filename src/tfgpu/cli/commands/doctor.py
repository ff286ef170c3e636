"""`tfgpu doctor`: read this machine and say which TensorFlow releases will use its GPU."""

from __future__ import annotations

from typing import Any

import typer

from tfgpu.cli.doctor import DOCTOR_OPTIONS, doctor_keywords, run_doctor
from tfgpu.cli.options import typer_command


def _doctor(**values: Any) -> int:
    return run_doctor(**doctor_keywords(values))


#: Its options are tfgpu.cli.doctor.DOCTOR_OPTIONS, the table the console script's fast path is generated from.
doctor = typer_command(DOCTOR_OPTIONS, _doctor, "Probe driver, GPUs, CUDA, cuDNN, Python and OS; say which TensorFlow "
                                                "versions will use the GPU.")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
