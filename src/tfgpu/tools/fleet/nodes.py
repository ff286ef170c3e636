"""Each node's result in the scheduler's terms: its verdict and the newest TensorFlow series usable on it,
as Kubernetes node labels, Slurm node features (`scontrol update` lines) and Ansible host facts.

Pure: a fleet document (tfgpu.fleet/1) in, values out. Node names come from reports (someone else's
text): a value that reaches a label, a shell line or YAML is checked against that place's syntax first
and left out, with the reason, when it does not fit.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Node labels tfgpu sets (Kubernetes: a DNS subdomain prefix, "/", a name).
LABEL_VERDICT = "tfgpu.io/verdict"
LABEL_TF_READY = "tfgpu.io/tf-ready"
USABLE = ("ready", "caveats")
#: Kubernetes label values: at most 63 characters, alphanumerics at both ends, "-", "_", "." inside
#: (kubernetes.io/docs/concepts/overview/working-with-objects/labels, "Syntax and character set").
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
#: A Kubernetes node name: a DNS subdomain (RFC 1123), at most 253 characters.
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: A Slurm node name as slurm.conf takes it (a host name; no hostlist brackets or separators).
_SLURM_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: Slurm features are words joined by "," in AvailableFeatures; constraint operators cannot be in one.
_SLURM_FEATURE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
#: The features tfgpu owns on a Slurm node (the others are kept as they are): tf<series>.
_OUR_FEATURE = re.compile(r"tf[0-9]+\.[0-9]+")


@dataclass(frozen=True)
class NodeResult:
    """One node of a merged fleet: its group, verdict and the newest series usable on it."""

    node: str
    group: str
    verdict: str  # ready | caveats | blocked (of --tf X when asked, else of the newest usable series)
    tf_ready: str | None  # the newest series usable (ready or caveats), e.g. "2.21"
    usable: tuple[str, ...]  # every usable series, newest first
    driver: str | None
    gpu_count: int

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "verdict": self.verdict, "tf_ready": self.tf_ready,
                "usable": list(self.usable), "driver": self.driver, "gpu_count": self.gpu_count}


def node_results(doc: Mapping[str, Any]) -> list[NodeResult]:
    """Every node of a fleet document, sorted by name."""
    series: list[str] = list(doc.get("series") or [])
    out = []
    for g in doc.get("groups") or []:
        cells = g.get("verdicts") or {}
        usable = tuple(s for s in series if (cells.get(s) or {}).get("verdict") in USABLE)
        newest = usable[0] if usable else None
        if doc.get("target") is not None:
            verdict = str((g.get("target") or {}).get("verdict") or "blocked")
        else:
            verdict = str((cells.get(newest) or {}).get("verdict")) if newest else "blocked"
        machine = g.get("machine") or {}
        for node in g.get("nodes") or []:
            out.append(NodeResult(node=str(node), group=str(g.get("id")), verdict=verdict, tf_ready=newest,
                                  usable=usable, driver=machine.get("driver"),
                                  gpu_count=int(machine.get("gpu_count") or 0)))
    return sorted(out, key=lambda r: r.node)


# --------------------------------------------------------------------------- Kubernetes


def label_value(value: str | None) -> str | None:
    """``value`` as a label value; None (the label is removed) when there is none or it does not fit."""
    if value is None or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        return None
    return value


def node_labels(result: NodeResult) -> dict[str, str | None]:
    """The labels of one node (a JSON merge patch: None removes a label that no longer holds)."""
    return {LABEL_VERDICT: label_value(result.verdict), LABEL_TF_READY: label_value(result.tf_ready)}


def valid_node_name(name: str) -> bool:
    """Whether ``name`` can be a Kubernetes node's name."""
    return len(name) <= 253 and _NODE_NAME.fullmatch(name) is not None


# --------------------------------------------------------------------------- Slurm


def parse_sinfo(text: str) -> dict[str, list[str]]:
    """`sinfo -h -N -o '%N %f'` output (a node and its comma-separated available features per line; a node
    in several partitions is listed once per partition) as {node: features}."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and _SLURM_NODE.fullmatch(parts[0]):
            features = [] if parts[1] in ("(null)", "") else parts[1].split(",")
            out[parts[0]] = [f for f in features if _SLURM_FEATURE.fullmatch(f)]
    return out


def slurm_feature_lines(results: Iterable[NodeResult], current: Mapping[str, list[str]]) -> list[str]:
    """`scontrol update NodeName=N AvailableFeatures=...` for each node: its features without tfgpu's old
    ones, plus tf<series> for each usable series. A name Slurm cannot have is named in a comment."""
    lines = []
    for r in results:
        if not _SLURM_NODE.fullmatch(r.node):
            lines.append(f"# skipped a node whose name is not a Slurm node name: {r.node.encode('unicode_escape')[:80]!r}")
            continue
        kept = [f for f in current.get(r.node, []) if not _OUR_FEATURE.fullmatch(f)]
        ours = [f"tf{s}" for s in r.usable if _SLURM_FEATURE.fullmatch(f"tf{s}")]
        features = ",".join(dict.fromkeys([*kept, *ours]))
        if not features:
            lines.append(f"# {r.node}: no feature to set (no TensorFlow series is usable there)")
            continue
        lines.append(shlex.join(["scontrol", "update", f"NodeName={r.node}", f"AvailableFeatures={features}"]))
    return lines


# --------------------------------------------------------------------------- Ansible


def ansible_facts(results: Iterable[NodeResult]) -> dict[str, dict[str, Any]]:
    """Facts per inventory host: tfgpu_verdict, tfgpu_tf_ready ("" when none), tfgpu_usable."""
    return {r.node: {"tfgpu_verdict": r.verdict, "tfgpu_tf_ready": r.tf_ready or "", "tfgpu_usable": list(r.usable),
                     "tfgpu_group": r.group} for r in results}
