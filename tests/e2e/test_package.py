"""The package as it would be published (issue 31, part 5): `python -m build` makes an sdist and a wheel whose
metadata is complete (scripts/check_dist.py, the checks `nox -s release` runs after `twine check`), and the wheel
runs with `uvx --from WHEEL` (pipx run's equivalent) in a fresh environment of its own.

Slow (a build and an environment). The build is offline (--no-isolation: hatchling from this environment); uvx
tries offline first (uv's cache), then, where the cache lacks a dependency, reads them from the package index --
set TFGPU_PACKAGE_OFFLINE=1 to skip instead."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO
from tests.conftest import load_file_module
from tfgpu import __version__

pytestmark = [pytest.mark.slow, pytest.mark.real_subprocess]


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return sorted(out.iterdir())


def test_build_makes_an_sdist_and_a_wheel_with_complete_metadata(dists: list[Path]) -> None:
    assert [p.name for p in dists] == [f"tfgpu-{__version__}-py3-none-any.whl", f"tfgpu-{__version__}.tar.gz"]
    check = load_file_module(REPO / "scripts" / "check_dist.py", "tfgpu_script_check_dist")
    assert check.check_wheel(dists[0]) == []
    assert check.check_sdist(dists[1]) == []
    twine = shutil.which("twine")
    if twine:
        proc = subprocess.run([twine, "check", "--strict", *map(str, dists)], capture_output=True, text=True,
                              check=False, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_dist_finds_a_broken_wheel(dists: list[Path], tmp_path: Path) -> None:
    """The checker is not vacuous: a wheel without its knowledge base, or with another version, fails."""
    import zipfile

    check = load_file_module(REPO / "scripts" / "check_dist.py", "tfgpu_script_check_dist")
    broken = tmp_path / dists[0].name
    with zipfile.ZipFile(dists[0]) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            if item.filename == "tfgpu/compat/cuda.toml":
                continue
            data = src.read(item)
            if item.filename.endswith("METADATA"):
                data = data.replace(f"Version: {__version__}".encode(), b"Version: 9.9.9")
            dst.writestr(item, data)
    problems = check.check_wheel(broken)
    assert any("compat/cuda.toml" in p for p in problems)
    assert any("Version" in p for p in problems)


def _uvx(wheel: Path, *args: str, offline: bool, home: Path) -> subprocess.CompletedProcess[str]:
    uvx = shutil.which("uvx")
    assert uvx is not None
    env = {**os.environ, "TFGPU_HOME": str(home), "UV_TOOL_DIR": str(home / "uv-tools"), "NO_COLOR": "1",
           "TFGPU_PROBE_NVML": "0"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([uvx, *(["--offline"] if offline else []), "--from", str(wheel), *args],
                          capture_output=True, text=True, check=False, timeout=600, env=env)


def test_uvx_runs_the_wheel(dists: list[Path], tmp_path: Path) -> None:
    if shutil.which("uvx") is None:
        pytest.skip("no uvx (pip install uv)")
    wheel = dists[0]
    proc = _uvx(wheel, "tfgpu", "--version", offline=True, home=tmp_path)
    if proc.returncode != 0 and "No solution found" in proc.stderr:  # uv's cache lacks (a new enough) dependency
        if os.environ.get("TFGPU_PACKAGE_OFFLINE"):
            pytest.skip(f"uv's cache cannot satisfy the wheel offline and TFGPU_PACKAGE_OFFLINE is set: {proc.stderr}")
        proc = _uvx(wheel, "tfgpu", "--version", offline=False, home=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"tfgpu {__version__} (knowledge base ")
    # the wheel's own knowledge base and CLI, judging a recorded machine
    facts = REPO / "tests" / "data" / "facts" / "mx150-laptop-ubuntu1804.json"
    doctor = _uvx(wheel, "tfgpu", "doctor", "--facts", str(facts), "--tf", "2.2", offline=True, home=tmp_path)
    assert doctor.returncode == 0, doctor.stderr[-2000:]
    assert "TensorFlow 2.2.0: READY" in doctor.stdout
    api = _uvx(wheel, "python", "-c", "import tfgpu, sys; r = tfgpu.explain('Illegal instruction (core dumped)', "
               "probe=False); print(r.findings[0].id, 'typer' in sys.modules)", offline=True, home=tmp_path)
    assert api.returncode == 0, api.stderr[-2000:]
    assert api.stdout.split() == ["cpu.illegal_instruction", "False"]
