"""Label the node a `tfgpu fleet k8s --label` pod runs on: one JSON merge patch of its labels through the
Kubernetes API, with the pod's own service account (its RBAC and admission policy let it patch only its
own node: tfgpu.tools.fleet.engines).

The request is the one `kubectl label node` sends (PATCH /api/v1/nodes/NAME, Content-Type
application/merge-patch+json, a field manager; kubectl -v=8 in flightctl/flightctl#16); the answers are
the API server's (200 with the Node; a Status object on failure, as in kubernetes-client/python#792).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfgpu.core.errors import InputError, UsageError
from tfgpu.tools.fleet.nodes import valid_node_name

#: Where Kubernetes mounts a pod's service account credentials (kubernetes.io/docs, "Accessing the
#: Kubernetes API from a Pod").
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
FIELD_MANAGER = "tfgpu"
TIMEOUT = 30.0
#: A Status or Node answer is a few kB; more is not read.
MAX_ANSWER = 4 * 1024 * 1024


def label_patch(labels: Mapping[str, str | None]) -> bytes:
    """The JSON merge patch (RFC 7386) that sets these labels (None removes one)."""
    return json.dumps({"metadata": {"labels": dict(labels)}}, separators=(",", ":"), sort_keys=True).encode()


def in_cluster_api(env: Mapping[str, str] | None = None) -> str:
    """The API server's URL inside a pod (KUBERNETES_SERVICE_HOST/PORT, which the kubelet sets)."""
    env = os.environ if env is None else env
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        msg = "not inside a Kubernetes pod: KUBERNETES_SERVICE_HOST is not set"
        raise UsageError(msg, hint="run `tfgpu fleet label` in the pod of `tfgpu fleet k8s --label`, or add --print-only")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 service address
    return f"https://{host}:{port}"


def patch_node_labels(node: str, labels: Mapping[str, str | None], *, api: str, token: str,
                      ca_file: str | None = None) -> dict[str, Any]:
    """PATCH the node's labels; returns the node's labels as the API server answered them. Raises
    InputError (exit 2) with the server's own message when it refuses."""
    if not valid_node_name(node):
        msg = f"{json.dumps(node)[:80]} is not a Kubernetes node name"
        raise UsageError(msg, hint="the DaemonSet passes spec.nodeName as NODE_NAME")
    url = f"{api.rstrip('/')}/api/v1/nodes/{urllib.parse.quote(node, safe='')}?fieldManager={FIELD_MANAGER}"
    request = urllib.request.Request(url, data=label_patch(labels), method="PATCH", headers={
        "Content-Type": "application/merge-patch+json", "Accept": "application/json",
        "Authorization": f"Bearer {token}", "User-Agent": "tfgpu-fleet-label"})
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as answer:
            body = answer.read(MAX_ANSWER)
    except urllib.error.HTTPError as exc:
        msg = f"the API server refused to label node {node}: HTTP {exc.code} {_status_message(exc.read(MAX_ANSWER))}"
        raise InputError(msg, hint="`tfgpu fleet k8s --label` sets up the role, binding and policy this needs") from None
    except (urllib.error.URLError, OSError) as exc:
        msg = f"cannot reach the Kubernetes API at {api}: {getattr(exc, 'reason', exc)}"
        raise InputError(msg) from None
    try:
        doc = json.loads(body)
    except ValueError:
        doc = {}
    got = doc.get("metadata", {}).get("labels", {}) if isinstance(doc, dict) else {}
    return {k: v for k, v in got.items() if k in labels} if isinstance(got, dict) else {}


def _status_message(body: bytes) -> str:
    """The message of a Kubernetes Status answer (shown as text, bounded)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(doc, dict):
        return f"{doc.get('reason', '')}: {doc.get('message', '')}"[:300]
    return ""


def service_account_token(root: Path = SERVICE_ACCOUNT) -> tuple[str, str | None]:
    """(token, CA file) of the pod's service account; UsageError when none is mounted."""
    try:
        token = (root / "token").read_text(encoding="utf-8").strip()
    except OSError:
        msg = f"no service account token in {root}: the pod cannot label its node"
        raise UsageError(msg, hint="`tfgpu fleet k8s --label` mounts it (automountServiceAccountToken)") from None
    ca = root / "ca.crt"
    return token, str(ca) if ca.is_file() else None


def node_labels_from_report(report: str, *, kb: Any, tf: str | None = None) -> dict[str, str | None]:
    """The tfgpu.io/ labels for the node that wrote ``report`` (its `tfgpu doctor --json` file), judged
    from its facts here, as the merge judges every node. InputError when the report cannot be merged."""
    from tfgpu.tools.fleet.merge import fleet_document, merge
    from tfgpu.tools.fleet.nodes import node_labels, node_results

    doc = fleet_document(merge([report], kb=kb, tf=tf))
    if doc["problems"]:
        problem = doc["problems"][0]
        msg = f"{problem['source']}: {problem['reason']}"
        raise InputError(msg, hint="give the report this node's `tfgpu doctor --json` wrote")
    (result,) = node_results(doc)
    return node_labels(result)
