"""Shared fixtures. Unit tests cannot touch the world: tfgpu's subprocess seam is blocked unless a
test is marked ``real_subprocess`` or installs a fake (STYLE.md, point 11)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tfgpu.core import process as run_mod

# The parsed knowledge base is cached between runs (tfgpu.kb.knowledge._cache_file); tests use their own dir.
os.environ.setdefault("TFGPU_CACHE_DIR", tempfile.mkdtemp(prefix="tfgpu-test-cache-"))
# Knowledge a developer fetched with `tfgpu kb update` must not change what the tests judge with (tfgpu.kb.bundles);
# the tests of the update itself unset this.
os.environ["TFGPU_KB_DATA"] = "bundled"


#: pytester runs the subprocess guard itself (tests/security/test_guard.py).
pytest_plugins = ["pytester"]
DATA = Path(__file__).resolve().parent / "data"
#: The machine `tfgpu lock` tests lock for (lock chooses its recipe for a machine, as plan does; unit tests
#: cannot probe this one).
LOCK_FACTS = str(DATA / "facts" / "mx150-laptop-ubuntu1804.json")
#: A desktop with an RTX 3080 on driver 550 and Python 3.11 (the doctor recommends a pip recipe there).
RTX3080_FACTS = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.35"},
                 "python": {"current": "3.11.4", "interpreters": [{"version": "3.11.4", "path": "/usr/bin/python3.11"}]},
                 "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3080", "compute_capability": "8.6",
                           "memory_mib": 10240}],
                 "driver": {"version": "550.54.15", "cuda": None}}


class RealSubprocessBlocked(BaseException):
    """Not an Exception: a probe's `except Exception` (which turns a crash into a "probe crashed"
    result) must not swallow it, or a test that reads the real machine would pass silently."""


@pytest.fixture(autouse=True)
def _subprocess_protection(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.node.get_closest_marker("real_subprocess") is not None:
        yield
        return
    attempts: list[str] = []

    def blocked(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        argv = args[0] if args else kwargs.get("args")
        attempts.append(repr(argv))
        raise RealSubprocessBlocked(
            f"unit test tried to start a real subprocess {argv!r}: install a fake "
            "(monkeypatch tfgpu.core.process._spawn) or mark the test real_subprocess"
        )

    monkeypatch.setattr(run_mod, "_spawn", blocked)
    request.node.spawn_attempts = attempts  # tests of this guard itself clear it
    yield
    # and should anything swallow even a BaseException, the test still fails here
    if attempts:
        pytest.fail(f"unit test tried to start real subprocesses: {', '.join(attempts[:3])}", pytrace=False)


#: Tests that need tfgpu's embedded conda engine (py-rattler >= 0.26, so Python >= 3.10).
needs_engine = pytest.mark.skipif(not __import__("importlib").import_module("tfgpu.backends.rattler").available(),
                                  reason="the embedded conda engine needs Python >= 3.10 (py-rattler >= 0.26)")


@pytest.fixture(autouse=True)
def _no_forced_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """A FORCE_COLOR in the environment running the tests (CI) must not style the output tests read
    (tfgpu.render.output honours it, as rich does), nor a COLUMNS wrap it."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    # pytest-xdist's workers run with COLUMNS=80, which tfgpu's human output honours (issue 29, item 5): the
    # tests read output as a pipe gets it, unwrapped, unless a test sets a width itself
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local file:// conda channel mirroring the real TensorFlow recipes (tests/channel_builder.py)."""
    from tests.channel_builder import tf_channel

    return tf_channel(tmp_path_factory.mktemp("channel"))


def isolate_installers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """tfgpu's home is the test's own; the host's pip.conf / uv.toml (constraints, extra indexes) must
    not leak into the test installs. Returns the tfgpu home."""
    home = tmp_path / "home"
    monkeypatch.setenv("TFGPU_HOME", str(home))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    return home


#: A step that makes a prefix look like a venv in milliseconds (tests whose faults come in later steps).
MAKE_VENV = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); p.mkdir(parents=True, exist_ok=True); "
             "(p / 'pyvenv.cfg').write_text('home = /usr/bin\\n')")


def fake_venv_plan(prefix: Path, *steps: Any) -> Any:
    """A pip plan whose first step makes a fake venv at ``prefix`` (MAKE_VENV), then ``steps``."""
    import sys

    from tfgpu.backends.steps import Step
    from tfgpu.plan.model import Plan

    return Plan(tf="2.20.0", backend="pip", backend_reason="test", prefix=str(prefix), name=None, python="3",
                steps=(Step((sys.executable, "-c", MAKE_VENV, str(prefix)), "make the venv"), *steps),
                tool="venv", env_python=str(prefix / "bin" / "python"))


def load_file_module(path: Path, name: str) -> ModuleType:
    """Import a script or benchmark file that is not a package module (registered under ``name``:
    dataclasses look their module up while the file executes)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def cli() -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""
    from tfgpu.cli.app import main

    def invoke(*argv: str) -> tuple[int, str, str]:
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        return code, out.getvalue(), err.getvalue()

    return invoke


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The casebook's score (tests/casebook/test_casebook.py), printed whatever -s/-q say."""
    from tests.casebook import RESULTS, summary_lines

    for line in summary_lines(RESULTS):
        terminalreporter.write_line(line)
