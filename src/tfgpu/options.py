"""The command-line options several commands share, defined once (pipx's add_backend_arg idea).

Each option has one flag, one metavar, one meaning and one help text everywhere. This module does not
import typer: the doctor's fast path (tfgpu.doctor.OPTIONS, used by the console script before the CLI
framework is loaded) is generated from the same table as the typer commands (:func:`typer_option`).
"""

from __future__ import annotations

from typing import Any

from tfgpu._record import record

#: The values --backend takes, everywhere (doctor, plan, create, lock).
BACKENDS = ("auto", "pip", "conda", "rattler")
#: The container route (issue 19): the --backend values that run a GPU image. doctor, plan and create accept
#: them in addition to BACKENDS; each has its row of runtimes in tfgpu.runners.RUNNERS, the one table of
#: runners (a test checks that the rows and these values agree).
CONTAINER_BACKENDS = ("container", "docker", "podman", "apptainer")

@record
class OptionSpec:
    flags: tuple[str, ...]
    dest: str  # the keyword of the library function
    kind: type  # str | bool | float
    help: str
    metavar: str | None = None
    default: Any = None


BACKEND_HELP = ("auto, pip (uv or python -m venv), conda (mamba/micromamba/conda) or rattler (tfgpu's embedded "
                "conda engine); or a GPU container image: docker, podman, apptainer, or container (whichever is set "
                "up). auto takes the recipe the doctor recommends and tries the config file's \\[backends] prefer first.")

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
    # the environment options of plan and create (lock shares --python, --channel, --platform's meaning)
    "tf": OptionSpec(("--tf",), "tf", str, help="A release (2.2.0), a series (2.2) or `latest`."),
    "from_lock": OptionSpec(("--from-lock",), "from_lock", str, metavar="FILE",
                            help="Build exactly what a lockfile pins, without solving: conda-lock's format (tfgpu "
                                 "lock) or a --require-hashes requirements file (tfgpu lock --backend pip). "
                                 "Instead of --tf."),
    "platform": OptionSpec(("--platform",), "platform", str,
                           help="conda platform to install from the lock (default: this machine's, e.g. linux-64)."),
    "name": OptionSpec(("--name", "-n"), "name", str, help="Environment name."),
    "prefix": OptionSpec(("--prefix", "-p"), "prefix", str, help="Environment directory."),
    "python": OptionSpec(("--python",), "python", str, help="Python X.Y for the environment."),
    "channel": OptionSpec(("--channel", "-c"), "channels", str,
                          help="conda channel name or URL (repeatable). Precedence: --channel, then `channels = "
                               "[...]` in the config file ($TFGPU_CONFIG, else ~/.config/tfgpu/config.toml), then "
                               "the recipe's channels. Anaconda's defaults/anaconda channels fall under Anaconda's "
                               "Terms of Service; conda-forge does not."),
    "find_links": OptionSpec(("--find-links",), "find_links", str,
                             help="Extra wheel directory/URL for pip (repeatable)."),
    "index_url": OptionSpec(("--index-url",), "index_url", str,
                            help="Package index for pip (env TFGPU_PIP_INDEX_URL)."),
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
