"""The GPU check (issue 27, section 5; CONTRIBUTING.md, "A real GPU"): what scripts/gpu_check.sh collected on a machine
with an NVIDIA GPU, compared fact by fact with `tfgpu doctor --json`; the timing table; the summary; and `import`, which
files the recorded outputs under tests/data/gpu/ with their origin.

    python3 scripts/gpu_check.py compare DIR        PASS/FAIL lines (exit 1 on a FAIL), DIR/compare.json
    python3 scripts/gpu_check.py timing DIR [--runs N] [--python PY]   DIR/timing.md and DIR/timing.json
    python3 scripts/gpu_check.py summary DIR        the one page a session reads first
    python3 scripts/gpu_check.py check-out OUT      what came back: at most 8 files, 16 MiB each
    python3 scripts/gpu_check.py import ARCHIVE [--dest tests/data/gpu] [--origin TEXT]

The references are read here with a few regular expressions of their own, never with tfgpu's parsers: a parser bug
must show up as a FAIL, not agree with itself. Standard library only (the GPU machine has no network and tfgpu is
not installed there); Python >= 3.8.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

# what scripts/gpu_check.sh writes into its directory (tests/unit/facts/test_gpu_check.py checks the script names them)
SMI_TABLE = "nvidia-smi.txt"
SMI_Q = "nvidia-smi-q.txt"
SMI_QX = "nvidia-smi-q-x.xml"
SMI_L = "nvidia-smi-L.txt"
SMI_VERSION = "nvidia-smi-version.txt"
SMI_CSV = "nvidia-smi-query-gpu.csv"  # QUERY, --format=csv: with its header and units
SMI_CSV_TFGPU = "nvidia-smi-query-gpu-tfgpu.csv"  # the probe's own query (tfgpu.facts.probe.parsers.SMI_FIELDS)
PROC = "proc-driver-nvidia-version.txt"
PROC_PATH = "/proc/driver/nvidia/version"
DOCTOR = "doctor.json"
LOGS = ("jax-ok", "jax-oom", "torch-ok", "torch-oom")
MANIFEST = "manifest.tsv"
QUERY = "index,name,uuid,driver_version,memory.total,compute_cap,pci.bus_id"
OUT_FILES, OUT_BYTES = 8, 16 * 1024 * 1024  # what the device machine hands back

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"
NA = {"", "N/A", "[N/A]", "Not Supported", "[Not Supported]"}


class Line(NamedTuple):
    status: str  # PASS | FAIL | SKIP | INFO
    fact: str
    detail: str

    def text(self) -> str:
        return f"{self.status:<4}  {self.fact}: {self.detail}"


# --------------------------------------------------------------------------- readers of the references (pure)


def read_query_csv(text: str) -> list[dict[str, str | None]]:
    """`nvidia-smi --query-gpu=... --format=csv` (with its header): one dict per GPU, keys without units
    (``memory.total [MiB]`` -> ``memory.total``), N/A values as None."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:  # an error message, or no GPU
        return []
    header = [re.sub(r"\s*\[[^\]]*\]\s*$", "", h.strip()) for h in lines[0].split(",")]
    if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", h) for h in header):  # "Failed to initialize NVML: ..."
        return []
    rows = []
    for row in csv.reader(io.StringIO("\n".join(lines[1:])), skipinitialspace=True):
        if len(row) == len(header):
            rows.append({h: (None if v.strip() in NA else v.strip()) for h, v in zip(header, row)})
    return rows


def _version(value: str | None) -> str | None:
    """A version as printed ("12.2", "535.161.08"); "ERR!", "N/A" and the like are no version."""
    return value if value and re.fullmatch(r"\d+(?:\.\d+)+", value) else None


def read_q_text(text: str) -> dict[str, Any]:
    """`nvidia-smi -q`: driver and CUDA versions (R610+ spell them KMD / CUDA UMD Version), the attached count
    and per GPU block its bus id, product name, UUID and total framebuffer memory (MiB)."""
    out: dict[str, Any] = {"driver": None, "cuda": None, "attached": None, "gpus": []}
    gpu: dict[str, Any] | None = None
    in_fb = False
    for line in text.splitlines():
        if m := re.match(r"^(?:Driver|KMD) Version\b[^:]*:\s*(\S+)", line):
            out["driver"] = out["driver"] or _version(m.group(1))
        elif m := re.match(r"^CUDA (?:UMD )?Version\b[^:]*:\s*(\S+)", line):
            out["cuda"] = out["cuda"] or _version(m.group(1))
        elif m := re.match(r"^Attached GPUs\s*:\s*(\d+)", line):
            out["attached"] = int(m.group(1))
        elif m := re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line):
            gpu = {"bus_id": m.group(1), "name": None, "uuid": None, "memory_mib": None}
            out["gpus"].append(gpu)
        elif gpu is not None and (m := re.match(r"^ {4}(\S[^:]*?)\s*:\s*(.*?)\s*$", line)):
            in_fb = False
            if m.group(1) == "Product Name":
                gpu["name"] = m.group(2)
            elif m.group(1) == "GPU UUID":
                gpu["uuid"] = m.group(2)
        elif gpu is not None and re.match(r"^ {4}FB Memory Usage\s*$", line):
            in_fb = True
        elif gpu is not None and in_fb and (m := re.match(r"^ {8}Total\s*:\s*(\d+) MiB", line)):
            gpu["memory_mib"], in_fb = int(m.group(1)), False
    return out


def read_table(text: str) -> dict[str, str | None]:
    """The default `nvidia-smi` table's header box: driver and CUDA version (R610+: KMD / CUDA UMD Version)."""
    head = "\n".join(text.splitlines()[:8])
    driver = re.search(r"(?:Driver|KMD) Version:\s*(\S+)", head)
    cuda = re.search(r"CUDA (?:UMD )?Version:\s*(\S+)", head)
    return {"driver": _version(driver.group(1)) if driver else None, "cuda": _version(cuda.group(1)) if cuda else None}


def read_proc(text: str) -> str | None:
    """/proc/driver/nvidia/version: the kernel module's version ("NVIDIA UNIX x86_64 Kernel Module  550.54.15 ...",
    "NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ...")."""
    m = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def _mib(value: str | None) -> int | None:
    m = re.match(r"^\s*(\d+)", value or "")
    return int(m.group(1)) if m else None


def _bus(value: object) -> tuple[int, str] | None:
    """A PCI bus id in any spelling (00000000:19:00.0, 0000:19:00.0, 19:00.0) as (domain, "bus:dev.fn")."""
    m = re.search(r"(?:([0-9A-Fa-f]+):)?([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", str(value or ""))
    return (int(m.group(1) or "0", 16), m.group(2).lower()) if m else None


# --------------------------------------------------------------------------- the comparison (pure)


class Refs(NamedTuple):
    """What nvidia-smi and /proc said (None: that output is missing), and why nvidia-smi gave nothing."""

    csv: list[dict[str, str | None]] | None = None
    q: dict[str, Any] | None = None
    table: dict[str, str | None] | None = None
    proc: str | None = None
    proc_text: str | None = None
    smi_missing: str = ""


def _agree(fact: str, mine: object, refs: list[tuple[str, object]]) -> Line:
    """One fact: the doctor's value against every reference that has one."""
    refs = [(name, value) for name, value in refs if value is not None]
    if not refs:
        return Line(SKIP, fact, f"doctor {mine!r}; no reference output has it")
    said = ", ".join(f"{name} {value!r}" for name, value in refs)
    ok = all(value == mine for _, value in refs)
    return Line(PASS if ok else FAIL, fact, f"doctor {mine!r}; {said}")


def _gpu_lines(gpus: list[dict[str, Any]], refs: Refs) -> list[Line]:
    """Names, compute capabilities, memory, UUIDs and bus ids, GPU by GPU (by index; -q blocks by position)."""
    csv_rows = refs.csv or []
    q_gpus = (refs.q or {}).get("gpus") or []
    lines = []
    for fact, key, from_csv, from_q in (
        ("GPU names", "name", lambda r: r.get("name"), lambda g: g.get("name")),
        ("compute capabilities", "compute_capability", lambda r: r.get("compute_cap"), lambda g: None),
        ("memory (MiB)", "memory_mib", lambda r: _mib(r.get("memory.total")), lambda g: g.get("memory_mib")),
        ("PCI bus ids", "pci_bus_id", lambda r: _bus(r.get("pci.bus_id")), lambda g: _bus(g.get("bus_id"))),
    ):
        mine = [(_bus(g.get(key)) if key == "pci_bus_id" else g.get(key)) for g in gpus]
        if key == "pci_bus_id" and not any(mine):
            lines.append(Line(SKIP, fact, "the doctor's facts carry no bus id"))
            continue
        theirs: list[tuple[str, object]] = []
        if csv_rows:
            theirs.append(("--query-gpu", [from_csv(r) for r in csv_rows]))
        if q_gpus and any(from_q(g) is not None for g in q_gpus):
            theirs.append(("-q", [from_q(g) for g in q_gpus]))
        lines.append(_agree(fact, mine, theirs))
    uuids = [str(g["uuid"]) for g in gpus if g.get("uuid")]
    ref_uuids = ([str(r["uuid"]) for r in csv_rows if r.get("uuid")] if csv_rows
                 else [str(g["uuid"]) for g in q_gpus if g.get("uuid")] if q_gpus else None)
    lines.append(_agree("UUID count", len(uuids), [("nvidia-smi", None if ref_uuids is None else len(ref_uuids))]))
    lines.append(_agree("UUIDs", sorted(uuids), [("nvidia-smi", None if ref_uuids is None else sorted(ref_uuids))]))
    return lines


def compare(doctor: dict[str, Any] | None, refs: Refs) -> list[Line]:
    """Every fact of the doctor's document against nvidia-smi and /proc/driver/nvidia/version."""
    facts = (doctor or {}).get("facts")
    if not isinstance(facts, dict):
        return [Line(FAIL, "doctor", "`tfgpu doctor --json` gave no document with facts")]
    driver = facts.get("driver") or {}
    gpus = sorted((g for g in facts.get("gpus") or [] if isinstance(g, dict)), key=lambda g: g.get("index") or 0)
    have_smi = bool(refs.csv or refs.q or (refs.table or {}).get("driver"))
    if not have_smi and refs.proc is None:
        why = refs.smi_missing or "nvidia-smi printed nothing usable"
        lines = [Line(INFO, "no GPU here", f"{why}; no {PROC_PATH}; doctor: {driver.get('error') or 'no error'}")]
        lines.append(Line(PASS if not gpus else FAIL, "doctor agrees",
                          f"the doctor lists {len(gpus)} GPU(s) and driver {driver.get('version')!r}"))
        return lines
    csv_rows, q, table = refs.csv or [], refs.q or {}, refs.table or {}
    csv_drivers = sorted({str(r["driver_version"]) for r in csv_rows if r.get("driver_version")})
    n_ref = len(csv_rows) if csv_rows else (q.get("attached") or len(q.get("gpus") or []) or None)
    lines = [_agree("GPU count", len(gpus), [("nvidia-smi", n_ref)]),
             _agree("driver", driver.get("version"), [
                 ("--query-gpu", csv_drivers[0] if len(csv_drivers) == 1 else (csv_drivers or None)),
                 ("-q", q.get("driver")), ("table", table.get("driver"))]),
             _agree("kernel module", driver.get("kernel_module"), [(PROC_PATH, refs.proc)])]
    user = csv_drivers[0] if len(csv_drivers) == 1 else q.get("driver") or table.get("driver")
    if refs.proc and user:
        lines.append(_agree("driver mismatch flag", bool(driver.get("mismatch")),
                            [(f"{PROC_PATH} {refs.proc} vs nvidia-smi {user}", refs.proc != user)]))
    lines.append(_agree("CUDA version (driver)", driver.get("cuda"), [("-q", q.get("cuda")), ("table", table.get("cuda"))]))
    lines += _gpu_lines(gpus, refs)
    overrides = (doctor or {}).get("overrides")
    if overrides:  # TFGPU_* in the environment: those facts were not probed
        lines.insert(0, Line(INFO, "overrides", f"not probed: {', '.join(map(str, overrides))}"))
    return lines


# --------------------------------------------------------------------------- the collected directory


def read_manifest(folder: Path) -> dict[str, dict[str, str]]:
    """manifest.tsv: step -> {rc, seconds, file, command} (rc "absent"/"skipped" when the step did not run)."""
    out: dict[str, dict[str, str]] = {}
    path = folder / MANIFEST
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 5:
                out[parts[0]] = {"rc": parts[1], "seconds": parts[2], "file": parts[3], "command": parts[4]}
    return out


def _text(folder: Path, name: str, steps: dict[str, dict[str, str]], step: str) -> str | None:
    """A step's output when the step succeeded (exit 0) and printed something."""
    if steps.get(step, {}).get("rc") != "0":
        return None
    path = folder / name
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    return text if text.strip() else None


def refs_from(folder: Path) -> Refs:
    steps = read_manifest(folder)
    csv_text, q_text = _text(folder, SMI_CSV, steps, "smi-query"), _text(folder, SMI_Q, steps, "smi-q")
    table_text, proc_text = _text(folder, SMI_TABLE, steps, "smi-table"), _text(folder, PROC, steps, "proc-version")
    missing = ""
    smi = steps.get("smi-table", {})
    if smi.get("rc") == "absent":
        missing = "nvidia-smi not found"
    elif smi and smi.get("rc") != "0":
        err = folder / "stderr" / "smi-table.txt"
        first = (err.read_text(errors="replace").strip().splitlines() or [""])[0] if err.is_file() else ""
        out = (folder / SMI_TABLE).read_text(errors="replace").strip() if (folder / SMI_TABLE).is_file() else ""
        missing = f"nvidia-smi exited {smi.get('rc')}: {(first or out)[:200]}"
    return Refs(csv=read_query_csv(csv_text) if csv_text else None, q=read_q_text(q_text) if q_text else None,
                table=read_table(table_text) if table_text else None,
                proc=read_proc(proc_text) if proc_text else None, proc_text=proc_text, smi_missing=missing)


def load_doctor(folder: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((folder / DOCTOR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def compare_dir(folder: Path) -> list[Line]:
    return compare(load_doctor(folder), refs_from(folder))


def verdict_of(lines: list[Line]) -> str:
    fails = [ln for ln in lines if ln.status == FAIL]
    if fails:
        return f"FAIL ({len(fails)} of {sum(ln.status in (PASS, FAIL) for ln in lines)} facts)"
    if any(ln.fact == "no GPU here" for ln in lines):
        return "no GPU here"
    return f"PASS ({sum(ln.status == PASS for ln in lines)} facts)"


# --------------------------------------------------------------------------- timing (effects: runs the commands)


class Timing(NamedTuple):
    name: str
    argv: list[str]
    seconds: list[float]
    failures: list[str]


def _run_once(argv: list[str], env: dict[str, str], timeout: float) -> tuple[float, str]:
    """Wall seconds of one run, and "" or why it failed (its output is discarded, as a pipe would take it)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, f"timed out after {timeout:g} s"
    except OSError as exc:
        return time.perf_counter() - start, f"cannot run: {exc}"
    took = time.perf_counter() - start
    # the doctor exits 1 when a target is not ready: a verdict, not a failure of the command
    if proc.returncode not in (0, 1):
        return took, f"exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[-200:]}"
    return took, ""


def time_commands(commands: list[tuple[str, list[str]]], runs: int, env: dict[str, str],
                  timeout: float = 60.0, deadline: float | None = None) -> list[Timing]:
    """Each command once untimed (warm-up), then ``runs`` rounds that take them in turn (interleaved, so that a
    slow moment of the machine falls on all of them alike); stops early at ``deadline`` (time.monotonic). A command
    whose warm-up timed out is not run again (a hung nvidia-smi must not take the budget)."""
    results = [Timing(name, argv, [], []) for name, argv in commands]
    for t in results:
        _, failed = _run_once(t.argv, env, timeout)
        if failed.startswith("timed out"):
            t.failures.append(f"warm-up {failed}")
    live = [t for t in results if not t.failures]
    for _ in range(runs):
        if deadline is not None and time.monotonic() > deadline:
            break
        for t in live:
            took, failed = _run_once(t.argv, env, timeout)
            if failed:
                t.failures.append(failed)
            else:
                t.seconds.append(took)
    return results


def timing_table(results: list[Timing], cold: tuple[float, str] | None) -> str:
    """Markdown: per command its runs, median, min and max in ms, and the median over `python3 -c pass`."""
    base = next((statistics.median(t.seconds) for t in results if t.name == "python3 -c pass" and t.seconds), None)
    out = ["| command | runs | median ms | min ms | max ms | median - python3 -c pass |", "|---|---|---|---|---|---|"]
    for t in results:
        if not t.seconds:
            out.append(f"| `{t.name}` | 0 | - | - | - | {'; '.join(t.failures[:1]) or 'not run'} |")
            continue
        med = statistics.median(t.seconds)
        over = f"{(med - base) * 1000:+.1f}" if base is not None else "-"
        fails = f" ({len(t.failures)} failed: {t.failures[0]})" if t.failures else ""
        out.append(f"| `{t.name}` | {len(t.seconds)} | {med * 1000:.1f} | {min(t.seconds) * 1000:.1f} | "
                   f"{max(t.seconds) * 1000:.1f} | {over}{fails} |")
    if cold is not None:
        out.append("")
        out.append(f"`tfgpu doctor --json` with an empty knowledge-base cache (one run, before the others): "
                   f"{cold[0] * 1000:.1f} ms" + (f" ({cold[1]})" if cold[1] else ""))
    return "\n".join(out) + "\n"


def run_timing(folder: Path, runs: int, python: str, budget: float) -> int:
    deadline = time.monotonic() + budget
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # every run would recompile every module (CONTRIBUTING, Performance)
    with tempfile.TemporaryDirectory() as empty:
        cold = _run_once([python, "-m", "tfgpu", "doctor", "--json"], {**env, "TFGPU_CACHE_DIR": empty}, 60.0)
    commands = [("python3 -c pass", [python, "-c", "pass"]),
                ("python3 -m tfgpu doctor --json", [python, "-m", "tfgpu", "doctor", "--json"]),
                ("python3 -m tfgpu doctor", [python, "-m", "tfgpu", "doctor"])]
    smi = _which("nvidia-smi")
    if smi and read_manifest(folder).get("smi-query", {}).get("rc") == "0":  # only an nvidia-smi that answered
        commands.append((f"nvidia-smi --query-gpu={QUERY} --format=csv", [smi, f"--query-gpu={QUERY}", "--format=csv"]))
    results = time_commands(commands, runs, env, timeout=30.0, deadline=deadline)
    (folder / "timing.md").write_text(timing_table(results, cold), encoding="utf-8")
    doc = {"python": python, "runs": runs, "cold_doctor_s": cold[0], "cold_failure": cold[1],
           "commands": [t._asdict() for t in results]}
    (folder / "timing.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


def _which(name: str) -> str | None:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = Path(d or ".") / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


# --------------------------------------------------------------------------- the summary


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def explain_lines(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    """Per log: how the op ended and what `tfgpu explain --json` made of it (its summary, then its findings)."""
    out = []
    for log in LOGS:
        op = steps.get(log, {})
        out.append(f"{log}.log: exit {op.get('rc', '?')} after {op.get('seconds', '?')} s")
        try:
            doc = json.loads((folder / f"explain-{log}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.append(f"  explain: no document (step exit {steps.get('explain-' + log, {}).get('rc', '?')})")
            continue
        findings = doc.get("findings") or []
        out.append(f"  explain summary: {doc.get('summary')}; {len(findings)} finding(s)")
        for f in findings[:4]:
            out.append(f"  - {f.get('id')} (line {f.get('line')}): {_clip(f.get('text') or '', 140)}")
    return out


def summary(folder: Path) -> str:
    steps = read_manifest(folder)
    lines = compare_dir(folder)
    env = (folder / "env.txt").read_text(errors="replace").strip() if (folder / "env.txt").is_file() else "(no env.txt)"
    timing = (folder / "timing.md").read_text(errors="replace").strip() if (folder / "timing.md").is_file() else "(not run)"
    out = [f"tfgpu GPU check: {verdict_of(lines)}", "", env, "",
           "== the doctor against nvidia-smi and /proc/driver/nvidia/version ==", *(ln.text() for ln in lines), "",
           "== tfgpu explain on the JAX and PyTorch logs ==", *explain_lines(folder, steps), "",
           "== timing (wall, interleaved runs) ==", timing, "", "== steps (exit 124/137: cut at its time limit) ==",
           *(f"{name}: exit {s['rc']}, {s['seconds']} s: {s['command']}" for name, s in steps.items())]
    return "\n".join(out) + "\n"


def check_out(out: Path) -> list[str]:
    """What is wrong with an output directory for the device machine (empty: nothing)."""
    files = [p for p in sorted(out.rglob("*")) if p.is_file()]
    problems = [f"{len(files)} files (at most {OUT_FILES})"] if len(files) > OUT_FILES else []
    problems += [f"{p.name}: {p.stat().st_size} bytes (at most {OUT_BYTES})" for p in files if p.stat().st_size > OUT_BYTES]
    if not (out / "summary.txt").is_file():
        problems.append("no summary.txt")
    return problems


# --------------------------------------------------------------------------- import: the outputs as fixtures

UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
SERIAL = [re.compile(r"(Serial Number\s*:\s*)(\d+)"), re.compile(r"(<serial>)(\d+)(?=</serial>)")]
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$")


def read_archive(archive: Path) -> dict[str, bytes]:
    """The regular files of gpu-check.tar.gz at its top level (gpu-check/NAME): nothing else is taken, nothing
    is written where the archive says."""
    files: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if not member.isfile() or len(parts) != 2 or parts[0] != "gpu-check" or not NAME.match(parts[1]):
                continue
            if member.size > OUT_BYTES:
                raise SystemExit(f"{member.name}: {member.size} bytes, more than {OUT_BYTES}")
            f = tar.extractfile(member)
            if f is not None:
                files[parts[1]] = f.read()
    if DOCTOR not in files or MANIFEST not in files:
        raise SystemExit(f"{archive}: not a gpu-check archive (no {DOCTOR} or {MANIFEST})")
    return files


def mask(files: dict[str, bytes]) -> tuple[dict[str, bytes], int]:
    """UUIDs replaced by format-preserving zeros numbered in order of appearance (distinct ones stay distinct, so
    the comparison still holds), serial numbers by zeros. Returns the files and how many UUIDs were masked."""
    seen: dict[str, str] = {}

    def uuid(m: re.Match[str]) -> str:
        key = m.group(0).lower()
        if key not in seen:
            n = len(seen)
            seen[key] = f"{m.group(1)}-00000000-0000-0000-0000-{n:012d}"
        return seen[key]

    out = {}
    for name in sorted(files, key=lambda n: (n != SMI_CSV, n)):  # the CSV's order numbers the GPUs
        text = files[name].decode("utf-8", errors="surrogateescape")
        text = UUID.sub(uuid, text)
        for pattern in SERIAL:
            text = pattern.sub(lambda m: m.group(1) + "0" * len(m.group(2)), text)
        out[name] = text.encode("utf-8", errors="surrogateescape")
    return out, len(seen)


def machine_slug(doctor: dict[str, Any]) -> str:
    facts = doctor.get("facts") or {}
    gpus = facts.get("gpus") or []
    name = str(gpus[0].get("name") or "gpu") if gpus else "no-gpu"
    driver = str((facts.get("driver") or {}).get("version") or "no-driver")
    return re.sub(r"[^a-z0-9.]+", "-", f"{len(gpus)}x-{name}-{driver}".lower()).strip("-")


def import_archive(archive: Path, dest: Path, origin: str) -> Path:
    """Write the archive's files to DEST/<gpus>x-<name>-<driver>/ (masked) and their rows to DEST/SOURCES.md."""
    files, n_uuids = mask(read_archive(archive))
    doctor = json.loads(files[DOCTOR])
    folder = dest / machine_slug(doctor)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    steps = read_manifest(folder)
    by_file = {s["file"]: (step, s) for step, s in steps.items()}
    rows = [f"\n## {folder.name}\n", f"Recorded by `bash scripts/gpu_check.sh` ({origin}). "
            f"Edits: {n_uuids} UUID(s) masked (format-preserving zeros, numbered in order), serial numbers zeroed; "
            f"logs longer than 4 MiB cut (see manifest.tsv). Nothing else changed.\n",
            "| file | step | exit | command |", "|---|---|---|---|"]
    for name in sorted(files):
        step, s = by_file.get(name, ("", {}))
        command = s.get("command", "").replace("|", "\\|")
        rows.append(f"| {name} | {step or '(made by the script)'} | {s.get('rc', '')} | `{command}` |" if command
                    else f"| {name} | {step or '(made by the script)'} | {s.get('rc', '')} | |")
    sources = dest / "SOURCES.md"
    if not sources.is_file():
        sources.write_text("# Sources of tests/data/gpu/\n\nOne folder per run of scripts/gpu_check.sh on a machine with "
                           "an NVIDIA GPU (CONTRIBUTING.md, \"A real GPU\"); tests/unit/facts/test_gpu_check.py reads "
                           "every folder.\n", encoding="utf-8")
    with sources.open("a", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    return folder


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("compare", "summary"):
        sub.add_parser(name).add_argument("dir", type=Path)
    t = sub.add_parser("timing")
    t.add_argument("dir", type=Path)
    t.add_argument("--runs", type=int, default=9)
    t.add_argument("--python", default="python3")
    t.add_argument("--budget", type=float, default=120.0, help="seconds for all the runs")
    sub.add_parser("check-out").add_argument("out", type=Path)
    i = sub.add_parser("import")
    i.add_argument("archive", type=Path)
    i.add_argument("--dest", type=Path, default=Path(__file__).resolve().parent.parent / "tests" / "data" / "gpu")
    i.add_argument("--origin", required=True, help="where and when it ran, e.g. 'the lent H100, 2026-12-01'")
    args = ap.parse_args(argv)
    if args.cmd == "compare":
        lines = compare_dir(args.dir)
        (args.dir / "compare.json").write_text(json.dumps([ln._asdict() for ln in lines], indent=1) + "\n")
        print("\n".join(ln.text() for ln in lines))
        print(verdict_of(lines))
        return 1 if any(ln.status == FAIL for ln in lines) else 0
    if args.cmd == "summary":
        sys.stdout.write(summary(args.dir))
        return 0
    if args.cmd == "timing":
        return run_timing(args.dir, args.runs, args.python, args.budget)
    if args.cmd == "check-out":
        problems = check_out(args.out)
        print("\n".join(problems) or f"{args.out}: fine (at most {OUT_FILES} files of {OUT_BYTES} bytes)")
        return 1 if problems else 0
    folder = import_archive(args.archive, args.dest, args.origin)
    print(f"wrote {folder} and its rows in {args.dest / 'SOURCES.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
