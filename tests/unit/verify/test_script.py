"""The smoke script in real child processes against the fake `tensorflow` in tests/fake_tf/.

Every log line the fake prints is a real one: copied at test time from tests/data/logs/ (real logs,
sources in SOURCES.md) or from the `sample` of a compat/explain.toml entry (each with its source).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests import REPO
from tests.conftest import DATA
from tfgpu.judge import explain
from tfgpu.kb.parse import load_toml
from tfgpu.verify import runner

pytestmark = pytest.mark.real_subprocess

FAKE = REPO / "tests" / "fake_tf"
LOGS = DATA / "logs"
SAMPLES = {e["id"]: e["sample"] for e in load_toml("explain")["entries"]}
SMOKE_SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/smoke.schema.json").read_text())
BUILD_212 = {"cuda_version": "11.8", "cudnn_version": "8", "cuda_compute_capabilities": ["sm_35", "sm_50",
             "sm_60", "sm_70", "sm_75", "compute_80"], "is_cuda_build": True, "is_rocm_build": False}


def _file(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def _log_lines(name: str, *needles: str) -> str:
    """Lines of a real log that contain any of ``needles`` (all lines when none are given)."""
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    return "\n".join(x for x in lines if not needles or any(n in x for n in needles)) + "\n"


def _run(python: str = sys.executable, *, benchmark: bool = False, timeout: float = 60,
         **fake: str) -> runner.SmokeReport:
    env = {"PYTHONPATH": str(FAKE), "TFGPU_SMOKE_BENCH_SIZE": "8"}
    env.update({f"FAKE_TF_{k.upper()}": v for k, v in fake.items()})
    return runner.run_smoke(python, timeout=timeout, benchmark=benchmark, env=env)


def _validate(report: runner.SmokeReport, allow_cpu: bool = False) -> dict[str, object]:
    doc = report.to_json(allow_cpu=allow_cpu)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, SMOKE_SCHEMA)
    return doc


def test_tf2_gpu_passes_with_build_info_and_placement() -> None:
    details = {"device_name": "NVIDIA GeForce RTX 2080", "compute_capability": [7, 5]}
    r = _run(version="2.12.0", gpus="1", build_info=json.dumps(BUILD_212), device_details=json.dumps(details))
    assert r.error is None, r.log_tail
    assert r.tf_version == "2.12.0"
    assert r.api == "eager"
    assert r.build_info["cuda_version"] == "11.8"
    assert r.build_info["source"] == "tf.sysconfig.get_build_info"
    assert r.gpu_method == "tf.config.list_physical_devices"
    assert r.gpus[0]["details"]["device_name"] == "NVIDIA GeForce RTX 2080"
    assert [(op.name, op.status, op.on_gpu) for op in r.ops] == [
        ("matmul", "pass", True), ("conv2d", "pass", True), ("xla", "pass", True)]
    assert all(op.device and op.device.endswith("GPU:0") for op in r.ops)
    assert r.gpu_ok
    assert r.passed()
    assert r.mode == "gpu"
    doc = _validate(r)
    assert doc["passed"] is True
    assert r.summary().startswith("GPU OK: TensorFlow 2.12.0 ran matmul, conv2d, xla on the GPU")


def test_tf2_no_gpu_is_cpu_only_and_explained(tmp_path: Path) -> None:
    log = _file(tmp_path, "log", _log_lines("no_gpu_tf213_cuda_drivers_not_found.log"))
    r = _run(version="2.13.0", gpus="0", build_info=json.dumps(BUILD_212), stderr_file=log)
    assert r.tf_ok
    assert not r.gpus
    assert [(op.status, op.on_gpu) for op in r.ops] == [("pass", False)] * 3
    assert all(op.device and op.device.endswith("CPU:0") for op in r.ops)
    assert not r.gpu_ok
    assert r.cpu_ok
    assert not r.passed()
    assert r.passed(allow_cpu=True)
    assert r.findings[0].id == "gpu.cuda_drivers_not_found"
    assert r.summary().startswith("NO GPU: TensorFlow 2.13.0 sees no GPU; the ops ran on the CPU: ")
    assert r.summary(allow_cpu=True).startswith("CPU only (allowed)")
    assert {f.id for f in r.findings if f.harmless} == {"harmless.tensorrt_not_found", "harmless.cpu_optimized_binary",
                                                         "harmless.onednn_opts_on"}
    assert _validate(r, allow_cpu=True)["mode"] == "cpu"


def test_tf114_session_api_tesla_m60_dlopen_failures(tmp_path: Path) -> None:
    """The seed: TF 1.14 wants CUDA 10.0, the machine has 10.1; GPUs skipped; ops on the CPU."""
    log = _file(tmp_path, "log", _log_lines("tesla_m60_tf114_cuda100_missing.log"))
    r = _run(version="1.14.0", gpus="0", stderr_file=log)
    assert r.api == "graph"
    assert r.gpu_method == "tf.config.experimental.list_physical_devices"
    assert r.build_info == {"source": "tf.test.is_built_with_cuda", "is_cuda_build": True}
    assert [op.status for op in r.ops] == ["pass", "pass", "pass"]
    assert not r.passed()
    ids = [f.id for f in r.findings]
    assert ids[:7] == ["dlopen.cudart", "dlopen.cublas", "dlopen.cufft", "dlopen.curand", "dlopen.cusolver",
                       "dlopen.cusparse", "gpu.cannot_dlopen_skipping"]
    assert "libcudart.so.10.0" in r.summary()


def test_tf114_facts_give_the_machine_specific_cause(tmp_path: Path) -> None:
    log = _file(tmp_path, "log", _log_lines("tesla_m60_tf114_cuda100_missing.log"))
    env = {"PYTHONPATH": str(FAKE), "FAKE_TF_VERSION": "1.14.0", "FAKE_TF_STDERR_FILE": log}
    facts = {"cuda_toolkits": [{"version": "10.1", "path": "/usr/local/cuda-10.1"}]}
    r = runner.run_smoke(sys.executable, timeout=60, env=env, facts=facts)
    assert "TensorFlow wants CUDA 10.0's libraries (libcudart.so.10.0); installed here: CUDA 10.1" in r.findings[0].cause


def test_tf113_device_lib_gpu_session_passes() -> None:
    r = _run(version="1.13.1", gpus="2", no_xla="1")
    assert r.gpu_method == "device_lib.list_local_devices"
    assert len(r.gpus) == 2
    assert [(op.name, op.status) for op in r.ops] == [("matmul", "pass"), ("conv2d", "pass"), ("xla", "skip")]
    assert "tf.xla.experimental.compile" in (r.ops[2].reason or "")
    assert r.gpu_ok  # a skipped op does not fail the GPU verdict


def test_tf24_experimental_compile_fallback() -> None:
    r = _run(version="2.4.1", gpus="1")
    assert [op.status for op in r.ops] == ["pass", "pass", "pass"]
    assert r.gpu_ok


def test_tf20_has_no_xla_option_so_xla_is_skipped_not_failed() -> None:
    """TF 2.0's tf.function takes neither jit_compile nor experimental_compile: `nox -s recipes` saw the
    smoke test of a working TF 2.0.4 environment fail on it (TypeError ... 'experimental_compile')."""
    r = _run(version="2.0.4", gpus="1")
    assert [(op.name, op.status) for op in r.ops] == [("matmul", "pass"), ("conv2d", "pass"), ("xla", "skip")]
    assert "experimental_compile" in (r.ops[2].reason or "")
    assert r.gpu_ok


def test_an_empty_pythonhome_is_removed_not_passed_to_the_child() -> None:
    """activation_env blanks PYTHONHOME/PYTHONPATH; Python 3.6 and 2.7 die on PYTHONHOME="" (`nox -s recipes`)."""
    env = runner.child_env({"PYTHONHOME": "", "PYTHONPATH": "", "PYTHONSTARTUP": ""},
                           base={"PYTHONHOME": "/elsewhere", "PATH": "/bin"})
    assert not {"PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP"} & set(env)
    assert runner.child_env({"PYTHONPATH": "/x"}, base={})["PYTHONPATH"] == "/x"


@pytest.mark.skipif(not list(Path("~/.pyenv/versions").expanduser().glob("3.6.*/bin/python3.6")),
                    reason="needs a Python 3.6")
def test_the_smoke_runner_starts_a_python_3_6(tmp_path: Path) -> None:
    """The real interpreter that failed: a Python 3.6 child under the environment `tfgpu create` gives it."""
    from tfgpu.build.execute import activation_env
    from tfgpu.core.process import capture
    from tfgpu.plan.model import Plan

    py36 = str(next(Path("~/.pyenv/versions").expanduser().glob("3.6.*/bin/python3.6")))
    plan = Plan(tf="1.12.3", backend="pip", backend_reason="", prefix=str(tmp_path), name=None, python="3.6",
                steps=())
    res = capture([py36, "-c", "import sys; print(sys.version_info[:2])"], timeout=60,
                  env=runner.child_env(activation_env(plan)))
    assert res.ok, res.stderr
    assert res.stdout.strip() == "(3, 6)"


def test_cudnn_failure_at_the_conv(tmp_path: Path) -> None:
    handle = _file(tmp_path, "handle", SAMPLES["cudnn.handle_error"] + "\n")
    error = _file(tmp_path, "error", SAMPLES["cudnn.conv_algorithm_failed"].split("UnknownError:", 1)[1].strip())
    r = _run(version="2.2.0", gpus="1", conv_stderr_file=handle, conv_error_file=error)
    by_name = {op.name: op for op in r.ops}
    assert by_name["matmul"].status == "pass"
    assert by_name["conv2d"].status == "fail"
    assert (by_name["conv2d"].error or "").startswith("UnknownError: Failed to get convolution algorithm")
    assert not r.gpu_ok
    assert not r.passed(allow_cpu=True)  # a GPU that fails is never "CPU only"
    assert [f.id for f in r.findings][:2] == ["cudnn.handle_error", "cudnn.conv_algorithm_failed"]
    assert r.summary().startswith("FAILED: conv2d: UnknownError: Failed to get convolution algorithm")
    _validate(r)


def test_import_failure_is_explained(tmp_path: Path) -> None:
    # the real ImportError message of tensorflow#23003 (catalog sample of dlopen.import_time)
    msg = _file(tmp_path, "msg", SAMPLES["dlopen.import_time"].split("ImportError: ", 1)[1])
    r = _run(import_error_file=msg)
    assert r.import_error == "ImportError: libcublas.so.8.0: cannot open shared object file: No such file or directory"
    assert r.findings[0].id == "dlopen.import_time"
    assert not r.passed(allow_cpu=True)
    assert r.mode == "failed"
    assert r.summary().startswith("FAILED: import tensorflow failed")
    _validate(r)


def test_not_installed() -> None:
    r = runner.run_smoke(sys.executable, timeout=60, env={"PYTHONPATH": ""})
    assert r.import_error is not None
    assert "No module named" in r.import_error
    assert not r.passed(allow_cpu=True)


@pytest.mark.skipif(not Path("/usr/local/cuda/lib64/libcudart.so.13").exists(), reason="needs the real CUDA 13 cudart")
def test_loaded_libraries_from_proc_maps_vs_build() -> None:
    """A real libcudart (CUDA 13 here) is mapped into the process; the build says CUDA 11.8."""
    r = _run(version="2.12.0", gpus="1", build_info=json.dumps(BUILD_212),
             load="/usr/local/cuda/lib64/libcudart.so.13")
    loaded = r.libraries["loaded"]
    assert [lib["name"] for lib in loaded] == ["libcudart.so.13"]
    assert loaded[0]["realpath"].startswith("/usr/local/cuda")
    assert r.libraries["expected"] == {"cuda_version": "11.8", "cudnn_version": "8"}
    (mismatch,) = r.libraries["mismatches"]
    assert mismatch.startswith("this TensorFlow was built with CUDA 11.8 but libcudart.so.13")
    assert mismatch in r.notes


def test_benchmark_reports_a_speedup() -> None:
    r = _run(version="2.15.0", gpus="1", benchmark=True)
    assert r.benchmark is not None
    for name in ("matmul", "conv2d"):
        b = r.benchmark[name]
        assert b["cpu_seconds"] > 0
        assert b["gpu_seconds"] > 0
        assert b["speedup"] == pytest.approx(b["cpu_seconds"] / b["gpu_seconds"])
    r = _run(version="1.14.0", gpus="1", benchmark=True)
    assert set(r.benchmark or {}) == {"matmul", "conv2d"}
    r = _run(version="2.15.0", gpus="0", benchmark=True)
    assert r.benchmark == {"skipped": "no GPU to compare with"}


def test_timeout_is_reported() -> None:
    r = _run(timeout=1.5, sleep="30")
    assert r.timed_out
    assert r.error is not None
    assert "timed out" in r.error
    assert not r.passed(allow_cpu=True)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigill_is_explained_as_a_cpu_without_avx() -> None:
    r = _run(signal="SIGILL")
    assert r.error == "the interpreter was killed by SIGILL"
    assert r.findings[0].id == "cpu.illegal_instruction"


def _pyenv(version_prefix: str) -> str | None:
    root = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
    if not root.is_dir():
        return None
    for d in sorted(root.iterdir()):
        exe = d / "bin" / "python"
        if d.name.startswith(version_prefix) and exe.exists():
            return str(exe)
    return None


@pytest.mark.parametrize("version", ["2.7", "3.6"])
def test_script_compiles_on_old_pythons(version: str) -> None:
    """TF 1.x environments run Python 2.7 / 3.5-3.7: the script must at least parse there."""
    from tfgpu.core.process import capture

    exe = _pyenv(version)
    if exe is None:
        pytest.skip(f"no Python {version} here")
    res = capture([exe, "-c", "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')",
                   str(runner.SCRIPT)], timeout=30)
    assert res.ok, res.stderr


def test_tf114_scenario_on_python36(tmp_path: Path) -> None:
    exe = _pyenv("3.6")
    if exe is None:
        pytest.skip("no Python 3.6 here")
    log = _file(tmp_path, "log", _log_lines("wsl2_numa_gpu_working_tf1.log"))
    r = _run(exe, version="1.14.0", gpus="1", stderr_file=log)
    assert r.python_version is not None
    assert r.python_version.startswith("3.6")
    assert r.gpu_ok, r.log_tail
    # a working TF 1.14 GPU log: apart from info notes (libraries opened, GPUs added) only the WSL2 NUMA note
    # (its two lines: "could not open file to read NUMA node" and "Your kernel may have been built without ...")
    assert {f.id for f in r.findings if f.severity != "info"} == {
        "harmless.numa_file_missing",
        "harmless.numa_kernel_note",
    }


# ------------------------------------------------------------------------------------------ CLI


def test_cli_smoke_json_and_exit_codes(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTHONPATH", str(FAKE))
    monkeypatch.setenv("FAKE_TF_GPUS", "1")
    code, out, err = cli("smoke", "--python", sys.executable, "--json", "--no-probe")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "tfgpu.smoke/1"
    assert doc["mode"] == "gpu"
    monkeypatch.setenv("FAKE_TF_GPUS", "0")
    # with no target smoke tests the environment tfgpu made last (issue 18): this Python is named explicitly
    code, out, _ = cli("smoke", "--python", sys.executable, "--json", "--no-probe")
    assert code == 1
    assert json.loads(out)["mode"] == "cpu"
    code, out, _ = cli("smoke", "--python", sys.executable, "--allow-cpu", "--no-probe")
    assert code == 0
    assert "CPU only (allowed)" in out


def test_cli_smoke_prefix(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTHONPATH", str(FAKE))
    monkeypatch.setenv("FAKE_TF_GPUS", "1")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    code, out, err = cli("smoke", "--prefix", str(tmp_path), "--no-probe")
    assert code == 0, err
    assert "GPU OK" in out
    assert "matmul" in out


# ------------------------------------------------------------------------------------------ e2e


@pytest.mark.e2e
@pytest.mark.parametrize("var", ["TFGPU_E2E_PYTHON", "TFGPU_E2E_PYTHON_TF220", "TFGPU_E2E_PYTHON_TF1"])
def test_real_tensorflow_from_pypi(var: str) -> None:
    """A real TensorFlow from PyPI on this GPU-less machine. TFGPU_E2E_PYTHON: an interpreter with a
    TensorFlow 2.x (nox: 2.21); TFGPU_E2E_PYTHON_TF220: one with 2.20; TFGPU_E2E_PYTHON_TF1 (optional):
    one with TensorFlow 1.15 (Python 3.7)."""
    exe = os.environ.get(var)
    if not exe:
        pytest.skip(f"set {var} to an interpreter with tensorflow installed")
    from tfgpu.facts.probe import detect_facts

    facts = detect_facts()
    r = runner.run_smoke(exe, timeout=900, facts=facts)
    assert r.error is None, r.log_tail
    assert r.import_error is None, r.log_tail
    assert r.tf_version
    bi = r.build_info
    assert isinstance(bi.get("is_cuda_build"), bool)
    if r.tf_version.startswith("2."):
        assert bi.get("source") == "tf.sysconfig.get_build_info"
        assert r.api == "eager"
    else:
        assert r.api == "graph"
    if bi.get("is_cuda_build") and bi.get("source") == "tf.sysconfig.get_build_info":
        assert bi.get("cuda_version")
        assert bi.get("cudnn_version")
    # no GPU here: the ops ran on the CPU, and the report says why
    assert not r.gpus
    assert r.cpu_ok, [op.error for op in r.ops]
    assert r.passed(allow_cpu=True)
    assert not r.passed()
    assert all(not op.on_gpu for op in r.ops if op.status == "pass")
    # the reason is never empty: the doctor's facts (no driver here) and the top finding of TF's own log
    assert r.reason, r.log_tail
    assert r.reason in r.summary()
    assert all(op.reason for op in r.ops if op.status != "skip")
    driver = facts.get("driver") or {}
    if not driver.get("version"):
        assert r.reason.startswith("no NVIDIA driver on this machine"), r.reason
    serious = [f for f in r.findings if f.severity in ("fatal", "error", "warning")]
    if bi.get("is_cuda_build"):
        assert serious, f"no explanation of why no GPU was used; log: {r.log_tail}"
        # every line TensorFlow printed about cuInit is known to the catalog (TF >= 2.16 prints
        # "failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)")
        cuinit = [f for f in r.findings if "cuInit" in f.text]
        if any("cuInit" in line for line in r.log_tail):
            assert cuinit, r.log_tail
        assert not [f for f in cuinit if f.unrecognised], cuinit
        top = explain.top_finding(r.findings)
        assert top is not None
        assert not top.unrecognised, (top, r.log_tail)
        assert top.meaning in r.reason
    else:
        assert any("not a CUDA build" in n for n in r.notes)
    _validate(r)


def test_the_first_import_says_how_long_compiling_took(tmp_path: Path) -> None:
    """Issue 32: a new environment's first `import tensorflow` compiles its Python files to bytecode (seconds for a
    real TensorFlow). The script times exactly that (SourceFileLoader.source_to_code, the one step a module without
    a valid .pyc takes) and the runner says it on a line of its own; the second import compiles nothing."""
    import shutil

    fake = tmp_path / "site"
    shutil.copytree(FAKE, fake, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(fake), "PYTHONDONTWRITEBYTECODE": "", "FAKE_TF_VERSION": "2.15.0"}
    first = runner.run_smoke(sys.executable, timeout=60, env=env)
    sources = len(list((fake / "tensorflow").rglob("*.py")))
    assert first.compiled_files is not None
    assert 1 <= first.compiled_files <= sources  # the fake's modules the import took (of its {sources})
    assert first.compile_seconds is not None
    assert first.import_seconds is not None
    assert 0 <= first.compile_seconds <= first.import_seconds
    line = first.compile_line()
    assert line is not None
    assert line.startswith(f"compiling TensorFlow's Python files: {first.compile_seconds:.1f} s "
                           f"({first.compiled_files:,} files")
    assert _validate(first, allow_cpu=True)["import"] == {
        "seconds": first.import_seconds, "compile_seconds": first.compile_seconds,
        "compiled_files": first.compiled_files}
    again = runner.run_smoke(sys.executable, timeout=60, env=env)  # the .pyc files are there now
    assert (again.compiled_files, again.compile_line()) == (0, None)
    assert again.tf_version == first.tf_version == "2.15.0"
