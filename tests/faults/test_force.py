"""Issue 16, High 1: `create --force` replaces only an environment tfgpu itself made (its marker matches
the registry); a user's venv, a folder with an empty conda-meta/ or a copied marker is refused with rc 2
and left as it was. Also the registry under concurrency and `remove` of a prefix that became a symlink."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fake_venv_plan, isolate_installers
from tfgpu.build import registry
from tfgpu.build.execute import run_plan
from tfgpu.core.errors import UsageError

pytestmark = pytest.mark.safety



@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_installers(monkeypatch, tmp_path)




def _users_venv(prefix: Path) -> Path:
    prefix.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    code = prefix / "my_project.py"
    code.write_text("print('years of work')\n")
    return code


@pytest.mark.real_subprocess
def test_force_refuses_a_users_venv(tmp_path: Path) -> None:
    prefix = tmp_path / "proj"
    code = _users_venv(prefix)
    with pytest.raises(UsageError, match="was not created by tfgpu; remove it yourself or choose another prefix"):
        run_plan(fake_venv_plan(prefix), force=True)
    assert code.read_text() == "print('years of work')\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == ["proj"]


@pytest.mark.real_subprocess
def test_force_refuses_a_folder_with_an_empty_conda_meta(tmp_path: Path) -> None:
    prefix = tmp_path / "data"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "thesis.tex").write_text("x")
    with pytest.raises(UsageError, match="not created by tfgpu"):
        run_plan(fake_venv_plan(prefix), force=True)
    assert (prefix / "thesis.tex").exists()


@pytest.mark.real_subprocess
def test_force_refuses_a_copied_marker_that_the_registry_does_not_name(tmp_path: Path) -> None:
    made = tmp_path / "made"
    run_plan(fake_venv_plan(made))
    other = tmp_path / "other"
    _users_venv(other)
    (other / registry.MARKER).write_bytes((made / registry.MARKER).read_bytes())  # same id, other prefix
    with pytest.raises(UsageError, match="not created by tfgpu"):
        run_plan(fake_venv_plan(other), force=True)
    assert (other / "my_project.py").exists()
    # a marker that is a symlink to a real one is not a marker
    (other / registry.MARKER).unlink()
    (other / registry.MARKER).symlink_to(made / registry.MARKER)
    assert registry.read_marker(other) is None


@pytest.mark.real_subprocess
def test_force_replaces_what_tfgpu_made_and_says_what(tmp_path: Path) -> None:
    prefix = tmp_path / "tf"
    first = run_plan(fake_venv_plan(prefix))
    assert first.replaced_what is None
    old_id = registry.read_marker(prefix)
    assert old_id is not None
    assert registry.find(str(prefix))["id"] == old_id  # type: ignore[index]
    second = run_plan(fake_venv_plan(prefix), force=True)
    assert second.replaced
    assert second.replaced_what is not None
    assert "TensorFlow 2.20.0 (venv), created" in second.replaced_what
    new_id = registry.read_marker(prefix)
    assert new_id not in (None, old_id)
    assert registry.find(str(prefix))["id"] == new_id  # type: ignore[index]


def test_cli_force_refuses_a_users_venv_with_rc_2(tmp_path: Path, cli: Any, data_dir: Path) -> None:
    prefix = tmp_path / "proj"
    code_file = _users_venv(prefix)
    facts = data_dir / "facts" / "r740-4x-tesla-m60.json"
    rc, out, err = cli("create", "--tf", "2.20.0", "--backend", "pip", "--prefix", str(prefix), "--facts",
                       str(facts), "--yes", "--force", "--no-smoke")
    assert rc == 2, (out, err)
    assert f"{prefix} was not created by tfgpu; remove it yourself or choose another prefix" in err
    assert code_file.exists()


# --------------------------------------------------------------------------- the registry under concurrency


def _record_many(home: str, worker: int, n: int) -> None:
    os.environ["TFGPU_HOME"] = home
    for i in range(n):
        registry.record(name=f"w{worker}-{i}", prefix=f"/envs/w{worker}-{i}", backend="pip", tool="uv", tf="2.20.0",
                    python="3.11", recipe="r", env_python="x")


@pytest.mark.faults
def test_registry_keeps_every_entry_under_concurrency(home: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_many, args=(str(home), w, 20)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert len(registry.load()) == 80


def test_registry_save_uses_unpredictable_names_and_never_follows_a_planted_link(home: Path, tmp_path: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (home / f".envs.{os.getpid()}.tmp").symlink_to(victim)  # the old predictable name
    registry.record(name="a", prefix="/envs/a", backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="r",
                env_python="x")
    assert victim.read_text() == "keep"
    assert [e["name"] for e in registry.load()] == ["a"]


def test_remove_of_a_prefix_that_became_a_symlink_is_refused(tmp_path: Path, cli: Any) -> None:
    prefix = tmp_path / "env"
    target = tmp_path / "precious"
    target.mkdir()
    (target / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (target / "data.txt").write_text("x")
    prefix.symlink_to(target)
    registry.record(name="env", prefix=str(prefix), backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="r",
                env_python="x")
    rc, _, err = cli("remove", "env", "--yes")
    assert rc == 2, err
    assert "is now a symlink" in err
    assert (target / "data.txt").exists()


def test_remove_takes_the_prefix_lock(tmp_path: Path, cli: Any) -> None:
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    registry.record(name="env", prefix=str(prefix), backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="r",
                env_python="x")
    with registry.prefix_lock(prefix):
        rc, _, err = cli("remove", "env", "--yes")
    assert rc == 1, err
    assert "is being created by tfgpu pid" in err
    assert prefix.exists()


def test_corrupt_registry_is_found_before_building(tmp_path: Path, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    registry.registry_path().write_text("{not json")
    prefix = tmp_path / "tf"
    with pytest.raises(UsageError, match="unreadable"):
        run_plan(fake_venv_plan(prefix))  # no real subprocess may start: the registry is checked first
    assert not prefix.exists()
