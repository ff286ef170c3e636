"""Typed errors with fixed exit codes; only the CLI layer turns them into an exit."""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable


class ExitCode(enum.IntEnum):
    """Exit codes, fixed for the whole tool (README, "Exit codes")."""

    OK = 0
    NOT_READY = 1  # the check ran and found the target not ready / a step failed
    USAGE = 2  # bad usage or bad input
    INTERNAL = 3  # a bug in tfgpu
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), the shell convention


class TfgpuError(Exception):
    """Base of every error tfgpu raises on purpose.

    ``message`` says what failed; ``hint`` says what to do next (a command where possible).
    """

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and the hint on one line; a message given in lines (what, then why) keeps its lines,
        with the fix on one of its own: a few short lines rather than one long one."""
        lines = [" ".join(line.split()) for line in self.message.splitlines() if line.strip()] or [""]
        hint = " ".join(self.hint.split()) if self.hint else ""
        if len(lines) == 1:  # one line stays one line (scripts grep it)
            return f"{lines[0]} ({hint})" if hint else lines[0]
        text = lines[0] + "".join(f"\n  {line}" for line in lines[1:])
        return text + (f"\n  fix: {hint}" if hint else "")


def clip_words(text: str, limit: int) -> str:
    """``text`` flattened to one line and cut at a word boundary to at most ``limit`` characters (… when cut):
    never mid-word."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit]  # a word that ends exactly at the limit is kept whole (the space after it is the cut)
    space = cut.rfind(" ")
    if space <= 0:  # one long token (a path, a URL): nothing to cut at but the limit
        return text[:limit - 1] + "…"
    return cut[:space].rstrip(" ,;:(") + "…"


class UsageError(TfgpuError):
    """Bad command-line usage or a bad value given by the user."""

    exit_code = ExitCode.USAGE


class InputError(UsageError):
    """A file the user gave (facts, lockfile, log) cannot be used."""


class DataError(TfgpuError):
    """The knowledge base in compat/ is malformed: a bug in tfgpu's data."""

    exit_code = ExitCode.INTERNAL


class NotReady(TfgpuError):
    """The check ran and the target is not ready (exit 1)."""

    exit_code = ExitCode.NOT_READY


class StepFailed(TfgpuError):
    """A step of a plan (an installer, a smoke test) failed."""

    exit_code = ExitCode.NOT_READY


class ProgramNotFound(StepFailed):
    """A program a step needs is not installed."""


class Interrupted(TfgpuError):
    """The user pressed Ctrl-C; what was half-done has been cleaned up."""

    exit_code = ExitCode.INTERRUPTED


def stderr_line(text: str) -> None:
    """One message on stderr, without the escape sequences or bidi controls a file name, a value or a
    log line in it may carry (they would redraw the terminal or reorder what it shows), and with no line
    that a CI runner would take as a workflow command."""
    from tfgpu.core.termtext import terminal_safe, workflow_safe

    sys.stderr.write(workflow_safe(terminal_safe(text)) + "\n")


def error_line(text: str) -> None:
    from tfgpu.core.termtext import mask_secrets

    text = mask_secrets(text)
    if len(text) > 1000:  # a 5,000-character bad value stays one readable line
        text = f"{text[:600]} … {text[-300:]}"
    stderr_line(f"tfgpu: error: {text}")


def run_guarded(fn: Callable[[], int], *, debug: bool) -> int:
    """Run a command and turn what it raises into one line on stderr and a fixed exit code.

    Tracebacks only with ``debug`` (--debug / TFGPU_DEBUG=1): an unexpected exception is a bug."""
    try:
        return fn()
    except TfgpuError as exc:
        try:
            if debug:
                import traceback

                traceback.print_exc()
            error_line(exc.one_line())
        except KeyboardInterrupt:  # a late Ctrl-C (the rest of a burst) while saying what happened
            pass
        return int(exc.exit_code)
    except KeyboardInterrupt:
        error_line("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `tfgpu doctor | head`
        return ExitCode.OK
    except Exception as exc:
        if debug:  # the traceback, and still the exit code of a bug (an escaping exception would be 1)
            import traceback

            traceback.print_exc()
            return ExitCode.INTERNAL
        error_line(
            f"internal error: {type(exc).__name__}: {clip_words(str(exc), 300)} "
            "(a bug in tfgpu: rerun with --debug and report it with `tfgpu doctor --json`)"
        )
        return ExitCode.INTERNAL


def finish(code: int, *, skip_teardown: bool = False) -> None:
    """Leave the process with ``code`` once everything is flushed.

    ``skip_teardown`` (the console script's `tfgpu doctor`) leaves with os._exit: the interpreter's
    finalization (freeing every module and the knowledge base's records) was ~13 ms of a ~110 ms run,
    and there is nothing left to finalize: output is flushed, files are closed, no atexit hook exists."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass
    if skip_teardown or "rattler" in sys.modules:
        # rattler's background threads can touch the GIL during interpreter shutdown
        # ("Fatal Python error: PyGILState_Release"); everything is flushed, so leave now.
        os._exit(code)
    raise SystemExit(code)
