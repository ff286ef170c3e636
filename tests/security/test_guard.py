"""Issue 16: the guard that blocks real subprocesses in unit tests cannot be caught by a probe's
`except Exception` (it raised an AssertionError, which the probe runner reported as "probe crashed", so
tests that read the real machine passed silently), and it fails the test at teardown even if swallowed."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import RealSubprocessBlocked
from tfgpu.core import process as run

pytestmark = pytest.mark.safety


def test_the_guard_escapes_a_probe_that_catches_exception(request: pytest.FixtureRequest) -> None:
    def probe() -> str:
        try:
            run.capture([sys.executable, "-c", "pass"], timeout=1)
        except Exception:  # what every probe does with a crash
            return "probe crashed"
        return "ran"

    with pytest.raises(RealSubprocessBlocked, match="unit test tried to start a real subprocess"):
        probe()
    assert len(request.node.spawn_attempts) == 1
    request.node.spawn_attempts.clear()  # this test wanted the attempt


def test_the_guard_also_fails_at_teardown_when_swallowed(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import _subprocess_protection  # noqa: F401\n")
    pytester.makepyfile("""
        import sys

        from tfgpu.core import process as run

        def test_swallows():
            try:
                run.capture([sys.executable, "-c", "pass"], timeout=1)
            except BaseException:
                pass
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*unit test tried to start real subprocesses*"])
