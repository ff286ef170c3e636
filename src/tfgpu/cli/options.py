"""The command-line options several commands share, defined once (pipx's add_backend_arg idea).

Each option has one flag, one metavar, one meaning and one help text everywhere. This module does not
import typer: the doctor's fast path (tfgpu.cli.doctor.OPTIONS, used by the console script before the CLI
framework is loaded) is generated from the same table as the typer commands (:func:`typer_option`).
"""

from __future__ import annotations

from tfgpu.core.record import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing before the doctor's probe child forks
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any



@record
class OptionSpec:
    flags: tuple[str, ...]
    dest: str  # the keyword of the library function
    kind: type  # str | bool | float
    help: str
    metavar: str | None = None
    default: Any = None


BACKEND_HELP = ("The backend: auto (the recipe the doctor recommends; the config file's \\[backends] prefer is tried "
                "first), pip (uv or python -m venv), conda (mamba/micromamba/conda) or rattler (tfgpu's embedded conda "
                "engine); or a GPU container image: docker, podman, apptainer, or container (whichever is set up).")

#: Every option more than one command takes, defined once: one flag, one metavar, one meaning. A command may
#: pass its own help to :func:`typer_option` to say more, but it starts with the same meaning (the words
#: before the first ":", "(" or full stop; tests/unit/cli/test_help.py checks every command).
SHARED: dict[str, OptionSpec] = {
    "facts": OptionSpec(("--facts",), "facts_file", str, metavar="FILE",
                        help="Read the facts (or an earlier `tfgpu doctor --json` report) from this file instead of "
                             "probing this machine."),
    "driver": OptionSpec(("--driver",), "driver", str, metavar="VERSION",
                         help="Assume this NVIDIA driver version (env TFGPU_DRIVER_VERSION)."),
    "gpu_cc": OptionSpec(("--gpu-cc",), "gpu_cc", str, metavar="X.Y[,X.Y]",
                         help='Assume GPUs of these compute capabilities, e.g. "8.6" or "8.6,7.5" (env TFGPU_GPU_CC).'),
    "os": OptionSpec(("--os",), "os_name", str, metavar="OS",
                     help="Assume this OS: linux, windows, macos or wsl2 (env TFGPU_OS)."),
    "backend": OptionSpec(("--backend",), "backend", str, metavar="BACKEND", default="auto", help=BACKEND_HELP),
    "json": OptionSpec(("--json",), "json_out", bool, default=False, help="Print the versioned JSON document."),
    "timeout": OptionSpec(("--timeout",), "timeout", float, metavar="SECONDS",
                          help="Give up after this many seconds."),
    "yes": OptionSpec(("--yes", "-y"), "yes", bool, default=False, help="Do not ask for confirmation."),
    "force": OptionSpec(("--force",), "force", bool, default=False, help="Go ahead where tfgpu would stop."),
    "strict": OptionSpec(("--strict",), "strict", bool, default=False, help="Warnings fail too (exit 1)."),
    "verbose": OptionSpec(("--verbose", "-v"), "verbose", bool, default=False,
                          help="Show everything: every note, caveat and detail in full, not only what to act on."),
    "redact": OptionSpec(("--redact",), "redact_out", bool, default=False,
                         help="Remove user names, the host name and tokens from the output."),
    "no_probe": OptionSpec(("--no-probe",), "no_probe", bool, default=False,
                           help="Do not read this machine to make causes specific."),
    # the environment options of plan and create (lock and smoke share --python, --channel, --platform...)
    "tf": OptionSpec(("--tf",), "tf", str, metavar="VERSION",
                     help="TensorFlow: a release (2.2.0), a series (2.2) or `latest`."),
    "from_lock": OptionSpec(("--from-lock",), "from_lock", str, metavar="FILE",
                            help="Build exactly what a lockfile pins, without solving: conda-lock's format (tfgpu "
                                 "lock) or a --require-hashes requirements file (tfgpu lock --backend pip). "
                                 "Instead of --tf."),
    "platform": OptionSpec(("--platform",), "platform", str, metavar="PLATFORM",
                           help="Conda platform: to install from the lock (default: this machine's, e.g. linux-64)."),
    "name": OptionSpec(("--name", "-n"), "name", str, metavar="NAME", help="The environment's name."),
    "prefix": OptionSpec(("--prefix", "-p"), "prefix", str, metavar="DIR", help="The environment's directory."),
    "python": OptionSpec(("--python",), "python", str, metavar="X.Y", help="Python X.Y of the environment."),
    "channel": OptionSpec(("--channel", "-c"), "channels", str, metavar="CHANNEL",
                          help="A conda channel name or URL (repeatable). Precedence: --channel, then `channels = "
                               "[...]` in the config file ($TFGPU_CONFIG, else ~/.config/tfgpu/config.toml), then "
                               "the recipe's channels. Anaconda's defaults/anaconda channels fall under Anaconda's "
                               "Terms of Service; conda-forge does not."),
    "find_links": OptionSpec(("--find-links",), "find_links", str, metavar="PATH",
                             help="Extra wheel directory or URL for pip (repeatable)."),
    "index_url": OptionSpec(("--index-url",), "index_url", str, metavar="URL",
                            help="Package index for pip (env TFGPU_PIP_INDEX_URL)."),
    "offline": OptionSpec(("--offline",), "offline", bool, default=False,
                          help="No network: pip/uv use only the given wheels; --from-lock installs from the package "
                               "cache only."),
    "cpu": OptionSpec(("--cpu",), "cpu", bool, default=False,
                      help="The CPU route: tensorflow-cpu on x86_64 Linux and Windows from 2.1 (else tensorflow, a CPU build there), never "
                           "\\[and-cuda] or nvidia-* wheels; the smoke test checks CPU ops. For a machine without a "
                           "usable GPU."),
    "allow_cpu": OptionSpec(("--allow-cpu",), "allow_cpu", bool, default=False,
                            help="A CPU-only smoke result is a success."),
    "image": OptionSpec(("--image",), "image", str, metavar="IMAGE", help="The container image to use."),
    "dry_run": OptionSpec(("--dry-run",), "dry_run", bool, default=False,
                          help="Judge and show the plan; change nothing."),
    "format": OptionSpec(("--format",), "fmt", str, metavar="FORMAT", help="Print the plan as a file format."),
    "output": OptionSpec(("--output", "-o"), "output", str, metavar="FILE", help="The file to write."),
}

#: The facts options every command that reads the machine takes (doctor, plan, create, lock, smoke, explain).
FACTS_OPTIONS = ("facts", "driver", "gpu_cc", "os")


def overrides(driver: str | None, gpu_cc: str | None, os_name: str | None) -> dict[str, str | None]:
    """The flag overrides, keyed as tfgpu.facts.document.apply_overrides wants them."""
    return {"driver": driver, "gpu_cc": gpu_cc, "os": os_name}


_SHARED_DEFAULT: Any = object()


def typer_option(key: str, *, help: str | None = None, default: Any = _SHARED_DEFAULT, **extra: Any) -> Any:
    """The typer Option for a shared option: its flags, metavar and help from :data:`SHARED` (``help`` only
    where a command must say more, keeping the meaning; ``default`` where it differs, ``...`` for a required
    option, as typer spells it; click's ``extra``, e.g. ``min``)."""
    import typer

    spec = SHARED[key]
    return typer.Option(spec.default if default is _SHARED_DEFAULT else default, *spec.flags, metavar=spec.metavar,
                        help=help or spec.help, **extra)


def fast_options(specs: tuple[OptionSpec, ...]) -> dict[str, tuple[str, type]]:
    """flag -> (keyword, type) for a hand-rolled parser (the doctor's fast path), from the same specs as
    the typer command: every spelling of every option."""
    return {flag: (spec.dest, spec.kind) for spec in specs for flag in spec.flags}


def typer_command(specs: tuple[OptionSpec, ...], run: Callable[..., int], doc: str) -> Callable[..., int]:
    """A typer command whose options are exactly ``specs`` (its signature is generated from them), calling
    ``run(**values)``: the command and a fast path built with :func:`fast_options` cannot disagree."""
    import inspect
    from typing import Optional

    import typer

    def command(**values: Any) -> int:
        return run(**values)

    annotations: dict[str, Any] = {}
    parameters = []
    for spec in specs:
        kind: Any = spec.kind if spec.kind is bool or spec.default is not None else Optional[spec.kind]
        annotations[spec.dest] = kind
        option = typer.Option(spec.default, *spec.flags, metavar=spec.metavar, help=spec.help)
        parameters.append(inspect.Parameter(spec.dest, inspect.Parameter.KEYWORD_ONLY, default=option,
                                            annotation=kind))
    annotations["return"] = int
    command.__signature__ = inspect.Signature(parameters, return_annotation=int)  # type: ignore[attr-defined]
    command.__annotations__ = annotations
    command.__doc__ = doc
    return command
