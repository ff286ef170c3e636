"""Fault injection at the probes: broken nvidia-smi, every NVML error, unreadable files, truncated and
non-UTF-8 input, very large machines. Each must give bounded time, a clear report and never a traceback.

Machine profiles are tmp_path trees with scripts on PATH (tests/probe_helpers.py). Where a fault needs
output, it is a recorded real output (tests/data/probe/SOURCES.md) that the fault cuts, corrupts or
repeats; the test says which.
"""

from __future__ import annotations

import builtins
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pynvml
import pytest

from tests import REPO
from tests.probe_helpers import PROBE, FakeGpu, FakeNvmlLib, Profile, fake_nvml
from tfgpu.facts.document import validate_facts
from tfgpu.facts.probe import detect_facts
from tfgpu.facts.probe.driver import resolve_driver
from tfgpu.facts.probe.nvml import probe_nvml, query_nvml
from tfgpu.facts.probe.parsers import SMI_FIELDS, parse_cudnn_header, parse_smi_xml

SMI = PROBE / "nvidia-smi"
DOCTOR_SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/doctor.schema.json")
                           .read_text(encoding="utf-8"))
Cli = Callable[..., "tuple[int, str, str]"]


def _probe(p: Profile, timeout: float = 2.0) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    facts = detect_facts(root=p.root, env=p.env, timeout=timeout)
    return facts, time.monotonic() - t0


def _doctor_json(facts: dict[str, Any], tmp_path: Path, cli: Cli, *args: str) -> dict[str, Any]:
    """`tfgpu doctor --facts FILE --json` on probed facts: exit 0/1, valid document, nothing on stderr."""
    path = tmp_path / "probed-facts.json"
    path.write_text(json.dumps(facts), encoding="utf-8")
    code, out, err = cli("doctor", "--facts", str(path), "--json", *args)
    assert code in (0, 1), err
    assert "Traceback" not in err
    doc: dict[str, Any] = json.loads(out)
    jsonschema.validate(doc, DOCTOR_SCHEMA)
    code, human, err = cli("doctor", "--facts", str(path), *args)
    assert code in (0, 1), err
    assert "Traceback" not in human + err
    assert "Recommendation" in human
    return doc


def _clear(text: str | None) -> bool:
    """A one-line, printable explanation."""
    return bool(text) and "\n" not in str(text) and "Traceback" not in str(text)


# --------------------------------------------------------------------------- nvidia-smi

@pytest.mark.real_subprocess
def test_nvidia_smi_that_hangs_is_cut_at_the_timeout(tmp_path: Path, cli: Cli) -> None:
    p = Profile(tmp_path)
    p.file("/proc/driver/nvidia/version", fixture=PROBE / "proc" / "driver-version-384.98-ubuntu.txt")
    p.program("nvidia-smi", script="#!/bin/sh\nexec /bin/sleep 60\n")
    facts, elapsed = _probe(p, timeout=1.0)
    assert elapsed < 3.0
    smi = facts["driver"]["sources"]["nvidia_smi"]
    assert smi["ok"] is False
    assert "timed out after 1 s" in smi["error"]
    # the kernel module still answers: the report goes on with what is known
    assert (facts["driver"]["version"], facts["driver"]["source"]) == ("384.98", "kernel_module")
    assert validate_facts(json.loads(json.dumps(facts))) == []
    _doctor_json(facts, tmp_path, cli)


@pytest.mark.real_subprocess
@pytest.mark.parametrize(("script", "expect"), [
    ("#!/bin/sh\nkill -SEGV $$\n", "SIGSEGV"),  # killed by a signal: returncode -11
    ("#!/bin/sh\nexit 139\n", "139"),  # how a shell wrapper reports the same crash
])
def test_nvidia_smi_that_crashes_is_named_in_the_report(tmp_path: Path, cli: Cli, script: str, expect: str) -> None:
    p = Profile(tmp_path)
    p.program("nvidia-smi", script=script)
    facts, elapsed = _probe(p)
    assert elapsed < 3.0
    smi = facts["driver"]["sources"]["nvidia_smi"]
    assert smi["ok"] is False
    assert expect in smi["error"]
    assert _clear(smi["error"])
    assert expect in facts["driver"]["error"]  # "no NVIDIA driver found (nvidia-smi: killed by signal SIGSEGV)"
    doc = _doctor_json(facts, tmp_path, cli)
    assert doc["recommendation"] is None or doc["recommendation"]["verdict"] != "ready"


@pytest.mark.real_subprocess
def test_nvidia_smi_printing_garbage_is_not_understood(tmp_path: Path, cli: Cli) -> None:
    garbage = random.Random(1234).randbytes(64 * 1024)  # fixed seed: the same bytes every run
    (tmp_path / "garbage.bin").write_bytes(garbage)
    p = Profile(tmp_path)
    p.program("nvidia-smi", default=(tmp_path / "garbage.bin", 0))
    facts, elapsed = _probe(p)
    assert elapsed < 3.0
    smi = facts["driver"]["sources"]["nvidia_smi"]
    assert smi["error"] == "nvidia-smi: output not understood"
    assert facts["gpus"] == []
    assert facts["driver"]["version"] is None
    _doctor_json(facts, tmp_path, cli)


@pytest.mark.real_subprocess
def test_nvidia_smi_non_utf8_output_is_replaced_not_fatal(tmp_path: Path, cli: Cli) -> None:
    # the recorded 8x H100 table re-encoded as UTF-16 (what a Windows redirect produces) and with a
    # Latin-1 byte in a GPU name: the probe reads what it can and never raises on decoding
    table = (SMI / "table-8gpu-h100-550.90.07.txt").read_text(encoding="utf-8")
    latin = table.replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 \u00e980GB").encode("latin-1")
    (tmp_path / "latin1.txt").write_bytes(latin)
    p = Profile(tmp_path)
    p.program("nvidia-smi", {"--query-gpu=*": (None, 0)}, default=(tmp_path / "latin1.txt", 0))
    facts, _ = _probe(p)
    assert facts["driver"]["version"] == "550.90.07"
    assert len(facts["gpus"]) == 8
    assert all("\ufffd" in g["name"] for g in facts["gpus"])
    _doctor_json(facts, tmp_path, cli)

    (tmp_path / "utf16.txt").write_bytes(table.encode("utf-16"))
    p.program("nvidia-smi", {"--query-gpu=*": (None, 0)}, default=(tmp_path / "utf16.txt", 0))
    facts, _ = _probe(p)
    assert facts["driver"]["sources"]["nvidia_smi"]["error"] == "nvidia-smi: output not understood"
    assert validate_facts(json.loads(json.dumps(facts))) == []


@pytest.mark.real_subprocess
def test_nvidia_smi_csv_with_a_header_and_extra_columns_falls_back_to_the_table(tmp_path: Path) -> None:
    # another format version: a driver that ignores `noheader` and prints ~200 columns (the recorded
    # all-fields query of driver 595.71.05) -> no row has our 6 fields; the table still answers
    p = Profile(tmp_path)
    p.program("nvidia-smi", {"--query-gpu=*": (SMI / "csv-query-gpu-allfields-1gpu-rtx2080super-595.71.05.csv", 0),
                             "-q -x": (None, 9)}, default=(SMI / "table-8gpu-h100-550.90.07.txt", 0))
    facts, _ = _probe(p)
    assert facts["driver"]["version"] == "550.90.07"
    assert facts["driver"]["cuda"] == "12.4"
    assert [g["index"] for g in facts["gpus"]] == list(range(8))
    assert facts["driver"]["sources"]["nvidia_smi"]["format"] == "table"


def test_nvidia_smi_xml_with_unknown_elements_is_read_by_name() -> None:
    # a future dtd: the recorded T4 document with unknown elements added at every level
    text = (SMI / "xml-1gpu-tesla-t4-515.105.01.xml").read_text(encoding="utf-8")
    text = text.replace("<driver_version>", "<future_thing><x>1</x></future_thing><driver_version>", 1)
    text = text.replace("<product_name>", "<quantum_mode>Enabled</quantum_mode><product_name>", 1)
    out = parse_smi_xml(text)
    assert out["driver_version"] == "515.105.01"
    assert out["cuda"] == "11.7"
    assert [g["name"] for g in out["gpus"]] == ["Tesla T4"]
    # and an XML bomb (entity expansion) is refused by the parser, not expanded into memory
    bomb = ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
            + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
            + ']><nvidia_smi_log><driver_version>&i;</driver_version></nvidia_smi_log>')
    t0 = time.monotonic()
    out = parse_smi_xml(bomb)
    assert time.monotonic() - t0 < 2.0
    assert out["gpus"] == []
    assert out["driver_version"] is None or len(out["driver_version"]) < 10**9


@pytest.mark.real_subprocess
def test_slow_nvidia_smi_within_the_timeout_is_read(tmp_path: Path) -> None:
    p = Profile(tmp_path)
    table = SMI / "table-8gpu-h100-550.90.07.txt"
    p.program("nvidia-smi", script=f"#!/bin/sh\n/bin/sleep 0.4\ncase \"$*\" in\n  --query-gpu=*) exit 0;;\n"
                                   f"  *) /bin/cat '{table}';;\nesac\n")
    facts, elapsed = _probe(p, timeout=3.0)
    assert facts["driver"]["sources"]["nvidia_smi"]["ok"] is True
    assert facts["driver"]["version"] == "550.90.07"
    assert 0.4 <= elapsed < 3.5


# --------------------------------------------------------------------------- NVML

ALL_NVML_ERRORS = sorted((v, k) for k, v in vars(pynvml).items() if k.startswith("NVML_ERROR_") and isinstance(v, int))


class ErrLib(FakeNvmlLib):
    """The fake C library, failing one function with ``rc``; nvmlErrorString returns a C string (the real
    binding sets restype c_char_p) for the codes pynvml has no text for."""

    def __init__(self, fail: str, rc: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.fail, self.rc = fail, rc

    def __getattr__(self, name: str) -> Any:
        if name == "nvmlErrorString":
            return lambda rc: f"NVML error {int(rc.value if hasattr(rc, 'value') else rc)}".encode()
        if name == self.fail:
            return lambda *a: self.rc
        return FakeNvmlLib.__getattr__(self, name)


@pytest.mark.parametrize(("code", "const"), ALL_NVML_ERRORS, ids=[c for _, c in ALL_NVML_ERRORS])
@pytest.mark.parametrize("where", ["nvmlInitWithFlags", "nvmlSystemGetDriverVersion", "nvmlDeviceGetCount_v2",
                                   "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetCudaComputeCapability"])
def test_every_nvml_error_is_a_result(code: int, const: str, where: str) -> None:
    lib = ErrLib(where, code, gpus=[FakeGpu("NVIDIA A10", "GPU-a", 23028, (8, 6))])
    with fake_nvml(lib):
        t0 = time.monotonic()
        out = probe_nvml(5.0)
        elapsed = time.monotonic() - t0
    assert elapsed < 2.0, "an error must come back at once, not as a timeout"
    assert set(out) >= {"ok", "driver_version", "cuda", "gpus", "error", "error_kind"}
    if where in ("nvmlInitWithFlags", "nvmlSystemGetDriverVersion", "nvmlDeviceGetCount_v2"):
        assert out["ok"] is False
        assert out["error"].startswith("NVML: ")
        assert _clear(out["error"])
        assert out["error_kind"]
        drv, gpus, _ = resolve_driver(out, None, None, None, os_name="linux", wsl=None)
        assert gpus == []
        assert _clear(drv["error"])
    else:  # one GPU's field failed: the others are kept and the failure is recorded on the GPU
        assert out["ok"] is True
        (gpu,) = out["gpus"]
        assert gpu.get("error") or gpu.get("errors")
    if where == "nvmlInitWithFlags":
        assert lib.calls == [] or "nvmlShutdown" not in lib.calls  # no shutdown without a successful init


def test_nvml_binding_that_breaks_while_reporting_an_error_is_contained() -> None:
    """pynvml formats an unknown code through nvmlErrorString; a broken binding can raise there, inside
    tfgpu's `except` clause. The probe still returns at once (no thread traceback, no fake timeout)."""

    class Broken(ErrLib):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlErrorString":
                raise RuntimeError("binding exploded")
            return ErrLib.__getattr__(self, name)

    lib = Broken("nvmlInitWithFlags", pynvml.NVML_ERROR_IN_USE)
    errors: list[Any] = []
    import threading

    old_hook = threading.excepthook
    threading.excepthook = errors.append
    try:
        with fake_nvml(lib):
            pynvml.NVMLError._errcode_to_string.pop(pynvml.NVML_ERROR_IN_USE, None)
            t0 = time.monotonic()
            out = probe_nvml(3.0)
            elapsed = time.monotonic() - t0
    finally:
        threading.excepthook = old_hook
    assert errors == []
    assert elapsed < 1.5
    assert out["ok"] is False
    assert out["error"].startswith("NVML: ")
    assert "timed out" not in out["error"]


def test_nvml_64_gpus_in_bounded_time() -> None:
    gpus = [FakeGpu("NVIDIA H100 80GB HBM3", f"GPU-{i:04d}", 81559, (9, 0)) for i in range(64)]
    with fake_nvml(FakeNvmlLib(driver="550.90.07", cuda=12040, gpus=gpus)):
        t0 = time.monotonic()
        out = query_nvml()
    assert time.monotonic() - t0 < 2.0
    assert [g["index"] for g in out["gpus"]] == list(range(64))


# --------------------------------------------------------------------------- files


@pytest.mark.real_subprocess
def test_unreadable_proc_and_sys_files_directories_in_place_of_files(tmp_path: Path, cli: Cli) -> None:
    # tests run as root, so chmod 000 does not stop a read; a directory where a file should be does
    p = Profile(tmp_path)
    for f in ("/proc/driver/nvidia/version", "/sys/module/nvidia/version", "/proc/version", "/proc/cpuinfo",
              "/etc/os-release", "/proc/1/cgroup", "/sys/bus/pci/devices/0000:3b:00.0/vendor",
              "/sys/bus/pci/devices/0000:3b:00.0/class"):
        (tmp_path / f.lstrip("/")).mkdir(parents=True)
    facts, elapsed = _probe(p)
    assert elapsed < 3.0
    assert facts["driver"]["version"] is None
    assert facts["cpu"]["avx"] is None
    assert facts["errors"] == {} or all(_clear(v) for v in facts["errors"].values())
    _doctor_json(facts, tmp_path, cli)


@pytest.mark.real_subprocess
def test_permission_denied_everywhere_under_proc_sys_etc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          cli: Cli) -> None:
    p = Profile(tmp_path)
    p.file("/proc/driver/nvidia/version", fixture=PROBE / "proc" / "driver-version-384.98-ubuntu.txt")
    p.file("/sys/module/nvidia/version", "384.98\n")
    p.file("/etc/os-release", fixture=PROBE / "os" / "os-release-ubuntu-22.04.5.txt")
    p.file("/proc/cpuinfo", fixture=PROBE / "proc" / "cpuinfo-flags-line-helper-vm.txt")
    p.file("/sys/bus/pci/devices/0000:3b:00.0/vendor", "0x10de\n")
    denied = tuple(str(tmp_path / d) for d in ("proc", "sys", "etc"))
    real_open, real_listdir = builtins.open, os.listdir

    def guarded_open(file: Any, *a: Any, **k: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and os.fspath(file).startswith(denied):
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *a, **k)

    def guarded_listdir(path: Any = ".") -> list[str]:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(denied):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(os, "listdir", guarded_listdir)
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: guarded_open(str(self), *a, **k))
    facts, elapsed = _probe(p)
    monkeypatch.undo()
    assert elapsed < 3.0
    assert facts["driver"]["version"] is None  # nothing could be read: unknown, not a crash
    assert facts["platform"]["distro"] is None
    assert facts["lspci_nvidia"] == []
    assert validate_facts(json.loads(json.dumps(facts))) == []
    _doctor_json(facts, tmp_path, cli)


@pytest.mark.parametrize("cut", [
    "#define CUDNN_MIN",  # cut inside a name
    "#define CUDNN_MINOR ",  # cut before the number
    "#define CUDNN_PATCHLEVEL",  # cut after the last name
])
def test_truncated_cudnn_header_gives_no_version_rather_than_a_wrong_one(cut: str) -> None:
    text = (PROBE / "cudnn" / "cudnn-8.2.1-cudnn_version.h").read_text(encoding="utf-8")
    assert parse_cudnn_header(text) == "8.2.1"
    truncated = text[: text.index(cut.split()[-1] if cut.endswith(" ") else cut) + len(cut)]
    assert parse_cudnn_header(truncated) is None


@pytest.mark.real_subprocess
def test_truncated_and_binary_headers_in_a_profile(tmp_path: Path, cli: Cli) -> None:
    text = (PROBE / "cudnn" / "cudnn-8.2.1-cudnn_version.h").read_bytes()
    p = Profile(tmp_path)
    p.file("/usr/include/cudnn_version.h", text[: text.index(b"#define CUDNN_MINOR") + 15])
    p.file("/usr/local/cuda-12.2/include/cudnn_version.h", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64)
    p.file("/usr/local/cuda-12.2/include/cuda_runtime_api.h", b"#define CUDART_VERSION 12\xff")
    p.file("/usr/local/cuda-12.2/lib64/libcudart.so.12")
    facts, _ = _probe(p)
    assert facts["cudnn"] == []
    (tk,) = facts["cuda_toolkits"]
    assert tk["version"] == "12.2"  # from the directory name, since the header is garbled
    _doctor_json(facts, tmp_path, cli)


# --------------------------------------------------------------------------- big machines


def _csv_rows(n: int) -> str:
    # the noheader,nounits format of tests/data/probe/nvidia-smi/csv-noheader-nounits-1gpu-rtx2080-440.64.csv,
    # with the fields tfgpu asks for (SMI_FIELDS), one row per GPU
    assert SMI_FIELDS == ("index", "name", "uuid", "driver_version", "memory.total", "pci.device_id", "compute_cap")
    # pci.device_id as nvidia-smi prints it (csv-query-gpu-allfields-*.csv): 0x2330 = GH100 [H100 SXM5 80GB]
    return "".join(f"{i}, NVIDIA H100 80GB HBM3, GPU-{i:08x}-0000-0000-0000-000000000000, 590.48.01, 81559, "
                   "0x233010DE, 9.0\n" for i in range(n))


@pytest.mark.real_subprocess
def test_64_gpus_and_mig_slices_bounded_and_valid(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "csv64.txt").write_text(_csv_rows(64))
    p = Profile(tmp_path)
    p.program("nvidia-smi", {"--query-gpu=*": (tmp_path / "csv64.txt", 0), "-q -x": (None, 9)},
              default=(SMI / "table-1gpu-h100-mig-enabled-590.48.01.txt", 0))
    p.env["TFGPU_PROBE_NVML"] = "1"
    gpus = [FakeGpu("NVIDIA H100 80GB HBM3", f"GPU-{i:04d}", 81559, (9, 0)) for i in range(64)]
    with fake_nvml(FakeNvmlLib(driver="590.48.01", cuda=13010, gpus=gpus)):
        facts, elapsed = _probe(p)
    assert elapsed < 3.0
    assert len(facts["gpus"]) == 64
    assert facts["driver"]["cuda"] == "13.1"
    doc = _doctor_json(facts, tmp_path, cli)
    assert len(doc["facts"]["gpus"]) == 64
    # the same with NVML off: nvidia-smi alone gives the 64 GPUs; the MIG table's slices are not GPUs
    p.env["TFGPU_PROBE_NVML"] = "0"
    facts, _ = _probe(p)
    assert [g["index"] for g in facts["gpus"]] == list(range(64))
    assert {g["source"] for g in facts["gpus"]} == {"nvidia-smi csv"}


@pytest.mark.faults
@pytest.mark.real_subprocess
def test_many_probe_faults_at_once_stay_within_the_budget(tmp_path: Path, cli: Cli) -> None:
    """Everything slow at once: nvidia-smi, lspci, ldconfig and nvcc all hang; NVML hangs too."""
    import threading

    p = Profile(tmp_path)
    for prog in ("nvidia-smi", "lspci", "ldconfig", "ldd", "uname", "conda"):
        p.program(prog, script="#!/bin/sh\nexec /bin/sleep 60\n")
    p.program("nvcc", script="#!/bin/sh\nexec /bin/sleep 60\n", where=tmp_path / "usr/local/cuda-12.4/bin")
    p.env["PATH"] += f":{tmp_path}/usr/local/cuda-12.4/bin"
    p.env["TFGPU_PROBE_NVML"] = "1"
    release = threading.Event()

    class Hanging(FakeNvmlLib):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlInitWithFlags":
                return lambda flags: release.wait(30) and 0
            return FakeNvmlLib.__getattr__(self, name)

    with fake_nvml(Hanging()):
        facts, elapsed = _probe(p, timeout=1.5)
        release.set()
    assert elapsed < 4.0
    assert "timed out" in facts["driver"]["sources"]["nvml"]["error"]
    _doctor_json(facts, tmp_path, cli)


# --------------------------------------------------------------------------- the probe deadline


def _spawn_recorder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[list[Any], dict[str, str]]:
    """A PATH with an `ldconfig` on it, and tfgpu.core.process._spawn replaced by a recorder that starts nothing."""
    from tfgpu.core import process as run

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "ldconfig"
    exe.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    exe.chmod(0o755)
    started: list[Any] = []

    def spawn(argv: Any, **kwargs: Any) -> Any:
        started.append(list(argv))
        msg = "recorded, not started"
        raise OSError(msg)

    monkeypatch.setattr(run, "_spawn", spawn)
    return started, {"PATH": str(bin_dir)}


def test_a_probe_past_its_deadline_starts_no_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `nox -s e2e` ended with a teardown error: a probe thread that detect_facts had stopped waiting for
    # started `ldconfig -p` after the test had ended (the budget's floor of 0.05 s still let it start)
    from tfgpu.facts.probe._ctx import Ctx

    started, env = _spawn_recorder(monkeypatch, tmp_path)
    late = Ctx(root=tmp_path, env=env, timeout=1.0, start=time.monotonic() - 5.0)
    assert late.expired()
    res = late.run(["ldconfig", "-p"])
    assert started == []
    assert (res.returncode, res.timed_out, res.ok) == (None, True, False)
    assert "not started" in (res.error or "")
    assert "ldconfig" in (res.error or "")
    in_time = Ctx(root=tmp_path, env=env, timeout=30.0)  # the control: within the budget it does start
    assert not in_time.expired()
    in_time.run(["ldconfig", "-p"])
    assert [a[1:] for a in started] == [["-p"]]


def test_a_probe_thread_left_behind_by_run_concurrently_starts_nothing_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from tfgpu.facts.probe._ctx import Ctx, run_concurrently
    from tfgpu.facts.probe.cuda import probe_libraries

    started, env = _spawn_recorder(monkeypatch, tmp_path)
    ctx = Ctx(root=tmp_path, env=env, timeout=0.2)
    release = threading.Event()
    out: list[Any] = []

    def slow_job() -> Any:
        release.wait(10)  # e.g. a stuck read: it outlives detect_facts' wait
        out.append(probe_libraries(ctx, []))
        return out[-1]

    results, _timings, errors = run_concurrently({"libraries": slow_job}, timeout=0.2)
    assert "libraries" not in results
    assert "timed out" in errors["libraries"]
    release.set()  # the caller (a test, tfgpu) has moved on; the thread goes on to the ldconfig step
    worker = next(t for t in threading.enumerate() if t.name == "tfgpu-probe-libraries")
    worker.join(5)
    assert not worker.is_alive()
    assert started == []  # ldconfig was found on PATH but not started
    assert out
    assert "not started" in str(out[0].get("ldconfig_error"))
