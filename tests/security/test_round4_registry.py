"""Issue 28 (safety, round four): removal that cannot delete what tfgpu did not make. The environments are
built by `tfgpu create` itself (a fake uv, tests/security/helpers.py) and every attack runs `python -m tfgpu`
as a user would. Each test names the attack (what the attacker controls), what happens today, and what must
happen instead; a test that fails on today's code carries a strict xfail naming its issue-28 item.
tests/security/ROUND4.md lists them all."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.security.helpers import (
    DEAD_PID,
    create_argv,
    env_with_fake_uv,
    make_env,
    registry_entries,
    tfgpu,
    users_folder,
)

pytestmark = [pytest.mark.safety]


def _home_env(home: Path) -> dict[str, str]:
    return {**os.environ, "TFGPU_HOME": str(home)}


def _killed_force(prefix: Path) -> Path:
    """What a `create --force` killed right after moving the old environment aside leaves: the old one at
    .NAME.tfgpu-old-PID (PID dead), nothing at the prefix."""
    aside = prefix.with_name(f".{prefix.name}.tfgpu-old-{DEAD_PID}")
    prefix.rename(aside)
    return aside


# --------------------------------------------------------------------------- High 4


def test_high4_remove_never_deletes_the_folder_a_user_put_where_a_killed_force_left_an_aside(tmp_path: Path) -> None:
    """High 4. The attacker: circumstance. A `create --force` was killed and left `.tf.tfgpu-old-PID`; the user
    then made their own folder at the environment's path. Today `tfgpu remove tf --yes` "restores" first:
    it renames the user's folder aside and `rm -rf`s it (then deletes the old environment too). Instead an
    aside name is acted on only when the registry says tfgpu made what is at the prefix; the user's folder
    is never moved nor deleted."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    _killed_force(prefix)
    keep = users_folder(prefix)
    tfgpu("remove", "tf", "--yes", env=_home_env(home))
    assert keep.is_file(), "the user's folder at the prefix was deleted"
    assert keep.read_text() == "years of work\n"


@pytest.mark.real_subprocess
def test_high4_create_force_never_deletes_the_folder_a_user_put_where_a_killed_force_left_an_aside(
        tmp_path: Path) -> None:
    """High 4, through `create --force`: the same stale `.tf.tfgpu-old-PID` and the user's folder at the prefix.
    Today `create --force` accepts the prefix because an aside exists ("the environment a killed create
    left"), "restores" it over the user's folder and deletes that folder. Instead the user's folder is refused
    (rc 2, "not created by tfgpu") and left as it was."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    _killed_force(prefix)
    keep = users_folder(prefix)
    res = tfgpu(*create_argv(tmp_path, ["--name", "tf"], "--force", "--no-smoke"), env=env_with_fake_uv(tmp_path, home))
    assert keep.is_file(), f"the user's folder at the prefix was deleted (rc {res.returncode})"
    assert res.returncode == 2, res.stderr


# --------------------------------------------------------------------------- High 5


def test_high5_remove_asks_before_deleting_the_old_copy_a_killed_force_left(tmp_path: Path) -> None:
    """High 5. The environment's folder is gone, but the old copy from a killed `--force` waits beside it.
    Today `tfgpu remove tf` without --yes (and without a terminal to ask on) restores it, deletes it and says
    "nothing was on disk": a whole environment deleted with no question. Instead removing anything asks first
    unless --yes (here: no terminal, so rc 2 "needs confirmation") and nothing is deleted."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    aside = _killed_force(prefix)
    res = tfgpu("remove", "tf", env=_home_env(home), stdin="")
    left = [p for p in (prefix, aside) if (p / "pyvenv.cfg").is_file()]
    assert left, f"deleted without asking (rc {res.returncode}): {res.stdout.strip()}"
    assert res.returncode == 2, res.stderr
    assert "confirmation" in res.stderr


def test_high5_remove_names_exactly_what_it_deletes(tmp_path: Path) -> None:
    """High 5, what `remove --yes` says. Today, after restoring and deleting the old copy, it prints "nothing was
    on disk ({prefix} was already gone)". Instead it lists exactly what it deletes: the old copy's path."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    aside = _killed_force(prefix)
    res = tfgpu("remove", "tf", "--yes", env=_home_env(home))
    assert res.returncode == 0, res.stderr
    assert "nothing was on disk" not in res.stdout
    assert str(aside) in res.stdout + res.stderr


def test_high5_remove_of_an_entry_whose_folder_is_gone_still_just_forgets_it(tmp_path: Path) -> None:
    """The ordinary case High 5's fix must keep: an entry whose folder is gone (no aside anywhere) is
    forgotten without a question, rc 0 (README: "removing it only forgets the entry")."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    shutil.rmtree(prefix)
    res = tfgpu("remove", "tf", env=_home_env(home), stdin="")
    assert res.returncode == 0, res.stderr
    assert registry_entries(home) == []


# --------------------------------------------------------------------------- Medium: --force and the smoke test


@pytest.mark.real_subprocess
def test_medium_force_keeps_the_old_environment_when_the_new_one_fails_its_smoke_test(tmp_path: Path) -> None:
    """Medium. `create --force` promises "it is kept until the new one works". Today the old environment is
    deleted as soon as the steps finish, before the smoke test; a new one that fails its smoke test (here its
    python cannot start) leaves the user with a broken environment and without the working one. Instead the
    old environment stays (aside, then back) until the new one has passed its smoke test."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    (prefix / "old-work.txt").write_text("the old environment\n")
    res = tfgpu(*create_argv(tmp_path, ["--name", "tf"], "--force"), env=env_with_fake_uv(tmp_path, home))
    assert res.returncode == 1, res.stderr  # the smoke test failed
    assert (prefix / "old-work.txt").is_file(), "the old environment is gone although the new one failed"


# --------------------------------------------------------------------------- Low: odd registry values


def _write_registry(home: Path, entry: dict[str, object]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "envs.json"
    path.write_text(json.dumps({"schema": "tfgpu.envs/1", "envs": [entry]}))
    path.chmod(0o600)


def _entry(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"name": "a", "prefix": "/nonexistent/tfgpu-r4/a", "backend": "pip", "tool": "uv",
                               "tf": "2.20.0", "python": "3.11", "recipe": "pip-and-cuda",
                               "env_python": "/nonexistent/tfgpu-r4/a/bin/python", "created": "2026-01-01T00:00:00",
                               "smoke": None}
    base.update(over)
    return base


@pytest.mark.parametrize(("entry", "argv"), [
    pytest.param(_entry(smoke="passed"), ("envs",), id="smoke-a-string-envs"),
    pytest.param(_entry(smoke=["passed"]), ("envs",), id="smoke-a-list-envs"),
    pytest.param(_entry(prefix="/tmp/" + "x" * 5000), ("envs",), id="long-prefix-envs"),
    pytest.param(_entry(prefix="/tmp/" + "x" * 5000), ("remove", "a", "--yes"), id="long-prefix-remove"),
    pytest.param(_entry(prefix="/tmp/" + "x" * 5000), ("run", "a", "--", "true"), id="long-prefix-run"),
])
def test_low_odd_values_in_envs_json_are_one_line_errors_not_internal_errors(
        cli: Callable[..., tuple[int, str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, object],
        argv: tuple[str, ...]) -> None:
    """Low. envs.json is a file (edited by hand, written by an older tfgpu, restored from a backup). Today a
    "smoke" that is a string or a list, or a prefix longer than the filesystem allows (ENAMETOOLONG), makes
    `tfgpu envs`, `remove` and `run` end with "internal error" (rc 3). Instead the value is shown as it is or
    refused in one line (rc 0, 1 or 2)."""
    home = tmp_path / "home"
    monkeypatch.setenv("TFGPU_HOME", str(home))
    _write_registry(home, entry)
    rc, _out, err = cli(*argv)
    assert rc in (0, 1, 2), err
    assert "internal error" not in err


# --------------------------------------------------------------------------- new: aside names tfgpu did not make


@pytest.mark.parametrize("kind", ["old", "partial", "trash"])
def test_new_a_folder_named_like_an_aside_that_tfgpu_did_not_make_is_left_alone(tmp_path: Path, kind: str) -> None:
    """New (R4-N18). The user (a backup restore, a sync tool, a colleague's copy in a group directory of
    theirs) has a folder `.tf.tfgpu-KIND-PID` beside a registered environment; tfgpu never wrote it (no
    marker, the registry names no aside). Today the next `tfgpu remove tf` treats it as a killed create's
    leftover: a "partial" or "trash" one is `rm -rf`ed; an "old" one is moved over the environment (which is
    deleted) and the user's folder ends up at the prefix. Instead only what the registry says tfgpu set aside
    is restored or deleted: the user's folder stays where it is, with its content."""
    home = tmp_path / "home"
    prefix = make_env(tmp_path, home)
    theirs = prefix.with_name(f".tf.tfgpu-{kind}-{DEAD_PID}")
    keep = users_folder(theirs)
    tfgpu("remove", "tf", "--yes", env=_home_env(home))
    assert keep.is_file(), f"the folder {theirs.name} was moved or deleted"
