"""Shared fixtures. Unit tests cannot touch the world: tfgpu's subprocess seam is blocked unless a
test is marked ``real_subprocess`` or installs a fake (STYLE.md, point 11)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tfgpu import run as run_mod

# The parsed knowledge base is cached between runs (tfgpu.compat._cache_file); tests use their own dir.
os.environ.setdefault("TFGPU_CACHE_DIR", tempfile.mkdtemp(prefix="tfgpu-test-cache-"))

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


class RealSubprocessBlocked(AssertionError):
    pass


def _blocked(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
    argv = args[0] if args else kwargs.get("args")
    raise RealSubprocessBlocked(
        f"unit test tried to start a real subprocess {argv!r}: install a fake "
        "(monkeypatch tfgpu.run._spawn) or mark the test real_subprocess"
    )


@pytest.fixture(autouse=True)
def _subprocess_protection(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("real_subprocess") is None:
        monkeypatch.setattr(run_mod, "_spawn", _blocked)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def cli() -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""
    from tfgpu.cli import main

    def invoke(*argv: str) -> tuple[int, str, str]:
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        return code, out.getvalue(), err.getvalue()

    return invoke
