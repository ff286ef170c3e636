"""`tfgpu create` against the same install by hand (bench/README.md, "create"): needs PyPI and disk, so it is
not part of `--quick`."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench_measure import (
    TIME_HEADER,
    Contestant,
    Report,
    contestant_rows,
    fmt_s,
    last_lines,
    log,
    md_table,
    ratio,
    summarize,
    tool,
)


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
    for key in [k for k in ("tfgpu", "before") if k in dirs]:  # unregister what create made
        subprocess.run([*tfgpu, "remove", "--yes", str(dirs[key])], capture_output=True, env=env, check=False)
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




#: Issue 32: `create --cpu --no-smoke` costs at most this much more than running its own steps by hand.
BUDGET_CREATE_BY_HAND = 1.1


def create_cpu_section(rep: Report, *, args: argparse.Namespace, env: dict[str, str], tfgpu: list[str],
                       cache: Path) -> None:
    """`tfgpu create --tf R --cpu --no-smoke` against the very steps `tfgpu plan` shows for it, run by hand (the same
    uv, the same arguments, the same warm uv cache), interleaved: what tfgpu itself adds to an install."""
    log("create --cpu")
    work = cache / "create-cpu"
    work.mkdir(parents=True, exist_ok=True)
    dirs = {k: work / k for k in ("tfgpu", "hand")}
    res = subprocess.run([*tfgpu, "plan", "--tf", args.cpu_release, "--cpu", "--json", "--prefix", str(dirs["tfgpu"])],
                         capture_output=True, text=True, env=env, check=False)
    try:
        steps = [s["argv"] for s in json.loads(res.stdout)["steps"]]
    except (ValueError, KeyError, TypeError):
        rep.add(f"### `tfgpu create --cpu`\n\nskipped: `tfgpu plan --json` failed ({res.returncode}): "
                f"{(res.stderr or res.stdout).strip()[-300:]}")
        return
    by_hand = [[a.replace(str(dirs["tfgpu"]), str(dirs["hand"])) for a in argv] for argv in steps]

    def wipe(path: Path) -> Callable[[], None]:
        return lambda: shutil.rmtree(path, ignore_errors=True)

    create = Contestant("create-cpu", "tfgpu create --cpu --no-smoke",
                        [[*tfgpu, "create", "--tf", args.cpu_release, "--cpu", "--no-smoke", "--yes", "--force",
                          "--prefix", str(dirs["tfgpu"])]], env, before=wipe(dirs["tfgpu"]), timeout=3600)
    hand = Contestant("hand", "its steps by hand (tfgpu plan's commands)", by_hand, env, before=wipe(dirs["hand"]),
                      timeout=3600)
    contestants = [create, hand]
    if args.baseline:  # the same create as of another revision, in the same rounds (before/after)
        from bench_installs import baseline

        before = baseline(cache, args.baseline)
        dirs["before"] = work / "before"
        contestants.append(Contestant(
            "create-before", f"tfgpu create --cpu --no-smoke as of `{args.baseline}`",
            [[*before, "create", "--tf", args.cpu_release, "--cpu", "--no-smoke", "--yes", "--force", "--prefix",
              str(dirs["before"])]] if isinstance(before, list) else [["tfgpu"]], env, before=wipe(dirs["before"]),
            timeout=3600, skipped=before if isinstance(before, str) else None))
    for c in contestants:  # fills uv's cache (not timed)
        log(f"  first run (fills the cache): {c.label}")
        s = c.run_once()
        if s.rc not in c.ok_codes:
            c.skipped = f"exit code {s.rc}: {last_lines(c.argvs[-1][0], 3)}"
    for i in range(args.create_runs):
        for c in contestants:
            if not c.skipped:
                s = c.run_once()
                if s.rc in c.ok_codes:
                    c.samples.append(s)
                else:
                    c.skipped = f"run {i + 1}: exit code {s.rc}: {last_lines(c.argvs[-1][0], 3)}"
        log(f"  round {i + 1}/{args.create_runs} done")
    for key in [k for k in ("tfgpu", "before") if k in dirs]:  # unregister what create made
        subprocess.run([*tfgpu, "remove", "--yes", str(dirs[key])], capture_output=True, env=env, check=False)
    for d in dirs.values():
        wipe(d)()
    rep.add(f"### `tfgpu create --tf {args.cpu_release} --cpu --no-smoke` vs its own steps by hand (issue 32)\n\n"
            "The by-hand commands are the ones `tfgpu plan --cpu --json` lists (same uv, same arguments), run "
            "interleaved with create, each into a freshly deleted directory, from the same warm uv cache.\n\n"
            + md_table(TIME_HEADER, contestant_rows(contestants, create)))
    r = ratio(create, hand)
    rep.budget(f"create --tf {args.cpu_release} --cpu --no-smoke / its steps by hand", "skipped" if r is None else
               f"{r:.2f}×", f"≤ {BUDGET_CREATE_BY_HAND}×", None if r is None else r <= BUDGET_CREATE_BY_HAND)
