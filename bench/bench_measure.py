"""What every benchmark of bench/ shares: running a command and measuring it (wall time, CPU, peak RSS),
interleaved groups, statistics, Markdown tables, and the environment the commands run in (bench/README.md)."""

from __future__ import annotations

import os
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

def empty_dir(path: Path) -> Callable[[], None]:
    def clear() -> None:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
    return clear


# ---------------------------------------------------------------- reporting


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
