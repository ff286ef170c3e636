"""Distinct machines: a report's facts split into what is judged (the machine) and what only names the node
(its identity), the machine's key, the signature administrators compare, and a judgement kept compactly.

Nodes of one model differ in their GPUs' UUIDs, serials and PCI bus ids, their host names and boot ids, and
in when and how fast they were probed; none of that changes a verdict. The key is therefore the judged
facts without that identity, so a fleet of 100,000 nodes of a few hundred kinds is a few hundred machines,
each judged once; each node keeps its identity in a compact record.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The top-level facts sections the verdict reads (tests/unit/tools/test_fleet_machines.py proves that
#: judging reads no other on every recorded machine), plus the schema id. Anything else in a report
#: (notes, timings, provenance, libraries, what a newer probe adds) cannot change a verdict.
JUDGED = ("schema", "platform", "cpu", "python", "driver", "gpus", "lspci_nvidia", "cuda_toolkits", "cudnn",
          "conda", "env", "tensorflow", "containers")
#: Per-GPU fields that name one physical GPU (NVML's nvmlDeviceGetUUID / serial / PCI busId).
GPU_IDENTITY = ("uuid", "serial", "pci_bus_id")
#: Platform fields that name one node, where a report carries them.
HOST_IDENTITY = ("hostname", "boot_id", "machine_id")
#: An identity value is a short string (a UUID is 40 characters); anything else is not one.
MAX_IDENTITY = 256
#: More GPUs than this is not a machine (tfgpu.facts.document caps a facts file at the same number).
MAX_GPUS = 256
#: CUDA_VISIBLE_DEVICES of indices only: the GPUs' UUIDs cannot change which ones are visible.
_INDICES = re.compile(r"[0-9, ]*")


class IdentityError(ValueError):
    """A report's identity fields are not what the facts schema allows."""


@dataclass(frozen=True)
class Split:
    """A report's facts split: ``key_text`` is the canonical JSON of the judged facts without identity."""

    facts: dict[str, Any]
    key_text: str
    identity: str | None  # compact JSON of the node's identity, None when it has none
    rest: dict[str, Any]  # the sections that are not judged (validated, then dropped)


def split_facts(facts: Mapping[str, Any]) -> Split:
    """The judged facts without per-node identity, and that identity. Raises IdentityError when an
    identity value is not a short string (or null), or the report lists more GPUs than a machine has."""
    judged = {k: facts[k] for k in JUDGED if k in facts}
    rest = {k: v for k, v in facts.items() if k not in judged}
    identity: dict[str, Any] = {}
    gpus = judged.get("gpus")
    if isinstance(gpus, list):
        if len(gpus) > MAX_GPUS:
            msg = f"the facts list {len(gpus)} GPUs (more than {MAX_GPUS}): not one machine"
            raise IdentityError(msg)
        cvd = _env_cvd(judged.get("env"))
        keep_uuid = cvd is not None and not _INDICES.fullmatch(cvd)  # a UUID there decides what is visible
        fields = tuple(f for f in GPU_IDENTITY if not (keep_uuid and f == "uuid"))
        stripped, ids = [], []
        for i, g in enumerate(gpus):
            if isinstance(g, dict) and any(f in g for f in fields):
                mine = {f: _identity_value(g[f], f"gpus[{i}].{f}") for f in fields if f in g}
                stripped.append({k: (None if k in mine else v) for k, v in g.items()})
                ids.append({k: v for k, v in mine.items() if v is not None})
            else:
                stripped.append(g)
                ids.append({})
        if any(ids):
            identity["gpus"] = ids
        judged["gpus"] = stripped
    platform = judged.get("platform")
    if isinstance(platform, dict) and any(f in platform for f in HOST_IDENTITY):
        mine = {f: _identity_value(platform[f], f"platform.{f}") for f in HOST_IDENTITY if f in platform}
        judged["platform"] = {k: v for k, v in platform.items() if k not in mine}
        identity.update({k: v for k, v in mine.items() if v is not None})
    key_text = json.dumps(judged, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return Split(judged, key_text, json.dumps(identity, separators=(",", ":")) if identity else None, rest)


def _env_cvd(env: Any) -> str | None:
    value = env.get("CUDA_VISIBLE_DEVICES") if isinstance(env, dict) else None
    return None if value is None else str(value)


def _identity_value(value: Any, where: str) -> str | None:
    if value is None or (isinstance(value, str) and len(value) <= MAX_IDENTITY):
        return value
    msg = f"facts.{where}: expected a string of at most {MAX_IDENTITY} characters or null"
    raise IdentityError(msg)


def machine_key(key_text: str) -> str:
    """The machine's id in the fleet document: the first 16 hex digits of the judged facts' digest (the
    merge itself keys machines by the whole digest)."""
    return hashlib.sha256(key_text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- the signature


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def signature(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts an administrator compares across nodes: driver, GPUs, OS, the runtime around them."""
    gpus: list[Any] = facts["gpus"] if isinstance(facts.get("gpus"), list) else []
    gpu_names = []
    for g in gpus:
        if isinstance(g, Mapping):
            name = g.get("name") or f"GPU cc {g.get('compute_capability') or '?'}"
            gpu_names.append(str(name))
    counted = Counter(gpu_names)
    platform: Mapping[str, Any] = facts["platform"] if isinstance(facts.get("platform"), Mapping) else {}
    os_text = " ".join(str(platform.get(k)) for k in ("os", "distro", "arch") if platform.get(k))
    if platform.get("wsl"):
        os_text += " (WSL2)"
    driver = _dig(facts, "driver", "version")
    kernel, user = _dig(facts, "driver", "kernel_module"), _dig(facts, "driver", "user_library")
    sig: dict[str, Any] = {
        "driver": str(driver) if driver else None,
        "gpus": ", ".join(f"{n} × {name}" for name, n in sorted(counted.items())) or None,
        "gpu_count": len(gpu_names),
        "os": os_text or None,
        "glibc": platform.get("glibc"),
        "driver_mismatch": (f"kernel module {kernel} ≠ user library {user}"
                            if _dig(facts, "driver", "mismatch") and kernel and user else None),
        "avx": _dig(facts, "cpu", "avx"),
    }
    toolkit = _container_toolkit(facts)
    if toolkit is not None:
        sig["container_toolkit"] = toolkit
    return sig


def _container_toolkit(facts: Mapping[str, Any]) -> str | None:
    """'present' / 'missing' from the container probes, when the report has them."""
    section = facts.get("containers")
    if not isinstance(section, Mapping):
        return None
    toolkit = section.get("toolkit") or section.get("nvidia_container_toolkit")
    if isinstance(toolkit, Mapping):
        found = toolkit.get("present")
        if found is None:
            found = any(bool(v) for k, v in toolkit.items() if k in ("nvidia_ctk", "nvidia_container_cli", "runtime"))
        return "present" if found else "missing"
    if isinstance(toolkit, bool):
        return "present" if toolkit else "missing"
    return None


SIGNATURE_LABELS = {
    "driver": "driver", "gpus": "GPUs", "gpu_count": "GPU count", "os": "OS", "glibc": "glibc",
    "driver_mismatch": "driver kernel/user mismatch", "avx": "CPU AVX", "container_toolkit": "container toolkit",
}


# --------------------------------------------------------------------------- judgements


@dataclass(frozen=True)
class Judgement:
    """What the fleet shows of a judged machine: a cell per series, the --tf cell, the checks that did
    not pass. Kept packed (compressed JSON: a judgement repeats its reasons, ~15 kB as objects, a few
    hundred bytes packed) and shared by every machine judged alike (``Judgements.intern``), so the merge
    holds little more per machine than its report's size; unpacked for the groups the document shows."""

    verdict_items: tuple[tuple[str, str], ...]
    target_verdict: str | None
    packed: bytes

    def verdicts(self) -> dict[str, str]:
        return dict(self.verdict_items)

    def _unpacked(self) -> list[Any]:
        value: list[Any] = json.loads(zlib.decompress(self.packed))
        return value

    @property
    def cells(self) -> dict[str, dict[str, Any] | None]:
        cells: dict[str, dict[str, Any] | None] = self._unpacked()[0]
        return cells

    @property
    def target(self) -> dict[str, Any] | None:
        target: dict[str, Any] | None = self._unpacked()[1]
        return target

    @property
    def checks(self) -> list[dict[str, Any]]:
        checks: list[dict[str, Any]] = self._unpacked()[2]
        return checks


def cell(t: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A target's verdict as the fleet shows it: the release, verdict, backend and the first reason."""
    if not t:
        return None
    why = ""
    if t.get("verdict") == "blocked" and t.get("blockers"):
        why = str(t["blockers"][0].get("summary", ""))
    elif t.get("verdict") == "caveats" and t.get("caveats"):
        why = str(t["caveats"][0].get("summary", ""))
    return {"tf": t.get("tf"), "verdict": t.get("verdict"), "backend": t.get("backend"), "why": why}


def judgement(doc: Mapping[str, Any], target_doc: Mapping[str, Any] | None) -> Judgement:
    """The fleet's view of a doctor document this tfgpu wrote (and of its --tf document, when asked)."""
    cells = {str(t.get("series") or t.get("tf", "?")): cell(t) for t in doc["targets"]}
    targets = (target_doc or {}).get("targets") or []
    target = cell(targets[0]) if targets else None
    checks = [c for c in doc["checks"] if c.get("status") in ("fail", "warn", "error")]
    packed = zlib.compress(json.dumps([cells, target, checks], allow_nan=False).encode(), 6)
    return Judgement(verdict_items=tuple((s, str((c or {}).get("verdict", "?"))) for s, c in cells.items()),
                     target_verdict=(target or {}).get("verdict"), packed=packed)


class Judgements:
    """One Judgement object per distinct content: machines judged alike share it (and its verdicts),
    so memory grows with the distinct judgements, not with the machines."""

    def __init__(self) -> None:
        self._by_packed: dict[bytes, Judgement] = {}
        self._verdicts: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}

    def intern(self, j: Judgement) -> Judgement:
        found = self._by_packed.get(j.packed)
        if found is None:
            items = self._verdicts.setdefault(j.verdict_items, j.verdict_items)
            found = self._by_packed[j.packed] = Judgement(items, j.target_verdict, j.packed)
        return found

    def __len__(self) -> int:
        return len(self._by_packed)


# --------------------------------------------------------------------------- nodes


@dataclass
class DistinctMachine:
    """One distinct machine (identical judged facts): its judgement and the nodes that reported it."""

    key: str
    signature: dict[str, Any]
    judgement: Judgement | None = None  # set once judged (tfgpu.tools.fleet.judging)
    rejudged: bool = False  # a node of it sent a report of another tfgpu or knowledge base (or bare facts)
    nodes: list[str] = field(default_factory=list)
    #: each node's identity (compact JSON; None when its report had none), in the order of ``nodes``
    identities: list[str | None] = field(default_factory=list)

    @property
    def judged(self) -> Judgement:
        if self.judgement is None:
            msg = f"machine {self.key} is not judged yet"
            raise RuntimeError(msg)
        return self.judgement

    def verdicts(self) -> dict[str, str]:
        return self.judged.verdicts()


class NodeNames:
    """Unique node names in linear time: a second `gpu` is `gpu#2`, a third `gpu#3` (a name taken by a
    report of its own is skipped); each base name remembers where its numbering stopped."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._next: dict[str, int] = {}

    def add(self, name: str) -> str:
        if name not in self._seen:
            self._seen.add(name)
            return name
        n = self._next.get(name, 2)
        while f"{name}#{n}" in self._seen:
            n += 1
        self._next[name] = n + 1
        unique = f"{name}#{n}"
        self._seen.add(unique)
        return unique


def printable(name: Any, limit: int = 120) -> str:
    """A node name as the fleet keeps it: printable characters only (others as '?'), bounded."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(name))[:limit]

