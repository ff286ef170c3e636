"""The recipe that failed on the seed's MX150, proven by a real install (networked, ~1 minute with a warm
uv cache): `tfgpu create --tf 2.2.0 --backend pip` built an environment where `import tensorflow` failed,
because `numpy<2` resolved to numpy 1.24, which removed np.object. Run by `nox -s recipes`."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from packaging.version import Version

from tests import REPO
from tests.conftest import load_file_module

pytestmark = [pytest.mark.recipes, pytest.mark.real_subprocess]


def _script() -> types.ModuleType:
    return load_file_module(REPO / "scripts" / "verify_recipes.py", "tfgpu_verify_recipes")


def test_tf_2_2_0_pip_recipe_imports_and_runs_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not list(Path("~/.pyenv/versions").expanduser().glob("3.8.*/bin/python3.8")):
        pytest.skip("needs a Python 3.8 (TensorFlow 2.2.0 has wheels for 3.5-3.8)")
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + ":" + __import__("os").environ["PATH"])
    script = _script()
    facts = script.prepare(tmp_path)
    row = script.verify_one("2.2.0", scratch=tmp_path, facts=facts, keep=False, log=print)
    assert row["recipe"] == "pip-system-cuda"
    assert row["result"] == "ok", row["reason"]
    assert Version(row["numpy"]) < Version("1.19")  # numpy 1.24 removed np.object, which TF 2.2 uses
    assert "numpy<1.19" in row["pins"].split()
