"""Red-team attacks on tfgpu's home directory (TFGPU_HOME): files planted where tfgpu writes.

Before the fix, ``prefix_lock`` opened its predictable lock file (sha256 of the prefix) following
symlinks and truncated it to write its pid: a symlink planted at ``locks/<hash>.lock`` (a shared or
group-writable TFGPU_HOME) made ``tfgpu create`` or ``remove`` overwrite the file it pointed at."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tfgpu.build import registry
from tfgpu.core.errors import TfgpuError

pytestmark = pytest.mark.safety


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("TFGPU_HOME", str(h))
    return h


def _lock_path(home: Path, prefix: Path) -> Path:
    return home / "locks" / (hashlib.sha256(str(prefix).encode()).hexdigest()[:16] + ".lock")


def test_attack_symlink_planted_at_the_prefix_lock_never_clobbers_its_target(home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    prefix = tmp_path / "envs" / "tf"
    lock = _lock_path(home, prefix)
    lock.parent.mkdir(parents=True)
    lock.symlink_to(victim)
    with pytest.raises(TfgpuError) as err, registry.prefix_lock(prefix):
        pass
    assert int(err.value.exit_code) == 1  # the surroundings, one line; never a traceback
    assert victim.read_text() == "precious\n"


def test_attack_dangling_symlink_at_the_prefix_lock_creates_nothing(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "created-elsewhere"
    prefix = tmp_path / "envs" / "tf"
    lock = _lock_path(home, prefix)
    lock.parent.mkdir(parents=True)
    lock.symlink_to(target)
    try:
        with registry.prefix_lock(prefix):
            pass
    except TfgpuError:
        pass
    assert not target.exists()


def test_attack_symlink_planted_at_the_registry_lock(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "created-elsewhere"
    (home / ".envs.lock").symlink_to(target)
    try:
        registry.update_smoke(str(tmp_path / "x"), None)
    except TfgpuError:
        pass
    assert not target.exists()


def test_attack_fifo_planted_at_the_prefix_lock_does_not_hang(home: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tf"
    lock = _lock_path(home, prefix)
    lock.parent.mkdir(parents=True)
    os.mkfifo(lock)
    with pytest.raises(TfgpuError), registry.prefix_lock(prefix):
        pass


def test_prefix_lock_still_serialises(home: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tf"
    with registry.prefix_lock(prefix) as path:
        assert path.is_file()
        assert "tfgpu pid" in path.read_text()
        with pytest.raises(TfgpuError, match="being created"), registry.prefix_lock(prefix):
            pass
