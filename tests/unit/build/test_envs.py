"""The registry of environments tfgpu made, prefix validation, and `tfgpu remove` / `tfgpu envs`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tfgpu.build import registry
from tfgpu.build.asides import remove_environment
from tfgpu.core.errors import InputError, UsageError


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def fake_venv(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return path


def test_home_honours_tfgpu_home(home: Path) -> None:
    assert registry.home() == home.resolve()


def test_home_defaults_to_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    monkeypatch.delenv("TFGPU_HOME")
    assert registry.home() == Path(platformdirs.user_data_dir("tfgpu", appauthor=False))


def test_record_find_update_and_list(tmp_path: Path) -> None:
    p = str(fake_venv(tmp_path / "e1"))
    registry.record(name="e1", prefix=p, backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="pip-and-cuda",
                env_python=p + "/bin/python")
    registry.update_smoke(p, {"passed": True, "mode": "gpu"})
    (entry,) = registry.load()
    assert entry["tf"] == "2.20.0"
    assert entry["smoke"] == {"passed": True, "mode": "gpu"}
    assert registry.find("e1") == entry == registry.find(p)
    doc = json.loads(registry.registry_path().read_text())
    assert doc["schema"] == "tfgpu.envs/1"
    # recording the same prefix again replaces the entry
    registry.record(name="e1", prefix=p, backend="pip", tool="uv", tf="2.19.0", python="3.11", recipe="r", env_python="x")
    assert [e["tf"] for e in registry.load()] == ["2.19.0"]


def test_corrupt_registry_is_an_input_error(home: Path) -> None:
    home.mkdir(parents=True)
    registry.registry_path().write_text("{not json")
    with pytest.raises(InputError, match="unreadable"):
        registry.load()


def test_remove_only_what_tfgpu_made(tmp_path: Path) -> None:
    made = fake_venv(tmp_path / "made")
    other = fake_venv(tmp_path / "other")
    env_id = registry.new_env_id()  # what create records; an entry without one is trusted only in envs/
    registry.write_marker(made, env_id)
    registry.record(name="made", prefix=str(made), backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="r",
                env_python="x", env_id=env_id)
    with pytest.raises(UsageError, match="not an environment tfgpu made"):
        remove_environment(str(other), lambda *_: True)
    assert other.exists()
    asked: list[list[Path]] = []
    remove_environment("made", lambda _entry, paths: asked.append(paths) or True)
    assert asked == [[made]]  # asked with exactly what is deleted
    assert not made.exists()
    assert registry.load() == []


def test_remove_refuses_a_directory_that_is_no_longer_an_environment(tmp_path: Path) -> None:
    d = tmp_path / "was-env"
    d.mkdir()
    (d / "precious.txt").write_text("keep")
    registry.record(name="w", prefix=str(d), backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="r", env_python="x")
    with pytest.raises(UsageError, match="does not look like an environment"):
        remove_environment("w", lambda *_: True)
    assert (d / "precious.txt").exists()


@pytest.mark.parametrize("bad", ["/", "~"])
def test_prefix_root_and_home_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="refusing"):
        registry.check_prefix(bad)


def test_prefix_inside_site_packages_or_another_env_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="site-packages"):
        registry.check_prefix(tmp_path / "lib" / "python3.11" / "site-packages" / "x")
    outer = fake_venv(tmp_path / "outer")
    with pytest.raises(UsageError, match="inside another environment"):
        registry.check_prefix(outer / "inner")
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        registry.check_prefix(f)


def test_relative_and_dotdot_prefixes_are_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert registry.check_prefix("a/../b") == (tmp_path / "b").resolve()


def test_cli_envs_and_remove(tmp_path: Path, cli: Any) -> None:
    code, out, _ = cli("envs")
    assert code == 0
    assert "no environments yet" in out
    p = fake_venv(tmp_path / "cli-env")
    env_id = registry.new_env_id()
    registry.write_marker(p, env_id)
    registry.record(name="cli-env", prefix=str(p), backend="pip", tool="uv", tf="2.20.0", python="3.11", recipe="r",
                env_python="x", env_id=env_id)
    code, out, _ = cli("envs")
    assert code == 0
    assert "cli-env" in out
    assert "2.20.0" in out
    code, _, err = cli("remove", "nope", "--yes")
    assert code == 2
    assert "not an environment tfgpu made" in err
    code, out, _ = cli("remove", "cli-env", "--yes")
    assert code == 0
    assert not p.exists()


def test_an_aside_record_acts_only_on_the_name_tfgpu_gives_such_an_aside(tmp_path: Path) -> None:
    """Issue 28: the registry's records are the only licence to restore or delete an aside; a record that names
    any other directory (a hand edit, a restored backup of envs.json) is ignored, the directory left alone."""
    from tfgpu.build.asides import stranded

    prefix = fake_venv(tmp_path / "envs" / "tf")
    elsewhere = tmp_path / "thesis"
    elsewhere.mkdir()
    (elsewhere / "chapter1.tex").write_text("years of work\n")
    dead = 2**22 + 17
    registry.note_aside(elsewhere, prefix, "trash", None)
    records = json.loads(registry.registry_path().read_text())["asides"]
    for rec in records:
        rec["pid"] = dead  # as if the process that wrote it were gone
    doc = json.loads(registry.registry_path().read_text())
    doc["asides"] = records
    registry.registry_path().write_text(json.dumps(doc))
    assert registry.load_asides() == []
    assert stranded([prefix]) == []
    assert (elsewhere / "chapter1.tex").is_file()
