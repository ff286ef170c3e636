"""`tfgpu fleet`: merging doctor reports, the terminal/HTML/JSON views, and the Slurm/Kubernetes/Ansible runs.

Node reports are real doctor documents: tfgpu's own doctor judging the seeds' recorded machines
(tests/data/facts), with the one fact an outlier has changed (an older driver, a GPU fallen off the bus,
a kernel module newer than the user library)."""

from __future__ import annotations

import copy
import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import TESTS
from tfgpu import __version__
from tfgpu.judge.diagnose import diagnose
from tfgpu.kb.knowledge import load_kb
from tfgpu.render import report
from tfgpu.tools.fleet import engines, render
from tfgpu.tools.fleet import merge as fm

DATA = TESTS / "data" / "facts"


def _facts(name: str = "r740-4x-tesla-m60.json") -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def _doc(facts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    kb = load_kb()
    doc = report.doctor_document(facts, diagnose(facts, kb), data_version=kb.data_version)
    doc.update(extra)
    return doc


def _targets(facts: dict[str, Any], tf: str | None = None) -> list[dict[str, Any]]:
    """What `tfgpu doctor --json` says of these facts (its JSON targets)."""
    return [t.to_json() for t in diagnose(facts, load_kb(), tf=tf).targets]


def _older_driver(facts: dict[str, Any], version: str = "410.48") -> dict[str, Any]:
    f = copy.deepcopy(facts)
    f["driver"].update({"version": version, "kernel_module": version, "cuda": None})
    return f


def _write(folder: Path, name: str, doc: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2) if not isinstance(doc, str) else doc)
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """Six nodes: four identical R740s, one with an older driver, one that lost a GPU."""
    base = _facts()
    reports = tmp_path / "reports"
    for i in range(1, 5):
        _write(reports, f"node{i:02d}", _doc(base))
    _write(reports, "node05", _doc(_older_driver(base)))
    lost = copy.deepcopy(base)
    lost["gpus"] = lost["gpus"][:3]
    _write(reports, "node06", _doc(lost))
    return reports


def _merge(*args: str, tf: str | None = None, stdin: Any = None) -> dict[str, Any]:
    return fm.fleet_document(fm.merge(list(args), kb=load_kb(), tf=tf, stdin=stdin))


# --------------------------------------------------------------------------- merge logic


def test_identical_nodes_are_one_group(cluster: Path) -> None:
    doc = _merge(str(cluster))
    assert doc["nodes"] == 6
    assert [g["count"] for g in doc["groups"]] == [4, 1, 1]
    assert doc["groups"][0]["nodes"] == ["node01", "node02", "node03", "node04"]
    assert doc["problems"] == []


def test_outliers_say_what_differs(cluster: Path) -> None:
    doc = _merge(str(cluster))
    by_node = {o["nodes"][0]: {d["field"]: d for d in o["differs"]} for o in doc["outliers"]}
    assert by_node["node05"]["driver"]["value"] == "410.48"
    assert by_node["node05"]["driver"]["largest_group"] == "418.87.00"
    assert by_node["node06"]["gpu_count"]["value"] == 3
    assert by_node["node06"]["gpu_count"]["largest_group"] == 4
    assert "driver" not in by_node["node06"]


def test_kernel_user_mismatch_is_named(tmp_path: Path) -> None:
    base = _facts()
    skew = copy.deepcopy(base)
    skew["driver"].update({"kernel_module": "418.87.01", "user_library": "418.87.00", "mismatch": True})
    _write(tmp_path, "a", _doc(base))
    _write(tmp_path, "b", _doc(base))
    _write(tmp_path, "c", _doc(skew))
    (outlier,) = _merge(str(tmp_path))["outliers"]
    fields = {d["field"]: d for d in outlier["differs"]}
    assert fields["driver_mismatch"]["value"] == "kernel module 418.87.01 ≠ user library 418.87.00"


def test_a_node_without_the_container_toolkit_is_named(tmp_path: Path) -> None:
    """facts["containers"]["toolkit"] as tfgpu.facts.probe.containers writes it: present on two nodes, absent on one."""
    base = _facts()
    with_toolkit = copy.deepcopy(base)
    with_toolkit["containers"] = {"runtimes": [], "toolkit": {"present": True, "nvidia_ctk": {"path": "/usr/bin/nvidia-ctk",
                                                                                          "version": "1.17.4"}}}
    without = copy.deepcopy(base)
    without["containers"] = {"runtimes": [], "toolkit": {"present": False, "nvidia_ctk": None}}
    _write(tmp_path, "a", _doc(with_toolkit))
    _write(tmp_path, "b", _doc(with_toolkit))
    _write(tmp_path, "c", _doc(without))
    (outlier,) = _merge(str(tmp_path))["outliers"]
    fields = {d["field"]: d for d in outlier["differs"]}
    assert outlier["nodes"] == ["c"]
    assert fields["container_toolkit"]["value"] == "missing"
    assert fields["container_toolkit"]["largest_group"] == "present"


def test_common_release_agrees_with_each_nodes_own_verdicts(cluster: Path) -> None:
    """The newest series usable everywhere, recomputed here from every node's own report."""
    doc = _merge(str(cluster))
    usable: dict[str, int] = {}
    order: list[str] = []
    for path in sorted(cluster.glob("*.json")):
        for t in json.loads(path.read_text())["targets"]:
            if t["series"] not in order:
                order.append(t["series"])
            usable[t["series"]] = usable.get(t["series"], 0) + (t["verdict"] in ("ready", "caveats"))
    everywhere = [s for s in order if usable[s] == 6]
    assert everywhere, "the fixture cluster must share a usable series"
    assert doc["common"]["every_node"]["series"] == everywhere[0]
    largest = [t["series"] for t in json.loads((cluster / "node01.json").read_text())["targets"]
               if t["verdict"] in ("ready", "caveats")]
    assert doc["common"]["largest_group"]["series"] == largest[0]


def test_no_common_release() -> None:
    groups = [{"verdicts": {"2.1": {"verdict": "ready", "tf": "2.1.0"}}},
              {"verdicts": {"2.1": {"verdict": "blocked", "tf": "2.1.0"}}}]
    assert fm._newest_usable(groups, ["2.1"]) is None


def test_reports_of_other_versions_are_rejudged(tmp_path: Path) -> None:
    base = _facts()
    honest = _doc(base)
    stale = _doc(base, tfgpu_version="0.0.1", data_version="2020.01.01")
    for t in stale["targets"]:  # an old knowledge base said otherwise
        t["verdict"] = "ready"
    _write(tmp_path, "new", honest)
    _write(tmp_path / "old", "old", stale)
    doc = _merge(str(tmp_path))
    assert doc["rejudged"] == {"reports": 1, "from": {"tfgpu 0.0.1, knowledge base 2020.01.01": 1}}
    assert len(doc["groups"]) == 1, "re-judged with this knowledge base, the two nodes are the same machine"
    fresh = {t["series"]: t["verdict"] for t in honest["targets"]}
    assert {s: c["verdict"] for s, c in doc["groups"][0]["verdicts"].items()} == fresh
    out = io.StringIO()
    render.render_human(doc, out, color=False)
    assert "re-judged from their facts" in out.getvalue()


def test_bare_facts_documents_are_judged(tmp_path: Path) -> None:
    shutil.copy(DATA / "mx150-laptop-ubuntu1804.json", tmp_path / "laptop.json")
    doc = _merge(str(tmp_path))
    assert doc["nodes"] == 1
    assert doc["rejudged"]["reports"] == 1
    expect = {t["series"]: t["verdict"] for t in _targets(_facts("mx150-laptop-ubuntu1804.json"))}
    assert {s: c["verdict"] for s, c in doc["groups"][0]["verdicts"].items()} == expect


def test_broken_inputs_are_named_and_the_rest_merged(cluster: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    _write(bad, "truncated", '{"schema": "tfgpu.doctor/1", "facts": {')
    _write(bad, "fleet", {"schema": "tfgpu.fleet/1"})
    _write(bad, "list", "[1, 2]")
    (bad / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    _write(bad, "badfacts", {"schema": "tfgpu.doctor/1", "facts": {"gpus": "many"}})
    (tmp_path / "empty").mkdir()
    doc = _merge(str(cluster), str(bad), str(tmp_path / "empty"), str(tmp_path / "missing.json"))
    assert doc["nodes"] == 6
    reasons = {Path(p["source"]).name: p["reason"] for p in doc["problems"]}
    assert set(reasons) == {"truncated.json", "fleet.json", "list.json", "binary.json", "badfacts.json", "empty",
                            "missing.json"}
    assert "not valid JSON" in reasons["truncated.json"]
    assert "tfgpu.fleet/1" in reasons["fleet.json"]
    assert "UTF-8" in reasons["binary.json"]
    assert "does not exist" in reasons["missing.json"]
    assert fm.exit_code(doc) == 2


def test_stdin_takes_concatenated_json_and_kubectl_logs(cluster: Path) -> None:
    docs = [json.loads(p.read_text()) for p in sorted(cluster.glob("*.json"))]
    # `cat *.json`: JSON lines and pretty-printed reports, each ending with a newline as tfgpu writes them
    concatenated = "".join(json.dumps(d) + "\n" for d in docs[:2]) + json.dumps(docs[2], indent=2) + "\n"
    concatenated += json.dumps(docs[3]) + "\n"
    doc = _merge("-", stdin=io.StringIO(concatenated))
    assert doc["nodes"] == 4
    assert doc["problems"] == []
    logs = "".join(f"[pod/tfgpu-preflight-{i}/tfgpu] {fm.MARKER} node=gpu-{i} {json.dumps(d)}\n"
                   f"[pod/tfgpu-preflight-{i}/tfgpu] some other log line\n" for i, d in enumerate(docs))
    doc = _merge("-", stdin=io.StringIO(logs))
    assert doc["nodes"] == 6
    assert sorted(n for g in doc["groups"] for n in g["nodes"]) == [f"gpu-{i}" for i in range(6)]


def test_node_names_from_reports_are_made_printable(tmp_path: Path) -> None:
    d = json.dumps(_doc(_facts()))
    doc = _merge("-", stdin=io.StringIO(f"{fm.MARKER} node=evil\x1b]8;;x\x07 {d}\n{fm.MARKER} node=evil\x1b]8;;x\x07 {d}\n"))
    names = doc["groups"][0]["nodes"]
    assert names == ["evil?]8;;x?", "evil?]8;;x?#2"]


def test_memory_follows_distinct_machines(tmp_path: Path) -> None:
    text = json.dumps(_doc(_facts()))
    stream = "\n".join(text for _ in range(500))
    fleet = fm.merge(["-"], kb=load_kb(), stdin=io.StringIO(stream))
    assert fleet.reports == 500
    assert len(fleet.machines) == 1
    (machine,) = fleet.machines.values()
    assert len(machine.nodes) == 500


def test_target_gate(cluster: Path) -> None:
    old = _older_driver(_facts())
    series = [t["series"] for t in _targets(_facts())
              if t["verdict"] != "blocked" and _targets(old, t["tf"])[0]["verdict"] == "blocked"]
    assert series, "the fixture needs a series the old driver cannot run"
    doc = _merge(str(cluster), tf=series[0])
    assert doc["target"]["not_ready_nodes"] == ["node05"]
    assert fm.exit_code(doc) == 1
    everywhere = doc["common"]["every_node"]["series"]
    doc = _merge(str(cluster), tf=everywhere)
    assert doc["target"]["ready_everywhere"] is True
    assert fm.exit_code(doc) == 0


def test_document_matches_its_schema(cluster: Path) -> None:
    import jsonschema

    schema = json.loads((Path(fm.__file__).parents[2] / "core" / "schemas" / "fleet.schema.json").read_text())
    jsonschema.validate(_merge(str(cluster), tf="2.1"), schema)
    jsonschema.validate(_merge(str(cluster)), schema)


# --------------------------------------------------------------------------- the command


def test_cli_merge_exit_codes_and_views(cli: Any, cluster: Path, tmp_path: Path) -> None:
    code, out, err = cli("fleet", "merge", str(cluster))
    assert code == 0, err
    assert "6 nodes, 3 machine groups" in out
    assert "Outliers" in out
    assert "driver: 410.48 (g1: 418.87.00)" in out
    code, out, _ = cli("fleet", "merge", str(cluster), "--json")
    assert json.loads(out)["schema"] == "tfgpu.fleet/1"
    page = tmp_path / "fleet.html"
    code, _, _ = cli("fleet", "merge", str(cluster), "--html", str(page))
    assert code == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    code, _, err = cli("fleet", "merge", str(cluster), "--html", str(tmp_path))
    assert code == 2
    assert "not a regular file" in err
    _write(cluster, "zz-broken", "{")
    code, out, err = cli("fleet", "merge", str(cluster), "--json")
    assert code == 2
    assert json.loads(out)["nodes"] == 6
    assert "zz-broken.json" in err


def test_cli_merge_stdin(cli: Any, cluster: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "\n".join(json.dumps(json.loads(p.read_text())) for p in sorted(cluster.glob("*.json")))
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, _ = cli("fleet", "merge", "-", "--json")
    assert code == 0
    assert json.loads(out)["nodes"] == 6


# --------------------------------------------------------------------------- HTML


def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    d = json.dumps(_doc(_facts()))
    doc = _merge("-", stdin=io.StringIO(f"{fm.MARKER} node={evil} {d}\n"))
    page = render.render_html(doc)
    assert evil not in page
    assert "&lt;script&gt;" in page or "\\u003cscript\\u003e" in page
    assert "http://" not in page, "no external assets"
    assert "https://" not in page, "no external assets"
    assert "<link" not in page
    assert " src=" not in page
    data = page.split('id="fleet-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["groups"][0]["nodes"] == [evil]


def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@pytest.mark.slow
def test_html_in_a_real_browser(cluster: Path, tmp_path: Path) -> None:
    """Debian's Chromium driven by Playwright: the matrix renders one row per group, a click shows the checks."""
    browser = _browser()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    page_file = tmp_path / "fleet.html"
    doc = _merge(str(cluster))
    page_file.write_text(render.render_html(doc))
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser, args=["--no-sandbox", "--disable-gpu",
                                                            "--disable-background-networking"])
        page = b.new_page()
        page.goto(page_file.as_uri())
        rows = page.locator("tr.group")
        assert rows.count() == len(doc["groups"]) == 3
        page.click("tr.group[data-group=g2]")
        node = doc["groups"][1]["nodes"][0]
        page.click(f".node[data-node='{node}']")
        checks = page.locator("#node-checks li")
        assert checks.count() >= 1
        first = doc["groups"][1]["checks"][0]
        assert first["id"] in checks.first.inner_text()
        page.click("button[data-v=blocked]")
        visible = [r for r in range(rows.count()) if rows.nth(r).is_visible()]
        want = [i for i, g in enumerate(doc["groups"])
                if any((c or {}).get("verdict") == "blocked" for c in g["verdicts"].values())]
        assert visible == want
        b.close()


# --------------------------------------------------------------------------- engines


def test_sbatch_script_is_valid_bash_with_the_right_directives() -> None:
    text = engines.slurm_script(nodes=16, partition="gpu", tf="2.15", gres="gpu:8")
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    directives = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "--nodes=16" in directives
    assert "--ntasks-per-node=1" in directives
    assert "--partition=gpu" in directives
    assert "--gres=gpu:8" in directives
    assert all(line.startswith("#SBATCH") for line in text.splitlines()[5:5 + len(directives)])
    assert "srun --ntasks-per-node=1" in text
    assert 'doctor --json --redact > "$1/${SLURMD_NODENAME}.json"' in text
    assert 'fleet merge "$REPORTS" --tf 2.15' in text
    listed = engines.slurm_script(nodelist="gpu[01-04,07]")
    assert "#SBATCH --nodelist=gpu[01-04,07]" in listed


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"nodes": 2, "partition": "gpu\nrm -rf ~"}, "--partition"),
    ({"nodelist": "a;b"}, "--nodelist"),
    ({"nodes": 2, "tf": "2.15; reboot"}, "--tf"),
    ({"nodes": 2, "gres": "gpu:1 --wrap=x"}, "--gres"),
    ({"nodes": 0}, "--nodes"),
    ({}, "--nodes"),
    ({"nodes": 2, "nodelist": "a"}, "--nodes"),
])
def test_sbatch_refuses_bad_values(kwargs: dict[str, Any], flag: str) -> None:
    from tfgpu.core.errors import UsageError

    with pytest.raises(UsageError, match=flag):
        engines.slurm_script(**kwargs)


def test_cli_engines_refuse_injection_with_exit_2(cli: Any) -> None:
    code, out, err = cli("fleet", "slurm", "--nodes", "2", "--partition", "gpu\n#SBATCH --uid=0")
    assert code == 2
    assert out == ""
    assert "--partition" in err
    code, out, err = cli("fleet", "k8s", "--namespace", "Bad NS")
    assert code == 2
    assert "--namespace" in err
    code, out, err = cli("fleet", "ansible", "--hosts", "{{ lookup('pipe','id') }}")
    assert code == 2
    assert "--hosts" in err


def _k8s_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_k8s_manifest_shape() -> None:
    (ds,) = _k8s_docs(engines.k8s_manifest(namespace="ml-infra", tf="2.15"))
    assert ds["kind"] == "DaemonSet"
    assert ds["metadata"]["namespace"] == "ml-infra"
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    (container,) = spec["containers"]
    assert "resources" not in container  # issue 30: no GPU requested (NVIDIA_VISIBLE_DEVICES=all instead)
    assert "tfgpu doctor --json --redact" in container["command"][2]
    assert fm.MARKER in container["command"][2]
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]


def test_k8s_manifest_validates_against_the_kubernetes_schema() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is a test dependency")
    text = engines.k8s_manifest(namespace="default", image="nvcr.io/nvidia/tensorflow:24.02-tf2-py3", tf="latest")
    for doc in _k8s_docs(text):
        kv.validate(doc, "1.30.0", strict=True)


def test_k8s_collect_line_feeds_merge(cli: Any) -> None:
    text = engines.k8s_manifest(tf="2.15")
    logs_line = next(line for line in text.splitlines() if "kubectl logs" in line)
    assert "--tail=-1" in logs_line
    assert "| tfgpu fleet merge - --tf 2.15" in logs_line


def test_ansible_playbook_parses_with_the_expected_modules() -> None:
    (play,) = yaml.safe_load(engines.ansible_playbook(hosts="gpu_nodes:!down", tf="2.15"))
    assert play["hosts"] == "gpu_nodes:!down"
    modules = [next(k for k in task if k.startswith("ansible.builtin.")) for task in play["tasks"]]
    assert modules == ["ansible.builtin.file", "ansible.builtin.command", "ansible.builtin.copy",
                       "ansible.builtin.command", "ansible.builtin.debug", "ansible.builtin.command",
                       "ansible.builtin.set_fact", "ansible.builtin.fail"]
    doctor = play["tasks"][1]["ansible.builtin.command"]["argv"]
    assert doctor == ["tfgpu", "doctor", "--json", "--redact"]
    merge = play["tasks"][3]["ansible.builtin.command"]["argv"]
    assert merge[:4] == ["tfgpu", "fleet", "merge", "tfgpu-fleet"]
    assert "--tf" in merge


def test_version_is_reported() -> None:
    assert fm.fleet_document(fm.merge([], kb=load_kb()))["tfgpu_version"] == __version__
