"""`tfgpu create --from-lock`: real runs against a local file:// channel (tests/channel_builder.py) with the
real embedded engine; interrupted and failed installs leave nothing behind; bad lockfiles are exit 2."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LOCK_FACTS, needs_engine
from tfgpu.backends import lockfiles
from tfgpu.backends.rattler import PARTIAL_MARK
from tfgpu.backends.steps import Step
from tfgpu.build import registry
from tfgpu.build.execute import run_plan
from tfgpu.core import process as run
from tfgpu.core.errors import Interrupted, StepFailed
from tfgpu.core.record import replace
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.fromlock import plan_from_lock
from tfgpu.plan.model import Plan
from tfgpu.plan.request import BuildRequest

Cli = Callable[..., tuple[int, str, str]]
KB = load_kb()
NO_GPU_FACTS: dict[str, Any] = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "wsl": None},
                                "gpus": [], "driver": {"version": None, "cuda": None}}

pytestmark = [pytest.mark.real_subprocess, needs_engine]



@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """tfgpu's home, rattler's package cache and the config file are the test's own."""
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "rattler-cache"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    (tmp_path / "no-config.toml").write_text("")
    return tmp_path


@pytest.fixture
def facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(NO_GPU_FACTS))
    return path


def conda_meta(prefix: Path) -> set[tuple[str, str, str, str]]:
    out = set()
    for f in (prefix / "conda-meta").glob("*.json"):
        r = json.loads(f.read_text())
        out.add((r["name"], r["version"], r["build"], r["sha256"]))
    return out


def leftovers(prefix: Path) -> list[str]:
    """The prefix itself and any hidden sibling an install into it made."""
    if not prefix.parent.exists():
        return []
    return sorted(p.name for p in prefix.parent.iterdir() if p.name == prefix.name or p.name.startswith(f".{prefix.name}."))


def make_lock(cli: Cli, channel: Path, out: Path) -> Path:
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "--channel", channel.as_uri(), "-o", str(out))
    assert code == 0, err
    return out


# --------------------------------------------------------------------------- lock -> create --from-lock

def test_lock_then_create_from_lock_reproduces_the_package_set_offline(
        cli: Cli, channel: Path, tmp_path: Path, facts_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "ch"
    shutil.copytree(channel, local)
    lock = make_lock(cli, local, tmp_path / "conda-lock.yml")
    locked = {(p.name, p.version, p.build, p.sha256) for p in lockfiles.read_conda_lock(lock).packages}
    assert len(locked) == 6

    # `plan --from-lock` prints the step `create` runs
    code, out, err = cli("plan", "--from-lock", str(lock), "--prefix", str(tmp_path / "a"), "--json",
                         "--facts", str(facts_file))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["steps"][0]["argv"][1:] == ["-m", "tfgpu.backends.rattler", "install-lock", "--prefix", str(tmp_path / "a"),
                                           "--lock", str(lock), "--platform", "linux-64"]
    assert (doc["tf"], doc["python"], doc["backend"]) == ("2.2.0", "3.8", "rattler")

    args = ["--yes", "--no-smoke", "--allow-cpu", "--facts", str(facts_file)]
    code, out, err = cli("create", "--from-lock", str(lock), "--prefix", str(tmp_path / "a"), *args)
    assert code == 0, (out, err)
    assert conda_meta(tmp_path / "a") == locked
    entry = registry.find(str((tmp_path / "a").resolve()))
    assert entry is not None
    assert (entry["tf"], entry["backend"], entry["python"]) == ("2.2.0", "rattler", "3.8")

    # the channel is gone; the warm package cache is all an --offline rebuild needs
    shutil.rmtree(local)
    code, out, err = cli("create", "--from-lock", str(lock), "--prefix", str(tmp_path / "b"), "--offline", *args)
    assert code == 0, (out, err)
    assert conda_meta(tmp_path / "b") == locked

    # with an empty cache --offline fails cleanly: exit 1, nothing left behind
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "empty-cache"))
    code, out, err = cli("create", "--from-lock", str(lock), "--prefix", str(tmp_path / "c"), "--offline", *args)
    assert code == 1, (out, err)
    assert "not in the package cache" in err
    assert leftovers(tmp_path / "c") == []


def test_from_lock_force_replaces_only_after_success(cli: Cli, channel: Path, tmp_path: Path,
                                                     facts_file: Path) -> None:
    lock = make_lock(cli, channel, tmp_path / "conda-lock.yml")
    prefix = tmp_path / "env"
    args = ["--from-lock", str(lock), "--prefix", str(prefix), "--yes", "--no-smoke", "--allow-cpu",
            "--facts", str(facts_file)]
    assert cli("create", *args)[0] == 0
    (prefix / "marker").write_text("old")
    code, _, err = cli("create", *args)
    assert code == 2
    assert "already exists" in err
    assert (prefix / "marker").exists()
    code, _, err = cli("create", *args, "--force")
    assert code == 0, err
    assert not (prefix / "marker").exists()
    assert leftovers(prefix) == ["env"]


# --------------------------------------------------------------------------- interrupted / killed installs

#: Runs the real engine with its link step slowed down after linking into the hidden partial directory,
#: so the test can interrupt it exactly there. "ignore" makes it ignore SIGINT, like an installer that
#: hangs, so the runner has to kill it after the grace period.
_SLOW_ENGINE = """
import signal, sys, time
from tfgpu.backends import rattler as engine
from tfgpu.backends.rattler.__main__ import main
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
real_link = engine._link
def slow_link(*args, **kwargs):
    real_link(*args, **kwargs)
    print("tfgpu-test: linked", flush=True)
    time.sleep(60)
engine._link = slow_link
sys.exit(main(sys.argv[2:]))
"""


def _slow_plan(plan: Plan, mode: str) -> Plan:
    first = plan.steps[0]
    assert first.argv[1:4] == ("-m", "tfgpu.backends.rattler", "install-lock")
    slow = Step((sys.executable, "-c", _SLOW_ENGINE, mode, *first.argv[3:]), first.why)
    return replace(plan, steps=(slow, *plan.steps[1:]))


@pytest.mark.parametrize("mode", ["graceful", "ignore"])
def test_interrupted_from_lock_create_leaves_nothing_behind(cli: Cli, channel: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    lock = make_lock(cli, channel, tmp_path / "conda-lock.yml")
    prefix = (tmp_path / "envs" / "tf").resolve()
    plan = plan_from_lock(KB, NO_GPU_FACTS, lockfiles.read_lock(lock), BuildRequest(platform="linux-64", prefix=str(prefix)))
    monkeypatch.setattr(run, "INTERRUPT_GRACE", 0.5)  # "ignore": killed after 0.5 s, not 10
    seen: list[list[str]] = []

    def on_line(line: str) -> None:
        if line == "tfgpu-test: linked":
            seen.append(leftovers(prefix))
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(Interrupted) as info:
        run_plan(_slow_plan(plan, mode), on_line=on_line)
    assert seen, "the slowed engine never reached its link step"
    assert any(PARTIAL_MARK in name for name in seen[0])  # it was interrupted mid-install...
    assert leftovers(prefix) == []  # ...and nothing is left: no prefix, no hidden partial directory
    assert info.value.exit_code == 130
    log = info.value.log_path.read_text()  # type: ignore[attr-defined]
    if mode == "ignore":  # the engine was killed: tfgpu's cleanup hook removed its partial directory
        assert "# removed the partial install" in log
    assert registry.find(str(prefix)) is None


def test_failed_from_lock_install_leaves_nothing_behind(cli: Cli, channel: Path, tmp_path: Path) -> None:
    local = tmp_path / "ch"
    shutil.copytree(channel, local)
    lock = make_lock(cli, local, tmp_path / "conda-lock.yml")
    # replace one archive by garbage: its download no longer matches the locked sha256
    victim = next((local / "linux-64").glob("cudnn-7.6.5-*.tar.bz2"))
    victim.write_bytes(b"BZh91AY&SY" + b"\0" * 64)
    prefix = (tmp_path / "envs" / "broken").resolve()
    plan = plan_from_lock(KB, NO_GPU_FACTS, lockfiles.read_lock(lock), BuildRequest(platform="linux-64", prefix=str(prefix)))
    with pytest.raises(StepFailed):
        run_plan(plan)
    assert leftovers(prefix) == []


# --------------------------------------------------------------------------- bad input: exit 2, one line

_BAD_LOCKS = {
    "broken-yaml.yml": "version: 1\n  metadata: [\n",
    "future.yml": "version: 99\nmetadata: {}\npackage: []\n",
    "empty.yml": "",
    "no-hashes.txt": "tensorflow==2.20.0\nnumpy==1.26.4\n",
    "unpinned.txt": "tensorflow>=2.16 --hash=sha256:" + "a" * 64 + "\n",
}


@pytest.mark.parametrize("filename", sorted(_BAD_LOCKS))
def test_malformed_lockfile_exits_2_with_one_line(cli: Cli, tmp_path: Path, filename: str, facts_file: Path) -> None:
    path = tmp_path / filename
    path.write_text(_BAD_LOCKS[filename])
    for command in (["create", "--yes"], ["plan"]):
        code, out, err = cli(*command, "--from-lock", str(path), "--prefix", str(tmp_path / "env"),
                             "--facts", str(facts_file))
        assert code == 2, (out, err)
        assert err.count("\n") == 1, err
        assert err.startswith("tfgpu: error: ")
        assert str(path) in err
    assert not (tmp_path / "env").exists()


def test_missing_lockfile_and_bad_option_mixes_exit_2(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("create", "--from-lock", str(tmp_path / "nope.yml"), "--yes")
    assert (code, err.count("\n")) == (2, 1)
    assert "does not exist" in err
    for extra in (["--tf", "2.2.0"], ["--backend", "pip"], ["--python", "3.8"], ["--channel", "conda-forge"]):
        code, _, err = cli("plan", "--from-lock", str(tmp_path / "nope.yml"), *extra)
        assert (code, err.count("\n")) == (2, 1), (extra, err)
        assert "--from-lock" in err
    code, _, err = cli("plan")
    assert (code, err.count("\n")) == (2, 1)
    assert "pass --tf VERSION or --from-lock FILE" in err


def test_lockfile_without_this_platform_exits_2(cli: Cli, channel: Path, tmp_path: Path, facts_file: Path) -> None:
    lock = make_lock(cli, channel, tmp_path / "conda-lock.yml")
    code, _, err = cli("create", "--from-lock", str(lock), "--platform", "win-64", "--yes", "--prefix",
                       str(tmp_path / "w"), "--facts", str(facts_file))
    assert (code, err.count("\n")) == (2, 1)
    assert "no packages for win-64 (it locks linux-64)" in err
    assert not (tmp_path / "w").exists()


# --------------------------------------------------------------------------- pip locks

UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
needs_uv = pytest.mark.skipif(not Path(UV).exists(), reason="uv is not installed")


@needs_uv
@pytest.mark.slow
def test_pip_lock_from_uv_compile_builds_a_venv_with_require_hashes(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fake_programs.wheels import build_fake_tensorflow

    wheels = tmp_path / "wheels"
    build_fake_tensorflow(wheels, "2.20.0")
    monkeypatch.setenv("PATH", f"{Path(UV).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    req_in = tmp_path / "req.in"
    req_in.write_text("tensorflow==2.20.0\n")
    lock = tmp_path / "requirements.lock.txt"
    # the same command tfgpu.build.lock.plan_pip_lock plans, against the local wheel directory
    subprocess.run([UV, "pip", "compile", "--generate-hashes", "--no-index", "--find-links", str(wheels),
                    "--no-header", "--quiet", str(req_in), "-o", str(lock)], check=True, timeout=120)
    assert "--hash=sha256:" in lock.read_text()
    base = str(getattr(sys, "_base_executable", sys.executable))
    xy = f"{sys.version_info.major}.{sys.version_info.minor}"
    facts = dict(NO_GPU_FACTS, python={"current": xy, "interpreters": [{"version": f"{xy}.0", "path": base}]})
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts))
    prefix = tmp_path / "venv"
    code, out, err = cli("create", "--from-lock", str(lock), "--prefix", str(prefix), "--find-links", str(wheels),
                         "--offline", "--yes", "--no-smoke", "--allow-cpu", "--facts", str(facts_file))
    assert code == 0, (out, err)
    assert "--require-hashes" in out
    version = subprocess.run([str(prefix / "bin" / "python"), "-c", "import tensorflow; print(tensorflow.__version__)"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert version == "2.20.0"
    # a tampered lock (another hash) is refused by the installer, and nothing is left behind
    text = lock.read_text()
    first = text.index("--hash=sha256:") + len("--hash=sha256:")
    lock.write_text(text[:first] + "0" * 64 + text[first + 64:])
    code, out, err = cli("create", "--from-lock", str(lock), "--prefix", str(tmp_path / "v2"), "--find-links",
                         str(wheels), "--offline", "--yes", "--no-smoke", "--allow-cpu", "--facts", str(facts_file))
    assert code == 1, (out, err)
    assert leftovers(tmp_path / "v2") == []


# --------------------------------------------------------------------------- channels from the config file

def test_config_file_channels_are_used_and_channel_option_beats_them(
        cli: Cli, channel: Path, tmp_path: Path, facts_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'channels = ["{channel.as_uri()}"]\n')
    monkeypatch.setenv("TFGPU_CONFIG", str(config))
    prefix = tmp_path / "from-config"
    base = ["--tf", "2.2.0", "--backend", "rattler", "--facts", str(facts_file)]
    code, out, err = cli("create", *base, "--prefix", str(prefix), "--yes", "--no-smoke", "--allow-cpu")
    assert code == 0, (out, err)
    assert f"channels from config {config}" in out
    assert {m[0] for m in conda_meta(prefix)} == {
        "tensorflow-gpu", "tensorflow", "_tflow_select", "cudatoolkit", "cudnn", "python"}

    # --channel beats the config file, which beats the recipe's channel (Anaconda's `defaults`)
    code, out, _ = cli("plan", *base, "--json", "--channel", "https://example.invalid/mirror")
    argv = json.loads(out)["steps"][0]["argv"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--channel"] == ["https://example.invalid/mirror"]
    config.unlink()
    monkeypatch.setenv("TFGPU_CONFIG", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no config at the default place either
    code, out, _ = cli("plan", *base, "--json")
    doc = json.loads(out)
    argv = doc["steps"][0]["argv"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--channel"] == [
        "anaconda"]  # rattler names Anaconda's `defaults` by its anaconda.org mirror
    assert any("Terms of Service" in n for n in doc["notes"])


@pytest.mark.slow
def test_channel_option_beats_a_broken_config_channel_in_a_real_build(
        cli: Cli, channel: Path, tmp_path: Path, facts_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'channels = ["{(tmp_path / "no-such-channel").as_uri()}"]\n')
    monkeypatch.setenv("TFGPU_CONFIG", str(config))
    base = ["--tf", "2.2.0", "--backend", "rattler", "--yes", "--no-smoke", "--allow-cpu", "--facts", str(facts_file)]
    code, out, err = cli("create", *base, "--prefix", str(tmp_path / "bad"))
    assert code == 1, (out, err)  # the config's channel is really used: it does not exist
    assert leftovers(tmp_path / "bad") == []
    code, out, err = cli("create", *base, "--prefix", str(tmp_path / "good"), "--channel", channel.as_uri())
    assert code == 0, (out, err)
    assert "channels from --channel" in out
    assert "tensorflow-gpu" in {m[0] for m in conda_meta(tmp_path / "good")}
