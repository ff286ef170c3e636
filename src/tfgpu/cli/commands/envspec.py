"""`tfgpu export` (write what a working environment is: an environment spec, TOML or JSON) and `tfgpu validate`
(what differs between a spec and this or another environment, and whether it matters; exit codes for CI). The
library is tfgpu.api.envspec; the rules are tfgpu.judge.envspec's."""

from __future__ import annotations

from typing import Optional

import typer

from tfgpu.cli.options import overrides, typer_option

PYTHON_HELP = ("Python X.Y of the environment: here, the interpreter (EXE) of the environment to {what} (default: the "
               "active one).")
FACTS_HELP = ("Read the facts (or an earlier `tfgpu doctor --json` report) from this file instead of probing this "
              "machine: the driver and GPUs {what}; a report's environment is used when none is named.")


def export_cmd(
    output: Optional[str] = typer_option("output", help="The file to write (TOML, or JSON when its name ends in "
                                                        ".json; default: standard output)."),
    force: bool = typer_option("force", help="Go ahead where tfgpu would stop: replace an existing file."),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.envspec/1) instead of TOML."),
    python: Optional[str] = typer_option("python", help=PYTHON_HELP.format(what="describe")),
    prefix: Optional[str] = typer_option("prefix", help="The environment's directory: the one to describe."),
    name: Optional[str] = typer_option("name", help="The environment's name: a tfgpu or conda environment to "
                                                    "describe."),
    facts_file: Optional[str] = typer_option("facts", help=FACTS_HELP.format(what="the spec records as where it "
                                                                                  "was exported")),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
) -> int:
    """Write what this (or the named) environment is: an environment spec for `tfgpu validate`.

    The spec (tfgpu.envspec/1) holds TensorFlow (distribution, version), the CUDA runtime and cuDNN it loads, the
    driver floor for that CUDA, the GPU architectures the build carries, Python, and the key pins (numpy,
    protobuf, keras, tf-keras, ml-dtypes, nvidia-* wheels) with the range each may move in. TOML by default.
    An existing file is never replaced without --force. Exit 0 when written; 2 when the environment holds no
    TensorFlow, the file exists, or an option is bad."""
    from tfgpu.api.envspec import export_spec
    from tfgpu.core.errors import UsageError
    from tfgpu.render import output as out
    from tfgpu.render.envspec import export_lines, spec_text

    as_json = json_out or (output or "").lower().endswith(".json")
    if json_out and output and output != "-" and output.lower().endswith(".toml"):
        msg = f"--json writes JSON, but {output} names a TOML file"
        raise UsageError(msg, hint="drop --json, or name the file *.json")
    spec = export_spec(facts_file=facts_file, python=python, prefix=prefix, name=name,
                       overrides=overrides(driver, gpu_cc, os_name))
    text = spec_text(spec, "json" if as_json else "toml")
    if not output or output == "-":
        out.write_document(text)
        return 0
    from tfgpu.core.sysio import write_new_file

    write_new_file(output, text, force=force, hint="pass --force to replace it, or give another -o FILE")
    out.lines([((line, style),) for line, style in export_lines(spec, output)], err=True, one_line=True)
    return 0


def validate_cmd(
    spec_file: str = typer.Argument(..., metavar="SPEC", help="The spec file (TOML or JSON) `tfgpu export` wrote."),
    python: Optional[str] = typer_option("python", help=PYTHON_HELP.format(what="check")),
    prefix: Optional[str] = typer_option("prefix", help="The environment's directory: the one to check."),
    name: Optional[str] = typer_option("name", help="The environment's name: a tfgpu or conda environment to check."),
    facts_file: Optional[str] = typer_option("facts", help=FACTS_HELP.format(what="checked against the spec (e.g. the "
                                                                                  "production machine's, from CI)")),
    driver: Optional[str] = typer_option("driver"),
    gpu_cc: Optional[str] = typer_option("gpu_cc"),
    os_name: Optional[str] = typer_option("os"),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.validate/1)."),
    strict: bool = typer_option("strict", help="Warnings fail too (exit 1): here, risky differences."),
) -> int:
    """Say what differs between an environment spec and this (or the named) environment, and whether it matters.

    Each difference is informational (another TensorFlow patch, a pin moved within its range, another GPU model the
    build runs on), risky (a pin outside its range or gone, another Python minor, a GPU that only JIT-compiles PTX,
    an older CUDA or cuDNN minor) or blocking (a driver below the spec's floor or none, a GPU the build carries no
    code for, another CUDA or cuDNN major, another TensorFlow series, a CPU build, no TensorFlow, a blocker of the
    environment verdict the exported environment did not have).

    Exit codes: 0 no blocking difference (risky ones are listed; with --strict they fail too); 1 a blocking
    difference; 2 bad input (a missing or malformed spec, a bad option)."""
    from tfgpu.api.envspec import validate_spec
    from tfgpu.render import output as out
    from tfgpu.render.envspec import validation_lines

    doc = validate_spec(spec_file, facts_file=facts_file, python=python, prefix=prefix, name=name,
                        overrides=overrides(driver, gpu_cc, os_name), strict=strict)
    if json_out:
        out.write_json(doc)
    else:
        out.lines([((line, style),) for line, style in validation_lines(doc)], one_line=True)
    return int(doc["exit_code"])


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)
    app.command("validate")(validate_cmd)
