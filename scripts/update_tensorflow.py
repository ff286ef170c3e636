#!/usr/bin/env python3
"""Regenerate the `builds` block of compat/tensorflow.toml from the tensorflow/docs GPU tables.

Upstream: https://github.com/tensorflow/docs
  site/en/install/source.md          "Tested build configurations" -> Linux GPU, macOS GPU
  site/en/install/source_windows.md  "Tested build configurations" -> Windows GPU

Usage:
  # a work tree (checkout) of tensorflow/docs
  python3 scripts/update_tensorflow.py --docs /path/to/tensorflow-docs
  # a bare git directory + ref (e.g. the mirror the search tool's fetch brings)
  python3 scripts/update_tensorflow.py --git-dir /path/to/docs.git --ref HEAD
  # print a unified diff and exit 1 when the file is out of date (the default, also --check)
  python3 scripts/update_tensorflow.py --git-dir ... --check
  # with neither --docs nor --git-dir, $TFGPU_TF_DOCS names one (a checkout or a git dir); else it skips
  # write the regenerated block (default: only print a unified diff)
  python3 scripts/update_tensorflow.py --git-dir ... --force
  # list value changes of GPU rows over the git history (to curate `corrections`)
  python3 scripts/update_tensorflow.py --git-dir ... --history

Only the `builds = [ ... ]` block is generated. The header, `[sources]`, `corrections` and per-row
`note` values are hand-curated and kept: a row's note is carried over from the committed file by
(tf, os, dist). With --force and a known docs commit, the commit in the tf-docs-* source URLs is
updated (and their `retrieved` date, from --retrieved or today) when it changed.

Standard library only; output is deterministic (rows sorted by OS, then version newest first).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import html
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/_table_io.py
from _table_io import skip_or_fail

LINUX_MD = "site/en/install/source.md"
WINDOWS_MD = "site/en/install/source_windows.md"
# historic name of source.md before 2018-09 (tensorflow/docs commit c3fa8643e)
OLD_LINUX_MD = "site/en/install/install_sources.md"

OS_ORDER = ("linux", "macos", "windows")
SOURCE_KEY = {"linux": "tf-docs-linux", "macos": "tf-docs-macos", "windows": "tf-docs-windows"}
GROUP_COMMENT = {
    "linux": "# Linux GPU (source.md). Version cells read tensorflow_gpu-X up to 1.15 (the separate"
    " tensorflow-gpu package) and tensorflow-X from 2.0 (see the rows' notes for 2.0.0).",
    "macos": "# macOS GPU (source.md): only 1.0.0 and 1.1.0. macOS has had no CUDA GPU build since 1.1.",
    "windows": "# Windows GPU (source_windows.md). Native-Windows CUDA builds END at tensorflow_gpu-2.10.0;"
    " from 2.11 on the docs say: use WSL2, or tensorflow-cpu + the DirectML plugin.",
}
FIELDS = ("tf", "os", "python", "compiler", "bazel", "cudnn", "cuda", "dist", "note", "source")

_TAG_RE = re.compile(r"<[^>]+>")
_CELL_RE = re.compile(r"<t([hd])[^>]*>(.*?)</t[hd]>", re.IGNORECASE | re.DOTALL)
_TR_RE = re.compile(r"<tr[^>]*>(.*?)</tr>", re.IGNORECASE | re.DOTALL)
_TABLE_RE = re.compile(r"<table[^>]*>(.*?)</table>", re.IGNORECASE | re.DOTALL)
_HEADING_RE = re.compile(r"^(#{2,4})\s+(.*?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Build:
    tf: str
    os: str
    python: str
    compiler: str
    bazel: str
    cudnn: str
    cuda: str
    dist: str
    build_tools: str  # raw "Build tools" cell, e.g. "Bazel 0.26.1" or "Cmake v3.6.3"


def _cell_text(raw: str) -> str:
    text = html.unescape(_TAG_RE.sub("", raw))
    return " ".join(text.split())


def _norm_header(h: str) -> str:
    return h.lower().rstrip(":").strip()


def _norm_python(value: str) -> str:
    # "2.7, 3.3-3.7" -> "2.7,3.3-3.7" (whitespace dropped, nothing else changed)
    return re.sub(r"\s+", "", value)


def _split_version(cell: str) -> tuple[str, str]:
    # "tensorflow_gpu-1.15.0" -> ("tensorflow_gpu", "1.15.0")
    m = re.match(r"^(tensorflow[\w-]*?)-(\d[\w.]*)$", cell.strip())
    if not m:
        msg = f"unrecognised Version cell: {cell!r}"
        raise ValueError(msg)
    return m.group(1), m.group(2)


def _bazel(build_tools: str) -> str:
    m = re.match(r"^bazel\s+(.*)$", build_tools.strip(), re.IGNORECASE)
    return m.group(1).strip() if m else ""


def parse_gpu_tables(text: str, *, windows_file: bool) -> list[Build]:
    """All GPU rows of the "Tested build configurations" tables of one markdown file."""
    start = text.lower().find("tested build configurations")
    if start < 0:
        start = text.lower().find("tested source configurations")
    if start < 0:
        return []
    # headings (with position) after the section start, to know OS and CPU/GPU context of each table
    headings = [(m.start(), m.group(2).strip().lower()) for m in _HEADING_RE.finditer(text)]
    out: list[Build] = []
    for tm in _TABLE_RE.finditer(text, start):
        os_name = "windows" if windows_file else "linux"
        gpu_heading = False
        for pos, title in headings:
            if pos > tm.start():
                break
            if pos < start:
                continue
            if title.startswith("linux"):
                os_name, gpu_heading = "linux", False
            elif title.startswith("macos") or title.startswith("mac os"):
                os_name, gpu_heading = "macos", False
            elif title.startswith("windows"):
                os_name, gpu_heading = "windows", False
            elif title == "gpu":
                gpu_heading = True
            elif title == "cpu":
                gpu_heading = False
        rows = _TR_RE.findall(tm.group(1))
        if not rows:
            continue
        header = [_norm_header(_cell_text(c)) for _, c in _CELL_RE.findall(rows[0])]
        if "cudnn" not in header or "cuda" not in header:
            continue
        idx = {name: i for i, name in enumerate(header)}
        for row in rows[1:]:
            cells = [_cell_text(c) for _, c in _CELL_RE.findall(row)]
            if len(cells) != len(header):
                continue
            dist, version = _split_version(cells[idx["version"]])
            kind = cells[idx["cpu/gpu"]].lower() if "cpu/gpu" in idx else ""
            is_gpu = kind == "gpu" if kind else (gpu_heading or dist.endswith("_gpu"))
            if not is_gpu:
                continue
            tools = cells[idx["build tools"]]
            out.append(
                Build(
                    tf=version,
                    os=os_name,
                    python=_norm_python(cells[idx["python version"]]),
                    compiler=cells[idx["compiler"]],
                    bazel=_bazel(tools),
                    cudnn=cells[idx["cudnn"]],
                    cuda=cells[idx["cuda"]],
                    dist=dist,
                    build_tools=tools,
                )
            )
    return out


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.]", v))


def sort_builds(builds: list[Build]) -> list[Build]:
    return sorted(builds, key=lambda b: (OS_ORDER.index(b.os), tuple(-x for x in _vkey(b.tf))))


# ---------------------------------------------------------------- TOML output (canonical form)


def toml_str(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return toml_str(v)
    msg = f"unsupported TOML value {v!r}"
    raise TypeError(msg)


def inline_table(fields: list[tuple[str, object]]) -> str:
    return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in fields) + " }"


def render_builds(builds: list[Build], notes: dict[tuple[str, str, str], str]) -> str:
    lines = ["builds = ["]
    current = None
    for b in sort_builds(builds):
        if b.os != current:
            current = b.os
            lines.append("  " + GROUP_COMMENT[b.os])
        note = notes.get((b.tf, b.os, b.dist), "")
        if not note and not b.bazel:
            note = f"built with {b.build_tools}, not Bazel"
        fields: list[tuple[str, object]] = [
            ("tf", b.tf),
            ("os", b.os),
            ("python", b.python),
            ("compiler", b.compiler),
            ("bazel", b.bazel),
            ("cudnn", b.cudnn),
            ("cuda", b.cuda),
            ("dist", b.dist),
        ]
        if note:
            fields.append(("note", note))
        fields.append(("source", SOURCE_KEY[b.os]))
        lines.append("  " + inline_table(fields) + ",")
    lines.append("]")
    return "\n".join(lines) + "\n"


_BUILDS_BLOCK_RE = re.compile(r"^builds = \[\n.*?^\]\n", re.MULTILINE | re.DOTALL)


def replace_builds(text: str, block: str) -> str:
    if not _BUILDS_BLOCK_RE.search(text):
        msg = "compat file has no `builds = [ ... ]` block to replace"
        raise ValueError(msg)
    return _BUILDS_BLOCK_RE.sub(lambda _m: block, text, count=1)


def existing_notes(text: str) -> dict[tuple[str, str, str], str]:
    data = tomllib.loads(text)
    notes: dict[tuple[str, str, str], str] = {}
    for row in data.get("builds", []):
        if row.get("note") and not str(row["note"]).startswith("built with "):
            notes[(row["tf"], row["os"], row.get("dist", ""))] = row["note"]
    return notes


# ---------------------------------------------------------------- reading the docs


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True
    ).stdout


def read_docs(docs: Path | None, git_dir: Path | None, ref: str) -> tuple[str, str, str | None]:
    """(source.md text, source_windows.md text, commit or None)."""
    if git_dir is not None:
        commit = _git(git_dir, "rev-parse", f"{ref}^{{commit}}").strip()
        return _git(git_dir, "show", f"{commit}:{LINUX_MD}"), _git(git_dir, "show", f"{commit}:{WINDOWS_MD}"), commit
    assert docs is not None
    commit = None
    try:
        top, head = subprocess.run(
            ["git", "-C", str(docs), "rev-parse", "--show-toplevel", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.split()
        # a copy of the docs inside another repository (e.g. tests/data) is not a docs commit
        commit = head if Path(top).resolve() == docs.resolve() else None
    except (OSError, ValueError, subprocess.CalledProcessError):
        commit = None
    return (docs / LINUX_MD).read_text(encoding="utf-8"), (docs / WINDOWS_MD).read_text(encoding="utf-8"), commit


def builds_from_docs(linux_text: str, windows_text: str) -> list[Build]:
    rows = parse_gpu_tables(linux_text, windows_file=False) + [
        b for b in parse_gpu_tables(windows_text, windows_file=True) if b.os == "windows"
    ]
    return rows


def update_source_commits(text: str, commit: str, retrieved: str) -> str:
    def fix(m: re.Match[str]) -> str:
        line = m.group(0)
        old = re.search(r"/blob/([0-9a-f]{7,40})/", line)
        if old is None or old.group(1) == commit:
            return line
        line = line.replace(f"/blob/{old.group(1)}/", f"/blob/{commit}/")
        return re.sub(r'retrieved = "[^"]*"', f'retrieved = "{retrieved}"', line)

    return re.sub(r"^tf-docs-[a-z]+ = \{.*\}$", fix, text, flags=re.MULTILINE)


# ---------------------------------------------------------------- history (to curate corrections)


def history(git_dir: Path, ref: str) -> list[dict[str, str]]:
    """Value changes of GPU rows between consecutive commits touching the two files (oldest first)."""
    changes: list[dict[str, str]] = []
    old_names = {LINUX_MD: (OLD_LINUX_MD,), WINDOWS_MD: ("site/en/install/install_sources_windows.md",)}
    for path, windows in ((LINUX_MD, False), (WINDOWS_MD, True)):
        # (git ignores --reverse together with --follow, so reverse here)
        log = _git(git_dir, "log", "--format=%H %ad", "--date=short", "--follow", ref, "--", path)
        prev: dict[tuple[str, str], Build] = {}
        for line in reversed(log.splitlines()):
            commit, date = line.split()
            text = None
            for candidate in (path, *old_names[path]):
                try:
                    text = _git(git_dir, "show", f"{commit}:{candidate}")
                    break
                except subprocess.CalledProcessError:
                    continue
            if text is None:
                continue
            try:
                rows = parse_gpu_tables(text, windows_file=windows)
            except ValueError:
                continue
            cur: dict[tuple[str, str], Build] = {}
            for b in rows:
                cur.setdefault((b.tf, b.os), b)
            for key, b in cur.items():
                old = prev.get(key)
                if old is None:
                    continue
                for field in ("python", "compiler", "bazel", "cudnn", "cuda"):
                    if getattr(old, field) != getattr(b, field):
                        changes.append(
                            {
                                "tf": b.tf,
                                "os": b.os,
                                "field": field,
                                "old": getattr(old, field),
                                "new": getattr(b, field),
                                "commit": commit,
                                "date": date,
                                "source": SOURCE_KEY[b.os],
                            }
                        )
            for key in prev.keys() - cur.keys():
                changes.append({"tf": key[0], "os": key[1], "field": "row", "old": "present", "new": "removed",
                                "commit": commit, "date": date, "source": SOURCE_KEY[key[1]]})
            if cur:
                prev = cur
    return changes


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--docs", type=Path, help="work tree of tensorflow/docs")
    src.add_argument("--git-dir", type=Path, help="(bare) git dir of tensorflow/docs")
    ap.add_argument("--ref", default="HEAD", help="ref to read with --git-dir (default HEAD)")
    ap.add_argument("--compat", type=Path, default=Path(__file__).resolve().parent.parent / "compat" / "tensorflow.toml")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="print a diff, exit 1 if out of date (default)")
    mode.add_argument("--force", action="store_true", help="write the file instead of printing a diff")
    ap.add_argument("--retrieved", default=_dt.date.today().isoformat(), help="date for updated sources")
    ap.add_argument("--history", action="store_true", help="print row value changes over git history")
    args = ap.parse_args(argv)
    if args.docs is None and args.git_dir is None:
        env = os.environ.get("TFGPU_TF_DOCS", "")
        if not env:
            return skip_or_fail("update_tensorflow", "no tensorflow/docs given (--docs DIR, --git-dir DIR or "
                                "TFGPU_TF_DOCS=DIR)", stream=sys.stderr)
        if not Path(env).exists():
            print(f"update_tensorflow: TFGPU_TF_DOCS={env} does not exist", file=sys.stderr)
            return 2
        if (Path(env) / LINUX_MD).is_file():
            args.docs = Path(env)
        else:
            args.git_dir = Path(env)

    if args.history:
        if args.git_dir is None:
            ap.error("--history needs --git-dir")
        for c in history(args.git_dir, args.ref):
            print(inline_table(list(c.items())) + ",")
        return 0

    linux_text, windows_text, commit = read_docs(args.docs, args.git_dir, args.ref)
    builds = builds_from_docs(linux_text, windows_text)
    if not builds:
        print("no GPU rows found: has the docs layout changed?", file=sys.stderr)
        return 2
    old_text = args.compat.read_text(encoding="utf-8")
    new_text = replace_builds(old_text, render_builds(builds, existing_notes(old_text)))
    if commit and args.force:
        new_text = update_source_commits(new_text, commit, args.retrieved)
    tomllib.loads(new_text)  # refuse to write something that does not parse
    if new_text == old_text:
        print(f"{args.compat}: up to date ({len(builds)} GPU rows, docs commit {commit or '?'})")
        return 0
    if args.force:
        args.compat.write_text(new_text, encoding="utf-8")
        print(f"{args.compat}: written ({len(builds)} GPU rows, docs commit {commit or '?'})")
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=str(args.compat),
            tofile=f"{args.compat} (regenerated)",
        )
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
