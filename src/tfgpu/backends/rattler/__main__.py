"""`python -m tfgpu.backends.rattler create|install-lock ...`: the embedded conda engine as a plan step.

Exit codes are tfgpu's (errors.ExitCode): 0 done, 1 the solve/install failed, 2 bad usage, 3 a bug,
130 interrupted. Failures print one line on stderr: ``tfgpu-engine: error: ...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tfgpu.backends.rattler import virtual
from tfgpu.core.errors import ExitCode, TfgpuError

PROG = "python -m tfgpu.backends.rattler"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Solve and install conda packages without conda.")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("create", help="solve SPEC... and install them into a new prefix")
    c.add_argument("--prefix", required=True, type=Path, help="the new environment (must not exist)")
    c.add_argument("--channel", "-c", action="append", default=[], help="channel name or URL (repeatable)")
    c.add_argument("--platform", default=None, help="conda platform (default: this machine's)")
    c.add_argument("--virtual-package", action="append", default=[], metavar="NAME=VERSION[=BUILD]",
                   help="treat a virtual package as installed, e.g. __cuda=12.4 (repeatable)")
    c.add_argument("--no-virtual-detect", action="store_true",
                   help="do not read this machine's virtual packages (only --virtual-package and CONDA_OVERRIDE_*)")
    c.add_argument("--driver-cuda", default=None, metavar="VERSION|none",
                   help="the CUDA the driver supports, as the plan's facts say (none: no driver); "
                        "tfgpu's probe is then not run again")
    c.add_argument("--cache-dir", type=Path, default=None, help="rattler cache (default: rattler's own)")
    c.add_argument("--offline", action="store_true", help="use only cached repodata and packages")
    c.add_argument("specs", nargs="+", metavar="SPEC", help="conda match specs, e.g. python=3.8")

    i = sub.add_parser("install-lock", help="install exactly the packages of a conda-lock file")
    i.add_argument("--prefix", required=True, type=Path)
    i.add_argument("--lock", required=True, type=Path, help="conda-lock.yml (version 1) or pixi.lock")
    i.add_argument("--platform", default=None)
    i.add_argument("--cache-dir", type=Path, default=None)
    i.add_argument("--offline", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from tfgpu.backends import rattler as engine

    try:
        if args.command == "create":
            explicit = [virtual.parse_virtual_package(v) for v in args.virtual_package]
            created = engine.create_env(
                args.specs, args.prefix, args.channel, platform=args.platform, virtual_packages=explicit,
                detect=not args.no_virtual_detect, cache_dir=args.cache_dir, offline=args.offline,
                driver_cuda_known=None if args.driver_cuda is None else
                (None if args.driver_cuda == "none" else args.driver_cuda,),
            )
            for note in created.notes:
                print(f"# {note}")
            print("# virtual packages: " + (" ".join(str(v) for v in created.virtual_packages) or "none"))
            for line in engine.describe(created.records):
                print(f"+ {line}")
            print(f"created {created.prefix} ({len(created.records)} packages)")
        else:
            records = engine.install_lockfile(args.lock, args.prefix, platform=args.platform,
                                              cache_dir=args.cache_dir, offline=args.offline)
            for line in engine.describe(records):
                print(f"+ {line}")
            print(f"created {args.prefix} from {args.lock} ({len(records)} packages)")
    except TfgpuError as exc:
        sys.stderr.write(f"tfgpu-engine: error: {exc.one_line()}\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("tfgpu-engine: error: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    return int(ExitCode.OK)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalization: rattler's tokio worker threads can still touch the GIL while
    # Python shuts down ("Fatal Python error: PyGILState_Release ... finalizing", seen here once in
    # a few runs), which would turn a finished install into a crash with a random exit code.
    os._exit(code)
