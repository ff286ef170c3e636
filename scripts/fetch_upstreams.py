#!/usr/bin/env python3
"""Bring the upstreams `nox -s update_compat` regenerates compat/ from, for every one not given locally.

  TFGPU_TF_DOCS             tensorflow/docs                       git clone --depth 1 (a checkout)
  TFGPU_CF_FEEDSTOCK        conda-forge/tensorflow-feedstock      git clone --bare (the whole main history)
  TFGPU_ANACONDA_FEEDSTOCK  AnacondaRecipes/tensorflow-feedstock  git clone --bare
  TFGPU_PCI_IDS             the PCI ID Repository's pci.ids       HTTPS download
(PyPI, the other upstream, is read by the scripts themselves.) An upstream named in the environment is used as it
is; the others go under DEST (default .nox/upstreams), and a second run updates them there. Every upstream that
cannot be read is named, and the exit status is 2: a refresh that could not read its sources must not pass.

  python3 scripts/fetch_upstreams.py [--dest DIR]      # prints NAME=PATH lines for the environment
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = ROOT / ".nox" / "upstreams"
GIT_UPSTREAMS = {  # env var -> (repository, directory under DEST, bare)
    "TFGPU_TF_DOCS": ("https://github.com/tensorflow/docs", "tensorflow-docs", False),
    "TFGPU_CF_FEEDSTOCK": ("https://github.com/conda-forge/tensorflow-feedstock", "tensorflow-feedstock.git", True),
    "TFGPU_ANACONDA_FEEDSTOCK": ("https://github.com/AnacondaRecipes/tensorflow-feedstock",
                                 "anaconda-tensorflow-feedstock.git", True),
}
PCI_IDS_URL = "https://pci-ids.ucw.cz/v2.2/pci.ids"
PCI_IDS_ENV = "TFGPU_PCI_IDS"

Runner = Callable[[Sequence[str]], None]
Downloader = Callable[[str, Path], None]


class UpstreamError(Exception):
    """One or more upstreams could not be read (the message names each)."""


def run_git(argv: Sequence[str]) -> None:
    try:
        subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as exc:
        msg = "git is not installed"
        raise UpstreamError(msg) from exc
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines()
        msg = f"{' '.join(argv)}: {lines[-1] if lines else f'exit {exc.returncode}'}"
        raise UpstreamError(msg) from exc
    except subprocess.TimeoutExpired as exc:
        msg = f"{' '.join(argv)}: timed out"
        raise UpstreamError(msg) from exc


def download(url: str, path: Path) -> None:
    """``url`` to ``path`` (written whole or not at all)."""
    req = urllib.request.Request(url, headers={"User-Agent": "tfgpu-fetch-upstreams/1 (+stdlib urllib)"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            data = resp.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        msg = f"{url}: {exc}"
        raise UpstreamError(msg) from exc
    if not data:
        msg = f"{url}: empty answer"
        raise UpstreamError(msg)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)


def _git_upstream(url: str, target: Path, bare: bool, run: Runner) -> None:
    if not target.exists():
        run(["git", "clone", "--quiet", *(["--bare"] if bare else ["--depth", "1"]), url, str(target)])
    elif bare:
        run(["git", "--git-dir", str(target), "fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/heads/*"])
    else:
        run(["git", "-C", str(target), "fetch", "--quiet", "--depth", "1", "origin", "HEAD"])
        run(["git", "-C", str(target), "reset", "--quiet", "--hard", "FETCH_HEAD"])


def ensure_upstreams(dest: Path, environ: Mapping[str, str], *, run: Runner = run_git,
                     fetch: Downloader = download) -> dict[str, str]:
    """NAME -> path of every upstream: the environment's where set, else brought under ``dest``.
    UpstreamError naming every upstream that could not be read."""
    dest.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    failed: list[str] = []
    for name, (url, subdir, bare) in GIT_UPSTREAMS.items():
        if environ.get(name):
            out[name] = environ[name]
            continue
        try:
            _git_upstream(url, dest / subdir, bare, run)
            out[name] = str(dest / subdir)
        except UpstreamError as exc:
            failed.append(f"{name} ({url}): {exc}")
    if environ.get(PCI_IDS_ENV):
        out[PCI_IDS_ENV] = environ[PCI_IDS_ENV]
    else:
        try:
            fetch(PCI_IDS_URL, dest / "pci.ids")
            out[PCI_IDS_ENV] = str(dest / "pci.ids")
        except UpstreamError as exc:
            failed.append(f"{PCI_IDS_ENV}: {exc}")
    if failed:
        raise UpstreamError("cannot read " + "; ".join(failed))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="where to keep what is brought")
    args = ap.parse_args(argv)
    try:
        found = ensure_upstreams(args.dest, os.environ)
    except UpstreamError as exc:
        print(f"fetch_upstreams: {exc}", file=sys.stderr)
        return 2
    for name, path in found.items():
        print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
