"""`tfgpu create` in a pipe or a log (CI, the bench) prints one plain line per step and imports no rich.progress,
which has nothing to show there (127 M instructions, ~40 ms of every create; issue 32); on a terminal the live
progress stays."""

from __future__ import annotations

import subprocess
import sys

import pytest

_RENDER = """
import sys
from types import SimpleNamespace
from tfgpu.cli.commands.create import _CreateRenderer
plan = SimpleNamespace(steps=("venv", "install"))
r = _CreateRenderer(yes=True)
with r.building(plan):
    for i, why in enumerate(("create a venv", "install tensorflow-cpu==2.21.0"), 1):
        r.step(i, 2, SimpleNamespace(why=why))
        r.line("Resolved 1 package")
    r.built(plan)
print("rich.progress" in sys.modules)
"""


@pytest.mark.real_subprocess
@pytest.mark.parametrize(("force_color", "progress"), [("", False), ("1", True)])
def test_create_in_a_pipe_prints_its_steps_plainly_without_rich_progress(force_color: str, progress: bool) -> None:
    env = {"PATH": "", "NO_COLOR": "", "FORCE_COLOR": force_color, "TERM": "xterm"}
    res = subprocess.run([sys.executable, "-c", _RENDER], capture_output=True, text=True, env=env, timeout=60,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(progress)
    if not progress:  # exactly what the disabled progress printed before: one line per step
        assert res.stderr.splitlines() == ["tfgpu: [1/2] create a venv", "tfgpu: [2/2] install tensorflow-cpu==2.21.0"]
