"""tfgpu.facts.probe.containers: parsers against recorded real outputs, and the probe on machine profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.probe_helpers import DATA, Profile
from tfgpu.facts.probe._ctx import Ctx
from tfgpu.facts.probe.containers import (
    parse_cdi_spec,
    parse_daemon_json,
    parse_docker_info,
    parse_docker_info_text,
    parse_group_file,
    parse_runtime_version,
    probe_containers,
)

CT = DATA / "containers"


def _read(name: str) -> str:
    return (CT / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(("fixture", "expected"), [
    ("docker_version.stdout", "28.2.2"),
    ("podman_version.stdout", "4.3.1"),
    ("nvidia_ctk_version.stdout", "1.12.0"),
    ("nvidia_container_cli_version.stdout", "1.11.0"),
    ("nvidia_container_runtime_version.stdout", "1.13.5"),
    ("apptainer_version_el7.stdout", "1.1.6-1.el7"),
    ("apptainer_version_rc.stdout", "1.1.0-rc.2"),
    ("singularity_version.stdout", "3.0.0-alpha.1-117-gc297513f"),
])
def test_versions_from_recorded_outputs(fixture: str, expected: str):
    assert parse_runtime_version(_read(fixture)) == expected


def test_docker_info_without_a_daemon_is_unreachable_with_the_clis_reason():
    info = parse_docker_info(_read("docker_info_no_daemon.stdout"), _read("docker_info_no_daemon.stderr"),
                             int(_read("docker_info_no_daemon.rc")))
    assert info["reachable"] is False
    assert info["client_version"] == "28.2.2"
    assert info["server_version"] is None
    assert "Cannot connect to the Docker daemon" in info["error"]
    assert info["rootless"] is None
    assert info["runtimes"] == []


def test_engine_info_from_a_daemon_with_the_nvidia_runtime():
    # GET /info as Docker Desktop 28.2.2 answered it: the object `docker info --format '{{json .}}'` prints,
    # without the CLI's ClientInfo
    info = parse_docker_info(_read("docker_api_info_nvidia_runtime.json"))
    assert info["reachable"] is True
    assert info["server_version"] == "28.2.2"
    assert info["client_version"] is None  # the probe then asks `docker --version`
    assert info["runtimes"] == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert info["default_runtime"] == "runc"
    assert info["rootless"] is False
    assert info["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert info["cdi_devices"] == []
    assert info["error"] is None


def test_docker_info_json_lists_the_cdi_devices_the_daemon_discovered():
    info = parse_docker_info(_read("docker_info_with_devices.json.golden"))
    assert info["reachable"] is True
    assert info["server_version"] == "17.06.1-ce"
    assert info["runtimes"] == ["runc"]
    assert info["cdi_devices"] == ["com.example.device1", "nvidia.com/gpu=gpu0"]


def test_docker_info_text_from_a_daemon_with_the_nvidia_runtime():
    assert parse_docker_info_text(_read("docker_info_nvidia_runtime.txt")) == {
        "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"], "default_runtime": "runc"}


@pytest.mark.parametrize("cut", [10, 500, 1200, 2376])
def test_a_truncated_docker_info_is_an_answer_not_an_exception(cut: int):
    text = _read("docker_api_info_nvidia_runtime.json")[:cut]
    info = parse_docker_info(text)
    assert info["reachable"] is False
    assert info["runtimes"] == []
    assert parse_docker_info_text(text)["runtimes"] == []


def test_docker_info_text_lines_name_the_runtimes():
    assert parse_docker_info_text(_read("docker_info_runtimes_runc_only.txt")) == {
        "runtimes": ["io.containerd.runc.v2", "runc"], "default_runtime": "runc"}


@pytest.mark.parametrize("fixture", ["daemon_json_nvidia_default.json", "daemon_json_nvidia_args.json"])
def test_daemon_json_with_the_nvidia_runtime(fixture: str):
    parsed = parse_daemon_json(_read(fixture))
    assert parsed["nvidia"] is True
    assert parsed["default_runtime"] == "nvidia"
    assert parsed["runtimes"]["nvidia"].endswith("nvidia-container-runtime")
    assert parsed["error"] is None


def test_a_broken_daemon_json_is_an_error_not_an_exception():
    parsed = parse_daemon_json(_read("daemon_json_nvidia_default.json")[:-3])
    assert parsed["nvidia"] is False
    assert parsed["error"].startswith("not valid JSON")


def test_cdi_spec_kind_and_version():
    spec = parse_cdi_spec(_read("cdi_nvidia_dgx_a100.yaml"))
    assert spec["kind"] == "nvidia.com/gpu"
    assert spec["cdi_version"] == "0.4.0"
    assert spec["devices"] == []  # the recorded part of the spec lists no devices


def test_group_file_membership():
    text = "root:x:0:\ndocker:x:998:alice,bob\nusers:x:100:\n"
    assert parse_group_file(text, "docker", "bob")["member"] is True
    assert parse_group_file(text, "docker", "carol")["member"] is False
    assert parse_group_file("root:x:0:\n", "docker", "bob") == {"exists": False, "members": [], "member": False}


def _profile(tmp_path: Path) -> Profile:
    prof = Profile(tmp_path)
    prof.env["USER"] = "alice"
    return prof


@pytest.mark.real_subprocess  # the profile's programs are scripts replaying recorded outputs
def test_probe_on_this_machines_recording_docker_without_daemon(tmp_path: Path):
    prof = _profile(tmp_path)
    prof.program("docker", {"info*": (CT / "docker_info_no_daemon.stdout", 1),
                            "--version": (CT / "docker_version.stdout", 0)})
    prof.file("/etc/group", "root:x:0:\ndocker:x:998:\n")
    prof.file("/var/run/docker.sock", "")  # a socket file whose daemon does not answer
    facts = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5))
    (docker,) = facts["runtimes"]
    assert docker["name"] == "docker"
    assert docker["version"] == "28.2.2"
    assert docker["daemon"]["reachable"] is False
    assert facts["docker_group"] == {"exists": True, "members": [], "member": False, "user": "alice", "root": False}
    assert facts["toolkit"]["present"] is False
    assert facts["toolkit"]["runtime"] is False


@pytest.mark.real_subprocess
def test_probe_finds_the_toolkit_daemon_json_and_cdi_specs(tmp_path: Path):
    prof = _profile(tmp_path)
    prof.program("podman", default=(CT / "podman_version.stdout", 0))
    prof.program("nvidia-ctk", default=(CT / "nvidia_ctk_version.stdout", 0))
    prof.program("nvidia-container-cli", default=(CT / "nvidia_container_cli_version.stdout", 0))
    prof.file("/etc/docker/daemon.json", fixture=CT / "daemon_json_nvidia_args.json")
    prof.file("/etc/cdi/nvidia.yaml", fixture=CT / "cdi_nvidia_dgx_a100.yaml")
    prof.file("/var/run/cdi/notes.txt", "not a spec")
    facts = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5), uid=1000)
    (podman,) = facts["runtimes"]
    assert (podman["name"], podman["version"], podman["rootless"]) == ("podman", "4.3.1", True)
    tk = facts["toolkit"]
    assert tk["present"] is True
    assert tk["nvidia_ctk"]["version"] == "1.12.0"
    assert tk["nvidia_container_cli"]["version"] == "1.11.0"
    assert tk["runtime"] is True
    assert [s["path"] for s in tk["cdi_specs"]] == ["/etc/cdi/nvidia.yaml"]
    json.dumps(facts)  # JSON-serialisable as the facts document needs


def test_fleet_reads_the_toolkit_shape():
    from tfgpu.tools.fleet.merge import _container_toolkit

    assert _container_toolkit({"containers": {"toolkit": {"present": True}}}) == "present"
    assert _container_toolkit({"containers": {"toolkit": {"present": False}}}) == "missing"


def test_nothing_found_is_an_answer(tmp_path: Path):
    facts = probe_containers(Ctx(root=tmp_path, env={"PATH": str(tmp_path / "none")}, timeout=1))
    assert facts["runtimes"] == []
    assert facts["toolkit"]["present"] is False
    assert facts["docker_group"]["error"] == "/etc/group unreadable"


@pytest.mark.real_subprocess
def test_no_socket_skips_docker_info(tmp_path: Path):
    prof = _profile(tmp_path)
    prof.program("docker", {"info*": (None, 99), "--version": (CT / "docker_version.stdout", 0)})
    facts = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5))
    (docker,) = facts["runtimes"]
    assert docker["version"] is None  # not asked: no daemon to use it with, and it costs the doctor ~50 ms
    assert docker["daemon"] == {"reachable": False, "server_version": None,
                                "error": "no Docker daemon socket at /var/run/docker.sock"}


def test_docker_host_elsewhere_is_asked_through_the_cli(tmp_path: Path):
    from tfgpu.facts.probe.containers import docker_socket

    ctx = Ctx(root=tmp_path, env={"DOCKER_HOST": "ssh://gpu-box"}, timeout=1)
    assert docker_socket(ctx) == ("ssh://gpu-box", False)
    ctx = Ctx(root=tmp_path, env={"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}, timeout=1)
    assert docker_socket(ctx) == ("/run/user/1000/docker.sock", True)


@pytest.mark.real_subprocess
def test_apptainer_needs_no_daemon_and_is_rootless_for_a_user(tmp_path: Path):
    prof = _profile(tmp_path)
    prof.program("apptainer", default=(CT / "apptainer_version_el7.stdout", 0))
    prof.program("singularity", default=(CT / "singularity_version.stdout", 0))
    facts = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5), uid=1000)
    found = {r["name"]: r for r in facts["runtimes"]}
    assert found["apptainer"]["version"] == "1.1.6-1.el7"
    assert found["singularity"]["version"] == "3.0.0-alpha.1-117-gc297513f"
    assert found["apptainer"]["daemon"]["reachable"] is None
    assert found["apptainer"]["rootless"] is True


def _docker_with_nvidia_runtime(tmp_path: Path, *, ctk: bool = True) -> Profile:
    prof = _profile(tmp_path)
    prof.program("docker", {"info*": (CT / "docker_api_info_nvidia_runtime.json", 0),
                            "--version": (CT / "docker_version.stdout", 0)})
    if ctk:
        prof.program("nvidia-ctk", default=(CT / "nvidia_ctk_version.stdout", 0))
    prof.file("/etc/group", "root:x:0:\ndocker:x:998:alice\n")
    prof.file("/var/run/docker.sock", "")
    return prof


@pytest.mark.real_subprocess
def test_probe_reports_the_nvidia_runtime_of_a_recorded_daemon(tmp_path: Path):
    prof = _docker_with_nvidia_runtime(tmp_path)
    facts = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5), uid=1000)
    (docker,) = facts["runtimes"]
    assert docker["daemon"] == {"reachable": True, "server_version": "28.2.2", "error": None}
    assert docker["version"] == "28.2.2"  # from `docker --version`: the recording has no ClientInfo
    assert docker["runtimes"] == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert docker["default_runtime"] == "runc"
    assert docker["rootless"] is False
    assert facts["toolkit"]["runtime"] is True  # registered with the running daemon (no daemon.json here)
    assert facts["toolkit"]["daemon_json"]["present"] is False
    assert facts["docker_group"]["member"] is True
    json.dumps(facts)


@pytest.mark.real_subprocess
@pytest.mark.parametrize("ctk", [True, False], ids=["toolkit-cli-on-path", "runtime-only"])
def test_the_doctor_judges_the_container_route_from_the_recorded_daemon(tmp_path: Path, ctk: bool):
    # runtime-only: the recording is Docker Desktop's (WSL2), whose daemon lists the nvidia runtime while the
    # distribution's PATH may hold no nvidia-ctk; the runtime the daemon lists is what `docker run` uses
    from tests.unit.judge.test_verdict import gpu_facts
    from tfgpu.judge.findings import BLOCKED, READY
    from tfgpu.judge.verdict import judge_release
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.kb.versions import version

    prof = _docker_with_nvidia_runtime(tmp_path, ctk=ctk)
    section = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5), uid=1000)
    assert section["toolkit"]["present"] is ctk
    kb = load_kb()
    facts = {**gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver="550.54.15"), "containers": section}
    tv = judge_release(facts, kb, version("2.15.1"), backend="docker")
    assert tv.verdict == READY, tv.blockers
    route = next(b for b in tv.backends if b.backend == "container")
    assert route.runtime == "docker"
    assert tv.recipe == "tensorflow/tensorflow:2.15.1-gpu"
    # the same daemon, a host driver below the 2.15 image's CUDA 12.2 floor: blocked on the driver, not the runtime
    old = {**gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver="525.60.13"), "containers": section}
    tv = judge_release(old, kb, version("2.15.1"), backend="docker")
    assert tv.verdict == BLOCKED
    checks = {f.check for f in tv.blockers}
    assert "container.driver" in checks
    assert not checks & {"container.toolkit", "container.daemon"}


@pytest.mark.real_subprocess
def test_a_daemon_that_lists_nvidia_cdi_devices_runs_the_gpu_without_the_nvidia_runtime(tmp_path: Path):
    # docker/cli's own rendering of `docker info --format '{{json .}}'`: a reachable daemon with runc only and
    # the CDI devices it discovered (DiscoveredDevices), among them nvidia.com/gpu=gpu0
    from tests.unit.judge.test_verdict import gpu_facts
    from tfgpu.judge.findings import BLOCKED, READY
    from tfgpu.judge.verdict import judge_release
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.kb.versions import version
    from tfgpu.plan.planner import plan_container

    prof = _profile(tmp_path)
    prof.program("docker", {"info*": (CT / "docker_info_with_devices.json.golden", 0),
                            "--version": (CT / "docker_version.stdout", 0)})
    prof.file("/etc/group", "root:x:0:\ndocker:x:998:alice\n")
    prof.file("/var/run/docker.sock", "")
    section = probe_containers(Ctx(root=tmp_path, env=prof.env, timeout=5), uid=1000)
    (docker,) = section["runtimes"]
    assert docker["daemon"]["reachable"] is True
    assert docker["runtimes"] == ["runc"]
    assert docker["cdi_devices"] == ["com.example.device1", "nvidia.com/gpu=gpu0"]
    assert section["toolkit"]["runtime"] is False
    # no nvidia runtime and no hook, but Docker's CDI (docker run --device vendor.com/class=name) reaches the GPU
    facts = {**gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver="550.54.15"), "containers": section}
    kb = load_kb()
    tv = judge_release(facts, kb, version("2.15.1"), backend="docker")
    assert tv.verdict == READY, tv.blockers
    (cdi,) = [f for f in tv.caveats if f.check == "container.cdi"]
    assert "nvidia.com/gpu=gpu0" in cdi.summary
    assert cdi.mitigated_by
    plan = plan_container(kb, facts, "2.15.1", backend="docker", image_ref=None, smoke_script="/s.py", cache_dir="/c")
    run = plan.steps[1].argv
    assert run[:5] == ("docker", "run", "--rm", "--device", "nvidia.com/gpu=gpu0")
    assert "--gpus" not in run
    # the same daemon without the CDI devices: blocked, with the toolkit's fix
    docker["cdi_devices"] = ["com.example.device1"]
    tv = judge_release(facts, kb, version("2.15.1"), backend="docker")
    assert tv.verdict == BLOCKED
    (toolkit,) = [f for f in tv.blockers if f.check == "container.toolkit"]
    assert "nvidia-ctk runtime configure --runtime=docker" in toolkit.fix
