"""Issue 30: fleet results in the scheduler's terms (Kubernetes labels, Slurm features, Ansible facts), the
DaemonSet that sees every GPU without consuming one, the label patch against recorded API server answers,
and `tfgpu fleet diff`."""

from __future__ import annotations

import copy
import http.server
import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import TESTS
from tfgpu.core.errors import InputError, UsageError
from tfgpu.judge.diagnose import diagnose
from tfgpu.kb.knowledge import load_kb
from tfgpu.render import report
from tfgpu.tools.fleet import diff as fd
from tfgpu.tools.fleet import engines, kube, nodes, render
from tfgpu.tools.fleet import merge as fm

K8S = TESTS / "data" / "k8s"
FACTS = TESTS / "data" / "facts" / "r740-4x-tesla-m60.json"


def _doc(facts: dict[str, Any]) -> dict[str, Any]:
    kb = load_kb()
    return report.doctor_document(facts, diagnose(facts, kb), data_version=kb.data_version)


def _older(facts: dict[str, Any], version: str = "410.48", cuda: str | None = None) -> dict[str, Any]:
    f = copy.deepcopy(facts)
    f["driver"].update({"version": version, "kernel_module": version, "cuda": cuda})
    return f


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    base = json.loads(FACTS.read_text())
    folder = tmp_path / "reports"
    folder.mkdir()
    for i in range(1, 4):
        (folder / f"gpu{i:02d}.json").write_text(json.dumps(_doc(base)))
    (folder / "gpu04.json").write_text(json.dumps(_doc(_older(base))))
    return folder


def _fleet(folder: Path, tf: str | None = None) -> dict[str, Any]:
    return fm.fleet_document(fm.merge([str(folder)], kb=load_kb(), tf=tf))


# --------------------------------------------------------------------------- node results


def test_node_results_name_the_newest_usable_series(cluster: Path) -> None:
    doc = _fleet(cluster)
    results = {r.node: r for r in nodes.node_results(doc)}
    own = [t.to_json() for t in diagnose(json.loads(FACTS.read_text()), load_kb()).targets]
    usable = [t["series"] for t in own if t["verdict"] in ("ready", "caveats")]
    assert results["gpu01"].tf_ready == usable[0]
    assert results["gpu01"].usable == tuple(usable)
    assert results["gpu01"].verdict == next(t["verdict"] for t in own if t["series"] == usable[0])
    assert results["gpu04"].tf_ready != results["gpu01"].tf_ready


def test_with_tf_the_verdict_is_the_targets(cluster: Path) -> None:
    doc = _fleet(cluster, tf="2.4")
    verdicts = {r.node: r.verdict for r in nodes.node_results(doc)}
    assert verdicts["gpu01"] in ("ready", "caveats")
    assert verdicts["gpu04"] == "blocked"


@pytest.mark.parametrize(("value", "ok"), [("2.21", True), ("ready", True), ("a" * 63, True), ("a" * 64, False),
                                          ("-x", False), ("x-", False), ("a b", False), ("", True), ("2.21\n", False)])
def test_label_values_follow_the_kubernetes_syntax(value: str, ok: bool) -> None:
    assert (nodes.label_value(value) == value) is ok


def test_node_labels_remove_a_label_that_no_longer_holds() -> None:
    r = nodes.NodeResult("n", "g1", "blocked", None, (), None, 0)
    assert nodes.node_labels(r) == {"tfgpu.io/verdict": "blocked", "tfgpu.io/tf-ready": None}


def test_slurm_feature_lines_keep_other_features_and_refuse_bad_names() -> None:
    results = [nodes.NodeResult("gpu01", "g1", "ready", "2.21", ("2.21", "2.20"), "570.86.10", 8),
               nodes.NodeResult("gpu02", "g2", "blocked", None, (), "410.48", 8),
               nodes.NodeResult("x;rm -rf /", "g1", "ready", "2.21", ("2.21",), None, 8)]
    current = nodes.parse_sinfo("gpu01 skylake,tf2.15,ib\ngpu02 (null)\nbad;name x\n")
    assert current == {"gpu01": ["skylake", "tf2.15", "ib"], "gpu02": []}
    lines = nodes.slurm_feature_lines(results, current)
    assert lines[0] == "scontrol update NodeName=gpu01 AvailableFeatures=skylake,ib,tf2.21,tf2.20"
    assert lines[1].startswith("# gpu02: no feature to set")
    assert lines[2].startswith("# skipped a node whose name is not a Slurm node name")
    subprocess.run(["bash", "-n"], input="\n".join(lines), text=True, check=True)


def test_ansible_facts_per_host() -> None:
    facts = nodes.ansible_facts([nodes.NodeResult("h1", "g1", "caveats", "2.20", ("2.20",), None, 1)])
    assert facts == {"h1": {"tfgpu_verdict": "caveats", "tfgpu_tf_ready": "2.20", "tfgpu_usable": ["2.20"],
                            "tfgpu_group": "g1"}}


def test_cli_fleet_nodes_views(cli: Any, cluster: Path, tmp_path: Path) -> None:
    code, out, err = cli("fleet", "nodes", str(cluster), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "tfgpu.fleet-nodes/1"
    assert sorted(doc["nodes"]) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    code, out, _ = cli("fleet", "nodes", str(cluster), "--ansible-facts")
    assert set(json.loads(out)["gpu04"]) == {"tfgpu_verdict", "tfgpu_tf_ready", "tfgpu_usable", "tfgpu_group"}
    sinfo = tmp_path / "sinfo.txt"
    sinfo.write_text("gpu01 ib\n")
    code, out, _ = cli("fleet", "nodes", str(cluster), "--slurm-features", "--sinfo", str(sinfo))
    assert re.match(r"scontrol update NodeName=gpu01 AvailableFeatures=ib,tf2\.\d+", out)
    code, _, err = cli("fleet", "nodes", str(cluster), "--json", "--slurm-features")
    assert code == 2
    assert "one of" in err


# --------------------------------------------------------------------------- Kubernetes


def _k8s(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_the_daemonset_requests_no_gpu_and_sees_them_all() -> None:
    (ds,) = _k8s(engines.k8s_manifest(namespace="ml", tf="2.15"))
    spec = ds["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert "resources" not in container, "no nvidia.com/gpu request: a busy node still runs the doctor"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["automountServiceAccountToken"] is False
    assert "fleet label" not in container["command"][2]
    (ds,) = _k8s(engines.k8s_manifest(runtime_class=None))
    assert "runtimeClassName" not in ds["spec"]["template"]["spec"]


def test_the_label_manifest_validates_and_allows_only_the_own_node() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is a test dependency")
    docs = _k8s(engines.k8s_manifest(namespace="ml", tf="2.15", label=True))
    for d in docs:
        kv.validate(d, "1.30.0", strict=True)
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                          "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert kinds["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    policy = kinds["ValidatingAdmissionPolicy"]["spec"]
    assert policy["failurePolicy"] == "Fail"
    assert policy["matchConditions"][0]["expression"] == \
        "request.userInfo.username == 'system:serviceaccount:ml:tfgpu-preflight'"
    rules = " ".join(v["expression"] for v in policy["validations"])
    assert "object.metadata.name == request.userInfo.extra['authentication.kubernetes.io/node-name'][0]" in rules
    assert "startsWith('tfgpu.io/')" in rules
    assert kinds["ValidatingAdmissionPolicyBinding"]["spec"]["validationActions"] == ["Deny"]
    pod = kinds["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "tfgpu-preflight"
    script = pod["containers"][0]["command"][2]
    assert 'tfgpu fleet label --report /tmp/tfgpu-report.json --node "$NODE_NAME"' in script
    assert {"name": "TFGPU_TF", "value": "2.15"} in pod["containers"][0]["env"]


@pytest.mark.parametrize("bad", ["Nvidia", "a b", "x;y", "-a"])
def test_a_runtime_class_that_is_not_a_name_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="--runtime-class"):
        engines.k8s_manifest(runtime_class=bad)


class _ApiServer(http.server.BaseHTTPRequestHandler):
    """A loopback stand-in for the API server: records the request, answers as the recorded exchanges."""

    seen: list[dict[str, Any]] = []  # noqa: RUF012 (one test at a time)

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _ApiServer.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        node = self.path.split("/api/v1/nodes/", 1)[1].split("?", 1)[0]
        if node == "gpu01":
            labels = {"kubernetes.io/hostname": "gpu01", **{k: v for k, v in json.loads(body)["metadata"]["labels"].items()
                                                            if v is not None}}
            answer = json.dumps({"kind": "Node", "apiVersion": "v1", "metadata": {"name": node, "labels": labels}})
            self._send(200, answer)
        else:  # the recorded 404 answer of kubernetes-client/python#792, for the node asked
            recorded = (K8S / "patch-node-404-status.txt").read_text().split("HTTP response body: ", 1)[1].strip()
            self._send(404, recorded.replace("192.168.1.50", node))

    def _send(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    _ApiServer.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_label_patch_is_the_request_kubectl_label_sends(api: str) -> None:
    recorded = (K8S / "patch-node-labels-kubectl-v8.txt").read_text()
    got = kube.patch_node_labels("gpu01", {"tfgpu.io/verdict": "ready", "tfgpu.io/tf-ready": "2.21"}, api=api,
                                 token="t0k3n")
    assert got == {"tfgpu.io/verdict": "ready", "tfgpu.io/tf-ready": "2.21"}
    (req,) = _ApiServer.seen
    assert req["path"] == "/api/v1/nodes/gpu01?fieldManager=tfgpu"
    for header in ("Content-Type: application/merge-patch+json", "Accept: application/json"):
        name, value = header.split(": ")
        assert header in recorded
        assert req["headers"][name] == value
    assert req["headers"]["Authorization"] == "Bearer t0k3n"
    assert json.loads(req["body"]) == {"metadata": {"labels": {"tfgpu.io/tf-ready": "2.21", "tfgpu.io/verdict": "ready"}}}
    assert re.search(r'Request Body: \{"metadata":\{"labels":\{', recorded)


def test_a_refused_patch_names_the_servers_reason(api: str) -> None:
    with pytest.raises(InputError, match=r'HTTP 404 NotFound: nodes "gpu09" not found'):
        kube.patch_node_labels("gpu09", {"tfgpu.io/verdict": "ready"}, api=api, token="t")
    with pytest.raises(UsageError, match="not a Kubernetes node name"):
        kube.patch_node_labels("../../namespaces", {}, api=api, token="t")
    with pytest.raises(InputError, match="cannot reach"):
        kube.patch_node_labels("gpu01", {}, api="http://127.0.0.1:9", token="t")


def test_fleet_label_prints_the_patch_for_its_own_report(cli: Any, cluster: Path) -> None:
    code, out, err = cli("fleet", "label", "--report", str(cluster / "gpu04.json"), "--node", "gpu04", "--print-only")
    assert code == 0, err
    labels = json.loads(out)["metadata"]["labels"]
    want = {r.node: r for r in nodes.node_results(_fleet(cluster))}["gpu04"]
    assert labels == {"tfgpu.io/tf-ready": want.tf_ready, "tfgpu.io/verdict": want.verdict}
    code, _, err = cli("fleet", "label", "--report", str(cluster / "gpu04.json"), "--node", "gpu04")
    assert code == 2
    assert "KUBERNETES_SERVICE_HOST" in err or "service account" in err


# --------------------------------------------------------------------------- Slurm and Ansible jobs


def test_the_sbatch_script_asks_for_the_gpus_and_writes_feature_lines() -> None:
    text = engines.slurm_script(nodes=4, gpus_per_node=8, features=True, tf="2.15")
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    assert "#SBATCH --gpus-per-node=8" in text.splitlines()
    assert "sinfo -h -N -o '%N %f' > \"$REPORTS/sinfo.txt\"" in text
    assert '"$TFGPU" fleet nodes "$REPORTS" --slurm-features --sinfo "$REPORTS/sinfo.txt" --tf 2.15' in text
    bare = engines.slurm_script(nodes=4)
    assert "# no GPUs requested" in bare
    with pytest.raises(UsageError, match="--gpus-per-node"):
        engines.slurm_script(nodes=1, gpus_per_node=0)


def test_the_playbook_sets_facts_on_each_host() -> None:
    (play,) = yaml.safe_load(engines.ansible_playbook(hosts="gpu", tf="2.15"))
    tasks = {t["name"]: t for t in play["tasks"]}
    nodes_task = tasks["each host's result"]
    assert nodes_task["ansible.builtin.command"]["argv"] == ["tfgpu", "fleet", "nodes", "tfgpu-fleet", "--ansible-facts",
                                                             "--tf", "2.15"]
    facts = tasks["set tfgpu_verdict and tfgpu_tf_ready on each host"]["ansible.builtin.set_fact"]
    assert set(facts) == {"tfgpu_verdict", "tfgpu_tf_ready", "cacheable"}
    assert "[inventory_hostname]" in facts["tfgpu_verdict"]


# --------------------------------------------------------------------------- drift


def test_diff_names_driver_cuda_verdict_and_release_changes(cluster: Path, tmp_path: Path) -> None:
    old = _fleet(cluster)
    base = json.loads(FACTS.read_text())
    (cluster / "gpu02.json").write_text(json.dumps(_doc(_older(base, "460.32.03", "11.2"))))
    (cluster / "gpu03.json").unlink()
    (cluster / "gpu05.json").write_text(json.dumps(_doc(base)))
    new = _fleet(cluster)
    drift = fd.fleet_diff(old, new, load_kb())
    assert drift["added"] == ["gpu05"]
    assert drift["removed"] == ["gpu03"]
    assert [c["node"] for c in drift["changed"]] == ["gpu02"]
    fields = {c["field"]: c for c in drift["changed"][0]["changes"]}
    assert fields["driver"]["old"] == "418.87.00"
    assert fields["driver"]["new"] == "460.32.03"
    assert fields["cuda"]["old"] == "10.1"
    assert fields["cuda"]["new"] == "11.2"
    assert "releases" in fields
    assert drift["unchanged"] == 2
    text = "\n".join(fd.render_text(drift))
    assert "gpu02: driver 418.87.00 -> 460.32.03; driver's CUDA 10.1 -> 11.2; verdict" in text
    assert fd.fleet_diff(new, new)["changed"] == []


def test_cli_diff_text_json_exit_codes_and_the_page_section(cli: Any, cluster: Path, tmp_path: Path) -> None:
    base = json.loads(FACTS.read_text())
    (cluster / "<b>gpu06.json").write_text(json.dumps(_doc(base)))
    old_json = tmp_path / "old.json"
    code, out, _ = cli("fleet", "merge", str(cluster), "--json")
    old_json.write_text(out)
    code, out, err = cli("fleet", "diff", str(old_json), str(old_json))
    assert code == 0, err
    assert "0 node(s) changed" in out
    (cluster / "<b>gpu06.json").write_text(json.dumps(_doc(_older(base, "460.32.03", None))))
    new_json = tmp_path / "new.json"
    new_json.write_text(cli("fleet", "merge", str(cluster), "--json")[1])
    code, out, _ = cli("fleet", "diff", str(old_json), str(new_json), "--json")
    assert code == 1
    drift = json.loads(out)
    assert drift["schema"] == "tfgpu.fleet-diff/1"
    assert drift["changed"][0]["node"] == "<b>gpu06"
    page = tmp_path / "fleet.html"
    code, _, err = cli("fleet", "merge", str(cluster), "--html", str(page), "--since", str(old_json))
    text = page.read_text()
    assert "Changes since the last merge" in text
    assert "<b>gpu06" not in text
    assert "&lt;b&gt;gpu06" in text
    assert render.render_html(json.loads(new_json.read_text())).count("Changes since") == 0


@pytest.mark.parametrize(("content", "reason"), [
    ("[]", "not a fleet document"), ('{"schema": "tfgpu.doctor/1"}', "not a fleet document"),
    ('{"schema": "tfgpu.fleet/1", "groups": [{"nodes": [1]}]}', "groups"), ("{", "not a JSON document"),
    ('{"schema": "tfgpu.fleet/1", "groups": [], "x": NaN}', "not a JSON document"),
])
def test_diff_refuses_what_is_not_a_fleet_document(cli: Any, tmp_path: Path, content: str, reason: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = cli("fleet", "diff", str(bad), str(bad))
    assert code == 2
    assert reason in err
    assert out == ""
