"""Container advice only where it belongs (issue 29, item 6): no container block on a machine without a GPU or
without a container runtime unless asked for, and every fix command runs as printed (no `systemctl start
docker` without a docker unit, no `apt-get install nvidia-container-toolkit` without NVIDIA's repository)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.judge.test_container_verdict import DOCKER_OK, THIS_MACHINE, with_containers
from tests.unit.judge.test_verdict import base_facts
from tfgpu.facts.probe._ctx import Ctx

Cli = Callable[..., tuple[int, str, str]]

NO_GPU = base_facts(gpus=[], driver={"version": None, "cuda": None, "kernel_module": None, "source": None,
                                     "error": None})


def _doctor(cli: Cli, tmp_path: Path, facts: dict[str, Any], *args: str) -> tuple[int, str]:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    code, out, err = cli("doctor", "--facts", str(path), *args)
    return code, out + err


@pytest.mark.parametrize("facts", [with_containers(NO_GPU, THIS_MACHINE), with_containers(NO_GPU, DOCKER_OK),
                                   with_containers(base_facts(), {"runtimes": [], "docker_group": None,
                                                                  "toolkit": None})],
                         ids=["no-gpu-docker-cli", "no-gpu-docker-ready", "gpu-no-runtime"])
def test_no_container_block_without_a_gpu_or_a_runtime(cli: Cli, tmp_path: Path, facts: dict[str, Any]) -> None:
    _, out = _doctor(cli, tmp_path, facts, "--tf", "2.2.0")
    assert "Container route" not in out
    assert "container (" not in out  # "also blocked: container (tensorflow/tensorflow:2.2.0-gpu)"
    assert "(container)" not in out  # "recipe tensorflow/tensorflow:2.2.0-gpu (container): not verified here"
    for word in ("docker", "systemctl", "Container Toolkit", "[container:"):
        assert word not in out
    _, series = _doctor(cli, tmp_path, facts)
    assert "container" not in series.split("TensorFlow releases on this machine")[-1].split("\n")[1]
    # asked for, it is judged (and said) all the same; the JSON keeps it either way
    _, asked = _doctor(cli, tmp_path, facts, "--tf", "2.2.0", "--backend", "docker", "--verbose")
    assert "container" in asked.lower()
    _, doc = _doctor(cli, tmp_path, facts, "--tf", "2.2.0", "--json")
    assert any(b["backend"] == "container" for b in json.loads(doc)["targets"][0]["backends"])


def test_a_gpu_with_a_runtime_keeps_the_container_route(cli: Cli, tmp_path: Path) -> None:
    _, out = _doctor(cli, tmp_path, with_containers(base_facts(), THIS_MACHINE), "--tf", "2.15")
    assert "Container route: blocked" in out


def _daemon_fix(service: dict[str, Any] | None) -> str:
    from tfgpu.judge.containers import judge_runtime

    entry = copy.deepcopy(THIS_MACHINE["runtimes"][0])
    if service is not None:
        entry["service"] = service
    rt = judge_runtime(THIS_MACHINE, entry)
    return next(fix for check, _, fix in rt.blockers if check == "container.daemon")


def test_the_daemon_fix_names_a_command_only_where_it_runs() -> None:
    none = {"systemd": True, "unit": None, "user_unit": None, "init_script": None}
    assert "systemctl" not in _daemon_fix(none)
    assert "install Docker Engine" in _daemon_fix(none)
    assert _daemon_fix({**none, "unit": "/lib/systemd/system/docker.service"}) == "start it: sudo systemctl start docker"
    assert "systemctl --user start docker" in _daemon_fix({**none, "user_unit": "/home/u/.config/systemd/user/docker.service"})
    # a unit file but no systemd running (a container, WSL without systemd): the SysV script, else nothing
    assert "systemctl" not in _daemon_fix({**none, "systemd": False, "unit": "/lib/systemd/system/docker.service"})
    assert "sudo service docker start" in _daemon_fix({**none, "systemd": False, "init_script": "/etc/init.d/docker"})
    assert "systemctl" not in _daemon_fix(None)  # facts from an older tfgpu: nothing known


def test_the_probe_reads_how_docker_is_started(tmp_path: Path) -> None:
    from tfgpu.facts.probe.containers import docker_service

    ctx = Ctx(root=tmp_path, env={"HOME": "/home/u"}, timeout=1)
    assert docker_service(ctx) == {"systemd": False, "unit": None, "user_unit": None, "init_script": None}
    (tmp_path / "run" / "systemd" / "system").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "systemd" / "system").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "systemd" / "system" / "docker.service").write_text("[Unit]\n")
    assert docker_service(ctx)["systemd"] is True
    assert docker_service(ctx)["unit"] == "/usr/lib/systemd/system/docker.service"


def test_toolkit_advice_never_installs_the_package_without_nvidias_repository(cli: Cli, tmp_path: Path) -> None:
    _, out = _doctor(cli, tmp_path, with_containers(base_facts(), THIS_MACHINE), "--tf", "2.15", "--backend", "docker")
    fixes = [line for line in out.splitlines() if "nvidia-container-toolkit" in line or "Container Toolkit" in line]
    assert fixes
    for line in fixes:
        if re.search(r"(apt-get|apt|dnf|yum|zypper) install", line):
            assert "nvidia.github.io/libnvidia-container" in line, line
    assert "repository" in " ".join(fixes)
