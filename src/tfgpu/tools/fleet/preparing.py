"""One fleet report reduced to what the merge keeps (tfgpu.tools.fleet.merge): its schema and versions
checked, its facts split into machine and identity (tfgpu.tools.fleet.machines), the sections no verdict
reads checked by type, its machine digested, its node named. Runs in the merge's process or in its
reading workers (tfgpu.tools.fleet.judging)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfgpu import __version__
from tfgpu.tools.fleet.machines import IdentityError, printable, split_facts
from tfgpu.tools.fleet.reading import FACTS_SCHEMA, Problem, Report

DOCTOR_SCHEMA = "tfgpu.doctor/1"


def _facts_of(item: Report, kb_version: str) -> tuple[Any, str | None] | Problem:
    """(the report's facts, why it counts as re-judged or None) or the Problem with it."""
    head = item.head
    schema = head.get("schema")
    if schema == FACTS_SCHEMA:
        return head, "a facts document (never judged)"
    if schema != DOCTOR_SCHEMA:
        return Problem(item.source, f"schema {str(schema)[:60]!r} is not {DOCTOR_SCHEMA!r} "
                                    "(the output of `tfgpu doctor --json`)")
    current = head.get("tfgpu_version") == __version__ and head.get("data_version") == kb_version
    foreign = None if current else f"tfgpu {head.get('tfgpu_version', '?')}, knowledge base {head.get('data_version', '?')}"
    return head.get("facts"), foreign


def _unjudged_problem(rest: Mapping[str, Any]) -> str | None:
    """The sections no verdict reads (timings, provenance, notes, ...) are never used: each report's are
    checked for the type the facts schema gives them (the judged sections are validated against the whole
    schema once per distinct machine)."""
    from tfgpu.facts.document import facts_schema

    props = facts_schema()["properties"]
    for key, value in rest.items():
        kind = props.get(key, {}).get("type") if isinstance(props.get(key), dict) else None
        kinds = kind if isinstance(kind, list) else [kind] if kind else []
        if kinds and not any(_JSON_TYPES[k](value) for k in kinds):
            return f"facts: facts.{key}: expected {' or '.join(kinds)}, got {type(value).__name__}"
    return None


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str), "null": lambda v: v is None, "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _node_name(facts: Mapping[str, Any], marker_node: str | None, source: str) -> str | None:
    """A marker's node=NAME, else the file name (slurm/ansible write <node>.json), else the report's host
    name; None when none (the merge numbers it)."""
    name = marker_node
    if not name and source != "-" and not source.rpartition(":")[2].isdigit():
        stem = Path(source).name
        name = stem[:-5] if stem.endswith(".json") else stem
    if not name:
        host = facts.get("platform", {}).get("hostname") if isinstance(facts.get("platform"), dict) else None
        name = str(host) if host and host != "<host>" else None
    return printable(name) if name else None


@dataclass(frozen=True)
class Prepared:
    """One report reduced to what the merge keeps: where it came from, its node name (None: numbered by
    the merge), why it counts as re-judged, its machine's digest, its identity; the judged facts and
    their canonical text only the first time its reader saw that machine."""

    source: str
    name: str | None
    why: str | None
    digest: bytes
    identity: str | None
    facts: dict[str, Any] | None = None
    key_text: str | None = None


def prepare(item: Report | Problem, data_version: str, seen: set[bytes]) -> Prepared | Problem:
    """A report's facts split, checked and digested (tfgpu.tools.fleet.machines); ``seen`` are the machines
    this reader has passed on already (their facts are not sent again)."""
    if isinstance(item, Problem):
        return item
    found = _facts_of(item, data_version)
    if isinstance(found, Problem):
        return found
    facts, why = found
    if not isinstance(facts, dict):
        return Problem(item.source, "the report has no facts")
    try:
        split = split_facts(facts)
    except IdentityError as exc:
        return Problem(item.source, str(exc))
    except ValueError:  # a number beyond a float (1e999): not a fact
        return Problem(item.source, "not a tfgpu report: a number out of range")
    bad_section = _unjudged_problem(split.rest)
    if bad_section:
        return Problem(item.source, bad_section)
    digest = hashlib.sha256(split.key_text.encode()).digest()
    name = _node_name(facts, item.node, item.source)
    if digest in seen:
        return Prepared(item.source, name, why, digest, split.identity)
    seen.add(digest)
    return Prepared(item.source, name, why, digest, split.identity, split.facts, split.key_text)


