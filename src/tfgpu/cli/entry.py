"""The `tfgpu` console script. `tfgpu doctor` takes a fast path that never imports the CLI
framework (typer, click, rich): most of a cold start is importing them, and the doctor must feel
instant. Anything unusual (help, an unknown option, a bad value) goes to the full CLI in tfgpu.cli.app,
which reports it the standard way."""

from __future__ import annotations

import os
import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["doctor"]:
        from tfgpu.cli.doctor import parse_fast, run_doctor
        from tfgpu.core.errors import finish, run_guarded

        options = parse_fast(args[1:])
        if options is not None:
            debug = os.environ.get("TFGPU_DEBUG", "") not in ("", "0")
            finish(run_guarded(lambda: run_doctor(**options, fork_probes=True), debug=debug), skip_teardown=True)
    from tfgpu.cli.app import main as full_cli

    full_cli()


if __name__ == "__main__":
    main()
