"""Drift between two merges: which nodes changed driver, CUDA, verdict or ready releases since the last one
(`tfgpu fleet diff OLD.json NEW.json`, and a section of the fleet page with `fleet merge --since OLD.json`).

Pure: two fleet documents (tfgpu.fleet/1) in, a drift document (tfgpu.fleet-diff/1) out. A node's CUDA is
the newest CUDA its driver runs (what nvidia-smi shows as "CUDA Version"), from this knowledge base's
driver table (compat/cuda.toml), as the verdict reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu.core.errors import InputError
from tfgpu.tools.fleet.nodes import node_results

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase

SCHEMA = "tfgpu.fleet-diff/1"
FLEET_SCHEMA = "tfgpu.fleet/1"
#: A merged fleet document of 100,000 nodes is tens of MB; refuse what cannot be one.
MAX_DOC_BYTES = 512 * 1024 * 1024
FIELDS = ("driver", "cuda", "verdict", "tf_ready")
LABELS = {"driver": "driver", "cuda": "driver's CUDA", "verdict": "verdict", "tf_ready": "newest usable series",
          "releases": "ready releases"}


def driver_cuda(kb: KnowledgeBase | None, driver: Any, os_text: Any) -> str | None:
    """The newest CUDA a driver runs on the node's OS (the signature's "os" text), or None."""
    from packaging.version import InvalidVersion, Version

    from tfgpu.kb.knowledge import newest_cuda_for_driver

    if kb is None or not isinstance(driver, str):
        return None
    try:
        found = newest_cuda_for_driver(kb, Version(driver), "windows" if str(os_text).startswith("windows")
                                       or "(WSL2)" in str(os_text) else "linux")
    except InvalidVersion:
        return None
    return None if found is None else str(found)


def _node_view(doc: Mapping[str, Any], kb: KnowledgeBase | None) -> dict[str, dict[str, Any]]:
    """{node: {driver, cuda, verdict, tf_ready, releases}} of one fleet document."""
    machines = {n: (g.get("machine") or {}, g.get("verdicts") or {}) for g in doc.get("groups") or []
                for n in g.get("nodes") or []}
    out = {}
    for r in node_results(doc):
        machine, cells = machines.get(r.node, ({}, {}))
        releases = sorted({str(c["tf"]) for s, c in cells.items() if s in r.usable and c and c.get("tf")})
        out[r.node] = {"driver": r.driver, "cuda": driver_cuda(kb, r.driver, machine.get("os")), "verdict": r.verdict,
                       "tf_ready": r.tf_ready, "releases": releases}
    return out


def fleet_diff(old: Mapping[str, Any], new: Mapping[str, Any], kb: KnowledgeBase | None = None) -> dict[str, Any]:
    """What changed from ``old`` to ``new``: nodes added, removed, and changed (field by field; CUDA with
    ``kb``)."""
    a, b = _node_view(old, kb), _node_view(new, kb)
    changed = []
    for node in sorted(set(a) & set(b)):
        changes = []
        for field in (*FIELDS, "releases"):
            before, after = a[node][field], b[node][field]
            if before != after:
                entry: dict[str, Any] = {"field": field, "label": LABELS[field], "old": before, "new": after}
                if field == "releases":
                    entry["lost"] = sorted(set(before) - set(after))
                    entry["gained"] = sorted(set(after) - set(before))
                changes.append(entry)
        if changes:
            changed.append({"node": node, "changes": changes})
    return {
        "schema": SCHEMA,
        "old": {"data_version": old.get("data_version"), "tfgpu_version": old.get("tfgpu_version"), "nodes": len(a)},
        "new": {"data_version": new.get("data_version"), "tfgpu_version": new.get("tfgpu_version"), "nodes": len(b)},
        "added": sorted(set(b) - set(a)),
        "removed": sorted(set(a) - set(b)),
        "changed": changed,
        "unchanged": len(set(a) & set(b)) - len(changed),
    }


def load_fleet_document(path: str) -> dict[str, Any]:
    """A `tfgpu fleet merge --json` document from a file: bounded, parsed as RFC 8259 JSON, its schema
    checked. Raises InputError (exit 2) naming the file and the problem."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_DOC_BYTES + 1)
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise InputError(msg, hint="give the output of `tfgpu fleet merge ... --json`") from None
    if len(data) > MAX_DOC_BYTES:
        msg = f"{path} is larger than 512 MB: not a fleet document"
        raise InputError(msg)

    def refuse(name: str) -> Any:
        msg = f"{name} is not JSON"
        raise ValueError(msg)

    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        msg = f"{path} is not a JSON document: {' '.join(str(exc).split())[:120]}"
        raise InputError(msg, hint="give the output of `tfgpu fleet merge ... --json`") from None
    if not isinstance(doc, dict) or doc.get("schema") != FLEET_SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        msg = f"{path} is not a fleet document (schema {str(found)[:60]!r}, not {FLEET_SCHEMA!r})"
        raise InputError(msg, hint="give the output of `tfgpu fleet merge ... --json`")
    if not isinstance(doc.get("groups"), list) or not all(_group_ok(g) for g in doc["groups"]):
        msg = f"{path}: its groups are not those of a fleet document"
        raise InputError(msg)
    return doc


def _group_ok(g: Any) -> bool:
    return (isinstance(g, dict) and isinstance(g.get("nodes"), list) and all(isinstance(n, str) for n in g["nodes"])
            and isinstance(g.get("verdicts"), dict) and all(c is None or isinstance(c, dict) for c in g["verdicts"].values())
            and isinstance(g.get("machine"), dict) and (g.get("target") is None or isinstance(g["target"], dict)))


def render_text(diff: Mapping[str, Any]) -> list[str]:
    """The drift as lines of text (the caller makes them terminal-safe)."""
    lines = [f"{len(diff['changed'])} node(s) changed, {len(diff['added'])} added, {len(diff['removed'])} removed, "
             f"{diff['unchanged']} unchanged (knowledge base {diff['old']['data_version']} -> {diff['new']['data_version']})"]
    for entry in diff["changed"]:
        parts = []
        for c in entry["changes"]:
            if c["field"] == "releases":
                moved = [*(f"-{r}" for r in c["lost"]), *(f"+{r}" for r in c["gained"])]
                parts.append(f"ready releases {' '.join(moved)}")
            else:
                parts.append(f"{c['label']} {c['old'] or 'none'} -> {c['new'] or 'none'}")
        lines.append(f"  {entry['node']}: " + "; ".join(parts))
    if diff["added"]:
        lines.append("  added: " + ", ".join(diff["added"][:50]) + (" …" if len(diff["added"]) > 50 else ""))
    if diff["removed"]:
        lines.append("  removed: " + ", ".join(diff["removed"][:50]) + (" …" if len(diff["removed"]) > 50 else ""))
    return lines
