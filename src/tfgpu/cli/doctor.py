"""`tfgpu doctor`: its options (one table for the typer command and the fast path) and its rendering; the report
itself comes from tfgpu.api.doctor.doctor_report, as `tfgpu.doctor()` gets it.

Nothing here imports typer: the console entry point (tfgpu.cli.entry) runs the doctor through
:func:`parse_fast` without loading the CLI framework, which is most of a cold start.
"""

from __future__ import annotations

import os
import sys

from tfgpu.api.doctor import doctor_document
from tfgpu.cli.options import SHARED, OptionSpec, fast_options
from tfgpu.core.record import replace

# What the console script imports before the probe child forks is kept small (no typing, pathlib or json
# here): the child starts sooner, and both processes import the rest at the same time on two cores.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


#: Every option of `tfgpu doctor`, in --help's order. Both the typer command (tfgpu.cli.commands.doctor, through
#: tfgpu.cli.options.typer_command) and the console script's fast path (:data:`OPTIONS`) are generated from
#: this one table: the shared options as tfgpu.cli.options.SHARED defines them, the doctor's own beside them.
DOCTOR_OPTIONS: tuple[OptionSpec, ...] = (
    replace(SHARED["tf"], help="TensorFlow: a release (2.2.0), a series (2.2) or `latest`, judged alone; exit 1 if "
                               "it is not ready."),
    replace(SHARED["json"], help="Print the versioned JSON document (tfgpu.doctor/1)."),
    SHARED["facts"],
    replace(SHARED["backend"], help="The backend, judged alone: auto, pip, conda, rattler, or the container route "
                                    "(container, docker, podman, apptainer)."),
    OptionSpec(("--require-gpu",), "require_gpu", bool, default=False,
               help="Exit 1 when no usable NVIDIA GPU is found."),
    SHARED["strict"],
    OptionSpec(("--ci",), "ci", bool, default=False,
               help="JSON on stdout, a plain log on stderr, GitHub annotations and step summary when available."),
    SHARED["redact"],
    SHARED["driver"],
    SHARED["gpu_cc"],
    SHARED["os"],
    replace(SHARED["timeout"], help="Give up after this many seconds: on each probe (env TFGPU_PROBE_TIMEOUT; "
                                    "default 2)."),
    replace(SHARED["python"], help="Python X.Y of the environment: here, the interpreter (EXE) of the environment "
                                   "whose TensorFlow is judged (default: the active one)."),
    replace(SHARED["prefix"], help="The environment's directory: its TensorFlow is judged."),
    replace(SHARED["name"], help="The environment's name: a tfgpu environment or a conda environment; its "
                                 "TensorFlow is judged."),
    OptionSpec(("--import",), "import_tf", bool, default=False,
               help="Import TensorFlow in that environment (a child process): the libraries it really maps, "
                    "its GPUs and its log, against the prediction."),
    replace(SHARED["verbose"], help="Show everything: every note, caveat and detail in full, not only what to act on "
                                    "(the recipes' verification, the caveats a backend choice handles)."),
)
#: The fast path's table: flag -> (keyword of run_doctor, type), every spelling of every option above.
OPTIONS: dict[str, tuple[str, type]] = fast_options(DOCTOR_OPTIONS)
OVERRIDE_KEYS = {"driver": "driver", "gpu_cc": "gpu_cc", "os_name": "os"}


def doctor_keywords(values: dict[str, Any]) -> dict[str, Any]:
    """Option values (keyed as in :data:`DOCTOR_OPTIONS`) -> run_doctor keywords: the overrides gathered.
    Used by the fast path and the typer command alike."""
    out = {k: v for k, v in values.items() if k not in OVERRIDE_KEYS}
    out["overrides"] = {OVERRIDE_KEYS[k]: v for k, v in values.items() if k in OVERRIDE_KEYS}
    return out


def parse_fast(args: list[str]) -> dict[str, Any] | None:
    """`tfgpu doctor` arguments -> run_doctor keywords, or None for anything unusual (help, an
    unknown option, a missing or bad value): the full CLI then handles it and reports errors."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        flag, eq, value = args[i].partition("=")
        spec = OPTIONS.get(flag)
        if spec is None:
            return None
        dest, kind = spec
        if kind is bool:
            if eq:
                return None
            out[dest] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if kind is float:
            try:
                number = float(value)
            except ValueError:
                return None
            out[dest] = number
        else:
            out[dest] = value
    return doctor_keywords(out)


def run_doctor(
    *, tf: str | None = None, json_out: bool = False, facts_file: str | Path | None = None, backend: str = "auto",
    require_gpu: bool = False, strict: bool = False, ci: bool = False, redact_out: bool = False,
    overrides: dict[str, str | None] | None = None, timeout: float | None = None, fork_probes: bool = False,
    python: str | None = None, prefix: str | None = None, name: str | None = None, import_tf: bool = False,
    verbose: bool = False,
) -> int:
    """`tfgpu doctor`: the report (tfgpu.api.doctor.doctor_report, as `tfgpu.doctor()` makes it), rendered."""
    plain_json = json_out and not (ci or redact_out)
    doc = doctor_document(tf=tf, facts_file=facts_file, backend=backend, require_gpu=require_gpu, strict=strict,
                          overrides=overrides, timeout=timeout, fork_probes=fork_probes, python=python, prefix=prefix,
                          name=name, import_tf=import_tf, prepare=_json_writer if plain_json else _report_writer)
    code = int(doc["exit_code"])
    if plain_json:
        from tfgpu.render import output

        output.write_json(doc)
        return code
    from tfgpu.render import report

    if redact_out:
        doc = report.redact(doc)
    if ci:
        from tfgpu.render import output

        output.write_json(doc)
        from tfgpu.core.safety import workflow_safe
        from tfgpu.core.termtext import terminal_safe

        # every line written in CI mode: no escape sequences, no workflow command from the facts
        sys.stderr.write(workflow_safe(terminal_safe(report.plain_log(doc))))
        if os.environ.get("GITHUB_ACTIONS") == "true":
            for line in report.ci_annotations(doc):
                sys.stderr.write(terminal_safe(line, keep_newlines=False) + "\n")
        report.write_step_summary(doc, os.environ)
    elif json_out:
        from tfgpu.render import output

        output.write_json(doc)
    else:
        report.render_human(doc, sys.stdout, verbose=verbose)
    return code


def _json_writer() -> None:
    """What writing the JSON document imports (the JSON text writer), imported while the probes run."""
    from tfgpu.core import jsontext  # noqa: F401
    from tfgpu.render import output  # noqa: F401


def _report_writer() -> None:
    """What the report, the CI log and redaction import, imported while the probes run."""
    _json_writer()
    from tfgpu.render import report  # noqa: F401
