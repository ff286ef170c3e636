"""The CLI skeleton: help, version, exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tfgpu import __version__
from tfgpu.core.errors import ExitCode, InputError, NotReady, TfgpuError


def test_help_exits_0(cli):
    code, out, _ = cli("--help")
    assert code == 0
    assert "doctor" in out


def test_no_arguments_prints_help_and_exits_0(cli):
    code, out, _ = cli()
    assert code == 0
    assert "Usage" in out


def test_version_names_tool_and_data_versions(cli):
    code, out, _ = cli("--version")
    assert code == 0
    assert out.startswith(f"tfgpu {__version__} (knowledge base 20")


def test_unknown_command_is_one_line_usage_error(cli):
    code, out, err = cli("nosuch")
    assert code == ExitCode.USAGE == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "nosuch" in err
    assert "Traceback" not in err


def test_unknown_option_is_one_line_usage_error(cli):
    code, _, err = cli("doctor", "--no-such-flag")
    assert code == 2
    assert err.startswith("tfgpu: error: ")
    assert "--no-such-flag" in err
    assert err.count("\n") == 1


@pytest.mark.real_subprocess  # it reads this machine (its probes start programs)
def test_doctor_exits_0(cli, monkeypatch):
    monkeypatch.setenv("TFGPU_PROBE_TIMEOUT", "2")
    code, out, _ = cli("doctor")
    assert code == 0
    assert out


@pytest.mark.parametrize(
    ("error", "expected"),
    [(InputError("bad file"), 2), (NotReady("not ready"), 1), (TfgpuError("bug"), 3)],
)
def test_typed_errors_map_to_fixed_exit_codes(cli, monkeypatch, error, expected):
    from tfgpu.cli.commands import doctor as doctor_cmd

    def boom(**_: object) -> int:
        raise error

    monkeypatch.setattr(doctor_cmd, "run_doctor", boom)
    code, _, err = cli("doctor")
    assert code == expected
    assert err == f"tfgpu: error: {error.one_line()}\n"


def test_unexpected_exception_is_exit_3_without_traceback(cli, monkeypatch):
    from tfgpu.cli.commands import doctor as doctor_cmd

    def boom(**_: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(doctor_cmd, "run_doctor", boom)
    code, _, err = cli("doctor")
    assert code == 3
    assert "Traceback" not in err
    assert "internal error: ZeroDivisionError" in err
    assert "--debug" in err


def test_debug_shows_the_traceback(cli, monkeypatch):
    from tfgpu.cli.commands import doctor as doctor_cmd

    def boom(**_: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(doctor_cmd, "run_doctor", boom)
    code, _, err = cli("--debug", "doctor")
    assert code == 3  # a bug's exit code, with the traceback (issue 16: it escaped as exit 1)
    assert "Traceback" in err
    assert "ZeroDivisionError: division by zero" in err


@pytest.mark.real_subprocess
def test_python_dash_m_tfgpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tfgpu", "--version"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("tfgpu ")


@pytest.mark.real_subprocess
def test_console_script_bad_usage_exits_2_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tfgpu", "nosuch"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "Traceback" not in proc.stderr
