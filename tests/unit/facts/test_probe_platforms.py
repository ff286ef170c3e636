"""Issue 32, item 4: every probe against a Windows and a macOS machine, on this Linux host. Each machine is a profile
tree (tests/probe_helpers.py) whose programs print recorded real outputs (tests/data/probe/SOURCES.md); the probes
read it with the probed machine's own path rules (ntpath for Windows, chosen by its OS, never by the host's), so a
path bug that only Windows would show fails here first. CI runs the whole suite on real Windows and macOS runners
too (.github/workflows/tests.yml)."""

from __future__ import annotations

import json
import ntpath
import os
import posixpath
import re
from pathlib import Path
from typing import Any

import pytest

from tests.probe_helpers import PROBE, Profile
from tfgpu.facts.document import validate_facts
from tfgpu.facts.probe import detect_facts
from tfgpu.facts.probe._ctx import Ctx

pytestmark = pytest.mark.real_subprocess  # the profiles' programs are scripts that print the recorded outputs

SMI_TABLE = PROBE / "nvidia-smi" / "table-1gpu-rtx2080super-windows-wddm-591.86.txt"
CUDA = r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA"
PE64 = (PROBE / "executables" / "t64.exe.head").read_bytes()  # a real x86-64 PE header


def _windows_machine(root: Path) -> Profile:
    """A Windows 11 PC (a composite of recorded outputs, each from its own machine): an RTX 2080 SUPER on driver
    591.86 (nvidia-smi in System32, as DCH drivers put it; no recorded CSV of that machine exists, so its query
    prints nothing and the table answers, as in bench/run.py), CUDA 12.6 (its version.json) and 12.5 (its nvcc, first
    on PATH, with cudart64_12.dll beside it), python.org Pythons 3.7-3.11 listed by `py -0p`, Miniconda (`conda
    --version`) and a venv with TensorFlow 2.10.0, the last release with GPU support on native Windows."""
    p = Profile(root)
    p.env = {"PATH": ";".join([rf"{CUDA}\v12.5\bin", r"C:\Windows\System32", r"C:\Windows"]),
             "PATHEXT": ".COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC", "SystemRoot": r"C:\Windows",
             "ProgramFiles": r"C:\Program Files", "USERPROFILE": r"C:\Users\me", "CUDA_PATH": rf"{CUDA}\v12.6",
             "CUDA_PATH_V12_6": rf"{CUDA}\v12.6", "CUDA_PATH_V12_5": rf"{CUDA}\v12.5",
             "CONDA_EXE": r"C:\Users\me\miniconda3\Scripts\conda.exe", "VIRTUAL_ENV": r"C:\Users\me\tf-env",
             "TFGPU_PROBE_NVML": "0"}
    p.program("nvidia-smi.exe", {"--query-gpu=*": (None, 0), "-q -x": (None, 9)}, default=(SMI_TABLE, 0),
              where=root / "C/Windows/System32")
    p.program("py.exe", default=(PROBE / "python" / "py-0p-5-pythons-program-files.txt", 0), where=root / "C/Windows")
    for tag in ("311", "310", "39", "38", "37"):
        p.file(f"/C/Program Files/Python{tag}/python.exe", PE64)
    p.file("/C/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v12.6/version.json",
           fixture=PROBE / "cuda" / "version-12.6-windows.json")
    p.program("nvcc.exe", default=(PROBE / "cuda" / "nvcc-version-12.5.40-windows-TRUNCATED.txt", 0),
              where=root / "C/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v12.5/bin")
    p.file("/C/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v12.5/bin/cudart64_12.dll", b"MZ")
    (root / "C/Users/me/miniconda3/conda-meta").mkdir(parents=True)
    p.program("conda.exe", default=(PROBE / "conda" / "conda-version-25.11.0-windows.txt", 0),
              where=root / "C/Users/me/miniconda3/Scripts")
    p.dist("/C/Users/me/tf-env/Lib/site-packages", "tensorflow", "2.10.0")
    return p


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_every_probe_reads_a_windows_machine_by_its_own_path_rules(tmp_path: Path) -> None:
    p = _windows_machine(tmp_path)
    facts = detect_facts(root=tmp_path, env=p.env, timeout=5.0)
    assert validate_facts(json.loads(json.dumps(facts))) == []
    assert facts["errors"] == {}
    assert facts["platform"]["os"] == "windows"
    # nvidia-smi found on the machine's PATH (";"-separated, PATHEXT), reported where it is on that machine
    assert (facts["driver"]["version"], facts["driver"]["cuda"], facts["driver"]["source"]) == ("591.86", "13.1",
                                                                                                 "nvidia-smi")
    assert facts["driver"]["sources"]["nvidia_smi"]["path"] == r"C:\Windows\System32\nvidia-smi.exe"
    assert [g["name"] for g in facts["gpus"]] == ["NVIDIA GeForce RTX 2080 ..."]  # the table truncates the name
    # `py -0p` (found as py.exe in C:\Windows): every Python with its path and word size (read from its PE header)
    found = {(i["version"], i["path"], i["source"], i["bits"]) for i in facts["python"]["interpreters"]}
    assert found == {(v, rf"C:\Program Files\Python{v.replace('.', '')}\python.exe", "py -0p", 64)
                     for v in ("3.11", "3.10", "3.9", "3.8", "3.7")}
    # both toolkits: 12.6 from CUDA_PATH and Program Files (its version.json), 12.5 from nvcc on PATH
    kits = {t["path"]: t for t in facts["cuda_toolkits"]}
    assert set(kits) == {rf"{CUDA}\v12.6", rf"{CUDA}\v12.5"}
    assert (kits[rf"{CUDA}\v12.6"]["version"], kits[rf"{CUDA}\v12.6"]["source"]) == ("12.6", "version.json")
    assert kits[rf"{CUDA}\v12.6"]["found_via"] == ["CUDA_PATH", "CUDA_PATH_V12_6", "Program Files"]
    v125 = kits[rf"{CUDA}\v12.5"]
    assert (v125["version"], v125["full_version"], v125["source"]) == ("12.5", "12.5.40", "nvcc --version")
    assert v125["nvcc"] == v125["nvcc_on_path"] == rf"{CUDA}\v12.5\bin\nvcc.exe"
    assert v125["libcudart"] == ["cudart64_12.dll"]
    # the DLL search path on Windows is PATH (TensorFlow <= 2.10 finds cudart64_*.dll there)
    assert {"kind": "cudart", "name": "cudart64_12.dll", "version": "12", "path": rf"{CUDA}\v12.5\bin\cudart64_12.dll",
            "source": "PATH"} in facts["libraries"]["libcudart"]
    assert (facts["conda"]["kind"], facts["conda"]["version"]) == ("conda", "25.11.0")
    assert facts["conda"]["path"] == r"C:\Users\me\miniconda3\Scripts\conda.exe"
    assert [(t["distribution"], t["version"], t["path"]) for t in facts["tensorflow"]] == [
        ("tensorflow", "2.10.0", r"C:\Users\me\tf-env\Lib\site-packages\tensorflow-2.10.0.dist-info")]
    # no machine path is written with this host's rules or leaks the profile tree
    paths = [s for s in _strings(facts) if re.match(r"^[A-Za-z]:\\", s)]
    assert paths
    assert not [s for s in paths if "/" in s]
    assert not [s for s in _strings(facts) if str(tmp_path) in s and s != facts["probe"]["root"]]


def test_a_macos_machine_is_read_by_posix_rules_and_judged_without_cuda(tmp_path: Path) -> None:
    """A Mac with Homebrew's Python 3.12 (a versioned name, not run), an unversioned python3 in /usr/bin (asked for
    its version), Miniforge (`conda --version`, the output recorded on Windows: the same program's format) and a venv
    with tensorflow-macos and tensorflow-metal, the two distributions of TensorFlow on a Mac."""
    p = Profile(tmp_path)
    (tmp_path / "System/Library/CoreServices").mkdir(parents=True)
    brew = p.file("/opt/homebrew/Cellar/python@3.12/3.12.4/bin/python3.12", "")
    (tmp_path / "opt/homebrew/bin").mkdir(parents=True)
    (tmp_path / "opt/homebrew/bin/python3.12").symlink_to(brew)
    p.program("python3", script="#!/bin/sh\necho 3.9.6\n", where=tmp_path / "usr/bin")
    (tmp_path / "Users/me/miniforge3/conda-meta").mkdir(parents=True)
    p.program("conda", default=(PROBE / "conda" / "conda-version-25.11.0-windows.txt", 0),
              where=tmp_path / "Users/me/miniforge3/bin")
    for name, version in (("tensorflow-macos", "2.16.2"), ("tensorflow-metal", "1.1.0")):
        p.dist("/Users/me/tf-metal/lib/python3.12/site-packages", name, version)
    p.env = {"PATH": "/opt/homebrew/bin:/usr/bin:/bin", "HOME": "/Users/me", "VIRTUAL_ENV": "/Users/me/tf-metal"}
    facts = detect_facts(root=tmp_path, env=p.env, timeout=5.0)
    assert validate_facts(json.loads(json.dumps(facts))) == []
    assert facts["errors"] == {}
    assert facts["platform"]["os"] == "macos"
    assert facts["driver"]["error"].startswith("macOS has no CUDA GPU support")
    assert "nvidia_smi" not in facts["timings"]  # neither NVML nor nvidia-smi is looked for on a Mac
    found = {(i["version"], i["path"], i["source"]) for i in facts["python"]["interpreters"]}
    assert found == {("3.12", "/opt/homebrew/bin/python3.12", "PATH"), ("3.9.6", "/usr/bin/python3", "PATH")}
    assert (facts["conda"]["kind"], facts["conda"]["version"], facts["conda"]["path"]) == (
        "conda", "25.11.0", "/Users/me/miniforge3/bin/conda")
    assert [(t["distribution"], t["version"]) for t in facts["tensorflow"]] == [
        ("tensorflow-macos", "2.16.2"), ("tensorflow-metal", "1.1.0")]
    assert facts["containers"]["error"] == "not probed on macos"
    assert not [s for s in _strings(facts) if "\\" in s]


@pytest.mark.parametrize(("tree", "os_name", "rules", "sep"), [
    ("Windows/System32", "windows", ntpath, ";"), ("C/Windows/System32", "windows", ntpath, ";"),
    ("System/Library/CoreServices", "macos", posixpath, ":"), ("etc", "linux", posixpath, ":"),
])
def test_machine_paths_follow_the_machine_not_the_host(tmp_path: Path, tree: str, os_name: str, rules: Any,
                                                       sep: str) -> None:
    (tmp_path / tree).mkdir(parents=True)
    facts = detect_facts(root=tmp_path, env={"PATH": ""}, timeout=2.0)
    assert facts["platform"]["os"] == os_name
    ctx = Ctx(root=tmp_path, env={}, timeout=1.0, os_name=os_name)
    assert (ctx.paths, ctx.pathsep) == (rules, sep)
    native = Ctx(root=Path("/"), env={}, timeout=1.0, os_name=os_name)
    assert (native.paths, native.pathsep) == (os.path, os.pathsep)  # this machine: this host's rules
    # a file of the tree named by the machine, and back
    machine = rules.join(r"C:\Users" if os_name == "windows" else "/Users", "me", "x.txt")
    assert ctx.unroot(str(ctx.path(machine))) == machine


def test_a_windows_program_is_found_by_pathext_and_never_in_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "C/Tools").mkdir(parents=True)
    (tmp_path / "C/Tools/tool.cmd").write_text("")
    (tmp_path / "C/Tools/other.exe").write_text("")
    (tmp_path / "other.exe").write_text("")  # the current directory's (an empty PATH entry): never taken
    ctx = Ctx(root=tmp_path, env={"PATH": r";C:\Tools", "PATHEXT": ".EXE;.CMD"}, timeout=1.0, os_name="windows")
    assert ctx.which("tool") == str(tmp_path / "C/Tools/tool.cmd")
    assert ctx.which("other") == str(tmp_path / "C/Tools/other.exe")
    assert ctx.which("other.exe") == str(tmp_path / "C/Tools/other.exe")
    assert ctx.which("missing") is None
    res = ctx.run(["missing", "--version"])
    assert (res.returncode, res.error) == (None, "missing: not found")
