#!/usr/bin/env python3
"""Benchmarks of tfgpu against what users would run instead; writes a Markdown report (bench/README.md).

Run with `nox -s bench` (or `python bench/run.py` inside an environment where tfgpu is installed).
Every group runs its commands interleaved (A, B, C, A, B, C, ...) after one untimed warm-up each, and
reports the median and spread of the wall time and the peak resident memory of each command's process
tree (ru_maxrss from os.wait4, in MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SMI_TABLE = ROOT / "tests" / "data" / "probe" / "nvidia-smi" / "table-8gpu-h100-550.90.07.txt"
FAKE_NVML_C = BENCH / "fake_nvml.c"
TF_CHECK = "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"
#: The budgets of issue 9: (what, limit). Ratios are tfgpu's median over the other's median.
BUDGET_ENV_DOCTOR = 0.3
BUDGET_TF_SPEEDUP = 20.0
BUDGET_RSS_MB = 60.0
#: Issue 27: `tfgpu explain` reads every byte of a 1 GB log at >= 50 MB/s (the log's size over the median wall time).
EXPLAIN_LOG_MB = 1024
BUDGET_EXPLAIN_MBPS = 50.0
#: The worst case for the matcher (every line a known problem): measured and reported beside it, without a budget.
EXPLAIN_DENSE_MB = 256
REAL_LOGS = ROOT / "tests" / "data" / "logs"
#: The real Keras progress lines of tensorflow#47249 and cuDNN failure of tensorflow#40646 (SOURCES.md beside them).
PROGRESS = ("Epoch 739/800", "61/61 [==============================] - 12s 200ms/step - loss: 0.0245 - accuracy: 0.9929 "
            "- val_loss: 0.2726 - val_accuracy: 0.9485")
CUDNN_FAILURE = REAL_LOGS / "cudnn_internal_error_940mx_tf22.log"


# ---------------------------------------------------------------- measuring


@dataclass
class Sample:
    wall: float  # seconds
    maxrss_kb: int  # peak resident set of the process tree (largest single process), KiB
    rc: int
    cpu: float = 0.0  # user + system CPU seconds of the process tree


@dataclass
class Contestant:
    """One command line (or a sequence of them, timed together) measured in a group."""

    key: str
    label: str
    argvs: list[list[str]]
    env: dict[str, str] | None = None
    ok_codes: tuple[int, ...] = (0,)
    runs: int | None = None  # at most this many timed runs (None: the group's N)
    before: Callable[[], None] | None = None  # untimed preparation before every run
    timeout: float = 600.0
    samples: list[Sample] = field(default_factory=list)
    skipped: str | None = None
    note: str | None = None

    def run_once(self) -> Sample:
        if self.before is not None:
            self.before()
        total, cpu, peak, rc = 0.0, 0.0, 0, 0
        for argv in self.argvs:
            s = measure(argv, env=self.env, timeout=self.timeout)
            total += s.wall
            cpu += s.cpu
            peak = max(peak, s.maxrss_kb)
            rc = s.rc
            if rc not in self.ok_codes:
                break
        return Sample(total, peak, rc, cpu)


_LAST_OUTPUT: dict[str, str] = {}


def measure(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600.0) -> Sample:
    """Run argv once; wall time and the child's peak RSS (os.wait4: this child and the descendants it
    waited for). Output goes to a temporary file (kept in _LAST_OUTPUT for error messages)."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env)
        except OSError as exc:
            _LAST_OUTPUT[argv[0]] = str(exc)
            return Sample(0.0, 0, 127)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        _LAST_OUTPUT[argv[0]] = out.read()[-4000:].decode("utf-8", "replace")
    return Sample(wall, int(usage.ru_maxrss), proc.returncode, usage.ru_utime + usage.ru_stime)


def last_lines(argv0: str, n: int = 2) -> str:
    lines = [x.strip() for x in _LAST_OUTPUT.get(argv0, "").strip().splitlines() if x.strip()]
    return " / ".join(lines[-n:])[:300]


def run_group(contestants: list[Contestant], runs: int, *, log: Callable[[str], None]) -> None:
    """One untimed warm-up each (a failing command is marked skipped), then `runs` interleaved rounds."""
    for c in contestants:
        if c.skipped:
            continue
        log(f"  warm-up: {c.label}")
        s = c.run_once()
        if s.rc not in c.ok_codes:
            c.skipped = f"exit code {s.rc}: {last_lines(c.argvs[-1][0])}"
    for i in range(runs):
        for c in contestants:
            if c.skipped or (c.runs is not None and i >= c.runs):
                continue
            s = c.run_once()
            if s.rc not in c.ok_codes:
                c.skipped = f"run {i + 1}: exit code {s.rc}: {last_lines(c.argvs[-1][0])}"
                continue
            c.samples.append(s)
        log(f"  round {i + 1}/{runs} done")


# ---------------------------------------------------------------- statistics and tables


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    p25: float
    p75: float
    low: float
    high: float
    peak_mb: float
    cpu: float  # median CPU seconds


def summarize(samples: Sequence[Sample]) -> Stats | None:
    if not samples:
        return None
    walls = sorted(s.wall for s in samples)
    if len(walls) >= 2:
        q = statistics.quantiles(walls, n=4, method="inclusive")
        p25, p75 = q[0], q[2]
    else:
        p25 = p75 = walls[0]
    return Stats(len(walls), statistics.median(walls), p25, p75, walls[0], walls[-1],
                 max(s.maxrss_kb for s in samples) / 1024, statistics.median(s.cpu for s in samples))


def fmt_s(seconds: float) -> str:
    if seconds >= 100:
        return f"{seconds:.0f} s"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.0f} ms"


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def contestant_rows(contestants: Sequence[Contestant], ref: Contestant | None = None) -> list[list[str]]:
    ref_stats = summarize(ref.samples) if ref else None
    rows = []
    for c in contestants:
        st = summarize(c.samples)
        cmd = "`" + " && ".join(" ".join(a) for a in display(c)) + "`"
        if st is None:
            rows.append([c.label, cmd, "0", "skipped: " + (c.skipped or "no samples"), "", "", "", "", ""])
            continue
        ratio = ""
        if ref_stats is not None and c is not ref:
            cpu = f"; CPU {st.cpu / ref_stats.cpu:.2f}×" if ref_stats.cpu > 0 else ""
            ratio = f"{st.median / ref_stats.median:.2f}×{cpu}"
        rows.append([c.label + (f" ({c.note})" if c.note else ""), cmd, str(st.n), fmt_s(st.median),
                     f"{fmt_s(st.p25)} – {fmt_s(st.p75)}", f"{fmt_s(st.low)} – {fmt_s(st.high)}",
                     fmt_s(st.cpu), f"{st.peak_mb:.0f}", ratio])
    return rows


def display(c: Contestant) -> list[list[str]]:
    out = []
    for argv in c.argvs:
        parts = [Path(argv[0]).name if os.sep in argv[0] else argv[0]]
        parts += [("'" + a + "'") if (" " in a or "[" in a) else a for a in argv[1:]]
        out.append(parts)
    return out


TIME_HEADER = ["what", "command", "N", "median wall", "p25 – p75", "min – max", "median CPU", "peak RSS MiB",
               "this ÷ tfgpu (wall; CPU)"]


def ratio(a: Contestant, b: Contestant) -> float | None:
    sa, sb = summarize(a.samples), summarize(b.samples)
    if sa is None or sb is None or sb.median == 0:
        return None
    return sa.median / sb.median


# ---------------------------------------------------------------- the world


def machine_info() -> list[tuple[str, str]]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    os_name = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"') + f" (kernel {platform.release()})"
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 0
    gpu = "none (no NVIDIA driver, no GPU)" if shutil.which("nvidia-smi") is None else "nvidia-smi present"
    return [("CPU", cpu), ("cores usable", str(cores)), ("RAM", ram), ("OS", os_name),
            ("Python", f"{platform.python_version()} ({sys.executable})"), ("GPU", gpu),
            ("load average at start (1, 5, 15 min)", load())]


def load() -> str:
    """Other work on the machine slows every command alike (runs are interleaved); the load says how much."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "?"


def versions(python: str, names: Sequence[str]) -> str:
    code = (f"import importlib.metadata as m\nfor n in {list(names)!r}:\n try: print(n, m.version(n))\n"
            " except Exception: print(n, '-')")
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return ", ".join(" ".join(x.split()) for x in res.stdout.splitlines())


def tool(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def base_env() -> dict[str, str]:
    """The environment of every measured command: ours without TFGPU_* overrides, with this
    environment's bin/ first on PATH (as in a nox session: tfgpu finds uv there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFGPU_")}
    # Users' Pythons write .pyc files: with PYTHONDONTWRITEBYTECODE set (some sandboxes and CI images do),
    # every run of every contestant would compile its modules from source (TensorFlow: thousands).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("VIRTUAL_ENV", None)
    return env


def make_venv(path: Path, packages: Sequence[str], *, log: Callable[[str], None], python: str = sys.executable
              ) -> str | None:
    """A cached venv with `packages`; returns None or why it could not be made. Install time is not
    measured."""
    marker = path / ".bench-packages"
    if marker.exists() and marker.read_text() == "\n".join(packages):
        return None
    shutil.rmtree(path, ignore_errors=True)
    uv = tool("uv")
    log(f"  installing {' '.join(packages)} into {path} (not timed)")
    if uv:
        cmds = [[uv, "venv", "-q", "--python", python, str(path)],
                [uv, "pip", "install", "-q", "--python", str(path / "bin" / "python"), *packages]]
    else:
        cmds = [[python, "-m", "venv", str(path)],
                [str(path / "bin" / "python"), "-m", "pip", "install", "-q", *packages]]
    for cmd in cmds:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            tail = " / ".join((res.stderr or res.stdout).strip().splitlines()[-2:])[:300]
            return f"`{' '.join(cmd[:3])} ...` failed ({res.returncode}): {tail}"
    marker.write_text("\n".join(packages))
    return None


def env_doctor_homes(cache: Path, venv: Path) -> tuple[Path, Path]:
    """HOME directories for env-doctor. env-doctor downloads its tables from GitHub at most once a day
    (1.5 s timeout each, then its bundled copy); `warm` holds fresh cache files (copies of its bundled
    tables, as after a successful download today), so it never touches the network; `cold` is emptied
    before every run (a first run, or offline: it tries the network)."""
    warm, cold = cache / "env-doctor-home-warm", cache / "env-doctor-home-cold"
    warm.mkdir(parents=True, exist_ok=True)
    cold.mkdir(parents=True, exist_ok=True)
    data = next(venv.glob("lib/python*/site-packages/env_doctor/data"), None)
    if data is not None:
        for bundled, cached in (("compatibility.json", ".env_doctor_cache.json"),
                                ("inference_engines.json", ".env_doctor_engines_cache.json")):
            if (data / bundled).exists():
                shutil.copyfile(data / bundled, warm / cached)
    return warm, cold


def empty_dir(path: Path) -> Callable[[], None]:
    def clear() -> None:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
    return clear


def fake_gpu_machine(cache: Path, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The faked GPU machine: a fake `nvidia-smi` first on PATH that prints a recorded real table
    (8x H100, driver 550.90.07) and a fake libnvidia-ml.so.1 (bench/fake_nvml.c, same values) first on
    LD_LIBRARY_PATH, so the real pynvml bindings load it. Returns (env, description)."""
    root = cache / "fake-gpu"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SMI_TABLE, root / "nvidia-smi-table.txt")
    smi = root / "bin" / "nvidia-smi"
    # tfgpu asks `--query-gpu=... --format=csv,noheader,nounits` first; no recorded CSV of this machine
    # exists, so the query prints nothing (exit 0) and the recorded table answers (tfgpu still runs
    # both commands, as on a real machine).
    smi.write_text("#!/bin/sh\nif [ $# -eq 0 ]; then exec /bin/cat '%s'; fi\nexit 0\n" % (root / "nvidia-smi-table.txt"))
    smi.chmod(0o755)
    fake = dict(env)
    fake["PATH"] = os.pathsep.join([str(root / "bin"), env.get("PATH", "")])
    cc = shutil.which("cc") or shutil.which("gcc")
    lib = root / "lib" / "libnvidia-ml.so.1"
    desc = f"fake `nvidia-smi` on PATH printing `{SMI_TABLE.relative_to(ROOT)}`"
    if cc:
        res = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(FAKE_NVML_C)],
                             capture_output=True, text=True, check=False)
        if res.returncode == 0:
            fake["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in (str(root / "lib"), env.get("LD_LIBRARY_PATH"))
                                                      if x)
            # this machine has no /proc/driver/nvidia or /dev/nvidia*, where tfgpu would skip NVML;
            # a real GPU machine has them, so make tfgpu load (and pay for) NVML as it would there
            fake["TFGPU_PROBE_NVML"] = "1"
            return fake, desc + " + fake NVML library (`bench/fake_nvml.c`) on LD_LIBRARY_PATH (TFGPU_PROBE_NVML=1)"
    return fake, desc + " (no C compiler: no fake NVML; NVML reports 'library not found')"


# ---------------------------------------------------------------- sections


class Report:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.budgets: list[list[str]] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        print(text + "\n", flush=True)

    def budget(self, what: str, measured: str, limit: str, met: bool | None) -> None:
        self.budgets.append([what, measured, limit, "skipped" if met is None else ("✓ met" if met else "✗ missed")])


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def doctor_section(rep: Report, *, title: str, env: dict[str, str], args: argparse.Namespace, tfgpu: list[str],
                   envdoc: str | None, envdoc_skip: str | None, homes: tuple[Path, Path] | None,
                   tf_python: str | None, tf_skip: str | None, extra: list[Contestant]) -> None:
    log(f"{title}")
    me = Contestant("tfgpu", "tfgpu doctor --json", [[*tfgpu, "doctor", "--json"]], env, ok_codes=(0, 1))
    contestants = [me]
    # env-doctor's exit code is its verdict: 0 pass, 1 warning, 2 fail (env_doctor/cli.py)
    ed_warm = Contestant("env-doctor", "env-doctor check --json, warm cache", [[envdoc or "env-doctor", "check", "--json"]],
                         ok_codes=(0, 1, 2), skipped=envdoc_skip)
    ed_cold = Contestant("env-doctor-cold", "env-doctor check --json, cold cache", [[envdoc or "env-doctor", "check", "--json"]],
                         ok_codes=(0, 1, 2), runs=args.slow_runs, skipped=envdoc_skip,
                         note="tries GitHub, 1.5 s timeout, then its bundled tables")
    if homes is not None:
        ed_warm.env = {**env, "HOME": str(homes[0])}
        ed_cold.env = {**env, "HOME": str(homes[1])}
        ed_cold.before = empty_dir(homes[1])
    contestants += [ed_warm, ed_cold]
    tf = Contestant("tf", f"TensorFlow ({args.tf_package})", [[tf_python or "python", "-c", TF_CHECK]], env,
                    runs=args.slow_runs, skipped=tf_skip)
    contestants.append(tf)
    contestants += extra
    run_group(contestants, args.runs, log=log)
    rep.add(f"### {title}\n\n" + md_table(TIME_HEADER, contestant_rows(contestants, me)))
    st = summarize(me.samples)
    r_ed, r_tf = ratio(me, ed_warm), ratio(tf, me)
    rep.budget(f"{title}: tfgpu doctor / env-doctor (warm)", "skipped" if r_ed is None else f"{r_ed:.3f}×",
               f"≤ {BUDGET_ENV_DOCTOR}×", None if r_ed is None else r_ed <= BUDGET_ENV_DOCTOR)
    rep.budget(f"{title}: TensorFlow / tfgpu doctor", "skipped" if r_tf is None else f"{r_tf:.1f}× faster",
               f"≥ {BUDGET_TF_SPEEDUP:.0f}×", None if r_tf is None else r_tf >= BUDGET_TF_SPEEDUP)
    rep.budget(f"{title}: tfgpu doctor peak RSS", "skipped" if st is None else f"{st.peak_mb:.1f} MiB",
               f"≤ {BUDGET_RSS_MB:.0f} MiB", None if st is None else st.peak_mb <= BUDGET_RSS_MB)
    for c in extra:
        r = ratio(c, me)
        rep.budget(f"{title}: {c.label} / tfgpu doctor", "skipped" if r is None else f"{r:.2f}×",
                   "same order (≤ ~3×)", None if r is None else r <= 3.0)


def importtime_section(rep: Report, tfgpu_argv_module: list[str], env: dict[str, str]) -> None:
    log("import profile")
    parts = []
    for label, argv in (("`python -X importtime -c 'import tfgpu.cli.app'`", [sys.executable, "-X", "importtime", "-c",
                                                                            "import tfgpu.cli.app"]),
                        ("`python -X importtime -m tfgpu doctor --json` (the whole command)",
                         [sys.executable, "-X", "importtime", "-m", "tfgpu", "doctor", "--json"])):
        measure(argv, env=env)  # warm the page cache
        res = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        rows = parse_importtime(res.stderr)
        total = sum(r[2] for r in rows if r[3] == 0)
        top = sorted(rows, key=lambda r: -r[2])[:12]
        parts.append(f"{label}: {len(rows)} modules, {total / 1000:.0f} ms in top-level imports (one run)\n\n" + md_table(
            ["module", "self ms", "cumulative ms"],
            [["`" + "  " * r[3] + r[0] + "`", f"{r[1] / 1000:.1f}", f"{r[2] / 1000:.1f}"] for r in top]))
    rep.add("### Start-up import profile\n\n" + "\n\n".join(parts))


def parse_importtime(stderr: str) -> list[tuple[str, int, int, int]]:
    """`-X importtime` lines -> (module, self µs, cumulative µs, nesting depth)."""
    rows = []
    for line in stderr.splitlines():
        head = line.split("|")
        if not line.startswith("import time:") or len(head) != 3 or "self [us]" in line:
            continue
        raw = head[2].rstrip()
        name = raw.lstrip()
        try:
            rows.append((name, int(head[0].split(":", 1)[1]), int(head[1]), max((len(raw) - len(name) - 1) // 2, 0)))
        except ValueError:
            continue
    return rows


def _write_log(path: Path, size: int, pieces: Callable[[int], str]) -> Path:
    """Write ``pieces(0)``, ``pieces(1)``, ... to ``path`` up to ``size`` bytes (kept when it already has that size)."""
    if path.exists() and path.stat().st_size == size:
        return path
    with path.open("w", encoding="utf-8") as fh:
        left, n = size, 0
        while left > 0:
            piece = pieces(n)[:left]
            fh.write(piece)
            left -= len(piece.encode())
            n += 1
    return path


def explain_log(cache: Path, size_mb: int = EXPLAIN_LOG_MB) -> Path:
    """A training log of ``size_mb`` MB from real lines, what a long run writes: the Keras progress lines of
    tensorflow#47249 with the epoch and loss advancing, TensorFlow's harmless start-up lines
    (tests/data/logs/harmless_only_tf215.log) every 10,000 epochs, and the real cuDNN failure of tensorflow#40646 at
    the middle of the file."""
    startup = (REAL_LOGS / "harmless_only_tf215.log").read_text(encoding="utf-8").rstrip("\n") + "\n"
    failure = CUDNN_FAILURE.read_text(encoding="utf-8").rstrip("\n") + "\n"
    epoch, step = PROGRESS
    half = size_mb * 1024 * 1024 // 2
    per = len(epoch) + len(step) + 10  # bytes of one epoch, near enough to place the failure

    def pieces(n: int) -> str:
        text = epoch.replace("739", str(n + 1)) + "\n" + step.replace("0.0245", f"0.{n * 7919 % 10000:04d}") + "\n"
        if n % 10_000 == 0:
            text = startup + text
        if n == half // per:
            text += failure
        return text

    return _write_log(cache / f"explain-train-{size_mb}mb.log", size_mb * 1024 * 1024, pieces)


def explain_dense_log(cache: Path, size_mb: int = EXPLAIN_DENSE_MB) -> Path:
    """The worst case for the matcher: the real logs in tests/data/logs one after another, again and again, each time
    with time stamps of its own (so no line repeats byte for byte): nearly every line is a problem, a harmless line
    or TensorFlow noise that a pattern nearly fits."""
    import re

    blob = "".join(p.read_text(encoding="utf-8").rstrip("\n") + "\n" for p in sorted(REAL_LOGS.glob("*.log")))
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}")

    def pieces(n: int) -> str:
        when = f"2024-{1 + n // 86400 % 12:02d}-{1 + n // 3600 % 28:02d} {n // 60 % 24:02d}:{n % 60:02d}:"
        return stamp.sub(lambda m: f"{when}{m.start() % 60:02d}.{n % 1000000:06d}", blob)

    return _write_log(cache / f"explain-dense-{size_mb}mb.log", size_mb * 1024 * 1024, pieces)


def explain_section(rep: Report, *, args: argparse.Namespace, env: dict[str, str], tfgpu: list[str]) -> float | None:
    """`tfgpu explain` on a 1 GB training log and on the worst case: wall time, throughput (MB/s) and peak RSS;
    returns the training log's MB/s. The training log's summary must be the cuDNN failure in its middle."""
    log("explain throughput")
    path, dense = explain_log(args.cache), explain_dense_log(args.cache)
    mb, dense_mb = path.stat().st_size / 1048576, dense.stat().st_size / 1048576
    found = subprocess.run([*tfgpu, "explain", str(path), "--json", "--no-probe"], capture_output=True, env=env,
                           check=False)
    summary = json.loads(found.stdout or b"{}").get("summary") if found.returncode == 0 else None
    me = Contestant("explain", f"tfgpu explain, {mb:.0f} MB training log of real lines",
                    [[*tfgpu, "explain", str(path), "--json", "--no-probe"]], env, runs=args.slow_runs)
    worst = Contestant("explain-dense", f"tfgpu explain, {dense_mb:.0f} MB of real problem logs (worst case)",
                       [[*tfgpu, "explain", str(dense), "--json", "--no-probe"]], env, runs=args.slow_runs)
    run_group([me, worst], args.slow_runs, log=log)
    st, wst = summarize(me.samples), summarize(worst.samples)
    mbps = mb / st.median if st is not None and st.median > 0 else None
    dense_mbps = dense_mb / wst.median if wst is not None and wst.median > 0 else None
    rep.add("### `tfgpu explain` throughput\n\n" + md_table(TIME_HEADER, contestant_rows([me, worst])) + "\n\n"
            + ("skipped" if st is None or mbps is None else
               f"Every byte is read and every line counted. Training log: {mbps:.1f} MB/s (the log's size over the "
               f"median wall time; {mb / st.cpu if st.cpu else 0:.1f} MB/s over the median CPU time, which a loaded "
               f"machine disturbs less); its summary: `{summary}` (the real cuDNN failure at its middle). Worst case, "
               f"every line a known problem: {dense_mbps or 0:.1f} MB/s "
               f"({dense_mb / wst.cpu if wst and wst.cpu else 0:.1f} MB/s over CPU time)."))
    ok = None if mbps is None else mbps >= BUDGET_EXPLAIN_MBPS and summary == "cudnn.handle_error"
    rep.budget(f"tfgpu explain on a {mb:.0f} MB log, every byte", "skipped" if mbps is None else f"{mbps:.1f} MB/s",
               f"≥ {BUDGET_EXPLAIN_MBPS:.0f} MB/s, error at the middle found", ok)
    return mbps if ok else None


def create_section(rep: Report, *, args: argparse.Namespace, env: dict[str, str], tfgpu: list[str],
                   cache: Path) -> None:
    log("create")
    work = cache / "create"
    work.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([*tfgpu, "plan", "--tf", args.tf_release, "--backend", "pip", "--json",
                          "--prefix", str(work / "plan-probe")], capture_output=True, text=True, env=env, check=False)
    try:
        plan = json.loads(res.stdout)
    except ValueError:
        rep.add(f"### `tfgpu create`\n\nskipped: `tfgpu plan --json` failed ({res.returncode}): "
                f"{(res.stderr or res.stdout).strip()[-300:]}")
        return
    python = next((s["argv"][s["argv"].index("--python") + 1] for s in plan["steps"] if "--python" in s["argv"]),
                  None) or plan.get("python_path") or sys.executable
    reqs = plan.get("pip_requirements") or [f"tensorflow=={plan['tf']}"]
    uv = tool("uv")
    dirs = {k: work / k for k in ("tfgpu", "pip", "uv")}

    def wipe(*paths: Path) -> Callable[[], None]:
        def go() -> None:
            for p in paths:
                shutil.rmtree(p, ignore_errors=True)
        return go

    create = Contestant("create", f"tfgpu create (plan tool: {plan.get('tool')}, warm cache)",
                        [[*tfgpu, "create", "--tf", args.tf_release, "--backend", "pip", "--yes", "--no-smoke",
                          "--force", "--prefix", str(dirs["tfgpu"])]], env, before=wipe(dirs["tfgpu"]),
                        timeout=3600)
    by_hand = Contestant("pip", "by hand: python -m venv + pip install (warm pip cache)",
                         [[python, "-m", "venv", str(dirs["pip"])],
                          [str(dirs["pip"] / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", *reqs]], env, before=wipe(dirs["pip"]), timeout=3600)
    contestants = [create, by_hand]
    if uv:
        contestants.append(Contestant("uv", "by hand: uv venv + uv pip install (warm uv cache)",
                                      [[uv, "venv", "-q", "--python", python, str(dirs["uv"])],
                                       [uv, "pip", "install", "-q", "--python", str(dirs["uv"] / "bin" / "python"),
                                        *reqs]], env, before=wipe(dirs["uv"]), timeout=3600))
    # The warm-up of run_group fills the caches (its time is reported separately: it depends on what the
    # caches held before); the timed rounds are all from warm caches.
    first: dict[str, float] = {}
    for c in contestants:
        log(f"  first run (fills the cache): {c.label}")
        s = c.run_once()
        first[c.key] = s.wall
        if s.rc not in c.ok_codes:
            c.skipped = f"exit code {s.rc}: {last_lines(c.argvs[-1][0], 3)}"
    for i in range(args.create_runs):
        for c in contestants:
            if c.skipped:
                continue
            s = c.run_once()
            if s.rc not in c.ok_codes:
                c.skipped = f"run {i + 1}: exit code {s.rc}: {last_lines(c.argvs[-1][0], 3)}"
            else:
                c.samples.append(s)
        log(f"  round {i + 1}/{args.create_runs} done")
    for c in contestants:
        if c.key in first and not c.skipped:
            c.note = f"first run {fmt_s(first[c.key])}"
    # tfgpu registered the environment it made: unregister it (ignore failure: `remove` may not exist yet)
    subprocess.run([*tfgpu, "remove", "--yes", str(dirs["tfgpu"])], capture_output=True, env=env, check=False)
    wipe(*dirs.values())()
    rows = contestant_rows(contestants, create)
    rep.add(f"### `tfgpu create --tf {args.tf_release} --backend pip` vs the same install by hand\n\n"
            f"Same release, same Python (`{python}`), same requirements (`{' '.join(reqs)}`), from "
            f"`tfgpu plan --json`. `--no-smoke`: the smoke test is not timed.\n\n"
            + md_table(TIME_HEADER, rows))
    r = ratio(create, by_hand)
    st = summarize(create.samples)
    rep.budget("create (uv warm cache) vs venv + pip by hand", "skipped" if r is None else f"{1 / r:.1f}× faster",
               "report both", None if r is None else r <= 1.0)
    rep.budget("re-create from uv's warm cache", "skipped" if st is None else fmt_s(st.median),
               "seconds, not minutes (< 60 s)", None if st is None else st.median < 60)


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "15")),
                   help="timed runs of each fast command (default 15)")
    p.add_argument("--slow-runs", type=int, default=5, help="timed runs of TensorFlow and cold env-doctor (5)")
    p.add_argument("--create-runs", type=int, default=3, help="timed runs of each create variant (3)")
    p.add_argument("--quick", action="store_true", help="skip the create benchmark")
    p.add_argument("--only-create", action="store_true", help="run only the create benchmark")
    p.add_argument("--only-explain", action="store_true",
                   help="run only the explain throughput benchmark (prints its figures; results.md is left alone)")
    p.add_argument("--tf-package", default="tensorflow-cpu==2.20.*", help="TensorFlow to compare with")
    p.add_argument("--tf-release", default="2.20", help="release for plan/create (2.20)")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "TFGPU_BENCH_CACHE", Path.home() / ".cache" / "tfgpu-bench")), help="venvs and work dirs")
    p.add_argument("--out", type=Path, default=BENCH / "results.md")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    previous = ""  # the last report, read before this run overwrites it (--quick keeps its create part)
    args.cache.mkdir(parents=True, exist_ok=True)
    env = base_env()
    exe = tool("tfgpu")
    tfgpu = [exe] if exe else [sys.executable, "-m", "tfgpu"]
    rep = Report()
    if args.only_explain:
        mbps = explain_section(rep, args=args, env=env, tfgpu=tfgpu)
        print(md_table(["budget", "measured", "limit", "result"], rep.budgets), flush=True)
        return 0 if mbps is not None else 1
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    rep.add("# tfgpu benchmarks\n\n"
            f"Written by `bench/run.py` ({' '.join(sys.argv[1:]) or 'no options'}) on {started}; method: "
            "bench/README.md. Interleaved runs after one untimed warm-up; wall time; peak RSS = largest "
            "ru_maxrss in the process tree; CPU = user + system time of the tree.\n\n" + md_table(["machine", ""], machine_info()) + "\n\n"
            f"tfgpu: {versions(sys.executable, ['tfgpu', 'typer', 'rich', 'pydantic', 'nvidia-ml-py', 'uv'])}")

    if not args.only_create:
        ed_venv = args.cache / "env-doctor"
        ed_skip = make_venv(ed_venv, ["env-doctor"], log=log)
        envdoc = str(ed_venv / "bin" / "env-doctor")
        homes = env_doctor_homes(args.cache, ed_venv) if ed_skip is None else None
        py = f"{sys.version_info[0]}.{sys.version_info[1]}"
        tf_venv = args.cache / f"tf-py{py}"
        tf_skip = make_venv(tf_venv, [args.tf_package], log=log)
        tf_python = str(tf_venv / "bin" / "python")
        tail = []
        if ed_skip is None:
            tail.append(f"env-doctor: {versions(str(ed_venv / 'bin' / 'python'), ['env-doctor', 'nvidia-ml-py'])}")
        if tf_skip is None:
            tail.append(f"TensorFlow venv: {versions(tf_python, ['tensorflow-cpu', 'tensorflow'])}")
        rep.add("\n\n".join(tail) or "")

        def extras(e: dict[str, str], with_compat: bool) -> list[Contestant]:
            out = []
            if with_compat:
                out.append(Contestant("compat", "tfgpu compat --tf 2.2", [[*tfgpu, "compat", "--tf", "2.2"]], e,
                                      ok_codes=(0, 1)))
            out.append(Contestant("plan", f"tfgpu plan --tf {args.tf_release} --backend pip",
                                  [[*tfgpu, "plan", "--tf", args.tf_release, "--backend", "pip"]], e, ok_codes=(0, 1)))
            if with_compat:
                out.append(Contestant("version", "tfgpu --version", [[*tfgpu, "--version"]], e))
            return out

        def available(cs: list[Contestant]) -> list[Contestant]:
            for c in cs:  # commands not written yet are reported as skipped
                if subprocess.run([*c.argvs[0][: len(tfgpu) + 1], "--help"], capture_output=True, env=env,
                                  check=False).returncode != 0:
                    c.skipped = "command not available"
            return cs

        doctor_section(rep, title="No GPU (this machine)", env=env, args=args, tfgpu=tfgpu, envdoc=envdoc,
                       envdoc_skip=ed_skip, homes=homes, tf_python=tf_python, tf_skip=tf_skip,
                       extra=available(extras(env, True)))
        fake_env, desc = fake_gpu_machine(args.cache, env)
        rep.add(f"Faked GPU machine: {desc}.")
        doctor_section(rep, title="Faked GPU machine (8x H100, driver 550.90.07)", env=fake_env, args=args,
                       tfgpu=tfgpu, envdoc=envdoc, envdoc_skip=ed_skip, homes=homes, tf_python=tf_python,
                       tf_skip=tf_skip, extra=available(extras(fake_env, False)))
        importtime_section(rep, tfgpu, env)
        explain_section(rep, args=args, env=env, tfgpu=tfgpu)
        if args.quick and args.out.exists() and not previous:
            previous = args.out.read_text()  # before it is overwritten: --quick keeps the create figures
        write(args.out, rep, partial=not args.quick)
    if not args.quick:
        create_section(rep, args=args, env=env, tfgpu=tfgpu, cache=args.cache)
    if args.only_create and args.out.exists():
        args.out.write_text(public_paths(splice(args.out.read_text(), rep)))
        log(f"added the create figures to {args.out}")
    else:
        write(args.out, rep, partial=False)
        if CREATE_HEADING in previous:  # --quick keeps the last create figures rather than dropping them
            args.out.write_text(public_paths(carry_create(previous, args.out.read_text())))
            log(f"kept the earlier create figures in {args.out}")
    return 0


CREATE_HEADING = "### `tfgpu create"
END_LINE = "\n\nLoad average at the end"


def splice(existing: str, rep: Report) -> str:
    """Put a create-only run's section and budget rows into an earlier report, replacing old ones."""
    text = existing.replace("\n\n(create benchmark still running)", "")
    if CREATE_HEADING in text:
        start = text.index(CREATE_HEADING)
        ends = [i for i in (text.find("\n### ", start + 1), text.find(END_LINE, start)) if i >= 0]
        text = text[:start].rstrip("\n") + (text[min(ends):] if ends else "\n")
    lines = [x for x in text.split("\n") if not x.startswith(("| create ", "| re-create "))]
    text = "\n".join(lines)
    rows = md_table(["budget", "measured", "limit", "result"], rep.budgets).split("\n")[2:]
    if "\n\n## Figures" in text:
        head, tail = text.split("\n\n## Figures", 1)
        text = head + "\n" + "\n".join(rows) + "\n\n## Figures" + tail
    section = "\n\n".join(p for p in rep.parts[1:] if p)
    if END_LINE in text:
        head = text[: text.index(END_LINE)]
        text = head + "\n\n" + section + f"{END_LINE} (1, 5, 15 min): {load()}.\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    return text


def carry_create(old: str, new: str) -> str:
    """Copy the create section and its budget rows of an earlier report into a --quick one."""
    start = old.index(CREATE_HEADING)
    ends = [i for i in (old.find("\n### ", start + 1), old.find(END_LINE, start)) if i >= 0]
    section = old[start:min(ends)] if ends else old[start:]
    rows = [x for x in old.split("\n") if x.startswith(("| create ", "| re-create "))]
    if rows and "\n\n## Figures" in new:
        head, tail = new.split("\n\n## Figures", 1)
        new = head + "\n" + "\n".join(rows) + "\n\n## Figures" + tail
    if END_LINE in new:
        i = new.index(END_LINE)
        return new[:i].rstrip("\n") + "\n\n" + section.strip("\n") + new[i:]
    return new.rstrip("\n") + "\n\n" + section.strip("\n") + "\n"


def _fleet_section(out: Path) -> str:
    """The fleet figures bench/fleet.py wrote into the report (between its markers): kept across runs."""
    text = out.read_text() if out.exists() else ""
    begin, end = "<!-- fleet:begin -->", "<!-- fleet:end -->"
    if begin in text and end in text:
        return text[text.index(begin): text.index(end) + len(end)]
    return ""


def public_paths(text: str) -> str:
    """The report without this machine's paths: the checkout is ".", the home directory "~"."""
    return text.replace(str(ROOT), ".").replace(str(Path.home()), "~")


def write(out: Path, rep: Report, *, partial: bool) -> None:
    budgets = "## Budgets (issue 9)\n\n" + md_table(["budget", "measured", "limit", "result"], rep.budgets)
    text = rep.parts[0] + "\n\n" + budgets + "\n\n## Figures\n\n" + "\n\n".join(p for p in rep.parts[1:] if p)
    text += f"\n\nLoad average at the end (1, 5, 15 min): {load()}."
    if partial:
        text += "\n\n(create benchmark still running)"
    kept = _fleet_section(out)
    out.write_text(public_paths(text + "\n" + (f"\n{kept}\n" if kept else "")))
    if not partial:
        print(budgets + "\n", flush=True)
        log(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
