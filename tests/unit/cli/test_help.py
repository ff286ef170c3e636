"""`--help` says the same thing the same way everywhere: every option's metavar from one vocabulary (none
for a flag), every help a sentence (capital first, full stop last), and a flag that several commands take
means one thing: it is defined once in tfgpu.cli.options.SHARED, with one spelling and one metavar, and each
command's help starts with the shared meaning (the words before the first ":", "(", ";" or full stop; a
command may add detail after it, never say something else)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tfgpu.cli import options
from tfgpu.cli.options import SHARED

#: The metavars an option may show. Arguments (LOGFILE, FILE..., REPORT...) are not options.
METAVARS = frozenset({
    "VERSION",     # a TensorFlow release or series, a driver, a CUDA version
    "X.Y",         # a Python or compute capability
    "X.Y[,X.Y]",
    "OS", "BACKEND", "FORMAT", "PLATFORM", "CHANNEL", "SPEC", "SHA256",
    "PATH", "FILE", "DIR", "URL", "NAME", "IMAGE", "SECONDS", "N", "HOSTLIST", "PATTERN", "HH:MM:SS",
})


def commands() -> Iterator[tuple[str, Any]]:
    """(`tfgpu ...` name, click command) for every leaf command, fleet's subcommands included."""
    import typer.main

    from tfgpu.cli.app import _register, app

    _register()

    def walk(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, (*path, name))
        else:
            yield " ".join(path), cmd

    yield from walk(typer.main.get_command(app), ())


def params() -> Iterator[tuple[str, Any]]:
    """Every parameter of every command, the root's (--version, --debug) included."""
    import typer.main

    from tfgpu.cli.app import app

    root = typer.main.get_command(app)
    for name, cmd in [("(root)", root), *commands()]:
        for p in cmd.params:
            if "--help" not in p.opts:
                yield name, p


def long_flag(p: Any) -> str:
    return next(o for o in p.opts if o.startswith("--"))


def is_flag(p: Any) -> bool:
    return bool(getattr(p, "is_flag", False))


def shared_by_flag() -> dict[str, options.OptionSpec]:
    return {spec.flags[0]: spec for spec in SHARED.values()}


def meaning(text: str) -> str:
    return re.split(r" \(|[:;,]|\.(?:\s|$)", text, maxsplit=1)[0]


def violations() -> list[str]:
    out = []
    by_flag: dict[str, list[tuple[str, Any]]] = {}
    for name, p in params():
        where = f"tfgpu {name} {'/'.join(p.opts) if p.param_type_name == 'option' else p.name.upper()}"
        text = (getattr(p, "help", None) or "").strip()
        if not text:
            out.append(f"{where}: no help")
        elif not (text[0].isupper() and text.endswith(".")):
            out.append(f"{where}: help is not a sentence (capital first, full stop last): {text!r}")
        if p.param_type_name != "option":
            continue
        if is_flag(p):
            if p.metavar is not None:
                out.append(f"{where}: a flag with a metavar {p.metavar!r}")
        elif p.metavar not in METAVARS:
            out.append(f"{where}: metavar {p.metavar!r} is not one of {sorted(METAVARS)}")
        by_flag.setdefault(long_flag(p), []).append((name, p))
    shared = shared_by_flag()
    for flag, uses in sorted(by_flag.items()):
        if len(uses) < 2:
            continue
        spec = shared.get(flag)
        if spec is None:
            out.append(f"{flag}: taken by {', '.join(n for n, _ in uses)} but not defined once in tfgpu.cli.options.SHARED")
            continue
        for name, p in uses:
            where = f"tfgpu {name} {flag}"
            if tuple(sorted(p.opts)) != tuple(sorted(spec.flags)):
                out.append(f"{where}: spelled {'/'.join(p.opts)}, shared as {'/'.join(spec.flags)}")
            if p.metavar != spec.metavar:
                out.append(f"{where}: metavar {p.metavar!r}, shared as {spec.metavar!r}")
            if meaning(getattr(p, "help", None) or "") != meaning(spec.help):
                out.append(f"{where}: help does not start with the shared meaning {meaning(spec.help)!r}")
            if is_flag(p) != (spec.kind is bool):
                out.append(f"{where}: a flag in one command, an option taking a value in another")
    return out


def test_every_command_says_what_it_does_in_a_sentence() -> None:
    import typer.main

    from tfgpu.cli.app import app

    found = []
    for name, cmd in [("(root)", typer.main.get_command(app)), *commands()]:
        first = (cmd.help or "").strip().split("\n\n")[0].strip()
        if not (first[:1].isupper() and first.endswith(".")):
            found.append(f"tfgpu {name}: {first!r}")
    assert found == []


def test_help_is_consistent_across_every_command() -> None:
    found = violations()
    assert found == [], f"{len(found)} --help inconsistencies:\n" + "\n".join(found)


def test_lock_backend_conda_says_what_it_does() -> None:
    lock = dict(commands())["lock"]
    text = next(p.help for p in lock.params if "--backend" in p.opts)
    assert "conda: " in text or "conda, " in text
    assert "embedded" in text
    assert "conda-lock's format" in text
    assert "no conda" in text  # it does not run conda, mamba or conda-lock


@pytest.mark.parametrize("key", sorted(SHARED))
def test_every_shared_option_is_a_sentence_with_a_metavar_from_the_vocabulary(key: str) -> None:
    spec = SHARED[key]
    assert spec.help[0].isupper(), spec.help
    assert spec.help.endswith("."), spec.help
    assert (spec.metavar is None) if spec.kind is bool else (spec.metavar in METAVARS), spec


def test_a_required_shared_option_stays_required(cli: Any) -> None:
    # found while moving lock's --tf to the shared definition: `default=...` (typer's "required") was read
    # as "the shared default", so `tfgpu lock` without --tf was an internal error (exit 3), not a usage error
    lock = dict(commands())["lock"]
    assert next(p for p in lock.params if "--tf" in p.opts).required
    rc, _, err = cli("lock")
    assert rc == 2
    assert "Missing option '--tf'" in err
