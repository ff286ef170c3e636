"""`tfgpu export` and `tfgpu validate` as a library: read an environment (the one named, the one in a facts file,
or the active one) and the machine, judge it as the doctor does (tfgpu.judge.environment), describe it as a spec
(tfgpu.judge.envspec, pure), read back a spec someone gave, and compare."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu.core.errors import InputError, UsageError

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase

#: A spec is a few kB; anything this large is not one (and is not read into memory whole).
MAX_SPEC_BYTES = 1 << 20
NAME_HINT = "name the environment: --python ENV/bin/python, --prefix DIR or --name NAME"


def read_environment(*, facts_file: str | None = None, python: str | None = None, prefix: str | None = None,
                     name: str | None = None, overrides: dict[str, str | None] | None = None,
                     ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """(the machine's facts, the environment's facts or None when it holds no TensorFlow, where it is).

    The environment: the one named (--python/--prefix/--name, read here), else the one a `tfgpu doctor --json`
    report given as ``facts_file`` holds, else the active one here. The machine: ``facts_file``'s, else this one
    probed; the overrides (--driver, --gpu-cc, --os, TFGPU_*) on top, as for every command."""
    from tfgpu.facts.gather import gather_facts

    target = None
    if python or prefix or name:
        from tfgpu.build.envtarget import named_environment

        target = named_environment(python=python, prefix=prefix, name=name)
    if facts_file is None:
        facts, _ = gather_facts(overrides=overrides, environment=target)
    else:
        facts, _ = gather_facts(facts_file=facts_file, overrides=overrides)
        if target is not None or not isinstance(facts.get("environment"), dict):
            facts["environment"] = _probe_here(target)
    env = facts.get("environment")
    env = env if isinstance(env, dict) else None
    where = {"prefix": (env or target or {}).get("prefix"), "how": (env or target or {}).get("how"),
             "python": (env or target or {}).get("python")}
    if env is None and target is None:
        from tfgpu.facts.environment import locate

        where["prefix"], where["how"] = locate(env=os.environ, own_prefix=sys.prefix)
    return facts, env, where


def _probe_here(target: dict[str, Any] | None) -> dict[str, Any] | None:
    """The environment's facts read on this machine (the named one, else the active one)."""
    from tfgpu.facts.environment import locate, probe_environment

    if target is None:
        prefix, how = locate(env=os.environ, own_prefix=sys.prefix)
        if prefix is None:
            return None
        target = {"prefix": prefix, "how": how, "explicit": False}
    return probe_environment(str(target["prefix"]), how=str(target.get("how") or ""), shell_env=os.environ,
                             explicit=bool(target.get("explicit")))


def describe(facts: dict[str, Any], env: dict[str, Any] | None, kb: KnowledgeBase) -> dict[str, Any]:
    """The spec of ``env`` on the machine ``facts`` describe (tfgpu.judge.envspec.make_spec), judged as the
    doctor judges it; without a TensorFlow, a spec with no tensorflow section."""
    from tfgpu import __version__
    from tfgpu.judge.environment import NO_TF, judge_environment
    from tfgpu.judge.envspec import make_spec
    from tfgpu.kb.sonames import load_sonames

    verdict = judge_environment(env, facts, kb, load_sonames()) if env is not None else {"verdict": NO_TF}
    return make_spec(env or {}, verdict, facts, kb, tfgpu_version=__version__, data_version=kb.data_version)


def export_spec(*, facts_file: str | None = None, python: str | None = None, prefix: str | None = None,
                name: str | None = None, overrides: dict[str, str | None] | None = None) -> dict[str, Any]:
    """The spec (tfgpu.envspec/1) of the named (or active) environment; refused (exit 2) without a TensorFlow."""
    from tfgpu.kb.knowledge import load_kb

    facts, env, where = read_environment(facts_file=facts_file, python=python, prefix=prefix, name=name,
                                         overrides=overrides)
    spec = describe(facts, env, load_kb())
    if "tensorflow" not in spec:
        msg = f"no TensorFlow in {where['prefix'] or 'the active environment'} ({where['how']}): nothing to export"
        raise UsageError(msg, hint=NAME_HINT)
    return spec


def validate_spec(spec_file: str, *, facts_file: str | None = None, python: str | None = None,
                  prefix: str | None = None, name: str | None = None, overrides: dict[str, str | None] | None = None,
                  strict: bool = False) -> dict[str, Any]:
    """The `tfgpu validate` document (tfgpu.validate/1): what differs between the spec in ``spec_file`` and the
    named (or active) environment on this machine (or the one ``facts_file`` describes), and its exit code."""
    from tfgpu.judge.envspec import validation_document
    from tfgpu.kb.knowledge import load_kb

    spec = load_spec(spec_file)
    facts, env, where = read_environment(facts_file=facts_file, python=python, prefix=prefix, name=name,
                                         overrides=overrides)
    actual = describe(facts, env, load_kb())
    return validation_document(spec, actual, spec_file=spec_file, environment=where, strict=strict)


def load_spec(path: str) -> dict[str, Any]:
    """A spec file someone gave (TOML or JSON), bounded and checked against its schema; InputError (exit 2)
    naming the file and the problem."""
    from tfgpu.core.sysio import read_text_file

    if Path(path).is_dir():
        msg = f"spec file {path} is a directory"
        raise InputError(msg, hint="give the file `tfgpu export -o FILE` wrote")
    text = read_text_file(path, what="spec file", limit=MAX_SPEC_BYTES, noun="an environment spec",
                          hint="give the file `tfgpu export -o FILE` wrote in the environment that works (a few kB)")
    doc = _parse(text, path)
    from tfgpu.core.safety import too_deep
    from tfgpu.judge.envspec import SCHEMA, check_spec

    if not isinstance(doc, dict) or too_deep(doc, 16) or not _plain(doc):
        msg = f"spec file {path} does not hold an environment spec (a TOML table or a JSON object)"
        raise InputError(msg, hint="give the file `tfgpu export -o FILE` wrote")
    if doc.get("schema") != SCHEMA:
        msg = f"spec file {path} has schema {str(doc.get('schema'))[:40]!r}; tfgpu reads {SCHEMA!r}"
        raise InputError(msg, hint="export it again with this tfgpu: tfgpu export -o FILE")
    problem = check_spec(doc)
    if problem:
        msg = f"spec file {path}: {problem}"
        raise InputError(msg, hint="export it again (tfgpu export -o FILE), or fix that value")
    return doc


def _parse(text: str, path: str) -> Any:
    """JSON when the file says so (its name, or its first character), else TOML."""
    import json

    def refuse(name: str) -> Any:
        msg = f"{name} is not JSON"  # NaN, Infinity: Python's json reads them, RFC 8259 has none
        raise ValueError(msg)

    if path.endswith(".json") or text.lstrip().startswith("{"):
        try:
            return json.loads(text, parse_constant=refuse)
        except (json.JSONDecodeError, RecursionError) as exc:
            where = f" (line {exc.lineno}, column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
            msg = f"spec file {path} is not valid JSON{where}"
            raise InputError(msg) from None
        except ValueError as exc:  # an integer of thousands of digits
            msg = f"spec file {path} is not valid JSON: {' '.join(str(exc).split())[:120]}"
            raise InputError(msg) from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError) as exc:
        msg = f"spec file {path} is not valid TOML ({' '.join(str(exc).split())[:160]})"
        raise InputError(msg) from None


def _plain(doc: Any) -> bool:
    """Whether a parsed document holds only JSON's kinds of value (TOML also has dates and times)."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif not isinstance(value, (str, int, float, bool)):
            return False
    return True
