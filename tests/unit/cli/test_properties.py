"""Property-based tests (hypothesis) of the CLI's arguments: version strings, environment names and
prefixes. Whatever a user types: no crash (exit 0, 1 or 2, never 3), no path escape, no shell injection.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tfgpu.core.errors import UsageError

Cli = Callable[..., "tuple[int, str, str]"]

#: Seeded from this file's machine: Linux, one RTX-class GPU, a driver and a Python 3.11 (a path is all
#: the planner needs; nothing is run: --backend pip plans without asking any installer).
FACTS: dict[str, Any] = {
    "schema": "tfgpu.facts/1",
    "platform": {"os": "linux", "wsl": None},
    "python": {"current": "3.11.9", "interpreters": [{"version": "3.11.9", "path": "/usr/bin/python3.11"}]},
    "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3060", "compute_capability": "8.6", "memory_mib": 12288,
              "uuid": None}],
    "driver": {"version": "550.54.15", "cuda": "12.4"},
}
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

version_like = st.one_of(
    st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,4}){0,4}\Z"),
    st.from_regex(r"\A[0-9]\.[0-9]{1,2}(rc[0-9]|\.post[0-9]|\.\*|\.dev0|a1)?\Z"),
    st.sampled_from(["latest", "", " ", "2.15 ", "2..15", "v2.15", "2.15.0.0.0.0", "+1", "-1", "nan", "1e9",
                     "9" * 400, "2.15\n", "2.15\x00", "٢.١٥", "２.１５", "2.15;rm -rf /", "$(id)", "`id`"]),
    st.text(min_size=0, max_size=30),
)
name_like = st.one_of(
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,70}\Z"),
    st.sampled_from(["..", ".", "../evil", "a/../../b", "a/b", "/abs", "--rm", "-n", "~", "~root", "a b",
                     "tf\n", "tf\nrm -rf ~", "tf;id", "tf$(id)", "ünïcödé", "tf\x00", "x" * 64, "x" * 65,
                     "con", "a..b", "tf 2.15", "'quoted'", '"dq"']),
    st.text(min_size=1, max_size=20),
)


@pytest.fixture
def facts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "facts.json"
    path.write_text(json.dumps(FACTS), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def tfgpu_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("tfgpu-home")
    monkeypatch.setenv("TFGPU_HOME", str(home))
    for var in ("TFGPU_DRIVER_VERSION", "TFGPU_GPU_CC", "TFGPU_OS", "TFGPU_PYTHONS", "CONDA_OVERRIDE_CUDA"):
        monkeypatch.delenv(var, raising=False)
    return home.resolve()


def _sane(code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err
    assert "internal error" not in err
    if code == 2:
        assert err.startswith("tfgpu: error: ")
        assert err.count("\n") == 1, err


# --------------------------------------------------------------------------- version strings


@SETTINGS
@given(tf=version_like)
def test_doctor_tf_never_crashes(cli: Cli, facts_file: Path, tf: str) -> None:
    _sane(*cli("doctor", "--facts", str(facts_file), "--tf", tf, "--json"))


@SETTINGS
@given(driver=version_like, cc=version_like)
def test_doctor_overrides_never_crash(cli: Cli, facts_file: Path, driver: str, cc: str) -> None:
    code, out, err = cli("doctor", "--facts", str(facts_file), "--driver", driver, "--gpu-cc", cc, "--json")
    _sane(code, out, err)
    if code != 2:
        doc = json.loads(out)
        assert f"driver={driver.strip()} (driver)" in doc["overrides"]


@SETTINGS
@given(tf=version_like, python=version_like, driver=version_like)
def test_compat_never_crashes(cli: Cli, tf: str, python: str, driver: str) -> None:
    _sane(*cli("compat", "--tf", tf, "--python", python, "--driver", driver, "--json"))


@SETTINGS
@given(tf=version_like)
def test_plan_tf_never_crashes(cli: Cli, facts_file: Path, tf: str) -> None:
    _sane(*cli("plan", "--facts", str(facts_file), "--backend", "pip", "--tf", tf, "--json"))


@SETTINGS
@given(python=version_like)
@example(python="banana")
def test_plan_python_never_crashes(cli: Cli, facts_file: Path, python: str) -> None:
    _sane(*cli("plan", "--facts", str(facts_file), "--backend", "pip", "--tf", "2.15", "--python", python, "--json"))


# --------------------------------------------------------------------------- names and prefixes


@SETTINGS
@given(name=name_like)
def test_plan_name_stays_inside_the_tfgpu_home(cli: Cli, facts_file: Path, tfgpu_home: Path, name: str) -> None:
    code, out, err = cli("plan", "--facts", str(facts_file), "--backend", "pip", "--tf", "2.15", "--name", name,
                         "--json")
    _sane(code, out, err)
    if "/" in name or "\\" in name or ".." in name or name.startswith("-") or name in (".", "~"):
        assert code == 2, f"{name!r} was accepted"
    if code == 0:
        prefix = Path(json.loads(out)["prefix"])
        assert prefix.parent == tfgpu_home / "envs"
        assert prefix.name == name


def test_environment_name_with_a_trailing_newline_is_refused() -> None:
    from tfgpu.plan.envspec import check_name

    with pytest.raises(UsageError):
        check_name("tf\n")


def _prefixes(tmp: Path) -> st.SearchStrategy[str]:
    home = os.path.expanduser("~")
    fixed = ["/", "//", "/.", "/..", "~", home, home + "/", home + "/.", "~/", "~/../", "..", ".", "../..",
             str(tmp), str(tmp / "new env"), str(tmp / "ünï cödé"), str(tmp / "a" / ".." / ".." / "x"),
             str(tmp / "env\nrm -rf ~"), str(tmp / "x\x00y"), str(tmp / ("y" * 300)), "--rm", "-rf",
             str(tmp / "$(id)"), str(tmp / "`id`"), str(tmp / "it's"), str(tmp / 'a"b'), "/usr", "/etc/passwd"]
    return st.one_of(st.sampled_from(fixed), st.text(min_size=1, max_size=40).map(lambda t: str(tmp / t)),
                     st.text(min_size=1, max_size=20))


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_plan_prefix_is_exactly_what_was_asked_or_refused(cli: Cli, facts_file: Path, tmp_path: Path,
                                                           data: st.DataObject) -> None:
    prefix = data.draw(_prefixes(tmp_path))
    code, out, err = cli("plan", "--facts", str(facts_file), "--backend", "pip", "--tf", "2.15", "--prefix", prefix,
                         "--json")
    _sane(code, out, err)
    home = Path.home().resolve()
    if code != 0:
        return
    planned = Path(json.loads(out)["prefix"])
    assert planned.is_absolute()
    assert planned not in (Path("/"), home), f"{prefix!r} -> {planned}"
    assert planned == (Path.cwd() / Path(prefix).expanduser()).resolve(), prefix
    assert not any(ord(c) < 32 for c in str(planned))
    assert not (planned.exists() and not planned.is_dir())


# --------------------------------------------------------------------------- no injection


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_plan_sh_cannot_be_injected(cli: Cli, facts_file: Path, tmp_path: Path, data: st.DataObject) -> None:
    """Every command line of `--format sh` parses with shlex into the plan's own argv: a prefix or a
    --find-links value full of shell syntax stays one argument, and no line is outside a comment,
    a command of the plan, or a quoted here-document."""
    prefix = data.draw(_prefixes(tmp_path))
    link = data.draw(st.one_of(st.sampled_from(["$(touch /tmp/pwned)", "`id`", "a b; rm -rf ~", "x\ny", "'"]),
                               st.text(min_size=1, max_size=20)))
    assume("\x00" not in link)
    args = ("plan", "--facts", str(facts_file), "--backend", "pip", "--tf", "2.15", "--prefix", prefix,
            "--find-links", link)
    code, out, err = cli(*args, "--json")
    _sane(code, out, err)
    if code != 0:
        return
    plan = json.loads(out)
    code, sh, err = cli(*args, "--format", "sh")
    assert code == 0, err
    expected = [s["argv"] for s in plan["steps"] if s["kind"] == "run"]
    commands: list[list[str]] = []
    lines = sh.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.startswith("#") or line == "set -eu" or line.startswith("mkdir -p "):
            continue
        if line.startswith("cat ") and line.endswith("<<'TFGPU_EOF'"):
            while lines[i] != "TFGPU_EOF":  # a quoted here-document: the shell expands nothing in it
                i += 1
            i += 1
            continue
        # a quoted argument may span lines (a newline inside --find-links): join until shlex accepts it
        text = line
        while True:
            try:
                tokens = shlex.split(text)
                break
            except ValueError:
                assert i < len(lines), f"unterminated quoting in {text!r}"
                text += "\n" + lines[i]
                i += 1
        env = []
        while tokens and "=" in tokens[0] and not tokens[0].startswith(("/", "-")):
            env.append(tokens.pop(0))
        commands.append(tokens)
    assert commands == expected
    assert link in expected[-1]


def test_argv_elements_reach_the_program_as_single_items(tmp_path: Path) -> None:
    """The runner hands argv to exec as a list: shell syntax in an element is never interpreted."""
    import sys

    from tfgpu.core import process as run

    seen: list[Any] = []

    def spawn(argv: Any, **kwargs: Any) -> Any:
        seen.append((argv, kwargs))
        raise OSError(2, "stop here")

    hostile = ["a b", "$(touch /tmp/pwned)", "`id`", "x;y", "--rm", "'", "\n"]
    old = run._spawn
    run._spawn = spawn
    try:
        res = run.capture([sys.executable, *hostile], timeout=1)
    finally:
        run._spawn = old
    ((argv, kwargs),) = seen
    assert argv[1:] == hostile
    assert isinstance(argv, list)
    assert kwargs.get("shell", False) is False
    assert res.error is not None
