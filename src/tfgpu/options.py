"""The command-line options several commands share, defined once (pipx's add_backend_arg idea).

Each option has one flag, one metavar, one meaning and one help text everywhere. This module does not
import typer: the doctor's fast path (tfgpu.doctor.OPTIONS, used by the console script before the CLI
framework is loaded) is generated from the same table as the typer commands (:func:`typer_option`).
"""

from __future__ import annotations

from typing import Any

from tfgpu._record import record


@record
class OptionSpec:
    flags: tuple[str, ...]
    dest: str  # the keyword of the library function
    kind: type  # str | bool | float
    help: str
    metavar: str | None = None
    default: Any = None


BACKEND_HELP = ("auto, pip (uv or python -m venv), conda (mamba/micromamba/conda) or rattler (tfgpu's embedded "
                "conda engine). auto takes the recipe the doctor recommends and tries the config file's "
                "\\[backends] prefer first.")

SHARED: dict[str, OptionSpec] = {
    "facts": OptionSpec(("--facts",), "facts_file", str, metavar="PATH",
                        help="Read facts (or an earlier `tfgpu doctor --json` report) from a file instead of "
                             "probing this machine."),
    "driver": OptionSpec(("--driver",), "driver", str, metavar="VERSION",
                         help="Assume this NVIDIA driver version (env TFGPU_DRIVER_VERSION)."),
    "gpu_cc": OptionSpec(("--gpu-cc",), "gpu_cc", str, metavar="X.Y[,X.Y]",
                         help='Assume GPUs of these compute capabilities, e.g. "8.6" or "8.6,7.5" (env TFGPU_GPU_CC).'),
    "os": OptionSpec(("--os",), "os_name", str, metavar="OS",
                     help="Assume this OS: linux, windows, macos or wsl2 (env TFGPU_OS)."),
    "backend": OptionSpec(("--backend",), "backend", str, metavar="BACKEND", default="auto", help=BACKEND_HELP),
    "json": OptionSpec(("--json",), "json_out", bool, default=False, help="Print the versioned JSON document."),
}

#: The facts options every command that reads the machine takes (doctor, plan, create, lock, smoke, explain).
FACTS_OPTIONS = ("facts", "driver", "gpu_cc", "os")


def overrides(driver: str | None, gpu_cc: str | None, os_name: str | None) -> dict[str, str | None]:
    """The flag overrides, keyed as tfgpu.facts.apply_overrides wants them."""
    return {"driver": driver, "gpu_cc": gpu_cc, "os": os_name}


def typer_option(key: str, *, help: str | None = None, default: Any = ..., metavar: str | None = None) -> Any:
    """The typer Option for a shared option (``help``/``default`` only where a command must say more)."""
    import typer

    spec = SHARED[key]
    return typer.Option(spec.default if default is ... else default, *spec.flags,
                        metavar=metavar or spec.metavar, help=help or spec.help)
