#!/usr/bin/env python3
"""Regenerate the conda-forge rows of compat/conda.toml from conda-forge/tensorflow-feedstock's main history.

Upstream: https://github.com/conda-forge/tensorflow-feedstock
  recipe/meta.yaml                   {% set version = "X" %}, the build number
  .ci_support/linux_64_*.yaml        cuda_compiler_version, cudnn, python of each CI variant

Only the FIRST-PARENT history of the default branch counts: each commit there is a state of the
feedstock that conda-forge's CI (or a maintainer's upload under CFEP-03) built from. Versions that
only ever lived on pull-request branches (the branch of PR #325 went 2.12.0 -> 2.12.1 before it was
merged) are not rows: main never pointed at them.

One row per (TensorFlow version, CUDA variant): the Pythons are every Python any main commit of that
version built for that variant, `commit` is the first main commit that had it, `builds` the recipe
build numbers (meta.yaml `number` / `{% set build = N %}`, before the per-variant offsets) it had.
A variant that a later main commit of the same version dropped again says so: `dropped` is that
commit, and the note names the variant that replaced it.

Usage:
  # a bare git directory (the mirror the search tool's fetch brings) or a checkout
  python3 scripts/update_conda_forge.py --git-dir /path/to/tensorflow-feedstock.git
  # print a unified diff and exit 1 when the file is out of date (the default, also --check)
  # write the regenerated rows (default: only print a unified diff)
  python3 scripts/update_conda_forge.py --git-dir ... --force
  # with no --git-dir, $TFGPU_CF_FEEDSTOCK names one; else the script says so and skips (exit 0)

Standard library only; output is deterministic (rows by version, then CUDA, ascending).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONDA_TOML = ROOT / "compat" / "conda.toml"
REF = "main"
SOURCE = "cf-tf-feedstock"
ROW_PREFIX = '  { channel = "conda-forge", name = "tensorflow",'


def git(git_dir: str, *args: str) -> str:
    out = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return ""
    return out.stdout


def resolve_git_dir(path: str) -> str:
    p = Path(path)
    return str(p / ".git") if (p / ".git").exists() else str(p)


# --------------------------------------------------------------------------- reading one commit


def read_recipe(text: str) -> tuple[str | None, int | None]:
    """meta.yaml -> (version, build number as written)."""
    version = re.search(r'{%\s*set\s+version\s*=\s*"([^"]+)"\s*%}', text)
    build = re.search(r"{%\s*set\s+build\s*=\s*(\d+)\s*%}", text) or re.search(r"^\s*number:\s*(\d+)\s*$", text, re.M)
    return (version.group(1) if version else None, int(build.group(1)) if build else None)


def read_ci_yaml(text: str) -> dict[str, list[str]]:
    """The top-level lists of a conda-smithy .ci_support file (`key:` then `- value` lines); zip_keys
    becomes one entry per group, its members joined by ","."""
    out: dict[str, list[str]] = {}
    key: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith((" ", "-")):
            key = line.split(":", 1)[0].strip()
            out[key] = []
            continue
        if key is None:
            continue
        if line.startswith("- - "):
            out[key].append(line[4:].strip().strip("'\""))
        elif line.startswith("  - ") and key == "zip_keys" and out[key]:
            out[key][-1] += "," + line[4:].strip().strip("'\"")
        elif line.startswith("- "):
            out[key].append(line[2:].strip().strip("'\""))
    return out


def python_of(value: str) -> str | None:
    """"3.10.* *_cpython" -> "3.10"; PyPy variants -> None."""
    if "pypy" in value:
        return None
    m = re.match(r"(\d+\.\d+)", value)
    return m.group(1) if m else None


def variants(ci: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """(cuda, cudnn, python) combinations one CI file builds; CPU variants are left out."""
    cudas = ci.get("cuda_compiler_version", [])
    pys = ci.get("python", [])
    cudnns = ci.get("cudnn", [])
    zipped = any("cuda_compiler_version" in g.split(",") and "python" in g.split(",") for g in ci.get("zip_keys", []))
    out = []
    pairs = list(zip(cudas, pys)) if zipped else [(c, p) for c in cudas for p in pys]
    for i, (cuda, py) in enumerate(pairs):
        if cuda in ("None", "", "none"):
            continue
        pyv = python_of(py)
        if pyv is None:
            continue
        cudnn = cudnns[min(i, len(cudnns) - 1)] if cudnns and cudnns[0] != "undefined" else ""
        out.append((cuda, cudnn, pyv))
    return out


@dataclass
class Snapshot:
    commit: str
    date: str
    version: str
    build: int | None
    variants: set[tuple[str, str, str]]


def snapshots(git_dir: str, ref: str = REF) -> list[Snapshot]:
    """Every first-parent commit of ``ref`` with a readable recipe, oldest first."""
    log = git(git_dir, "log", "--first-parent", "--reverse", "--format=%H %ad", "--date=short", ref)
    out = []
    for line in log.splitlines():
        commit, date = line.split()
        meta = git(git_dir, "show", f"{commit}:recipe/meta.yaml")
        version, build = read_recipe(meta)
        if version is None:
            continue
        names = git(git_dir, "ls-tree", "--name-only", commit, ".ci_support/").split()
        found: set[tuple[str, str, str]] = set()
        for name in names:
            base = name.rsplit("/", 1)[-1]
            if base.startswith("linux_64") and base.endswith(".yaml"):
                found |= set(variants(read_ci_yaml(git(git_dir, "show", f"{commit}:{name}"))))
        out.append(Snapshot(commit, date, version, build, found))
    return out


# --------------------------------------------------------------------------- rows


@dataclass
class Row:
    version: str
    cuda: str
    cudnn: str = ""
    python: set[str] = field(default_factory=set)
    builds: set[int] = field(default_factory=set)
    commit: str = ""
    date: str = ""
    dropped: str = ""  # the main commit that dropped the variant for good (for this version)
    #: (what, commit, date, other CUDA variants it was swapped with) in history order
    events: list[tuple[str, str, str, list[str]]] = field(default_factory=list)
    cudnn_seen: list[str] = field(default_factory=list)


def vkey(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _major(cudnn: str) -> str:
    return cudnn.split(".", 1)[0]


def build_rows(snaps: list[Snapshot]) -> list[Row]:
    rows: dict[tuple[str, str], Row] = {}
    previous: Snapshot | None = None
    for snap in snaps:
        now = {c for c, _, _ in snap.variants}
        before = {c for c, _, _ in previous.variants} if previous is not None and previous.version == snap.version \
            else set()
        for cuda, cudnn, py in sorted(snap.variants):
            row = rows.get((snap.version, cuda))
            if row is None:
                row = rows[(snap.version, cuda)] = Row(snap.version, cuda, commit=snap.commit, date=snap.date)
            elif cuda not in before and row.dropped:  # the variant came back
                row.events.append(("back", snap.commit, snap.date, sorted(before - now, key=vkey)))
                row.dropped = ""
            if cudnn and _major(cudnn) not in row.cudnn_seen:
                row.cudnn_seen.append(_major(cudnn))
            row.cudnn = _major(cudnn) if cudnn else row.cudnn
            row.python.add(py)
            if snap.build is not None:
                row.builds.add(snap.build)
        for cuda in before - now:
            row = rows[(snap.version, cuda)]
            row.dropped = snap.commit
            row.events.append(("dropped", snap.commit, snap.date, sorted(now - before, key=vkey)))
        previous = snap
    return sorted(rows.values(), key=lambda r: (vkey(r.version), vkey(r.cuda)))


def render_row(row: Row) -> str:
    cuda_tag = row.cuda.replace(".", "")
    pythons = ",".join(sorted(row.python, key=vkey))
    builds = ",".join(str(b) for b in sorted(row.builds))
    parts = [f"first on main at {row.commit[:7]} ({row.date})"]
    for what, commit, date, others in row.events:
        if what == "dropped":
            instead = f" for CUDA {' / '.join(others)}" if others else ""
            parts.append(f"dropped at {commit[:7]} ({date}){instead}")
        else:
            instead = f", replacing CUDA {' / '.join(others)}" if others else ""
            parts.append(f"back at {commit[:7]} ({date}){instead}")
    if row.dropped:
        parts.append("the builds made before stay on the channel; newer builds of this version use another CUDA")
    if len(row.cudnn_seen) > 1:
        parts.append(f"cuDNN {' then '.join(row.cudnn_seen)} across rebuilds")
    fields = [
        ("channel", "conda-forge"), ("name", "tensorflow"), ("version", row.version), ("os", "linux"),
        ("build", f"cuda{cuda_tag}*"), ("python", pythons), ("cuda", row.cuda), ("cudnn", row.cudnn),
        ("source", SOURCE), ("confidence", "ci-config"), ("commit", row.commit), ("builds", builds),
    ]
    if row.dropped:
        fields.append(("dropped", row.dropped))
    fields.append(("note", "; ".join(parts)))
    return render_fields(dict(fields))


#: The order of a conda-forge row's fields (canonical form: tests re-render the loaded rows with this).
FIELD_ORDER = ("channel", "name", "version", "os", "build", "python", "cuda", "cudnn", "source", "confidence",
               "commit", "builds", "dropped", "note")


def render_fields(row: dict[str, str]) -> str:
    """One row as its single TOML line, fields in FIELD_ORDER (every value a string)."""
    return "  { " + ", ".join(f'{k} = "{row[k]}"' for k in FIELD_ORDER if k in row) + " },"


def regenerate(text: str, rows: list[Row]) -> str:
    """Replace the conda-forge rows of ``text`` (kept in place: where the first one was)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    inserted = False
    for line in lines:
        if line.startswith(ROW_PREFIX):
            if not inserted:
                out.extend(render_row(r) + "\n" for r in rows)
                inserted = True
            continue
        out.append(line)
    if not inserted:
        msg = f"{CONDA_TOML}: no conda-forge rows to replace"
        raise SystemExit(msg)
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-dir", help="conda-forge/tensorflow-feedstock: a bare git directory or a checkout")
    ap.add_argument("--ref", default=REF, help="the default branch (default: main)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="write compat/conda.toml")
    mode.add_argument("--check", action="store_true", help="print a diff; exit 1 when out of date (default)")
    ap.add_argument("--file", default=str(CONDA_TOML), help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)  # nox update_compat passes every script the same posargs
    source = args.git_dir or os.environ.get("TFGPU_CF_FEEDSTOCK")
    if not source:
        print("update_conda_forge: no feedstock given (--git-dir or TFGPU_CF_FEEDSTOCK); skipped")
        return 0
    git_dir = resolve_git_dir(source)
    snaps = snapshots(git_dir, args.ref)
    if not snaps:
        print(f"update_conda_forge: no recipe history under {git_dir} ({args.ref})", file=sys.stderr)
        return 2
    path = Path(args.file)
    old = path.read_text(encoding="utf-8")
    new = regenerate(old, build_rows(snaps))
    if new == old:
        print(f"{path.name}: conda-forge rows up to date ({len(snaps)} main commits read)")
        return 0
    if args.force:
        path.write_text(new, encoding="utf-8")
        print(f"{path.name}: conda-forge rows written")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                               f"a/compat/{path.name}", f"b/compat/{path.name}"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
