"""Benchmark `tfgpu fleet merge` on 10,000 node reports (issue 20: <= 10 s and <= 500 MB on 2 cores).

The reports are real doctor documents: tfgpu's doctor judging the recorded machines in tests/data/facts
(and tests/cases/ when present), each varied the way fleets vary (driver versions, a GPU fallen off the
bus, a kernel/user driver mismatch), spread over the nodes with a few large groups and a long tail. The
merge runs as a separate process; its wall time and peak RSS are measured. The figures are written into
bench/results.md between the fleet markers (kept across `bench/run.py` runs by `nox -s bench`).

    python bench/fleet.py [--nodes 10000] [--out bench/results.md]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- fleet:begin -->", "<!-- fleet:end -->"
DRIVERS = ["418.87.00", "450.80.02", "470.82.01", "525.60.13", "535.104.05", "550.54.15", "570.86.10"]


def profiles() -> list[dict[str, Any]]:
    """Recorded machines to vary: the seeds' facts, plus the casebook's where it exists."""
    out = [json.loads(p.read_text()) for p in sorted((ROOT / "tests" / "data" / "facts").glob("*.json"))]
    for p in sorted((ROOT / "tests" / "cases").rglob("*.json"))[:40]:
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        facts = doc.get("facts") if isinstance(doc, dict) else None
        if isinstance(facts, dict) and facts.get("schema", "tfgpu.facts/1") == "tfgpu.facts/1":
            out.append(facts)
    return out


def machines(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` distinct machines derived from the recorded profiles."""
    base = profiles()
    out = []
    while len(out) < count:
        f = copy.deepcopy(rng.choice(base))
        drv = f.setdefault("driver", {})
        version = rng.choice(DRIVERS)
        drv.update({"version": version, "kernel_module": version, "cuda": None})
        gpus = f.get("gpus") or []
        if len(gpus) > 1 and rng.random() < 0.2:
            f["gpus"] = gpus[:-1]  # a GPU fell off the bus
        if rng.random() < 0.1:
            drv.update({"user_library": DRIVERS[max(0, DRIVERS.index(version) - 1)], "mismatch": True})
        out.append(f)
    return out


def write_reports(folder: Path, nodes: int, distinct: int, seed: int = 20) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import report

    kb = load_kb()
    rng = random.Random(seed)
    docs = [json.dumps(report.doctor_document(f, diagnose(f, kb), data_version=kb.data_version))
            for f in machines(distinct, rng)]
    weights = [1.0 / (i + 1) for i in range(len(docs))]  # a few big groups, a long tail
    folder.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(rng.choices(docs, weights=weights, k=nodes)):
        (folder / f"node{i:05d}.json").write_text(text)


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--distinct", type=int, default=60, help="distinct machines among the nodes (60)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results.md")
    args = p.parse_args(argv)
    tfgpu = [sys.executable, "-m", "tfgpu"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfgpu-fleet-bench-") as tmp:
        for nodes in sorted({max(1, args.nodes // 10), args.nodes}):
            folder = Path(tmp) / f"n{nodes}"
            write_reports(folder, nodes, args.distinct)
            size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
            samples = [measure([*tfgpu, "fleet", "merge", str(folder), "--json"]) for _ in range(args.runs)]
            wall = sorted(s[0] for s in samples)[len(samples) // 2]
            rss = max(s[1] for s in samples)
            codes = {s[2] for s in samples}
            rows.append((nodes, size, wall, rss, codes))
            print(f"fleet merge of {nodes} reports ({size:.0f} MiB): median {wall:.2f} s, peak {rss:.0f} MiB, "
                  f"exit {sorted(codes)}", flush=True)
    n, _, wall, rss, _ = rows[-1]
    verdict = "✓ met" if wall <= 10 and rss <= 500 else "✗ missed"
    lines = [BEGIN, "## Fleet merge (issue 20)", "",
             f"Written by `bench/fleet.py` on {time.strftime('%Y-%m-%d %H:%M %Z')}: `tfgpu fleet merge DIR --json` "
             f"over real doctor reports of {args.distinct} distinct machines (recorded profiles with varied drivers, "
             f"lost GPUs, driver mismatches) spread over the nodes; median of {args.runs} runs, peak RSS of the "
             "merge process.", "",
             "| reports | on disk | wall (median) | peak RSS |", "|---|---|---|---|"]
    lines += [f"| {nodes:,} | {size:.0f} MiB | {w:.2f} s | {r:.0f} MiB |" for nodes, size, w, r, _ in rows]
    lines += ["", f"Budget: {n:,} reports in ≤ 10 s and ≤ 500 MB: {wall:.2f} s, {rss:.0f} MiB — {verdict}.", END]
    section = "\n".join(lines)
    text = args.out.read_text() if args.out.exists() else "# tfgpu benchmarks\n"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0 if verdict.endswith("met") else 1


if __name__ == "__main__":
    sys.exit(main())
