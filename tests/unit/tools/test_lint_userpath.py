"""lint's small wrong outputs (issue 29, item 9): no "[✓] GPU access" for a service whose environment hides
every GPU, no `CUDA_VISIBLE_DEVICES=all` (CUDA takes indices or UUIDs only), and exit codes that say what was
found: 0 none, 1 a ✗ finding (or a warning with --strict), 2 bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.cli.test_userpath import rtx_3080

Cli = Callable[..., tuple[int, str, str]]

COMPOSE_HIDDEN = """\
services:
  train:
    image: tensorflow/tensorflow:2.15.0-gpu
    environment:
      - NVIDIA_VISIBLE_DEVICES=none
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""


@pytest.fixture
def facts(tmp_path: Path) -> str:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(rtx_3080("550.54.15")))
    return str(path)


def test_a_service_whose_environment_hides_every_gpu_gets_no_gpu_access_tick(cli: Cli, tmp_path: Path,
                                                                             facts: str) -> None:
    compose = tmp_path / "compose.yml"
    compose.write_text(COMPOSE_HIDDEN)
    code, out, _ = cli("lint", "--facts", facts, str(compose))
    assert "[✗] service train: NVIDIA_VISIBLE_DEVICES=none hides every GPU" in out
    assert "GPU access" not in out.split("hides every GPU", 1)[1]
    assert "NVIDIA_VISIBLE_DEVICES=all" in out
    assert code == 1


@pytest.mark.parametrize(("line", "fix"), [("ENV CUDA_VISIBLE_DEVICES=-1", "CUDA_VISIBLE_DEVICES=0"),
                                           ("ENV NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=all")])
def test_the_fix_gives_a_value_the_variable_takes(cli: Cli, tmp_path: Path, facts: str, line: str, fix: str) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM tensorflow/tensorflow:2.15.0-gpu\n{line}\n")
    code, out, _ = cli("lint", "--facts", facts, "--json", str(dockerfile))
    (check,) = [c for c in json.loads(out)["files"][0]["checks"] if c["id"] == "env.visible_devices"]
    assert fix in check["fix"]
    assert "CUDA_VISIBLE_DEVICES=all" not in check["fix"]
    assert code == 1


def test_exit_codes(cli: Cli, tmp_path: Path, facts: str) -> None:
    fine = tmp_path / "Dockerfile"
    fine.write_text("FROM tensorflow/tensorflow:2.15.0-gpu\n")
    assert cli("lint", "--facts", facts, str(fine))[0] == 0
    warned = tmp_path / "warned.Dockerfile"
    warned.write_text("FROM tensorflow/tensorflow:2.15.0-gpu\nENV LD_LIBRARY_PATH=/opt/lib\n")
    code, out, _ = cli("lint", "--facts", facts, "--json", str(warned))
    statuses = {c["status"] for c in json.loads(out)["files"][0]["checks"]}
    assert "warn" in statuses
    assert "fail" not in statuses
    assert code == 0
    assert cli("lint", "--facts", facts, "--strict", str(warned))[0] == 1
    assert cli("lint", "--facts", facts, str(tmp_path / "missing"))[0] == 2
    code, out, _ = cli("lint", "--help")
    assert "Exit 0" in out
