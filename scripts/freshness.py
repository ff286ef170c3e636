#!/usr/bin/env python3
"""What PyPI already has that tfgpu's knowledge base lacks (`nox -s freshness`; CI can run it on a schedule).

Asks PyPI's JSON API (https://pypi.org/pypi/NAME/json) for the newest final release of
  tensorflow                                                    -> compat/releases.toml (`tensorflow` rows)
  nvidia-cuda-runtime-cu11/-cu12, nvidia-cuda-runtime (CUDA 13)  -> compat/cuda.toml `toolkits` (its CUDA
                                                                    major.minor) and `cuda_runtime_wheels`
  nvidia-cudnn-cu11/-cu12/-cu13                                  -> compat/cuda.toml `cudnn_wheels`
and lists everything the knowledge base lacks. A pre-release (a/b/rc/dev, e.g. TensorFlow 2.22.0rc0) is reported
as a note, never as missing: the knowledge base lists releases only (and a pre-release row in it is an error).

Exit status: 0 nothing is missing; 1 something is (one line each); 2 a source could not be read.
  python3 scripts/freshness.py            # ask PyPI
  python3 scripts/freshness.py --json     # the same as a JSON document
How to add what it lists: CONTRIBUTING.md, "Generated files and how to regenerate them".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/_pypi.py
from _pypi import SourceError, fetch_all, finals, prereleases

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "compat"
TENSORFLOW = "tensorflow"
RUNTIME_DISTS = ("nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13",
                 "nvidia-cuda-runtime")
CUDNN_DISTS = ("nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13")
PROJECTS = (TENSORFLOW, *RUNTIME_DISTS, *CUDNN_DISTS)


@dataclass(frozen=True)
class Known:
    """What the knowledge base holds, read from compat/*.toml."""

    tensorflow: frozenset[Version]
    toolkits: frozenset[str]  # CUDA major.minor with a `toolkits` row
    runtime_wheels: Mapping[tuple[str, str], Version]  # (dist, CUDA major.minor) -> newest recorded release
    cudnn_wheels: Mapping[tuple[str, str], Version]  # (dist, cuDNN major.minor) -> newest recorded release


@dataclass
class Report:
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"schema": "tfgpu.freshness/1", "missing": self.missing, "notes": self.notes}


def _load(name: str, compat: Path) -> dict[str, Any]:
    with (compat / f"{name}.toml").open("rb") as f:
        return tomllib.load(f)


def load_known(compat: Path = COMPAT) -> Known:
    releases = _load("releases", compat)
    cuda = _load("cuda", compat)
    return Known(
        tensorflow=frozenset(Version(r["version"]) for r in releases["releases"] if r["dist"] == TENSORFLOW),
        toolkits=frozenset(str(r["cuda"]) for r in cuda["toolkits"]),
        runtime_wheels={(r["dist"], r["cuda"]): Version(r["version"]) for r in cuda.get("cuda_runtime_wheels", [])},
        cudnn_wheels={(r["dist"], r["cudnn"]): Version(r["version"]) for r in cuda.get("cudnn_wheels", [])},
    )


def _minor(v: Version) -> str:
    return f"{v.major}.{v.minor}"


def check_tensorflow(doc: Mapping[str, Any], known: Known, report: Report) -> None:
    listed_pre = sorted(v for v in known.tensorflow if v.is_prerelease or v.is_devrelease)
    for v in listed_pre:
        report.missing.append(f"compat/releases.toml lists tensorflow {v}, a pre-release, as a release: remove it "
                              "(python3 scripts/update_releases.py --force)")
    newest_known = max((v for v in known.tensorflow if v not in listed_pre), default=None)
    for v, day in finals(doc):
        if newest_known is None or v > newest_known:
            report.missing.append(f"tensorflow {v} (on PyPI since {day}) is not in compat/releases.toml "
                                  "(python3 scripts/update_releases.py --force; then its build rows: "
                                  "nox -s update_compat)")
    newest_final = max((v for v, _ in finals(doc)), default=None)
    for v, day in prereleases(doc):
        if newest_final is None or v > newest_final:
            report.notes.append(f"tensorflow {v} (on PyPI since {day}) is a pre-release: the knowledge base lists "
                                "releases only, so it is not missing")


def check_wheels(dist: str, doc: Mapping[str, Any], known: Known, report: Report) -> None:
    released = [(v, day) for v, day in finals(doc) if v.major >= 1]
    if not released:
        placeholder = finals(doc)[-1][0] if finals(doc) else None
        report.notes.append(f"{dist} has no CUDA release on PyPI" + (f" (only the placeholder {placeholder})"
                                                                     if placeholder else ""))
        return
    v, day = released[-1]
    key = (dist, _minor(v))
    if dist in RUNTIME_DISTS:
        if _minor(v) not in known.toolkits:
            report.missing.append(f"CUDA {_minor(v)} ({dist} {v}, on PyPI since {day}) has no row in compat/cuda.toml "
                                  "`toolkits` (its driver floor: NVIDIA's CUDA release notes)")
        have = known.runtime_wheels.get(key)
        table = "cuda_runtime_wheels"
    else:
        have = known.cudnn_wheels.get(key)
        table = "cudnn_wheels"
    if have is None or have < v:
        recorded = f"it records {have}" if have else f"no row for {_minor(v)}"
        report.missing.append(f"{dist} {v} (on PyPI since {day}): compat/cuda.toml `{table}` has {recorded} "
                              "(python3 scripts/update_nvidia_wheels.py --force)")


def check(docs: Mapping[str, Mapping[str, Any]], known: Known) -> Report:
    report = Report()
    check_tensorflow(docs[TENSORFLOW], known, report)
    for dist in (*RUNTIME_DISTS, *CUDNN_DISTS):
        check_wheels(dist, docs[dist], known, report)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print a JSON document instead of lines")
    args = ap.parse_args(argv)
    try:
        docs = fetch_all(list(PROJECTS))
    except SourceError as exc:
        print(f"freshness: cannot read PyPI: {exc}", file=sys.stderr)
        return 2
    report = check(docs, load_known())
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.missing:
            print(f"missing: {line}")
        for line in report.notes:
            print(f"note: {line}")
        print(f"freshness: {len(report.missing)} missing" if report.missing
              else "freshness: the knowledge base has PyPI's newest tensorflow, CUDA runtime and cuDNN releases")
    return 1 if report.missing else 0


if __name__ == "__main__":
    sys.exit(main())
