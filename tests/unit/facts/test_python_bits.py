"""A 32-bit Python cannot install TensorFlow: every wheel on PyPI is 64-bit (compat/rules.toml wheels-64-bit-only;
tensorflow#30158 in tests/cases). The probe reads each interpreter's word size from its executable header."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from tfgpu.api.doctor import doctor_result
from tfgpu.facts.machine import Machine
from tfgpu.facts.probe._ctx import Ctx
from tfgpu.facts.probe.parsers import executable_bits
from tfgpu.facts.probe.system import probe_python
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.choose import interpreters

EXE = DATA / "probe" / "executables"
KB = load_kb()


@pytest.mark.parametrize(("name", "bits"), [("t32", 32), ("t64", 64), ("t64-arm", 64)])
def test_the_pe_machine_field_of_real_windows_executables(name: str, bits: int) -> None:
    # pip's own launchers for i386, x86-64 and ARM64 (tests/data/probe/SOURCES.md)
    assert executable_bits((EXE / f"{name}.exe.head").read_bytes()) == bits


def test_the_elf_class_of_this_interpreter_and_what_is_not_an_executable() -> None:
    head = Path(sys.executable).resolve().read_bytes()[:64]
    assert executable_bits(head) == (64 if sys.maxsize > 2**32 else 32)
    # EI_CLASS (byte 4 of the ELF identification, System V ABI): 1 is ELFCLASS32
    assert executable_bits(head[:4] + b"\x01" + head[5:]) == 32
    for junk in (None, b"", b"#!/usr/bin/env bash\nexec pyenv ...", b"\x7fELF", b"MZ" + b"\0" * 10,
                 (EXE / "t64.exe.head").read_bytes()[:200]):
        assert executable_bits(junk) is None


def test_the_probe_records_each_interpreters_word_size(tmp_path: Path) -> None:
    # a profile tree: a real 64-bit ELF and a real 32-bit PE named as interpreters on PATH
    bin_dir = tmp_path / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3.11").write_bytes(Path(sys.executable).resolve().read_bytes()[:1024])
    (bin_dir / "python3.5").write_bytes((EXE / "t32.exe.head").read_bytes())
    (bin_dir / "python3.9").write_text("#!/bin/sh\nexec /opt/python3.9 \"$@\"\n")
    ctx = Ctx(root=tmp_path, env={"PATH": "/usr/bin"}, timeout=2.0)
    found = {e["version"]: e["bits"] for e in probe_python(ctx, "linux")["interpreters"]}
    assert found == {"3.11": 64, "3.5": 32, "3.9": None}


def _facts(python: dict[str, object]) -> dict[str, object]:
    facts = json.loads((DATA / "facts" / "mx150-laptop-ubuntu1804.json").read_text())
    facts["python"] = python
    return facts


def test_a_32_bit_python_is_no_python_for_pip() -> None:
    only_32 = _facts({"current": "3.5.1", "bits": 32})
    m = Machine.from_facts(only_32, KB)
    assert (m.pythons, m.pythons_32bit) == ((), ("3.5",))
    row = doctor_result(only_32, KB, tf="1.13.1", backend="pip").targets[0]
    assert row.verdict == "blocked"
    (finding,) = [f for f in row.blockers if "python.bits" in f.check]
    assert "32-bit build" in finding.summary
    assert "64-bit Python 3.5" in finding.fix
    # the same Python as a 64-bit build (or of unknown word size): no such blocker
    for bits in (64, None):
        row = doctor_result(_facts({"current": "3.5.1", "bits": bits}), KB, tf="1.13.1", backend="pip").targets[0]
        assert not any(f.check == "python.bits" for f in row.blockers)
    # a 64-bit interpreter of the same version beside the 32-bit one: pip uses it
    both = _facts({"current": "3.5.1", "bits": 32,
                   "interpreters": [{"version": "3.5.4", "path": "C:/Python35/python.exe", "bits": 64}]})
    assert Machine.from_facts(both, KB).pythons == ("3.5",)
    assert Machine.from_facts(both, KB).pythons_32bit == ()


def test_the_planner_never_picks_a_32_bit_interpreter() -> None:
    facts = _facts({"current": "3.8.10", "interpreters": [
        {"version": "3.7.9", "path": "C:/Python37-32/python.exe", "bits": 32},
        {"version": "3.8.10", "path": "C:/Python38/python.exe", "bits": 64},
        {"version": "3.6.8", "path": "C:/Python36/python.exe"}]})
    assert interpreters(copy.deepcopy(facts), {}) == {"3.8": "C:/Python38/python.exe", "3.6": "C:/Python36/python.exe"}


def test_a_fifo_or_device_named_like_an_interpreter_is_not_read(tmp_path: Path) -> None:
    # reading the header must not block on a FIFO (nothing writes to it) nor read a device: word size unknown
    import os

    bin_dir = tmp_path / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    os.mkfifo(bin_dir / "python3.10")
    (bin_dir / "python3.12").symlink_to("/dev/zero")
    ctx = Ctx(root=tmp_path, env={"PATH": "/usr/bin"}, timeout=2.0)
    assert ctx.head("/usr/bin/python3.10") is None
    found = {e["version"]: e["bits"] for e in probe_python(ctx, "linux")["interpreters"]}
    assert found["3.10"] is None


def test_a_folder_on_path_twice_under_another_name_is_read_once(tmp_path: Path, monkeypatch) -> None:
    # a merged-/usr system (Debian 12, Ubuntu 20.04+): /bin is a symlink to usr/bin, and PATH names both
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "bin").symlink_to("usr/bin")
    (tmp_path / "usr" / "bin" / "python3.11").write_bytes(Path(sys.executable).resolve().read_bytes()[:1024])
    listed: list[str] = []
    real_listdir = Ctx.listdir
    monkeypatch.setattr(Ctx, "listdir", lambda self, p: listed.append(str(p)) or real_listdir(self, p))
    ctx = Ctx(root=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=2.0)
    found = [(e["path"], e["version"]) for e in probe_python(ctx, "linux")["interpreters"]]
    assert found == [("/usr/bin/python3.11", "3.11")]
    assert [p for p in listed if p.endswith("bin")] == ["/usr/bin"]  # not /bin again
