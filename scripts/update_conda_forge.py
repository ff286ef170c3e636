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

The same script writes the anaconda channel's `tensorflow` CUDA rows (2.17 on) from
AnacondaRecipes/tensorflow-feedstock's first-parent main history: the linux CUDA variants of
recipe/conda_build_config.yaml, the Pythons its meta.yaml `skip: true  # [py<310 or py>313]` lines leave,
and the value of the flag (skip_cuda_pbp / skip_cuda_prefect) that keeps those variants out of Anaconda's
build pipeline, per commit, in the note (confidence = "recipe": declared, not seen on the channel).

Usage:
  # a bare git directory (the mirror the search tool's fetch brings) or a checkout
  python3 scripts/update_conda_forge.py --git-dir /path/to/tensorflow-feedstock.git
  # print a unified diff and exit 1 when the file is out of date (the default, also --check)
  # write the regenerated rows (default: only print a unified diff)
  python3 scripts/update_conda_forge.py --git-dir ... --force
  # Anaconda's feedstock: --anaconda-git-dir DIR (or $TFGPU_ANACONDA_FEEDSTOCK)
  # with no --git-dir, $TFGPU_CF_FEEDSTOCK names one; with neither feedstock the script skips (exit 0)

Standard library only; output is deterministic (rows by version, then CUDA, ascending).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/_table_io.py
from _table_io import REQUIRE_ENV, skip_or_fail, write_or_diff

ROOT = Path(__file__).resolve().parent.parent
CONDA_TOML = ROOT / "compat" / "conda.toml"
REF = "main"
SOURCE = "cf-tf-feedstock"
ROW_PREFIX = '  { channel = "conda-forge", name = "tensorflow",'
ANACONDA_SOURCE = "anaconda-tf-feedstock"
#: Anaconda's own CUDA builds of `tensorflow` (2.17+); the hand-curated `tensorflow-gpu` rows stay as they are.
ANACONDA_PREFIX = '  { channel = "anaconda", name = "tensorflow",'


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
    caveat: str = ""  # something at this commit that limits what the variants say (Anaconda: a skip flag)


def main_commits(git_dir: str, ref: str = REF) -> Iterator[tuple[str, str, str, str, int | None]]:
    """(commit, date, meta.yaml, version, build number) of every first-parent commit of ``ref`` whose
    recipe/meta.yaml names a version, oldest first."""
    log = git(git_dir, "log", "--first-parent", "--reverse", "--format=%H %ad", "--date=short", ref)
    for line in log.splitlines():
        commit, date = line.split()
        meta = git(git_dir, "show", f"{commit}:recipe/meta.yaml")
        version, build = read_recipe(meta)
        if version is not None:
            yield commit, date, meta, version, build


def snapshots(git_dir: str, ref: str = REF) -> list[Snapshot]:
    """Every first-parent commit of ``ref`` with a readable recipe, oldest first."""
    out = []
    for commit, date, _meta, version, build in main_commits(git_dir, ref):
        names = git(git_dir, "ls-tree", "--name-only", commit, ".ci_support/").split()
        found: set[tuple[str, str, str]] = set()
        for name in names:
            base = name.rsplit("/", 1)[-1]
            if base.startswith("linux_64") and base.endswith(".yaml"):
                found |= set(variants(read_ci_yaml(git(git_dir, "show", f"{commit}:{name}"))))
        out.append(Snapshot(commit, date, version, build, found))
    return out


# --------------------------------------------------------------------------- AnacondaRecipes/tensorflow-feedstock

PYTHONS = [(3, m) for m in range(6, 15)]


def _py_expr_holds(node: ast.AST, py: int) -> bool | None:
    """A selector of `py` comparisons joined by and/or, at ``py`` (310 = 3.10); None = not such a selector."""
    if isinstance(node, ast.BoolOp):
        parts = [_py_expr_holds(v, py) for v in node.values]
        if any(p is None for p in parts):
            return None
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "py"
            and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Constant)
            and isinstance(node.comparators[0].value, int)):
        other = node.comparators[0].value
        ops = {ast.Lt: py < other, ast.Gt: py > other, ast.LtE: py <= other, ast.GtE: py >= other,
               ast.Eq: py == other, ast.NotEq: py != other}
        return ops.get(type(node.ops[0]))
    return None


def pythons_from_skips(meta: str) -> list[str]:
    """The Pythons a conda recipe builds for, from its top-level `skip: true  # [py<310 or py>313]` lines."""
    exprs = []
    for m in re.finditer(r"^  skip:\s*true\s*#\s*\[(.*)\]\s*$", meta, re.M):
        try:
            exprs.append(ast.parse(m.group(1).strip(), mode="eval").body)
        except SyntaxError:
            continue
    out = []
    for major, minor in PYTHONS:
        py = major * 100 + minor if minor >= 10 else major * 10 + minor
        if not any(_py_expr_holds(e, py) for e in exprs):
            out.append(f"{major}.{minor}")
    return out


def _linux_values(cbc: str, key: str) -> list[str]:
    """The values of ``key`` in a conda_build_config.yaml that apply on linux-64 (no selector, or one
    naming linux)."""
    out, inside = [], False
    for line in cbc.splitlines():
        if re.match(rf"^{re.escape(key)}:", line):
            inside = True
            continue
        if inside and re.match(r"^\S", line):
            break
        m = re.match(r"^\s*-\s*([^#\s]+)\s*(?:#\s*\[(.*)\])?", line) if inside else None
        if m and (m.group(2) is None or "linux" in m.group(2)) and "not linux" not in (m.group(2) or ""):
            out.append(m.group(1).strip("'\""))
    return out


def anaconda_snapshots(git_dir: str, ref: str = REF) -> list[Snapshot]:
    """Every first-parent commit of ``ref`` whose recipe declares CUDA variants, oldest first."""
    out = []
    for commit, date, meta, version, build in main_commits(git_dir, ref):
        cbc = git(git_dir, "show", f"{commit}:recipe/conda_build_config.yaml")
        if not cbc:
            continue
        cudas = [c for c in _linux_values(cbc, "cuda_compiler_version") if c != "None"]
        cudnn = ".".join((_linux_values(cbc, "cudnn") or [""])[0].split(".")[:2])
        found = {(c, cudnn, py) for c in cudas for py in pythons_from_skips(meta)}
        caveat = ""
        flag = re.search(r"skip:\s*true\s*#\s*\[(skip_cuda_\w+) and", meta)
        if flag and cudas:
            value = _linux_values(cbc, flag.group(1))
            caveat = f"{flag.group(1)} {value[0] if value else 'unset'}"
        out.append(Snapshot(commit, date, version, build, found, caveat))
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
    caveats: list[tuple[str, str]] = field(default_factory=list)  # (caveat, commit) in history order


def vkey(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _major(cudnn: str, parts: int = 1) -> str:
    """conda-forge pins cuDNN by major ("9"); Anaconda's rows keep major.minor ("9.1")."""
    return ".".join(cudnn.split(".")[:parts])


def build_rows(snaps: list[Snapshot], cudnn_parts: int = 1) -> list[Row]:
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
            if cudnn and _major(cudnn, cudnn_parts) not in row.cudnn_seen:
                row.cudnn_seen.append(_major(cudnn, cudnn_parts))
            row.cudnn = _major(cudnn, cudnn_parts) if cudnn else row.cudnn
            row.python.add(py)
            if snap.build is not None:
                row.builds.add(snap.build)
            if snap.caveat and (snap.caveat, snap.commit) not in row.caveats[-1:]:
                row.caveats.append((snap.caveat, snap.commit))
        for cuda in before - now:
            row = rows[(snap.version, cuda)]
            row.dropped = snap.commit
            row.events.append(("dropped", snap.commit, snap.date, sorted(now - before, key=vkey)))
        previous = snap
    return sorted(rows.values(), key=lambda r: (vkey(r.version), vkey(r.cuda)))


_CAVEAT_MEANS = {"true": "the recipe keeps its CUDA variants out of Anaconda's build pipeline",
                 "false": "built by the pipeline", "unset": "Anaconda's global build config decides"}


def _caveat_text(caveats: list[tuple[str, str]]) -> list[str]:
    """[("skip_cuda_pbp true", c1), ("skip_cuda_pbp true", c2), ("skip_cuda_pbp false", c3)] ->
    ["skip_cuda_pbp true at c1..c2 (...)", "skip_cuda_pbp false from c3 (...)"]."""
    runs: list[list[str]] = []
    for text, commit in caveats:
        if runs and runs[-1][0] == text:
            runs[-1].append(commit)
        else:
            runs.append([text, commit])
    out = []
    for i, (text, *commits) in enumerate(runs):
        span = commits[0][:7] if len(commits) == 1 else f"{commits[0][:7]}..{commits[-1][:7]}"
        when = f"from {commits[0][:7]}" if i == len(runs) - 1 and i else f"at {span}"
        out.append(f"{text} {when} ({_CAVEAT_MEANS.get(text.rsplit(' ', 1)[-1], '')})")
    return out


def render_row(row: Row, channel: str = "conda-forge", source: str = SOURCE, confidence: str = "ci-config") -> str:
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
    parts += _caveat_text(row.caveats)
    fields = [
        ("channel", channel), ("name", "tensorflow"), ("version", row.version), ("os", "linux"),
        ("build", f"cuda{cuda_tag}*"), ("python", pythons), ("cuda", row.cuda), ("cudnn", row.cudnn),
        ("source", source), ("confidence", confidence), ("commit", row.commit), ("builds", builds),
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


def regenerate(text: str, lines_new: list[str], prefix: str = ROW_PREFIX, after: str | None = None) -> str:
    """Replace the rows of ``text`` that start with ``prefix`` (kept in place: where the first one was);
    with none there yet, put them after the last row starting with ``after``."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    inserted = False
    for line in lines:
        if line.startswith(prefix):
            if not inserted:
                out.extend(ln + "\n" for ln in lines_new)
                inserted = True
            continue
        out.append(line)
    if not inserted and after is not None:
        last = max((i for i, ln in enumerate(out) if ln.startswith(after)), default=None)
        if last is not None:
            out[last + 1:last + 1] = [ln + "\n" for ln in lines_new]
            inserted = True
    if not inserted:
        msg = f"{CONDA_TOML}: no rows starting with {prefix.strip()!r} to replace"
        raise SystemExit(msg)
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-dir", help="conda-forge/tensorflow-feedstock: a bare git directory or a checkout")
    ap.add_argument("--ref", default=REF, help="the default branch (default: main)")
    ap.add_argument("--anaconda-git-dir", help="AnacondaRecipes/tensorflow-feedstock (TFGPU_ANACONDA_FEEDSTOCK)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="write compat/conda.toml")
    mode.add_argument("--check", action="store_true", help="print a diff; exit 1 when out of date (default)")
    ap.add_argument("--file", default=str(CONDA_TOML), help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)  # nox update_compat passes every script the same posargs
    source = args.git_dir or os.environ.get("TFGPU_CF_FEEDSTOCK")
    anaconda = args.anaconda_git_dir or os.environ.get("TFGPU_ANACONDA_FEEDSTOCK")
    if not source and not anaconda:
        return skip_or_fail("update_conda_forge", "no feedstock given (--git-dir / TFGPU_CF_FEEDSTOCK, "
                            "--anaconda-git-dir / TFGPU_ANACONDA_FEEDSTOCK)")
    if os.environ.get(REQUIRE_ENV) and not (source and anaconda):
        return skip_or_fail("update_conda_forge", "only one of the two feedstocks given")
    path = Path(args.file)
    old = path.read_text(encoding="utf-8")
    new = old
    read = []
    if source:
        snaps = snapshots(resolve_git_dir(source), args.ref)
        if not snaps:
            print(f"update_conda_forge: no recipe history under {source} ({args.ref})", file=sys.stderr)
            return 2
        new = regenerate(new, [render_row(r) for r in build_rows(snaps)])
        read.append(f"conda-forge: {len(snaps)} main commits")
    if anaconda:
        snaps = anaconda_snapshots(resolve_git_dir(anaconda), args.ref)
        if not snaps:
            print(f"update_conda_forge: no recipe history under {anaconda} ({args.ref})", file=sys.stderr)
            return 2
        rows = [render_row(r, "anaconda", ANACONDA_SOURCE, "recipe") for r in build_rows(snaps, cudnn_parts=2)]
        new = regenerate(new, rows, ANACONDA_PREFIX, after=ROW_PREFIX)
        read.append(f"anaconda: {len(snaps)} main commits")
    return write_or_diff(path, old, new, force=args.force, what=f"generated rows ({', '.join(read)} read)")


if __name__ == "__main__":
    sys.exit(main())
