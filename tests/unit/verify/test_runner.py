"""tfgpu smoke, the pure parts: which interpreter, parsing the script's output, verdicts, libraries."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tfgpu.core.errors import InputError, UsageError
from tfgpu.core.process import Result
from tfgpu.verify import runner, script


def _prefix(root: Path, *, windows: bool = False) -> Path:
    exe = root / ("python.exe" if windows else "bin/python")
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("")
    return exe


def test_python_in_prefix(tmp_path: Path) -> None:
    assert runner.python_in_prefix(tmp_path) is None
    exe = _prefix(tmp_path / "env")
    assert runner.python_in_prefix(tmp_path / "env", windows=False) == exe
    win = _prefix(tmp_path / "winenv", windows=True)
    assert runner.python_in_prefix(tmp_path / "winenv", windows=True) == win
    venv = tmp_path / "venv" / "Scripts" / "python.exe"
    venv.parent.mkdir(parents=True)
    venv.write_text("")
    assert runner.python_in_prefix(tmp_path / "venv", windows=True) == venv


def test_resolve_env_python_from_conda_prefix_siblings(tmp_path: Path) -> None:
    base = tmp_path / "miniforge3"
    active = base / "envs" / "work"
    _prefix(active)
    wanted = _prefix(base / "envs" / "tf114")
    environ = {"CONDA_PREFIX": str(active)}
    assert runner.resolve_env_python("tf114", environ=environ, home=tmp_path / "h",
                                     tfgpu_envs=tmp_path / "t") == wanted
    # from the base env: its envs/ directory
    assert runner.resolve_env_python("tf114", environ={"CONDA_PREFIX": str(base)}, home=tmp_path / "h",
                                     tfgpu_envs=tmp_path / "t") == wanted


def test_resolve_env_python_other_places(tmp_path: Path) -> None:
    home = tmp_path / "home"
    in_home = _prefix(home / "miniconda3" / "envs" / "a")
    assert runner.resolve_env_python("a", environ={}, home=home, tfgpu_envs=tmp_path / "t") == in_home
    tf_env = _prefix(tmp_path / "t" / "b")
    assert runner.resolve_env_python("b", environ={}, home=home, tfgpu_envs=tmp_path / "t") == tf_env
    envs_path = _prefix(tmp_path / "custom" / "c")
    assert runner.resolve_env_python("c", environ={"CONDA_ENVS_PATH": str(tmp_path / "custom")}, home=home,
                                     tfgpu_envs=tmp_path / "t") == envs_path
    mamba = _prefix(tmp_path / "mm" / "envs" / "d")
    assert runner.resolve_env_python("d", environ={"MAMBA_ROOT_PREFIX": str(tmp_path / "mm")}, home=home,
                                     tfgpu_envs=tmp_path / "t") == mamba
    conda_exe = _prefix(tmp_path / "ana" / "envs" / "e")
    assert runner.resolve_env_python(
        "e", environ={"CONDA_EXE": str(tmp_path / "ana" / "bin" / "conda")}, home=home, tfgpu_envs=tmp_path / "t"
    ) == conda_exe
    root = _prefix(tmp_path / "root")
    assert runner.resolve_env_python("base", environ={"CONDA_ROOT": str(tmp_path / "root")}, home=home,
                                     tfgpu_envs=tmp_path / "t") == root


def test_resolve_env_python_missing_names_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        runner.resolve_env_python("nope", environ={}, home=tmp_path, tfgpu_envs=tmp_path / "t")
    assert str(tmp_path / "t") in info.value.one_line()
    assert "--prefix" in info.value.one_line()
    with pytest.raises(UsageError, match="not a path"):
        runner.resolve_env_python("../x", environ={}, home=tmp_path)


def test_resolve_python(tmp_path: Path) -> None:
    assert runner.resolve_python() == sys.executable
    exe = _prefix(tmp_path / "p")
    assert runner.resolve_python(prefix=str(tmp_path / "p")) == str(exe)
    with pytest.raises(UsageError, match="only one"):
        runner.resolve_python(prefix="a", python="b")
    with pytest.raises(InputError, match="no such directory"):
        runner.resolve_python(prefix=str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no Python interpreter"):
        runner.resolve_python(prefix=str(tmp_path / "empty"))
    with pytest.raises(InputError, match="not found"):
        runner.resolve_python(python=str(tmp_path / "nopython"))
    assert runner.resolve_python(python=sys.executable) == sys.executable


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--prefix", "/nonexistent/x"], "no such directory"),
        (["--name", "no-such-env-for-tfgpu-tests"], "no environment named"),
        (["--python", "/nonexistent/python"], "not found"),
        (["--prefix", "/a", "--name", "b"], "only one"),
    ],
)
def test_cli_usage_errors_exit_2(cli, args: list[str], needle: str) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("smoke", *args)
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1


def test_child_env_sets_tensorflow_logging() -> None:
    env = runner.child_env({"X": "1", "TF_CPP_MIN_LOG_LEVEL": "1"}, base={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/b"})
    assert env["PATH"] == "/b"
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "1"  # the caller's explicit env wins over ours
    assert runner.child_env(base={"TF_CPP_MIN_LOG_LEVEL": "3"})["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_run_smoke_argv_through_the_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake_capture(argv, *, timeout, env=None, cwd=None, guard=False):  # type: ignore[no-untyped-def]
        seen.update(argv=list(argv), timeout=timeout, env=env, guard=guard)
        return Result(tuple(argv), None, error="python: not found")

    monkeypatch.setattr(runner, "capture", fake_capture)
    r = runner.run_smoke("python", timeout=5, benchmark=True)
    assert seen["argv"] == ["python", str(runner.SCRIPT), "--benchmark"]
    assert seen["timeout"] == 5
    assert seen["guard"] is True  # the smoke process dies with tfgpu (the watchdog), SIGKILL included
    assert isinstance(seen["env"], dict)
    assert seen["env"]["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert r.error == "python: not found"
    assert r.summary() == "FAILED: python: not found"
    assert not r.passed(allow_cpu=True)


def _doc(**over: object) -> str:
    doc: dict[str, object] = {
        "schema": script.SCRIPT_SCHEMA, "python": {"version": "3.7.9"}, "tensorflow": {"version": "2.4.0"},
        "import_error": None, "build_info": {}, "api": "eager",
        "gpus": {"method": "tf.config.list_physical_devices", "gpus": [{"name": "/physical_device:GPU:0"}]},
        "tests": [{"name": n, "status": "pass", "device": "/device:GPU:0", "on_gpu": True} for n in
                  ("matmul", "conv2d", "xla")],
        "libraries": {"available": True, "loaded": []}, "error": None,
    }
    doc.update(over)
    return f"noise\n{script.BEGIN}\n{json.dumps(doc)}\n{script.END}\n"


def _result(stdout: str, stderr: str = "", rc: int | None = 0) -> Result:
    return Result(("python", "script.py"), rc, stdout, stderr)


def test_markers_match_between_script_and_runner() -> None:
    assert (script.BEGIN, script.END) == (runner.BEGIN, runner.END)


def test_verdicts() -> None:
    ok = runner.build_report("py", _result(_doc()))
    assert ok.gpu_ok
    assert ok.passed()
    skip_xla = runner.build_report("py", _result(_doc(tests=[
        {"name": "matmul", "status": "pass", "on_gpu": True}, {"name": "conv2d", "status": "pass", "on_gpu": True},
        {"name": "xla", "status": "skip", "reason": "old"}])))
    assert skip_xla.gpu_ok
    xla_cpu = runner.build_report("py", _result(_doc(tests=[
        {"name": "matmul", "status": "pass", "on_gpu": True}, {"name": "conv2d", "status": "pass", "on_gpu": True},
        {"name": "xla", "status": "fail", "on_gpu": False, "error": "asked for /GPU:0 but the op ran on CPU"}])))
    assert not xla_cpu.gpu_ok
    assert xla_cpu.summary().startswith("FAILED: xla: asked for /GPU:0")
    missing = runner.build_report("py", _result(_doc(tests=[{"name": "matmul", "status": "pass", "on_gpu": True}])))
    assert not missing.gpu_ok  # conv2d never ran
    crashed = runner.build_report("py", _result(_doc(error="RuntimeError: boom")))
    assert any("stopped early" in n for n in crashed.notes)


def test_output_without_result() -> None:
    r = runner.build_report("py", _result("nothing", "Traceback ...\nSystemError: x", rc=1))
    assert r.error == "the smoke script printed no result (exit code 1)"
    assert r.log_tail[-1] == "SystemError: x"
    bad = runner.build_report("py", _result(f"{script.BEGIN}\n{{not json\n{script.END}\n"))
    assert bad.error is not None
    assert bad.error.startswith("the smoke script's result is not JSON")
    lst = runner.build_report("py", _result(f"{script.BEGIN}\n[1]\n{script.END}\n"))
    assert lst.error == "the smoke script's result is not a JSON object"


def test_not_a_cuda_build_is_noted() -> None:
    r = runner.build_report("py", _result(_doc(build_info={"is_cuda_build": False}, gpus={"gpus": []})))
    assert any("not a CUDA build" in n for n in r.notes)


@pytest.mark.parametrize(
    ("build", "loaded", "expect"),
    [
        ({"cuda_version": "11.2", "cudnn_version": "8"},
         [{"name": "libcudart.so.11.0", "path": "/e/lib/libcudart.so.11.0", "realpath": "/e/lib/libcudart.so.11.2.152"},
          {"name": "libcudnn.so.8", "path": "/e/lib/libcudnn.so.8"}], []),
        ({"cuda_version": "12.3", "cudnn_version": "8"},
         [{"name": "libcudart.so.12", "path": "/a"}, {"name": "libcudnn_ops_infer.so.9", "path": "/b"}],
         ["this TensorFlow was built with cuDNN 8 but libcudnn_ops_infer.so.9 (cuDNN 9) is loaded from /b"]),
        ({}, [{"name": "libcudart.so.10.0", "path": "/a"}], []),
    ],
)
def test_compare_libraries(build: dict[str, str], loaded: list[dict[str, str]], expect: list[str]) -> None:
    assert runner.compare_libraries(build, {"loaded": loaded}) == expect


def test_parse_maps_of_this_process() -> None:
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("no /proc")
    libs = script.parse_maps(maps.read_text())
    assert all(script.GPU_LIB_RE.search(lib["path"]) for lib in libs)
    sample = ("7f1c2a000000-7f1c2a0a0000 r--p 00000000 08:01 1234 /opt/env/lib/libcudnn_ops_infer.so.8.9.7\n"
              "7f1c2b000000-7f1c2b001000 r-xp 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libcuda.so.535.54.03\n"
              "7f1c2c000000-7f1c2c001000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n"
              "7f1c2d000000-7f1c2d001000 rw-p 00000000 00:00 0 \n")
    names = [lib["name"] for lib in script.parse_maps(sample)]
    assert names == ["libcudnn_ops_infer.so.8.9.7", "libcuda.so.535.54.03"]


# ------------------------------------------------------------------------- why not on the GPU (issue 15)

NO_DRIVER = {"driver": {"version": None, "error": "no NVIDIA GPU found (no NVIDIA display device on the PCI bus) "
                        "and no NVIDIA driver"}, "gpus": []}
CPU_OPS = [{"name": n, "status": "pass", "device": "/job:localhost/replica:0/task:0/device:CPU:0", "on_gpu": False}
           for n in ("matmul", "conv2d", "xla")]


def _real_cuinit_line() -> str:
    # the TF 2.4 libcuda/cuInit pair of a real WSL2 log (tests/data/logs/SOURCES.md)
    from tests.conftest import DATA

    return "\n".join(x for x in (DATA / "logs" / "wsl2_libcuda_missing_tf23.log").read_text().splitlines()
                     if "cuInit" in x or "libcuda.so.1" in x)


def test_no_gpu_reason_combines_the_machine_and_the_log() -> None:
    r = runner.build_report("py", _result(_doc(gpus={"gpus": []}, tests=CPU_OPS), _real_cuinit_line()), facts=NO_DRIVER)
    assert r.mode == "cpu"
    assert r.reason is not None
    assert r.reason.startswith("no NVIDIA driver on this machine (doctor: no NVIDIA GPU found")
    assert "TensorFlow's log: " in r.reason
    assert r.reason in r.summary()
    assert all(op.reason == r.reason for op in r.ops)  # the table's reason column is never empty
    assert r.to_json()["reason"] == r.reason


@pytest.mark.parametrize(
    ("doc", "stderr", "facts", "expect"),
    [
        ({"gpus": {"gpus": []}, "tests": CPU_OPS}, "", None, "TensorFlow's log names no reason tfgpu knows"),
        ({"gpus": {"gpus": []}, "tests": CPU_OPS}, "", {"driver": {"version": "535.54.03"}, "gpus": []},
         "NVIDIA driver 535.54.03 is installed but reports no GPU"),
        ({"tests": [{"name": "matmul", "status": "fail", "error": "wrong result [[0.0, 0.0], [0.0, 0.0]], expected "
                     "[[19.0, 22.0], [43.0, 50.0]]"}, {"name": "conv2d", "status": "pass", "on_gpu": True}]}, "", None,
         "matmul failed: wrong result [[0.0, 0.0]"),
        ({"gpus": {"gpus": []}, "tests": CPU_OPS, "build_info": {"is_cuda_build": False}}, "", None,
         "this TensorFlow is not a CUDA build"),
    ],
)
def test_reason_is_never_empty(doc: dict[str, object], stderr: str, facts: dict[str, object] | None, expect: str) -> None:
    r = runner.build_report("py", _result(_doc(**doc), stderr), facts=facts)
    assert not r.gpu_ok
    assert r.reason
    assert expect in r.reason


def test_gpu_pass_has_no_reason() -> None:
    r = runner.build_report("py", _result(_doc()), facts=NO_DRIVER)
    assert r.gpu_ok
    assert r.reason is None


@pytest.mark.parametrize(("given", "expect"), [
    ({"seconds": 6.2, "compile_seconds": 4.8, "compiled_files": 2398}, (6.2, 4.8, 2398)),
    ({"seconds": "6", "compile_seconds": -1, "compiled_files": True}, (None, None, None)),
    ({"seconds": 1e300, "compile_seconds": float("nan")}, (None, None, None)),
    ("not an object", (None, None, None)),
])
def test_the_import_timing_is_read_only_when_it_is_sane(given: object, expect: tuple[object, ...]) -> None:
    """The script runs in someone else's environment: its numbers are checked before they are printed."""
    doc = {"tensorflow": {"version": "2.21.0"}, "import": given}
    out = runner.BEGIN + "\n" + json.dumps(doc) + "\n" + runner.END + "\n"
    report = runner.build_report("python", Result(("python",), 0, out, ""))
    assert (report.import_seconds, report.compile_seconds, report.compiled_files) == expect
    if expect[2]:
        assert report.compile_line() == ("compiling TensorFlow's Python files: 4.8 s (2,398 files compiled to "
                                         "bytecode by the first import; the import took 6.2 s in all)")
    else:
        assert report.compile_line() is None
