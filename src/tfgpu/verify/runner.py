"""Run the smoke script with a target environment's interpreter and turn its output into a report.

``run_smoke`` is the effect (one child process through tfgpu.core.process.capture); ``build_report`` is pure:
the child's stdout/stderr in, a :class:`SmokeReport` out, with TensorFlow's log explained.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfgpu.core.errors import InputError, UsageError, clip_words
from tfgpu.core.process import Result, capture
from tfgpu.core.record import field, record
from tfgpu.core.tfnames import ALLOW_GROWTH
from tfgpu.judge.explain import LogFinding, explain_lines, top_finding

SCHEMA = "tfgpu.smoke/1"
SCRIPT = Path(__file__).resolve().with_name("script.py")
BEGIN = "@@TFGPU-SMOKE-BEGIN@@"
END = "@@TFGPU-SMOKE-END@@"
REQUIRED_TESTS = ("matmul", "conv2d")
#: TensorFlow's log settings for the child: level 0 keeps the "Could not load dynamic library" lines
#: (INFO in TF 1.14's dso_loader.cc:53, WARNING later) that name what is missing.
CHILD_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "0",
    ALLOW_GROWTH[0]: ALLOW_GROWTH[1],
    "PYTHONIOENCODING": "utf-8",
    "PYTHONUNBUFFERED": "1",
}
LOG_TAIL_LINES = 40


@record
class OpResult:
    """One op of the smoke test: matmul (cuBLAS), conv2d forward+backward (cuDNN), xla (ptxas)."""

    name: str
    status: str  # pass | fail | skip
    device: str | None = None
    on_gpu: bool = False
    error: str | None = None
    seconds: float | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "device": self.device, "on_gpu": self.on_gpu,
                "error": self.error, "seconds": self.seconds, "reason": self.reason}


@record
class SmokeReport:
    python: str
    returncode: int | None = None
    duration: float = 0.0
    timed_out: bool = False
    error: str | None = None  # why there is no complete result (did not start, crashed, timed out)
    tf_version: str | None = None
    import_error: str | None = None
    build_info: Mapping[str, Any] = field(default_factory=dict)
    api: str | None = None
    gpus: tuple[Mapping[str, Any], ...] = ()
    gpu_method: str | None = None
    ops: tuple[OpResult, ...] = ()
    libraries: Mapping[str, Any] = field(default_factory=dict)
    benchmark: Mapping[str, Any] | None = None
    findings: tuple[LogFinding, ...] = ()
    notes: tuple[str, ...] = ()
    log_tail: tuple[str, ...] = ()
    python_version: str | None = None
    #: Why TensorFlow did not compute on the GPU (None on a GPU pass): the top finding of its log with the
    #: doctor's facts of this machine; never empty otherwise.
    reason: str | None = None
    #: `import tensorflow` in seconds, and how much of it compiled Python source to bytecode (how many files):
    #: the first import in a new environment compiles thousands (issue 32); None when the script did not say.
    import_seconds: float | None = None
    compile_seconds: float | None = None
    compiled_files: int | None = None

    def compile_line(self) -> str | None:
        """ "compiling TensorFlow's Python files: 4.8 s (2,398 files, ...)" when the import compiled any, else
        None: the part of the smoke test's time that only a new environment pays."""
        if not self.compiled_files or self.compile_seconds is None:
            return None
        return (f"compiling TensorFlow's Python files: {self.compile_seconds:.1f} s ({self.compiled_files:,} files "
                f"compiled to bytecode by the first import; the import took {self.import_seconds or 0:.1f} s in all)")

    # -- verdicts -------------------------------------------------------------------------------
    @property
    def tf_ok(self) -> bool:
        return self.error is None and self.import_error is None and self.tf_version is not None

    @property
    def gpu_ok(self) -> bool:
        """TensorFlow saw a GPU and ran every op that ran at all on it (matmul and conv2d at least)."""
        if not self.tf_ok or not self.gpus:
            return False
        ran = [op for op in self.ops if op.status != "skip"]
        names = {op.name for op in ran}
        return all(n in names for n in REQUIRED_TESTS) and all(
            op.status == "pass" and op.on_gpu for op in ran
        )

    @property
    def cpu_ok(self) -> bool:
        """No GPU is visible to TensorFlow and the ops work on the CPU."""
        if not self.tf_ok or self.gpus:
            return False
        ran = [op for op in self.ops if op.status != "skip"]
        names = {op.name for op in ran}
        return all(n in names for n in REQUIRED_TESTS) and all(op.status == "pass" for op in ran)

    @property
    def mode(self) -> str:
        if self.gpu_ok:
            return "gpu"
        if self.cpu_ok:
            return "cpu"
        return "failed"

    def passed(self, allow_cpu: bool = False) -> bool:
        return self.gpu_ok or (allow_cpu and self.cpu_ok)

    def problems(self) -> list[LogFinding]:
        return [f for f in self.findings if f.severity in ("fatal", "error", "warning")]

    def summary(self, allow_cpu: bool = False) -> str:
        """One line: the verdict, and the most important cause when it is not a GPU pass."""
        tf = f"TensorFlow {self.tf_version}" if self.tf_version else "TensorFlow"
        if self.gpu_ok:
            ops = ", ".join(op.name for op in self.ops if op.status == "pass")
            return f"GPU OK: {tf} ran {ops} on the GPU ({len(self.gpus)} GPU(s) visible)"
        why = f": {self.reason}" if self.reason else ""
        if self.error:
            return f"FAILED: {self.error}"
        if self.import_error:
            return f"FAILED: import tensorflow failed ({clip_words(self.import_error.splitlines()[0], 200)}){why}"
        if self.cpu_ok:
            label = "CPU only (allowed)" if allow_cpu else "NO GPU"
            return f"{label}: {tf} sees no GPU; the ops ran on the CPU{why}"
        failed = [op for op in self.ops if op.status == "fail"]
        if failed:
            first = failed[0]
            return f"FAILED: {first.name}: {clip_words(first.error.splitlines()[0], 200) if first.error else ''}{why}"
        return f"FAILED: {tf} did not complete the smoke test{why}"

    def to_json(self, *, allow_cpu: bool = False) -> dict[str, Any]:
        from tfgpu import __version__

        return {
            "schema": SCHEMA,
            "tfgpu_version": __version__,
            "python": {"executable": self.python, "version": self.python_version},
            "passed": self.passed(allow_cpu),
            "allow_cpu": allow_cpu,
            "mode": self.mode,
            "gpu_ok": self.gpu_ok,
            "summary": self.summary(allow_cpu),
            "reason": self.reason,
            "tensorflow": {"version": self.tf_version, "import_error": self.import_error, "api": self.api,
                           "build_info": dict(self.build_info)},
            "gpus": {"method": self.gpu_method, "devices": [dict(g) for g in self.gpus]},
            "ops": [op.to_json() for op in self.ops],
            "libraries": dict(self.libraries),
            "benchmark": dict(self.benchmark) if self.benchmark is not None else None,
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
            "process": {"returncode": self.returncode, "duration": round(self.duration, 3),
                        "timed_out": self.timed_out, "error": self.error, "log_tail": list(self.log_tail)},
            "import": {"seconds": self.import_seconds, "compile_seconds": self.compile_seconds,
                       "compiled_files": self.compiled_files},
        }


# ----------------------------------------------------------------------------------- pure parts


def parse_output(stdout: str) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """The script's JSON document, the other stdout lines, and why there is no document."""
    start = stdout.rfind(BEGIN)
    end = stdout.rfind(END)
    if start < 0 or end < start:
        return None, stdout.splitlines(), "the smoke script printed no result"
    body = stdout[start + len(BEGIN):end].strip()
    other = (stdout[:start] + stdout[end + len(END):]).splitlines()
    try:
        doc = json.loads(body)
    except ValueError as exc:
        return None, other, f"the smoke script's result is not JSON: {exc}"
    except RecursionError:
        return None, other, "the smoke script's result is nested too deeply"
    if not isinstance(doc, dict):
        return None, other, "the smoke script's result is not a JSON object"
    from tfgpu.core.safety import too_deep

    if too_deep(doc):  # the script writes a flat document; a deep one would crash whatever walks it
        return None, other, "the smoke script's result is nested too deeply"
    return doc, other, None


def _soname_major(name: str, stem: str) -> str | None:
    m = re.match(rf"lib{stem}(?:_\w+)?\.so\.(\d+)", name)
    return m.group(1) if m else None


def compare_libraries(build_info: Mapping[str, Any], libraries: Mapping[str, Any]) -> list[str]:
    """Notes where the CUDA/cuDNN libraries loaded differ from what the build says it expects."""
    notes: list[str] = []
    loaded = [lib for lib in libraries.get("loaded") or [] if isinstance(lib, Mapping)]
    for stem, key, label in (("cudart", "cuda_version", "CUDA"), ("cudnn", "cudnn_version", "cuDNN")):
        want = str(build_info.get(key) or "")
        if not want:
            continue
        want_major = want.split(".")[0]
        for lib in loaded:
            name = str(lib.get("name", ""))
            major = _soname_major(name, stem)
            if major is None:
                continue
            real = Path(str(lib.get("realpath") or name)).name
            if major != want_major:
                notes.append(f"this TensorFlow was built with {label} {want} but {real} ({label} {major}) "
                             f"is loaded from {lib.get('path')}")
            break
    return notes


def _libraries_view(build_info: Mapping[str, Any], libraries: Mapping[str, Any] | None) -> dict[str, Any]:
    libs = dict(libraries or {})
    expected = {k: build_info.get(k) for k in ("cuda_version", "cudnn_version") if build_info.get(k)}
    libs["expected"] = expected
    libs["mismatches"] = compare_libraries(build_info, libs)
    return libs


def _run_error(result: Result, doc: dict[str, Any] | None, why: str | None) -> tuple[str | None, list[str]]:
    """Why the smoke test failed as a run (no child, a timeout, no result document, a signal), or None; and the
    lines a shell would have shown for it (for the log's explanations)."""
    extra: list[str] = []
    error: str | None = None
    if result.error and result.returncode is None and not result.timed_out:
        error = result.error
    elif result.timed_out:
        error = result.error or "the smoke test timed out"
    elif doc is None:
        error = why
        if result.returncode is not None and result.returncode < 0:
            sig = -result.returncode
            try:
                signame = signal.Signals(sig).name
            except ValueError:
                signame = f"signal {sig}"
            error = f"the interpreter was killed by {signame}"
            if signame == "SIGILL":
                # What a shell prints for this death; the catalog explains it (CPU without AVX).
                extra.append("Illegal instruction (core dumped)")
        elif result.returncode not in (0, None):
            error = f"{why} (exit code {result.returncode})"
    return error, extra


def build_report(
    python: str,
    result: Result,
    *,
    facts: Mapping[str, Any] | None = None,
) -> SmokeReport:
    """Turn the finished child process into a report: parse, explain the log, compare libraries."""
    doc, other_stdout, why = parse_output(result.stdout)
    stderr_lines = result.stderr.splitlines()
    notes: list[str] = []
    error, extra = _run_error(result, doc, why)
    if result.truncated:
        notes.append("the output was longer than tfgpu keeps; only its beginning was read")
    doc = doc or {}
    build_info = doc.get("build_info") or {}
    if not isinstance(build_info, dict):
        build_info = {}
    ops = tuple(
        OpResult(name=str(t.get("name")), status=str(t.get("status")), device=t.get("device"),
                 on_gpu=bool(t.get("on_gpu")), error=t.get("error"), seconds=t.get("seconds"),
                 reason=t.get("reason"))
        for t in doc.get("tests") or [] if isinstance(t, dict)
    )
    for op in ops:
        if op.error:
            extra.extend(op.error.splitlines())
    import_error = doc.get("import_error")
    if doc.get("error"):
        notes.append(f"the smoke script stopped early: {doc['error']}")
    gpus_doc = doc.get("gpus") or {}
    libraries = _libraries_view(build_info, doc.get("libraries"))
    findings = explain_lines([*stderr_lines, *other_stdout, *extra], facts=facts)
    notes.extend(libraries["mismatches"])
    if build_info.get("is_cuda_build") is False:
        notes.append("this TensorFlow is not a CUDA build: it can never use an NVIDIA GPU "
                     "(a tensorflow-cpu wheel, or Windows native TensorFlow >= 2.11, or macOS)")
    tf = doc.get("tensorflow") or {}
    py = doc.get("python") or {}
    imported: dict[str, Any] = doc["import"] if isinstance(doc.get("import"), dict) else {}
    report = SmokeReport(
        python=python,
        returncode=result.returncode,
        duration=result.duration,
        timed_out=result.timed_out,
        error=error,
        tf_version=tf.get("version") if isinstance(tf, dict) else None,
        import_error=import_error,
        build_info=build_info,
        api=doc.get("api"),
        gpus=tuple(g for g in gpus_doc.get("gpus") or [] if isinstance(g, dict)),
        gpu_method=gpus_doc.get("method"),
        ops=ops,
        libraries=libraries,
        benchmark=doc.get("benchmark"),
        findings=tuple(findings),
        notes=tuple(notes),
        log_tail=tuple(stderr_lines[-LOG_TAIL_LINES:]),
        python_version=py.get("version") if isinstance(py, dict) else None,
        import_seconds=_number(imported.get("seconds")),
        compile_seconds=_number(imported.get("compile_seconds")),
        compiled_files=int(n) if (n := _number(imported.get("compiled_files"))) is not None else None,
    )
    return with_reason(report, facts)


def _number(value: Any) -> float | None:
    """A non-negative finite number from the script's JSON, else None (it runs in someone else's environment)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        return None
    return float(value)


def machine_reason(facts: Mapping[str, Any] | None) -> str | None:
    """What the doctor's facts say against a GPU here ("no NVIDIA driver on this machine"), or None."""
    if not facts or not isinstance(facts.get("driver"), Mapping):
        return None
    driver = facts["driver"]
    if not driver.get("version"):
        err = driver.get("error")
        return "no NVIDIA driver on this machine" + (f" (doctor: {err})" if err else "")
    gpus = facts.get("gpus")
    if isinstance(gpus, list) and not gpus:
        return f"NVIDIA driver {driver['version']} is installed but reports no GPU"
    return None


def smoke_reason(report: SmokeReport, facts: Mapping[str, Any] | None) -> str:
    """Why the smoke test did not compute on the GPU: the machine's facts, then the top finding of
    TensorFlow's own log; never empty."""
    parts = []
    machine = machine_reason(facts)
    if machine:
        parts.append(machine)
    top = top_finding(report.findings)
    if top is not None and (top.problem or top.unrecognised):
        parts.append(f"TensorFlow's log: {top.meaning} [{top.id}]")
    if not parts:
        failed = [op for op in report.ops if op.status == "fail" and op.error]
        if failed and failed[0].error:
            parts.append(f"{failed[0].name} failed: {failed[0].error.splitlines()[0][:200]}")
        elif report.import_error:
            parts.append(f"import tensorflow failed: {report.import_error.splitlines()[0][:200]}")
        elif report.build_info.get("is_cuda_build") is False:
            parts.append("this TensorFlow is not a CUDA build")
        else:
            parts.append("TensorFlow's log names no reason tfgpu knows; run tfgpu doctor for this machine")
    return "; ".join(parts)


def with_reason(report: SmokeReport, facts: Mapping[str, Any] | None) -> SmokeReport:
    """The report with its reason, and each op that did not run on the GPU carrying it."""
    from tfgpu.core.record import replace

    if report.gpu_ok:
        return report
    reason = smoke_reason(report, facts)
    ops = tuple(
        replace(op, reason=reason) if op.status != "skip" and not op.on_gpu and not op.reason else op
        for op in report.ops
    )
    return replace(report, reason=reason, ops=ops)


def child_env(env: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours (or ``base``), TensorFlow's log settings, then ``env``."""
    out = dict(os.environ if base is None else base)
    out.update(CHILD_ENV)
    if env:
        out.update(env)
    # tfgpu.build.execute.activation_env blanks these to keep the caller's Python out; an empty value must be
    # removed, not passed: Python 3.6 (and 2.7) take PYTHONHOME="" as a home and die before main
    # ("Fatal Python error: Py_Initialize: Unable to get the locale encoding"), found by `nox -s recipes`
    for key in ("PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP"):
        if out.get(key) == "":
            del out[key]
    return out


# -------------------------------------------------------------------------------------- effects


def run_smoke(
    python: str,
    *,
    timeout: float = 600,
    benchmark: bool = False,
    env: Mapping[str, str] | None = None,
    facts: Mapping[str, Any] | None = None,
) -> SmokeReport:
    """Run the smoke script with ``python`` (a child process with a timeout) and report.

    The smoke process (TensorFlow holding the GPU for up to ``timeout`` seconds) ends with tfgpu: Ctrl-C,
    SIGTERM or SIGHUP stop its process group and raise Interrupted; a SIGKILL of tfgpu reaches it through
    the runner's watchdog."""
    from tfgpu.core.errors import Interrupted
    from tfgpu.core.process import signal_guard, signal_name

    argv: list[str] = [python, str(SCRIPT)]
    if benchmark:
        argv.append("--benchmark")
    with signal_guard() as guard:
        try:
            result = capture(argv, timeout=timeout, env=child_env(env), guard=True)
        except KeyboardInterrupt:
            guard.disarm()
            msg = f"{signal_name(guard.signum)} while the smoke test ran; it was stopped"
            raise Interrupted(msg) from None
        guard.disarm()
    return build_report(python, result, facts=facts)


# ------------------------------------------------------------------------ which interpreter to use


def python_in_prefix(prefix: str | os.PathLike[str], *, windows: bool | None = None) -> Path | None:
    """The interpreter of an environment prefix (conda env or venv), or None."""
    root = Path(prefix)
    win = (os.name == "nt") if windows is None else windows
    names: Sequence[str] = (
        ("python.exe", "Scripts/python.exe") if win else ("bin/python", "bin/python3")
    )
    for name in names:
        cand = root / name
        if cand.is_file():
            return cand
    return None


def env_search_dirs(environ: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Directories that hold named environments: conda envs dirs, then tfgpu's own venv home."""
    env = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    dirs: list[Path] = []
    for item in (env.get("CONDA_ENVS_PATH") or env.get("CONDA_ENVS_DIRS") or "").split(os.pathsep):
        if item:
            dirs.append(Path(item))
    prefix = env.get("CONDA_PREFIX")
    if prefix:
        p = Path(prefix)
        dirs.append(p.parent if p.parent.name == "envs" else p / "envs")
    for var in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT"):
        if env.get(var):
            dirs.append(Path(env[var]) / "envs")
    exe = env.get("CONDA_EXE")
    if exe:  # .../miniconda3/bin/conda or ...\Scripts\conda.exe
        dirs.append(Path(exe).parent.parent / "envs")
    for base in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", ".conda"):
        dirs.append(home / base / "envs")
    dirs.append(Path("/opt/conda/envs"))
    return list(dict.fromkeys(dirs))


def tfgpu_envs_dir() -> Path:
    """tfgpu.core.paths.envs_dir: $TFGPU_HOME/envs, else the platform's data directory (as create puts them)."""
    from tfgpu.core.paths import envs_dir

    return envs_dir()


def resolve_env_python(
    name: str,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    tfgpu_envs: Path | None = None,
) -> Path:
    """The interpreter of the conda environment or tfgpu venv called ``name``.

    Looks in the conda envs directories known from the environment (no `conda` call needed), then in
    tfgpu's venv home. Raises UsageError naming the places it looked.
    """
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        msg = f"--name wants an environment name, not a path: {name!r}"
        raise UsageError(msg, hint="use --prefix PATH for a path")
    env = os.environ if environ is None else environ
    if name == "base":
        for var in ("CONDA_ROOT", "MAMBA_ROOT_PREFIX"):
            if env.get(var):
                py = python_in_prefix(env[var])
                if py:
                    return py
    dirs = [*env_search_dirs(env, home), tfgpu_envs if tfgpu_envs is not None else tfgpu_envs_dir()]
    for d in dirs:
        py = python_in_prefix(d / name)
        if py is not None:
            return py
    msg = f"no environment named {name!r} (looked in {', '.join(str(d) for d in dirs)})"
    raise UsageError(msg, hint="use --prefix PATH or --python EXE to point at it")


def resolve_python(
    *, prefix: str | None = None, name: str | None = None, python: str | None = None
) -> str:
    """Which interpreter `tfgpu smoke` runs: --prefix, --name, --python, or this one."""
    given = [x for x in (prefix, name, python) if x]
    if len(given) > 1:
        msg = "give only one of --prefix, --name and --python"
        raise UsageError(msg)
    if prefix:
        if not Path(prefix).is_dir():
            msg = f"--prefix {prefix}: no such directory"
            raise InputError(msg, hint="give the environment's root directory")
        py = python_in_prefix(prefix)
        if py is None:
            msg = f"--prefix {prefix}: no Python interpreter in it (looked for bin/python, python.exe)"
            raise InputError(msg, hint="is it a conda environment or virtualenv?")
        return str(py)
    if name:
        return str(resolve_env_python(name))
    if python:
        import re

        from tfgpu.core.process import which

        # --python means a Python everywhere: here X.Y is `pythonX.Y` on PATH, anything else a command or path
        found = which(f"python{python}" if re.fullmatch(r"\d+\.\d+", python) else python)
        if found is None:
            msg = f"--python {python}: not found"
            raise InputError(msg, hint="give the interpreter's full path")
        return found
    return sys.executable
