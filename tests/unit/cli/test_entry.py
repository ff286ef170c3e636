"""The console entry point's fast path for `tfgpu doctor` must accept exactly what the full CLI does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import DATA
from tfgpu.cli.doctor import OPTIONS, parse_fast


def typer_doctor_options() -> dict[str, bool]:
    """flag -> is_flag, read from the typer command itself."""
    import typer.main

    from tfgpu.cli.app import _register, app

    _register()
    command = typer.main.get_command(app)
    doctor = command.commands["doctor"]  # type: ignore[attr-defined]
    out = {}
    for param in doctor.params:
        for opt in param.opts:
            if opt not in ("--help", "-h"):
                out[opt] = bool(getattr(param, "is_flag", False))
    return out


def test_fast_path_knows_every_doctor_option_and_its_kind():
    """Both are generated from tfgpu.cli.doctor.DOCTOR_OPTIONS: the fast path accepts exactly the command's flags."""
    typer_opts = typer_doctor_options()
    assert set(typer_opts) == set(OPTIONS)
    for flag, is_flag in typer_opts.items():
        assert (OPTIONS[flag][1] is bool) == is_flag, flag


@pytest.mark.parametrize(("args", "expected"), [
    ([], {"overrides": {}}),
    (["--json"], {"json_out": True, "overrides": {}}),
    (["--tf", "2.2.0", "--backend=conda", "--strict"], {"tf": "2.2.0", "backend": "conda", "strict": True,
                                                        "overrides": {}}),
    (["--driver", "550.54.15", "--gpu-cc=8.6", "--os", "wsl2", "--timeout", "1.5"],
     {"overrides": {"driver": "550.54.15", "gpu_cc": "8.6", "os": "wsl2"}, "timeout": 1.5}),
])
def test_fast_path_parses(args, expected):
    assert parse_fast(args) == expected


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--nope"], ["--tf"], ["--tf", "--json"], ["--json=1"],
                                  ["--timeout", "soon"], ["extra"]])
def test_anything_unusual_goes_to_the_full_cli(args):
    assert parse_fast(args) is None


@pytest.mark.real_subprocess
@pytest.mark.parametrize("args", [
    ["--json", "--facts", str(DATA / "facts" / "r740-4x-tesla-m60.json"), "--tf", "1.14", "--backend", "pip"],
    ["--facts", str(DATA / "facts" / "windows-gtx1080.json"), "--tf", "banana"],
])
def test_fast_path_and_full_cli_agree(tmp_path, args):
    fast = subprocess.run([sys.executable, "-m", "tfgpu", "doctor", *args], capture_output=True, text=True,
                          cwd=tmp_path, check=False, timeout=60)
    full = subprocess.run([sys.executable, "-c", "from tfgpu.cli.app import main; main()", "doctor", *args],
                          capture_output=True, text=True, cwd=tmp_path, check=False, timeout=60)
    assert fast.returncode == full.returncode
    assert fast.stdout == full.stdout
    assert fast.stderr == full.stderr


@pytest.mark.real_subprocess
def test_doctor_fast_path_does_not_import_the_cli_framework(tmp_path):
    facts = str(DATA / "facts" / "mx150-laptop-ubuntu1804.json")
    # the fast path leaves with os._exit (no atexit hooks): report the modules on the way out
    probe = (f"import os, sys; sys.argv=['tfgpu','doctor','--json','--facts',{facts!r}]\n"
             "leave, me = os._exit, os.getpid()\n"
             "def report(code):\n"
             "    if os.getpid() == me:\n"
             "        sys.stderr.write('MODULES ' + ' '.join(sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('typer','click','rich','pydantic'))) + '\\n'); sys.stderr.flush()\n"
             "    leave(code)\n"
             "os._exit = report\n"
             "from tfgpu.cli.entry import main; main()")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES"))
    assert line.strip() == "MODULES"


@pytest.mark.real_subprocess
def test_the_doctor_forks_before_any_thread_exists(tmp_path):
    """Python >= 3.12 warns when a multi-threaded process forks (a deadlock risk in the child): the
    console script's doctor must fork its probe child, and that child its NVML process, before any
    thread starts. -W error turns the warning into a failure the child would report as a crash."""
    env = {**os.environ, "TFGPU_PROBE_FORK": "1", "TFGPU_PROBE_NVML": "1", "TFGPU_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-X", "dev", "-m", "tfgpu", "doctor",
                           "--json"], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    assert "multi-threaded" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["facts"]["probe"]["process"] == "a forked child"  # the child did not die of the warning
    nvml = doc["facts"]["driver"]["sources"]["nvml"]
    assert "crashed" not in str(nvml.get("error"))  # nor did the NVML process


@pytest.mark.real_subprocess
def test_the_doctor_forks_its_probe_child_before_the_heavy_imports(tmp_path):
    """The probe child is the doctor's longest path on a GPU machine: it forks right after the options are
    parsed, before typing, pathlib, json or the knowledge base are imported (both processes then import what
    they need at the same time, on two cores), and it never imports the knowledge base itself."""
    probe = ("import os, sys\n"
             "base = set(sys.modules)\n"
             "real, me = os.fork, os.getpid()\n"
             "def fork():\n"
             "    if os.getpid() == me and not getattr(fork, 'done', False):\n"
             "        fork.done = True\n"
             "        sys.stderr.write('AT_FORK ' + ' '.join(sorted(set(sys.modules) - base)) + '\\n')\n"
             "        sys.stderr.flush()\n"
             "    return real()\n"
             "os.fork = fork\n"
             "sys.argv = ['tfgpu', 'doctor', '--json']\n"
             "from tfgpu.cli.entry import main; main()")
    env = {**os.environ, "TFGPU_PROBE_FORK": "1", "TFGPU_PROBE_NVML": "0", "TFGPU_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False,
                          timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["facts"]["probe"]["process"] == "a forked child"
    at_fork = set(next(ln for ln in proc.stderr.splitlines() if ln.startswith("AT_FORK")).split()[1:])
    assert {"tfgpu.cli.doctor", "tfgpu.facts.probe._child"} <= at_fork
    heavy = {"typing", "pathlib", "json", "packaging.version", "tfgpu.facts.document", "tfgpu.kb.knowledge", "tfgpu.render.report",
             "tfgpu.judge.verdict", "tfgpu.core.safety"}
    assert not at_fork & heavy, sorted(at_fork & heavy)


@pytest.mark.real_subprocess
def test_the_probes_do_not_import_the_knowledge_base(tmp_path):
    probe = ("import sys\n"
             "base = set(sys.modules)\n"
             "from tfgpu.facts.probe import detect_facts\n"
             "facts = detect_facts()\n"
             "assert facts['schema'] == 'tfgpu.facts/1'\n"
             "print(' '.join(sorted(set(sys.modules) - base)))")
    env = {**os.environ, "TFGPU_PROBE_NVML": "0"}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = set(proc.stdout.split())
    assert "tfgpu.facts.probe.cuda" in modules
    # nor pathlib (with urllib.parse and ipaddress, ~4 ms of the probe child's start): machine paths are strings
    unwanted = {"tfgpu.kb.knowledge", "packaging.version", "typing", "pathlib", "urllib.parse"}
    assert not modules & unwanted, sorted(modules & unwanted)


@pytest.mark.real_subprocess
def test_the_nvml_process_imports_only_nvml_and_pynvml():
    """On a GPU machine the doctor's NVML process shares two cores with the probe child and the parent: importing
    nvidia-ml-py is its work, and the parsers (their regexes, json) or threading of its own would only add to it."""
    probe = ("import sys\n"
             "base = set(sys.modules)\n"
             "import tfgpu.facts.probe.nvml\n"
             "print(' '.join(sorted(set(sys.modules) - base)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    unwanted = {"tfgpu.facts.probe.parsers", "json", "threading", "re", "pynvml"}  # pynvml: only when asked
    assert not set(proc.stdout.split()) & unwanted, sorted(set(proc.stdout.split()) & unwanted)
