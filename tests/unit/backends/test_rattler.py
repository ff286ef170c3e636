"""The embedded conda engine against a real local channel: real rattler solver and installer, offline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.channel_builder import PLACEHOLDER, Pkg, build_channel, corrupt_package
from tests.conftest import needs_engine
from tfgpu.backends import rattler as engine
from tfgpu.backends.rattler import virtual
from tfgpu.core.errors import Interrupted, StepFailed, UsageError

TF22 = ["tensorflow-gpu=2.2.0", "python=3.8"]
TF216 = ["tensorflow=2.16.1=cuda*"]
NO_DRIVER = [virtual.VirtualPkg("__unix", "0"), virtual.VirtualPkg("__glibc", "2.28")]

pytestmark = needs_engine



def meta(prefix: Path) -> dict[str, dict[str, object]]:
    out = {}
    for f in sorted((prefix / "conda-meta").glob("*.json")):
        rec = json.loads(f.read_text())
        out[rec["name"]] = rec
    return out


# --------------------------------------------------------------------------- the worker thread's time limit

def test_a_solve_past_its_timeout_is_cancelled_and_named() -> None:
    # `tfgpu lock --timeout N` bounds each platform's solve (engine.solve(timeout=...), through _run): the
    # coroutine is cancelled, the worker stops, and the error says what timed out (exit 1)
    import asyncio
    import time

    state: dict[str, bool] = {}

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise

    start = time.monotonic()
    with pytest.raises(StepFailed, match=r"solving for linux-64 timed out after 0.3 s") as info:
        engine._run(slow(), timeout=0.3, what="solving for linux-64")
    assert time.monotonic() - start < 10
    assert state == {"cancelled": True}
    assert "--timeout" in (info.value.hint or "")

    async def quick() -> int:
        return 7

    assert engine._run(quick(), timeout=5) == 7


# --------------------------------------------------------------------------- virtual packages (pure)

def test_conda_override_cuda_sets_and_empty_removes() -> None:
    detected = [virtual.VirtualPkg("__glibc", "2.36"), virtual.VirtualPkg("__cuda", "11.0")]
    vps, notes = virtual.resolve_virtual_packages(detected, driver_cuda=None, env={"CONDA_OVERRIDE_CUDA": "12.4"})
    assert virtual.VirtualPkg("__cuda", "12.4") in vps
    assert notes == ["__cuda=12.4 from CONDA_OVERRIDE_CUDA"]
    vps, notes = virtual.resolve_virtual_packages(detected, driver_cuda="12.2", env={"CONDA_OVERRIDE_CUDA": ""})
    assert [v.name for v in vps] == ["__glibc"]
    assert "CONDA_OVERRIDE_CUDA is set and empty" in notes[0]


def test_driver_probe_replaces_detected_cuda_and_explicit_wins() -> None:
    detected = [virtual.VirtualPkg("__cuda", "11.0"), virtual.VirtualPkg("__glibc", "2.36")]
    vps, _ = virtual.resolve_virtual_packages(detected, driver_cuda="12.2", env={})
    assert virtual.VirtualPkg("__cuda", "12.2") in vps
    vps, _ = virtual.resolve_virtual_packages(
        detected, driver_cuda="12.2", env={"CONDA_OVERRIDE_GLIBC": "2.17"},
        explicit=[virtual.parse_virtual_package("__cuda=11.8=0")])
    assert {str(v) for v in vps} == {"__cuda=11.8=0", "__glibc=2.17=0"}


@pytest.mark.parametrize("bad", ["cuda=12", "__cuda", "__cuda=", "__cuda=1=2=3"])
def test_bad_virtual_package_is_usage_error(bad: str) -> None:
    with pytest.raises(UsageError, match="bad virtual package") as info:
        virtual.parse_virtual_package(bad)
    assert "NAME=VERSION" in info.value.one_line()


def test_other_platform_gets_machine_independent_defaults() -> None:
    vps, _ = virtual.detect_virtual_packages("win-64", env={})
    assert {v.name for v in vps} == {"__win", "__archspec"}


def test_defaults_alias_expands_to_anaconda_main_and_r() -> None:
    assert engine.expand_channels(["conda-forge", "defaults"]) == [
        "conda-forge", "https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r"]


# --------------------------------------------------------------------------- solving (real rattler)

def test_tf22_solve_brings_cudatoolkit_101_and_cudnn_76(channel: Path, tmp_path: Path) -> None:
    recs = engine.solve(TF22, [channel.as_uri()], "linux-64", NO_DRIVER, cache_dir=tmp_path)
    got = {r.name.normalized: (str(r.version), str(r.build)) for r in recs}
    assert got["cudatoolkit"] == ("10.1.243", "h6bb024c_0")
    assert got["cudnn"] == ("7.6.5", "cuda10.1_0")
    assert got["tensorflow"] == ("2.2.0", "gpu_py38hb782248_0")
    assert got["python"][0] == "3.8.10"


def test_cuda_build_without_driver_fails_with_a_clear_line(channel: Path, tmp_path: Path) -> None:
    with pytest.raises(StepFailed) as info:
        engine.solve(TF216, [channel.as_uri()], "linux-64", NO_DRIVER, cache_dir=tmp_path)
    line = info.value.one_line()
    assert "\n" not in line
    assert line.startswith("nothing provides __cuda >=12 needed by tensorflow-2.16.1-cuda120py311h0e7b9a7_0")
    assert "needs an NVIDIA driver supporting CUDA >= 12" in line
    assert "CONDA_OVERRIDE_CUDA=12.0" in line


def test_cuda_build_solves_with_conda_override_cuda(channel: Path, tmp_path: Path) -> None:
    vps, notes = virtual.detect_virtual_packages("linux-64", env={"CONDA_OVERRIDE_CUDA": "12.4"}, detect=False,
                                                explicit=NO_DRIVER)
    recs = engine.solve(TF216, [channel.as_uri()], "linux-64", vps, cache_dir=tmp_path)
    assert {r.name.normalized: str(r.build) for r in recs}["tensorflow"] == "cuda120py311h0e7b9a7_0"
    assert notes[0] == "__cuda=12.4 from CONDA_OVERRIDE_CUDA"


def test_missing_package_is_step_failed(channel: Path, tmp_path: Path) -> None:
    with pytest.raises(StepFailed, match=r"cannot solve: .*no-such-package"):
        engine.solve(["no-such-package"], [channel.as_uri()], "linux-64", NO_DRIVER, cache_dir=tmp_path)


def test_bad_spec_is_usage_error(channel: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="bad package spec"):
        engine.solve(["python >=>=3"], [channel.as_uri()], "linux-64", NO_DRIVER, cache_dir=tmp_path)


# --------------------------------------------------------------------------- installing

def test_create_env_writes_conda_meta_and_final_prefix(channel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tf22"
    created = engine.create_env(TF22, prefix, [channel.as_uri()], platform="linux-64",
                                virtual_packages=NO_DRIVER, detect=False, cache_dir=tmp_path / "cache")
    records = meta(prefix)
    assert set(records) == {"python", "cudatoolkit", "cudnn", "tensorflow", "tensorflow-gpu", "_tflow_select"}
    assert records["cudnn"]["version"] == "7.6.5"
    assert {r.name.normalized for r in created.records} == set(records)
    # installed in a temporary sibling, renamed into place: prefix-dependent files name the final prefix
    act = (prefix / "etc/conda/activate.d/cudatoolkit.sh").read_text()
    assert act == f"export CUDA_HOME={prefix}\n"
    assert PLACEHOLDER not in act
    assert engine.partial_dirs(prefix) == []
    assert "python 3.8.*" in records["python"]["requested_specs"]


def test_existing_prefix_is_never_touched(channel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists"):
        engine.create_env(TF22, prefix, [channel.as_uri()], platform="linux-64", virtual_packages=NO_DRIVER,
                          detect=False, cache_dir=tmp_path / "cache")
    assert [p.name for p in prefix.iterdir()] == ["keep.txt"]


def _solved(channel: Path, cache: Path) -> list[object]:
    return engine.solve(TF22, [channel.as_uri()], "linux-64", NO_DRIVER, cache_dir=cache)


def test_keyboard_interrupt_after_linking_leaves_nothing(channel: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine._link
    seen: list[Path] = []

    def link_then_ctrl_c(records, target, final, **kw):  # type: ignore[no-untyped-def]
        real(records, target, final, **kw)
        seen.append(target)
        assert (target / "conda-meta").is_dir()  # the packages really landed in the temporary prefix
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "_link", link_then_ctrl_c)
    prefix = tmp_path / "sub" / "env"
    with pytest.raises(Interrupted, match="nothing was left behind"):
        engine.install(_solved(channel, tmp_path / "c"), prefix, platform="linux-64", cache_dir=tmp_path / "c")
    assert seen
    assert not seen[0].exists()
    assert not prefix.exists()
    assert not prefix.parent.exists()  # the parent tfgpu created for it is gone too


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_real_sigint_during_install_leaves_nothing(channel: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine._link

    def sigint_then_link(records, target, final, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives while rattler is linking
        real(records, target, final, **kw)

    monkeypatch.setattr(engine, "_link", sigint_then_link)
    prefix = tmp_path / "env"
    with pytest.raises(Interrupted):
        engine.install(_solved(channel, tmp_path / "c"), prefix, platform="linux-64", cache_dir=tmp_path / "c")
    assert not prefix.exists()
    assert list(tmp_path.glob(".env*")) == []


def test_corrupt_package_fails_and_leaves_nothing(tmp_path: Path) -> None:
    root = build_channel(tmp_path / "ch", [
        Pkg("python", "3.8.10", "h12debd9_8"),
        Pkg("cudatoolkit", "10.1.243", "h6bb024c_0"),
        Pkg("cudnn", "7.6.5", "cuda10.1_0", depends=("cudatoolkit 10.1.*",)),
    ])
    corrupt_package(root, "linux-64", "cudnn-7.6.5-cuda10.1_0.tar.bz2")
    prefix = tmp_path / "env"
    with pytest.raises(StepFailed, match=r"installing into .*env failed") as info:
        engine.create_env(["cudnn=7.6", "python=3.8"], prefix, [root.as_uri()], platform="linux-64",
                          virtual_packages=NO_DRIVER, detect=False, cache_dir=tmp_path / "cache")
    assert "\n" not in info.value.one_line()
    assert not prefix.exists()
    assert engine.partial_dirs(prefix) == []


def test_stale_partial_dir_of_a_killed_install_is_removed(channel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    stale = tmp_path / f".env{engine.PARTIAL_MARK}999999999-deadbeef"  # no such PID
    (stale / "conda-meta").mkdir(parents=True)
    engine.install(_solved(channel, tmp_path / "c"), prefix, platform="linux-64", cache_dir=tmp_path / "c")
    assert not stale.exists()
    assert (prefix / "conda-meta").is_dir()


def test_offline_install_needs_a_warm_cache_and_no_channel(channel: Path, tmp_path: Path) -> None:
    local = tmp_path / "ch"
    shutil.copytree(channel, local)
    cache = tmp_path / "cache"
    recs = engine.solve(TF22, [local.as_uri()], "linux-64", NO_DRIVER, cache_dir=cache)
    with pytest.raises(StepFailed, match="not in the package cache"):
        engine.install(recs, tmp_path / "cold", platform="linux-64", cache_dir=cache, offline=True)
    assert not (tmp_path / "cold").exists()
    engine.install(recs, tmp_path / "warm1", platform="linux-64", cache_dir=cache)
    shutil.rmtree(local)  # the channel is gone: only the cache can serve the packages now
    engine.install(recs, tmp_path / "warm2", platform="linux-64", cache_dir=cache, offline=True)
    assert meta(tmp_path / "warm2").keys() == meta(tmp_path / "warm1").keys()


# --------------------------------------------------------------------------- the subprocess contract

@pytest.mark.real_subprocess
def test_engine_module_cli_exit_codes_and_stderr(channel: Path, tmp_path: Path) -> None:
    from tfgpu.core import process as run

    base = [sys.executable, "-m", "tfgpu.backends.rattler", "create", "--channel", channel.as_uri(),
            "--platform", "linux-64", "--cache-dir", str(tmp_path / "cache")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE")}
    res = run.capture([*base, "--prefix", str(tmp_path / "a"), *TF216], timeout=120,
                      env={**env, "CONDA_OVERRIDE_CUDA": ""})
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("tfgpu-engine: error: nothing provides __cuda >=12 needed by tensorflow-2.16.1")
    assert not (tmp_path / "a").exists()
    res = run.capture([*base, "--prefix", str(tmp_path / "b"), *TF216], timeout=120,
                      env={**env, "CONDA_OVERRIDE_CUDA": "12.4"})
    assert res.returncode == 0, res.stderr
    assert "+ tensorflow 2.16.1 cuda120py311h0e7b9a7_0" in res.stdout
    assert set(meta(tmp_path / "b")) == {"tensorflow", "python"}
    res = run.capture([*base, "--prefix", str(tmp_path / "b"), *TF216], timeout=120, env=env)
    assert res.returncode == 2
    assert "already exists" in res.stderr
    res = run.capture([*base, "--prefix", str(tmp_path / "c"), "--virtual-package", "cuda", *TF216],
                      timeout=120, env=env)
    assert res.returncode == 2
    assert "bad virtual package" in res.stderr


def test_cleanup_partial_removes_only_the_engines_own_partial_installs(tmp_path: Path) -> None:
    """Issue 28 (R4-N18's engine side): a killed install's `.NAME.tfgpu-partial-PID-XXXXXXXX` goes; a folder
    that only starts like one (a user's `.tf.tfgpu-partial-PID`, a link) is not the engine's and stays."""
    dead = 2**22 + 17  # above Linux's largest pid_max: never a live process
    prefix = tmp_path / "envs" / "tf"
    prefix.parent.mkdir(parents=True)
    ours = prefix.parent / f".tf.tfgpu-partial-{dead}-0a1b2c3d"
    theirs = prefix.parent / f".tf.tfgpu-partial-{dead}"
    for d in (ours, theirs):
        d.mkdir()
        (d / "x").write_text("x")
    (prefix.parent / f".tf.tfgpu-partial-{dead}-deadbeef").symlink_to(theirs)
    assert engine.cleanup_partial(prefix) == [ours]
    assert not ours.exists()
    assert (theirs / "x").read_text() == "x"
