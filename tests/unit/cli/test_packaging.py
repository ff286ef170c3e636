"""The built wheel carries the knowledge base and works outside the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import REPO

pytestmark = pytest.mark.real_subprocess


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("tfgpu-*.whl")
    return whl


def test_wheel_contains_every_compat_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (REPO / "compat").glob("*.toml"):
        assert f"tfgpu/compat/{path.name}" in names
    assert "tfgpu/cli/app.py" in names


def test_installed_wheel_reads_its_own_compat_outside_the_source_tree(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = (
        "import tfgpu, tfgpu.kb.parse as p, tfgpu.kb.queries as q; "
        "print(tfgpu.__file__); print(p.compat_dir()); print(q.data_version())"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=elsewhere, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    module_file, compat_dir, version = proc.stdout.split("\n")[:3]
    assert module_file.startswith(str(site))
    assert compat_dir == str(site / "tfgpu" / "compat")
    assert version.startswith("20")
    cli = subprocess.run([sys.executable, "-m", "tfgpu", "--version"], cwd=elsewhere, env=env,
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 0, cli.stderr
    assert version in cli.stdout


def test_sdist_contains_compat_and_tests(tmp_path):
    pytest.importorskip("hatchling")
    proc = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    import tarfile

    (sdist,) = tmp_path.glob("tfgpu-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert any(n.endswith("/compat/meta.toml") for n in names)
    assert any(n.endswith("/src/tfgpu/cli/app.py") for n in names)
