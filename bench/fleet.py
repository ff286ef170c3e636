"""Benchmark `tfgpu fleet merge` on realistic fleets: 10,000 and 100,000 node reports (issue 30: 100,000
in <= 30 s and <= 500 MB peak, 10,000 in <= 5 s, on 2 cores).

The reports are what the documented collection command writes on each node (`tfgpu doctor --json --redact`,
indented as `--json` prints it): tfgpu's doctor judging a few hundred distinct machines derived from the
recorded machines in tests/data/facts and tests/cases/ (driver versions, a GPU fallen off the bus, a
kernel/user driver mismatch), spread over the nodes with a few large groups and a long tail. Every node
carries its own identity, in the shapes the probes write it:

* each GPU its own UUID, `GPU-` + 8-4-4-4-12 hex digits as NVML's nvmlDeviceGetUUID and `nvidia-smi -q -x`
  print it (tests/data/probe/nvidia-smi/xml-1gpu-tesla-t4-515.105.01.xml: `GPU-d37e67a5-91dd-3774-a5cb-...`);
* each GPU its PCI bus id as NVML's busId gives it (`00000000:B1:00.0`, tfgpu.facts.probe.nvml), in a slot
  layout that is the same for every node of a model;
* its own probe timings (the `timings` section tfgpu.facts.probe writes, seconds per probe).

The merge runs as a separate process; its wall time and peak RSS (the process's and any child's) are
measured. The figures are written into bench/results.md between the fleet markers (kept across
`bench/run.py` runs by `nox -s bench`).

    python bench/fleet.py [--nodes 10000 100000] [--distinct 300] [--runs 3] [--tfgpu 'python -m tfgpu']
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- fleet:begin -->", "<!-- fleet:end -->"
DRIVERS = ["418.87.00", "450.80.02", "470.82.01", "525.60.13", "535.104.05", "550.54.15", "570.86.10"]
#: issue 30's budgets: reports -> (seconds, MB of peak RSS or None)
BUDGETS = {10_000: (5.0, None), 100_000: (30.0, 500.0)}
#: the probes tfgpu.facts.probe times (the keys of its `timings` section on a real run)
PROBES = ("platform", "conda", "python", "distributions", "nvml", "nvidia_smi", "pci", "kernel_module",
          "containers", "libraries", "cuda_toolkits", "cudnn")


def profiles() -> list[dict[str, Any]]:
    """Recorded machines to vary: the seeds' facts, plus the casebook's. Cases whose CUDA_VISIBLE_DEVICES
    names a GPU by UUID are left out: their UUIDs are part of what is judged, not per-node identity."""
    out = [json.loads(p.read_text()) for p in sorted((ROOT / "tests" / "data" / "facts").glob("*.json"))]
    for p in sorted((ROOT / "tests" / "cases").rglob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        facts = doc.get("facts") if isinstance(doc, dict) else None
        if not isinstance(facts, dict) or facts.get("schema", "tfgpu.facts/1") != "tfgpu.facts/1":
            continue
        cvd = str((facts.get("env") or {}).get("CUDA_VISIBLE_DEVICES") or "")
        if cvd.replace(",", "").strip().isdigit() or not cvd:
            out.append(facts)
    return out


def machines(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` distinct machines derived from the recorded profiles."""
    base = profiles()
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(out) < count:
        f = copy.deepcopy(rng.choice(base))
        if isinstance(f.get("driver"), dict) and f["driver"].get("version"):
            drv = f["driver"]
            version = rng.choice(DRIVERS)
            drv.update({"version": version, "kernel_module": version, "cuda": None})
            if rng.random() < 0.1:
                drv.update({"user_library": DRIVERS[max(0, DRIVERS.index(version) - 1)], "mismatch": True})
        gpus = f.get("gpus") or []
        if len(gpus) > 1 and rng.random() < 0.2:
            f["gpus"] = gpus[:-1]  # a GPU fell off the bus
        text = json.dumps(f, sort_keys=True)
        if text not in seen:
            seen.add(text)
            out.append(f)
    return out


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def node_facts(facts: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One node's facts: the machine's, with this node's GPU UUIDs, bus ids and probe timings."""
    f = dict(facts)
    gpus = f.get("gpus")
    if isinstance(gpus, list):
        f["gpus"] = [dict(g, uuid=_uuid(rng), pci_bus_id=f"00000000:{0x1A + 0x20 * i:02X}:00.0")
                     if isinstance(g, dict) else g for i, g in enumerate(gpus)]
    timings = {p: round(rng.uniform(0.0001, 0.05), 4) for p in PROBES}
    timings["total"] = round(sum(timings.values()), 4)
    f["timings"] = timings
    return f


def write_reports(folder: Path, nodes: int, distinct: int, seed: int = 30) -> None:
    """``nodes`` report files, <node>.json as the Slurm job writes them, indented as `--json` prints."""
    sys.path.insert(0, str(ROOT / "src"))
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import report

    kb = load_kb()
    rng = random.Random(seed)
    pieces = []
    mark = "\u0000FACTS\u0000"
    for f in machines(distinct, rng):
        doc = report.doctor_document(f, diagnose(f, kb), data_version=kb.data_version)
        doc["facts"] = mark
        head, tail = json.dumps(doc, indent=2).split(json.dumps(mark))
        pieces.append((f, head, tail))
    weights = [1.0 / (i + 1) for i in range(len(pieces))]  # a few big groups, a long tail
    folder.mkdir(parents=True, exist_ok=True)
    for i, (f, head, tail) in enumerate(rng.choices(pieces, weights=weights, k=nodes)):
        facts = json.dumps(node_facts(f, rng), indent=2).replace("\n", "\n  ")
        (folder / f"gpu{i:06d}.json").write_text(head + facts + tail + "\n")


def _tree_rss(root: int) -> int:
    """The resident memory (kB) of a process and all its descendants now (Linux /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[int(entry.name)] = next((int(line.split()[1]) for line in status.splitlines()
                                     if line.startswith("VmRSS:")), 0)
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(rss.get(pid, 0) for pid in tree)


def measure(argv: list[str]) -> tuple[float, float, float, int, float]:
    """(wall seconds, peak RSS MiB of the largest process, peak RSS MiB of the whole process tree sampled
    every 0.1 s -- the merge forks judging workers --, exit code, CPU seconds user+sys of it and its
    workers) of one run."""
    import threading

    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, peak[0] / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--distinct", type=int, default=300, help="distinct machines among the nodes (300)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tfgpu", default=f"{shlex.quote(sys.executable)} -m tfgpu",
                   help="the command to measure (default: this interpreter's tfgpu)")
    p.add_argument("--keep", type=Path, help="write the reports here and keep them (default: a temporary folder)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results.md")
    p.add_argument("--no-write", action="store_true", help="print the figures only")
    args = p.parse_args(argv)
    tfgpu = shlex.split(args.tfgpu)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfgpu-fleet-bench-") as tmp:
        base = args.keep or Path(tmp)
        for nodes in sorted(set(args.nodes)):
            folder = base / f"n{nodes}"
            if not folder.is_dir():
                write_reports(folder, nodes, args.distinct)
            size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
            load = os.getloadavg()[0]
            samples = [measure([*tfgpu, "fleet", "merge", str(folder), "--json"]) for _ in range(args.runs)]
            wall = sorted(s[0] for s in samples)[len(samples) // 2]
            cpu = sorted(s[4] for s in samples)[len(samples) // 2]
            rss = max(max(s[1], s[2]) for s in samples)  # the larger of the biggest process and the tree
            codes = {s[3] for s in samples}
            rows.append((nodes, size, wall, rss, codes, cpu, load))
            print(f"fleet merge of {nodes} reports ({size:.0f} MiB): median {wall:.2f} s (CPU {cpu:.2f} s, load "
                  f"average {load:.1f} at start), peak {rss:.0f} MiB "
                  f"(largest process {max(s[1] for s in samples):.0f} MiB, all processes "
                  f"{max(s[2] for s in samples):.0f} MiB), exit {sorted(codes)}", flush=True)
    verdicts = []
    for nodes, _, wall, rss, *_ in rows:
        if nodes in BUDGETS:
            seconds, mb = BUDGETS[nodes]
            ok = wall <= seconds and (mb is None or rss * 2**20 / 1e6 <= mb)
            limit = f"≤ {seconds:g} s" + (f" and ≤ {mb:g} MB" if mb else "")
            verdicts.append((f"{nodes:,} reports in {limit}: {wall:.2f} s, {rss:.0f} MiB — "
                             + ("✓ met" if ok else "✗ missed"), ok))
    lines = [BEGIN, "## Fleet merge (issue 30)", "",
             f"Written by `bench/fleet.py` on {time.strftime('%Y-%m-%d %H:%M %Z')}: `tfgpu fleet merge DIR --json` "
             f"over realistic doctor reports (`tfgpu doctor --json --redact` as each node writes it: its own GPU "
             f"UUIDs, bus ids and probe timings) of {args.distinct} distinct machines spread over the nodes; median "
             f"of {args.runs} runs; peak RSS of the merge with its judging workers (the larger of its biggest "
             "process and the sum over its processes sampled every 0.1 s).", "",
             f"The machine: {os.cpu_count()} CPUs, shared (its 1-minute load average when each size started is "
             "shown; the CPU column is user+sys of the merge and its workers, which contention does not inflate).", "",
             "| reports | on disk | wall (median) | CPU (median) | load average | peak RSS |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {nodes:,} | {size:.0f} MiB | {w:.2f} s | {c:.2f} s | {la:.1f} | {r:.0f} MiB |"
              for nodes, size, w, r, _, c, la in rows]
    lines += ["", *(f"Budget: {text}." for text, _ in verdicts), END]
    if not args.no_write:
        section = "\n".join(lines)
        text = args.out.read_text() if args.out.exists() else "# tfgpu benchmarks\n"
        if BEGIN in text and END in text:
            text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        args.out.write_text(text)
        print(f"wrote {args.out}")
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
