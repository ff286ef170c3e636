"""Red-team faults: a disk that fills up under tfgpu's registry and under `fleet merge --html` (a real
tmpfs, when this runs as root; skipped otherwise). Both held before: the test guards the promise that
nothing already there is lost and the error is one line, rc 1."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.test_badinput import _mount_tmpfs
from tests.security.test_inputs import _facts, _report
from tests.security.test_inputs3 import Cli
from tfgpu.build import registry
from tfgpu.core.errors import TfgpuError

pytestmark = [pytest.mark.faults, pytest.mark.safety, pytest.mark.real_subprocess]

REGISTRY = {"schema": "tfgpu.envs/1", "envs": [{"name": "keep", "prefix": "/nowhere/keep", "backend": "venv",
                                                  "smoke": None}]}


def _fill(d: Path) -> None:
    """No block and no inode left on the filesystem of ``d``."""
    with contextlib.suppress(OSError), (d / "filler").open("wb", buffering=0) as fh:
        while fh.write(b"\0" * 4096):
            pass
    with contextlib.suppress(OSError):
        for i in range(64):
            (d / f"inode-{i}").touch()


@pytest.fixture
def full_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for d in _mount_tmpfs(tmp_path / "full", "size=64k,nr_inodes=32"):
        home = d / "home"
        home.mkdir()
        (home / "registry.json").write_text(json.dumps(REGISTRY))
        (home / ".envs.lock").touch()
        _fill(d)
        monkeypatch.setenv("TFGPU_HOME", str(home))
        yield home


def test_attack_full_disk_during_a_registry_write_keeps_the_registry(full_home: Path) -> None:
    before = (full_home / "registry.json").read_text()
    with pytest.raises(TfgpuError) as err:
        registry.update_smoke("/nowhere/keep", {"ok": True, "detail": "x" * 200_000})
    assert int(err.value.exit_code) == 1
    assert (full_home / "registry.json").read_text() == before
    assert [p.name for p in full_home.iterdir() if p.name.endswith(".tmp")] == []


def test_attack_full_disk_under_fleet_html(cli: Cli, full_home: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "n1.json").write_text(json.dumps(_report(_facts())))
    rc, _out, err = cli("fleet", "merge", str(reports), "--html", str(full_home / "fleet.html"))
    assert rc == 1, err
    assert "No space left" in err
    assert "Traceback" not in err
    assert not (full_home / "fleet.html").exists()
    assert [p.name for p in full_home.iterdir() if "tmp" in p.name] == []
