"""Issue 16, bad input and broken surroundings: each is one line on stderr and rc 2 (bad values) or
rc 1 (the surroundings failed), never rc 3 and never a traceback; `--debug` with a real bug is rc 3
with the traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import TESTS
from tests.conftest import LOCK_FACTS
from tfgpu.build import registry

pytestmark = pytest.mark.safety

Cli = Callable[..., tuple[int, str, str]]
FACTS = TESTS / "data" / "facts" / "r740-4x-tesla-m60.json"
BIG = "1" * 5000


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("")
    for var in ("TFGPU_DRIVER_VERSION", "TFGPU_CUDA_DRIVER", "CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_GLIBC",
                "TFGPU_PYTHONS", "TFGPU_GPU_MEMORY_MIB", "TFGPU_PROBE_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "home"


def _one_line(rc: int, err: str, want: int = 2) -> None:
    assert rc == want, err
    assert "Traceback" not in err
    assert "internal error" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("tfgpu: error:")]
    assert len(lines) == 1, err
    assert len(lines[0]) < 1200


@pytest.mark.parametrize("argv", [
    ("doctor", "--tf", BIG, "--facts", str(FACTS)),
    ("doctor", "--driver", BIG, "--facts", str(FACTS)),
    ("compat", "--tf", BIG),
    ("compat", "--python", BIG),
    ("plan", "--tf", "2.20", "--python", BIG, "--facts", str(FACTS)),
    ("plan", "--tf", BIG, "--facts", str(FACTS)),
    ("doctor", "--tf", "٨.٦", "--facts", str(FACTS)),
    ("doctor", "--driver", "٥٥٠.٥٤", "--facts", str(FACTS)),
    ("doctor", "--gpu-cc", "٨.٦", "--facts", str(FACTS)),
    ("doctor", "--tf", "²", "--facts", str(FACTS)),
    ("doctor", "--timeout", "inf", "--facts", str(FACTS)),
    ("doctor", "--timeout", "1e308", "--facts", str(FACTS)),
    ("doctor", "--timeout", "-5", "--facts", str(FACTS)),
    ("doctor", "--timeout", "nan", "--facts", str(FACTS)),
    ("create", "--tf", "2.20", "--timeout", "-5", "--dry-run", "--facts", str(FACTS)),
    ("create", "--tf", "2.20", "--timeout", "inf", "--dry-run", "--facts", str(FACTS)),
    ("smoke", "--timeout", "inf", "--python", sys.executable),
    ("lock", "--tf", "2.2", "--virtual-package", "__cuda=٨"),
    ("lock", "--tf", "2.2", "--virtual-package", f"__cuda={BIG}"),
    ("lock", "--tf", "2.2", "--virtual-package", "cuda=12"),
], ids=lambda a: " ".join(a)[:40])
def test_bad_values_are_rc_2_with_one_line(cli: Cli, argv: tuple[str, ...]) -> None:
    rc, _, err = cli(*argv)
    _one_line(rc, err)


@pytest.mark.parametrize(("var", "value"), [
    ("TFGPU_DRIVER_VERSION", BIG), ("TFGPU_DRIVER_VERSION", "٥٥٠.٥٤"), ("TFGPU_CUDA_DRIVER", "١٢.٤"),
    ("TFGPU_GPU_MEMORY_MIB", "٨٠٠٠"), ("TFGPU_GPU_MEMORY_MIB", BIG), ("TFGPU_PYTHONS", "3.١١"),
    ("CONDA_OVERRIDE_CUDA", "garbage"), ("CONDA_OVERRIDE_CUDA", BIG),
])
def test_bad_environment_overrides_are_rc_2(cli: Cli, monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    rc, _, err = cli("doctor", "--facts", str(FACTS))
    _one_line(rc, err)


def test_conda_override_garbage_reaches_the_engine_as_rc_2() -> None:
    from tfgpu.backends.rattler.virtual import resolve_virtual_packages
    from tfgpu.core.errors import UsageError

    with pytest.raises(UsageError, match="CONDA_OVERRIDE_GLIBC"):
        resolve_virtual_packages([], driver_cuda=None, env={"CONDA_OVERRIDE_GLIBC": "2.3\n5"})


def test_a_unicode_digit_driver_override_is_refused_not_silently_ignored(cli: Cli) -> None:
    rc, out, err = cli("doctor", "--json", "--driver", "٥٥٠.٥٤.١٥", "--facts", str(FACTS))
    _one_line(rc, err)
    assert out == ""


@pytest.mark.parametrize("content", [
    '{"gpus": [{"name": "x", "memory_mib": ' + BIG + "}]}",
    '{"notes": ' + "[" * 200 + "]" * 200 + "}",
    '{"env": {"X": ' + '{"a": ' * 300 + "1" + "}" * 300 + "}}",
    '{"gpus": [{"name": "x", "compute_capability": "' + BIG + '.0"}]}',
    '{"driver": {"version": "' + BIG + '"}}',
], ids=["huge-int", "deep-list", "deep-dict", "huge-cc-string", "huge-driver-string"])
def test_bad_facts_files_are_rc_2(cli: Cli, tmp_path: Path, content: str) -> None:
    path = tmp_path / "facts.json"
    path.write_text(content)
    rc, _, err = cli("doctor", "--facts", str(path))
    _one_line(rc, err)


def test_lone_surrogates_in_facts_strings_in_human_output(cli: Cli, tmp_path: Path) -> None:
    facts = json.loads(FACTS.read_text())
    facts["gpus"][0]["name"] = "Tesla \ud800 M60 \udfff"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    rc, out, err = cli("doctor", "--facts", str(path))
    assert rc in (0, 1), err
    out.encode("utf-8")


def test_explain_with_stdin_closed(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    rc, _, err = cli("explain", "--no-probe", "-")
    _one_line(rc, err)
    assert "standard input is closed" in err


def test_a_deeply_nested_smoke_result_is_a_failed_parse_not_a_crash() -> None:
    from tfgpu.verify.runner import BEGIN, END, parse_output

    for depth in (100, 100_000):
        doc, _, why = parse_output(f"{BEGIN}{{\"ops\": {'[' * depth}{']' * depth}}}{END}")
        assert doc is None
        assert why == "the smoke script's result is nested too deeply"


# --------------------------------------------------------------------------- broken surroundings


def test_binary_config_file(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = tmp_path / "bin.toml"
    cfg.write_bytes(bytes(range(256)))
    monkeypatch.setenv("TFGPU_CONFIG", str(cfg))
    rc, _, err = cli("plan", "--tf", "2.20", "--facts", str(FACTS))
    _one_line(rc, err)


@pytest.mark.parametrize("value", ["/dev/null", "~nouser-tfgpu-test/x", "/etc/passwd"])
def test_unusable_tfgpu_home(cli: Cli, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TFGPU_HOME", value)
    rc, _, err = cli("envs")
    _one_line(rc, err)
    assert "TFGPU_HOME" in err


def _mount_tmpfs(where: Path, opts: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("needs root and mount to make a real read-only or full filesystem")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def ro_fs(tmp_path: Path) -> Iterator[Path]:
    yield from _mount_tmpfs(tmp_path / "ro", "ro,size=1m")


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs with no block and no inode left (tfgpu's home and its locks/ directory already there)."""
    for d in _mount_tmpfs(tmp_path / "full", "size=64k,nr_inodes=16"):
        (d / "home" / "locks").mkdir(parents=True)
        fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        for i in range(64):
            try:
                (d / f"inode-{i}").touch()
            except OSError:
                break
        yield d


@pytest.mark.real_subprocess
def test_read_only_tfgpu_home_is_rc_1(cli: Cli, monkeypatch: pytest.MonkeyPatch, ro_fs: Path) -> None:
    from tests.conftest import fake_venv_plan
    from tfgpu.build.execute import run_plan
    from tfgpu.core.errors import NotReady

    monkeypatch.setenv("TFGPU_HOME", str(ro_fs / "home"))
    with pytest.raises(NotReady, match="cannot write tfgpu's"):
        run_plan(fake_venv_plan(ro_fs.parent / "env"))
    assert not (ro_fs.parent / "env").exists()


@pytest.mark.real_subprocess
def test_full_tfgpu_home_during_prefix_lock_is_rc_1(monkeypatch: pytest.MonkeyPatch, full_fs: Path) -> None:
    from tests.conftest import fake_venv_plan
    from tfgpu.build.execute import run_plan
    from tfgpu.core.errors import NotReady

    monkeypatch.setenv("TFGPU_HOME", str(full_fs / "home"))
    with pytest.raises(NotReady) as info, registry.prefix_lock(full_fs / "x"):
        pass
    assert "No space left on device" in info.value.one_line()
    with pytest.raises(NotReady):
        run_plan(fake_venv_plan(full_fs.parent / "env"))


def test_lock_output_on_a_read_only_filesystem_is_rc_1(cli: Cli, ro_fs: Path) -> None:
    rc, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "-o", str(ro_fs / "conda-lock.yml"))
    _one_line(rc, err, want=1)


# --------------------------------------------------------------------------- --debug


def test_debug_with_an_internal_error_is_rc_3_with_the_traceback(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tfgpu.cli import app as cli_mod
    from tfgpu.cli.commands import envs as envs_cmd

    def boom(**_kw: object) -> int:
        msg = "a bug"
        raise ZeroDivisionError(msg)

    monkeypatch.setattr(envs_cmd, "envs_cmd", lambda json_out=False: boom())
    monkeypatch.setattr(registry, "load", lambda: boom())
    assert cli_mod.main(["--debug", "envs"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert "ZeroDivisionError: a bug" in err
    assert cli_mod.main(["envs"]) == 3
    assert "internal error: ZeroDivisionError" in capsys.readouterr().err
