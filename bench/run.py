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
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# the bench's own modules beside this script (`python bench/run.py` has this folder on sys.path already)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_create import create_cpu_section, create_section
from bench_installs import baseline, installs_section, isolated
from bench_measure import (
    TIME_HEADER,
    Contestant,
    Report,
    base_env,
    contestant_rows,
    empty_dir,
    load,
    log,
    make_venv,
    md_table,
    measure,
    ratio,
    run_group,
    summarize,
    tool,
    versions,
)

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SMI_TABLE = ROOT / "tests" / "data" / "probe" / "nvidia-smi" / "table-8gpu-h100-550.90.07.txt"
FAKE_NVML_C = BENCH / "fake_nvml.c"
TF_CHECK = "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"
#: The budgets of issue 9: (what, limit). Ratios are tfgpu's median over the other's median. The doctor's ratio to
#: env-doctor was 0.3 in issue 9; issue 32 lowered it to 0.25 on both machine shapes.
BUDGET_ENV_DOCTOR = 0.25
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


def forget(env: dict[str, str]) -> Callable[[], None]:
    """Before each run: remove what the doctor kept of its last run (tfgpu.facts.lastrun's facts-*.json)."""
    folder = Path(env["TFGPU_CACHE_DIR"])

    def remove() -> None:
        for path in folder.glob("facts-*.json"):
            path.unlink()

    return remove


def doctor_section(rep: Report, *, title: str, env: dict[str, str], args: argparse.Namespace, tfgpu: list[str],
                   envdoc: str | None, envdoc_skip: str | None, homes: tuple[Path, Path] | None,
                   tf_python: str | None, tf_skip: str | None, extra: list[Contestant],
                   before: Contestant | None = None) -> None:
    """``before``: the same doctor of another revision (``--baseline``), in the same rounds."""
    log(f"{title}")
    me = Contestant("tfgpu", "tfgpu doctor --json", [[*tfgpu, "doctor", "--json"]], env, ok_codes=(0, 1))
    contestants = [me, *([before] if before is not None else [])]
    # the floor: what any Python command costs on this machine
    contestants.append(Contestant("floor", "python -c pass (the floor)", [[sys.executable, "-c", "pass"]], env))
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
    if before is not None:
        r_before = ratio(before, ed_warm)
        rep.budget(f"{title}: {before.label} / env-doctor (warm)",
                   "skipped" if r_before is None else f"{r_before:.3f}×", f"≤ {BUDGET_ENV_DOCTOR}×",
                   None if r_before is None else r_before <= BUDGET_ENV_DOCTOR)
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
    p.add_argument("--only-installs", action="store_true",
                   help="run only the two-installs scenario (prints its figures; results.md is left alone)")
    p.add_argument("--baseline", metavar="REV",
                   help="also measure tfgpu as of git revision REV (the doctor, two installs): before/after in one run")
    p.add_argument("--tf-package", default="tensorflow-cpu==2.20.*", help="TensorFlow to compare with")
    p.add_argument("--tf-release", default="2.20", help="release for plan/create (2.20)")
    p.add_argument("--cpu-release", default="2.21", help="release for create --cpu against its steps by hand (2.21)")
    p.add_argument("--only-create-cpu", action="store_true",
                   help="run only create --cpu against its steps by hand (prints its figures; results.md is left alone)")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "TFGPU_BENCH_CACHE", Path.home() / ".cache" / "tfgpu-bench")), help="venvs and work dirs")
    p.add_argument("--out", type=Path, default=BENCH / "results.md")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    previous = ""  # the last report, read before this run overwrites it (--quick keeps its create part)
    args.cache.mkdir(parents=True, exist_ok=True)
    env = isolated(base_env(), args.cache, "now")
    exe = tool("tfgpu")
    tfgpu = [exe] if exe else [sys.executable, "-m", "tfgpu"]
    rep = Report()
    if args.only_create_cpu:
        create_cpu_section(rep, args=args, env=env, tfgpu=tfgpu, cache=args.cache)
        print(md_table(["budget", "measured", "limit", "result"], rep.budgets), flush=True)
        return 0
    if args.only_installs:
        installs_section(rep, runs=args.runs, env=env, cache=args.cache, rev=args.baseline)
        print(md_table(["budget", "measured", "limit", "result"], rep.budgets), flush=True)
        return 0
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
            # the doctor with nothing of its last run to reuse (as on its first run, or after a change): it loads the
            # knowledge base and judges (the row above reuses the last run's answer, as a repeated run does)
            out = [Contestant("forgotten", "tfgpu doctor --json, its last run forgotten",
                              [[*tfgpu, "doctor", "--json"]], e, ok_codes=(0, 1), before=forget(e))]
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

        before_argv = baseline(args.cache, args.baseline) if args.baseline else None

        def before(e: dict[str, str]) -> Contestant | None:
            if before_argv is None:
                return None
            return Contestant("before", f"tfgpu doctor --json as of `{args.baseline}`",
                              [[*before_argv, "doctor", "--json"]] if isinstance(before_argv, list) else [["tfgpu"]],
                              isolated(e, args.cache, "before"), ok_codes=(0, 1),
                              skipped=before_argv if isinstance(before_argv, str) else None)

        doctor_section(rep, title="No GPU (this machine)", env=env, args=args, tfgpu=tfgpu, envdoc=envdoc,
                       envdoc_skip=ed_skip, homes=homes, tf_python=tf_python, tf_skip=tf_skip,
                       extra=available(extras(env, True)), before=before(env))
        fake_env, desc = fake_gpu_machine(args.cache, env)
        rep.add(f"Faked GPU machine: {desc}.")
        doctor_section(rep, title="Faked GPU machine (8x H100, driver 550.90.07)", env=fake_env, args=args,
                       tfgpu=tfgpu, envdoc=envdoc, envdoc_skip=ed_skip, homes=homes, tf_python=tf_python,
                       tf_skip=tf_skip, extra=available(extras(fake_env, False)), before=before(fake_env))
        installs_section(rep, runs=args.runs, env=env, cache=args.cache, rev=args.baseline)
        importtime_section(rep, tfgpu, env)
        explain_section(rep, args=args, env=env, tfgpu=tfgpu)
        if args.quick and args.out.exists() and not previous:
            previous = args.out.read_text()  # before it is overwritten: --quick keeps the create figures
        write(args.out, rep, partial=not args.quick)
    if not args.quick:
        create_cpu_section(rep, args=args, env=env, tfgpu=tfgpu, cache=args.cache)
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
    for _ in _create_sections(text):  # every create section (create --cpu and create --backend pip)
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


def _create_sections(text: str) -> list[str]:
    """The create sections of a report (each from its heading to the next section or the closing line)."""
    found = []
    start = text.find(CREATE_HEADING)
    while start >= 0:
        ends = [i for i in (text.find("\n### ", start + 1), text.find(END_LINE, start)) if i >= 0]
        end = min(ends) if ends else len(text)
        found.append(text[start:end].strip("\n"))
        start = text.find(CREATE_HEADING, end)
    return found


def carry_create(old: str, new: str) -> str:
    """Copy the create sections and their budget rows of an earlier report into a --quick one."""
    section = "\n\n".join(_create_sections(old))
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
