"""Command-line entry point: parse, call one library function, render, exit.

Only this module turns errors into exit codes (errors.ExitCode). Commands live in
tfgpu/cli/commands/, one module each; they import their heavy machinery lazily so that
`tfgpu --help` and `tfgpu doctor` start fast.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from tfgpu import __version__
from tfgpu.core.errors import ExitCode, error_line, finish, run_guarded

app = typer.Typer(
    name="tfgpu",
    help="Environment doctor and installer for TensorFlow on NVIDIA GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        from tfgpu.kb.queries import data_version
        from tfgpu.render import output

        output.say(f"tfgpu {__version__} (knowledge base {data_version()})")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for internal errors."),
) -> None:
    """Environment doctor and installer for TensorFlow on NVIDIA GPUs."""


_registered = False


def _register() -> None:
    """Add the commands to the app once per process (main() may be called many times in tests)."""
    global _registered
    if _registered:
        return
    from tfgpu.cli.commands import register_all

    register_all(app)
    _registered = True


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("TFGPU_DEBUG", "") not in ("", "0")


def _error(text: str) -> None:
    error_line(text)


def _click_exceptions() -> Any:
    """Click's exception classes: vendored inside newer typer, the click package for older ones."""
    try:
        from typer._click import exceptions  # typer >= 0.26 on Python >= 3.11
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions  # type: ignore[no-redef,unused-ignore]
    return exceptions


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and, as a console script, exits with) the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(args)
    _register()
    code = run_guarded(lambda: _invoke(args), debug=debug)
    if argv is None:
        finish(code)
    return code


def _invoke(args: list[str]) -> int:
    """typer/click's own errors (bad usage) -> one line and exit 2; the rest is run_guarded's."""
    cx = _click_exceptions()
    try:
        rv = app(args=args, prog_name="tfgpu", standalone_mode=False)
        return rv if isinstance(rv, int) else ExitCode.OK
    except getattr(cx, "NoArgsIsHelpError", ()) as exc:  # `tfgpu` alone (click >= 8.2): help, exit 0
        from tfgpu.render import output

        output.write_document((exc.ctx.get_help() if exc.ctx else "") + "\n")
        return ExitCode.OK
    except cx.UsageError as exc:
        hint = f" (see 'tfgpu {exc.ctx.info_name if exc.ctx and exc.ctx.parent else ''} --help')"
        hint = hint.replace("tfgpu tfgpu", "tfgpu").replace("tfgpu  --help", "tfgpu --help")
        _error(" ".join(exc.format_message().split()) + hint)
        return ExitCode.USAGE
    except typer.Abort:
        _error("interrupted")
        return ExitCode.INTERRUPTED
    except cx.ClickException as exc:
        _error(" ".join(exc.format_message().split()))
        return int(exc.exit_code)
