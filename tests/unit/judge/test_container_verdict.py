"""The container route in the verdicts: runtime, toolkit, host driver and GPU against compat/containers.toml."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from tests.unit.judge.test_verdict import base_facts, gpu_facts
from tfgpu.facts.machine import Machine
from tfgpu.judge.containers import is_datacenter_gpu, judge_container, pick_runtime
from tfgpu.judge.diagnose import diagnose
from tfgpu.judge.findings import BLOCKED, READY
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.queries import ngc_images
from tfgpu.kb.versions import version

KB = load_kb()

DOCKER_OK: dict[str, Any] = {
    "runtimes": [{"name": "docker", "version": "28.2.2", "daemon": {"reachable": True, "server_version": "28.2.2",
                                                                     "error": None},
                  "rootless": False, "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"], "default_runtime": "runc"}],
    "docker_group": {"exists": True, "members": ["alice"], "member": True, "user": "alice", "root": False},
    "toolkit": {"present": True, "nvidia_ctk": {"path": "/usr/bin/nvidia-ctk", "version": "1.17.8"}, "runtime": True,
                "daemon_json": {"nvidia": True}, "cdi_specs": [], "cdi_gpu_devices": []},
}
#: This machine as probed: a Docker CLI, no daemon socket, no toolkit.
THIS_MACHINE: dict[str, Any] = {
    "runtimes": [{"name": "docker", "version": None, "daemon": {
        "reachable": False, "server_version": None, "error": "no Docker daemon socket at /var/run/docker.sock"},
        "rootless": None, "runtimes": [], "default_runtime": None}],
    "docker_group": {"exists": False, "members": [], "member": None, "user": None, "root": True},
    "toolkit": {"present": False, "runtime": False, "daemon_json": {"nvidia": False}, "cdi_specs": [], "cdi_gpu_devices": []},
}


def with_containers(facts: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(facts)
    out["containers"] = copy.deepcopy(section)
    return out


def container_of(tv: Any) -> Any:
    return next(b for b in tv.backends if b.backend == "container")


def test_ready_on_a_gpu_machine_with_docker_and_the_toolkit():
    facts = with_containers(base_facts(), DOCKER_OK)
    tv = judge_release(facts, KB, version("2.15.1"), backend="docker")
    # the image holds the pip wheel, whose sm_80 SASS runs on the RTX 3090 (8.6): read from the 2.15 wheel
    assert tv.verdict == READY, tv.blockers
    assert "gpu.ptx_jit" not in [c.check for c in tv.caveats]
    assert tv.backend == "container"
    assert tv.recipe == "tensorflow/tensorflow:2.15.1-gpu"
    assert container_of(tv).runtime == "docker"


def test_auto_shows_the_container_route_without_changing_the_pip_choice():
    facts = with_containers(base_facts(), DOCKER_OK)
    tv = judge_release(facts, KB, version("2.15.1"))
    assert tv.backend == "pip"
    cv = container_of(tv)
    assert cv.viable
    assert cv.to_json()["image"] == "tensorflow/tensorflow:2.15.1-gpu"
    assert cv.to_json()["runtime"] == "docker"


def test_this_machine_says_what_to_install():
    facts = with_containers(base_facts(), THIS_MACHINE)
    cv = container_of(judge_release(facts, KB, version("2.15.1")))
    checks = {f.check: f for f in cv.blockers}
    assert "start the Docker daemon" in checks["container.daemon"].fix  # no service facts: no command guessed
    assert "nvidia-ctk runtime configure --runtime=docker" in checks["container.toolkit"].fix
    assert "sudo" in checks["container.toolkit"].fix  # tfgpu prints it; it never runs it


def test_no_runtime_at_all():
    facts = with_containers(base_facts(), {"runtimes": [], "docker_group": None, "toolkit": None})
    cv = container_of(judge_release(facts, KB, version("2.15.1")))
    (blocker,) = [f for f in cv.blockers if f.check == "container.runtime"]
    assert blocker.summary.startswith("no container runtime")
    assert "https://docs.docker.com/engine/install/" in blocker.fix


def test_driver_below_the_images_floor_blocks_with_the_floor():
    facts = with_containers(gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver="525.60.13"), DOCKER_OK)
    tv = judge_release(facts, KB, version("2.15.1"), backend="docker")  # 2.15 images carry CUDA 12.2 (535.54.03)
    assert tv.verdict == BLOCKED
    assert any(f.check == "container.driver" and "535.54.03" in f.summary for f in tv.blockers), tv.blockers


def test_forward_compatibility_helps_a_data_center_gpu_only():
    image = next(i for i in ngc_images() if i.ref.endswith("24.02-tf2-py3"))
    dc = with_containers(gpu_facts("NVIDIA A100-SXM4-80GB", "8.0", driver="535.86.10"), DOCKER_OK)
    consumer = with_containers(gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver="535.86.10"), DOCKER_OK)
    v = version("2.15.1")
    assert judge_container(dc, KB, v, Machine.from_facts(dc), image_ref=image.ref).viable
    assert not judge_container(consumer, KB, v, Machine.from_facts(consumer), image_ref=image.ref).viable


def test_rtx_50_series_names_the_ngc_image_that_can_run_it():
    facts = with_containers(gpu_facts("NVIDIA GeForce RTX 5090", "12.0", driver="570.124.04"), DOCKER_OK)
    tv = judge_release(facts, KB, version("2.17.1"))
    found = [f for f in (*tv.blockers, *tv.caveats) if f.check == "container.alternative"]
    assert found, (tv.blockers, tv.caveats)
    assert "nvcr.io/nvidia/tensorflow:25.02-tf2-py3" in found[0].summary
    direct = judge_release(facts, KB, version("2.17.1"), backend="docker")
    assert direct.verdict == READY, direct.blockers
    assert direct.recipe == "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"  # TF's own 2.17 image cannot run on 12.0


def test_podman_needs_a_cdi_spec():
    section = {"runtimes": [{"name": "podman", "version": "4.3.1", "daemon": {"reachable": None}, "rootless": True}],
               "docker_group": None, "toolkit": {"present": True, "cdi_specs": [], "cdi_gpu_devices": []}}
    rt = pick_runtime({"containers": section})
    assert rt is not None
    assert [b[0] for b in rt.blockers] == ["container.cdi"]
    assert "nvidia-ctk cdi generate" in rt.blockers[0][2]
    section["toolkit"]["cdi_specs"] = [{"path": "/etc/cdi/nvidia.yaml", "kind": "nvidia.com/gpu"}]
    assert pick_runtime({"containers": section}).gpu_ready  # type: ignore[union-attr]


def test_apptainer_needs_only_the_driver():
    section = {"runtimes": [{"name": "apptainer", "version": "1.3.4", "daemon": {"reachable": None}}],
               "docker_group": None, "toolkit": {"present": False}}
    rt = pick_runtime({"containers": section}, "apptainer")
    assert rt is not None
    assert rt.gpu_ready


def test_doctor_series_view_lists_the_container_route():
    facts = with_containers(base_facts(), DOCKER_OK)
    result = diagnose(facts, KB)
    assert all(any(b.backend == "container" for b in t.backends) for t in result.targets if t.backends)


@pytest.mark.parametrize("name", ["Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L40S"])
def test_data_center_names(name: str):
    assert is_datacenter_gpu(name, KB)


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 5090", "NVIDIA RTX A6000", "Quadro P4000", "NVIDIA TITAN V"])
def test_consumer_and_workstation_names(name: str):
    assert not is_datacenter_gpu(name, KB)


@settings(max_examples=40, deadline=None)
@given(major=st.integers(450, 590), minor=st.integers(0, 199))
def test_a_newer_driver_never_turns_a_ready_container_route_blocked(major: int, minor: int):
    lower = with_containers(gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver=f"{major}.{minor}"), DOCKER_OK)
    higher = with_containers(gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver=f"{major + 1}.{minor}"), DOCKER_OK)
    v = version("2.15.1")
    if judge_container(lower, KB, v, Machine.from_facts(lower)).viable:
        assert judge_container(higher, KB, v, Machine.from_facts(higher)).viable


def test_doctor_cli_judges_the_container_route_from_a_facts_file(cli, tmp_path):
    import json

    from tests.unit.cli.test_doctor import validate

    facts = with_containers(gpu_facts("NVIDIA GeForce RTX 5090", "12.0", driver="570.124.04"), DOCKER_OK)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    code, out, err = cli("doctor", "--facts", str(path), "--tf", "2.17", "--backend", "container", "--json")
    assert code == 0, err
    doc = json.loads(out)
    validate(doc)
    (target,) = doc["targets"]
    assert (target["backend"], target["recipe"]) == ("container", "nvcr.io/nvidia/tensorflow:25.02-tf2-py3")
    assert doc["recommendation"]["command"] == "tfgpu create --tf 2.17.1 --backend container"
    code, out, _ = cli("doctor", "--facts", str(path), "--tf", "2.17")
    assert "Container route: ready (nvcr.io/nvidia/tensorflow:25.02-tf2-py3 with docker)" in out


def test_doctor_cli_on_this_machines_container_facts(cli, tmp_path):
    import json

    path = tmp_path / "facts.json"
    path.write_text(json.dumps(with_containers(base_facts(), THIS_MACHINE)))
    _code, out, _ = cli("doctor", "--facts", str(path), "--tf", "2.15")
    assert "Container route: blocked" in out
    assert "the Docker daemon is not running" in out


# --------------------------------------------------------------------------- explain uses the container facts

NO_GPU_DRIVER = (DATA / "containers" / "docker_run_no_gpu_driver.stderr").read_text()


def _explain(text: str, facts: dict[str, Any]) -> Any:
    from tfgpu.judge.explain import explain_lines

    return [f for f in explain_lines(text.splitlines(), facts=facts) if f.id.startswith("container.")]


def test_explain_says_the_toolkit_is_missing_here():
    (f, *_) = _explain(NO_GPU_DRIVER, with_containers(base_facts(), THIS_MACHINE))
    assert f.id == "container.no_gpu_runtime"
    assert "no NVIDIA Container Toolkit program" in f.to_json()["cause"]


def test_explain_says_the_daemon_json_lacks_the_runtime():
    section = copy.deepcopy(DOCKER_OK)
    section["toolkit"]["daemon_json"] = {"present": True, "nvidia": False}
    (f, *_) = _explain(NO_GPU_DRIVER, with_containers(base_facts(), section))
    assert "registers no nvidia runtime" in f.to_json()["cause"]


@pytest.mark.parametrize(("wanted", "phrase"), [("apptainer", "apptainer.org"), ("podman", "nvidia-ctk cdi generate"),
                                                ("docker", "docs.docker.com"), ("container", "Apptainer")])
def test_a_missing_runtime_names_its_own_installation(wanted: str, phrase: str):
    facts = with_containers(base_facts(), {"runtimes": [], "docker_group": None, "toolkit": None})
    cv = judge_container(facts, KB, version("2.15.1"), Machine.from_facts(facts), wanted=wanted)
    (b,) = [f for f in cv.blockers if f.check == "container.runtime"]
    assert phrase in b.fix


def test_the_backend_lists_follow_the_backend_table():
    """The names are the backend table's (tfgpu.backends.names): each has its row of runners, and the doctor
    takes every one."""
    from tfgpu.api import doctor
    from tfgpu.backends import names
    from tfgpu.backends.runners import RUNNERS

    assert set(RUNNERS) == set(names.BACKENDS) | set(names.CONTAINER_BACKENDS)
    assert (*names.BACKENDS, *names.CONTAINER_BACKENDS) == doctor.BACKENDS
