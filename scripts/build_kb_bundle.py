#!/usr/bin/env python3
"""Build the knowledge bundle of compat/ and its index, for `tfgpu kb update` (docs/guide.md, "Knowledge updates").

The bundle is ``tfgpu-kb-<data_version>.tar.gz``: the knowledge base's TOML files (those tfgpu.kb.knowledge.SCHEMAS
names), flat, as regular files, byte-for-byte as in compat/; reproducible (sorted, no owners, fixed times, gzip
without a time stamp), so the same data always gives the same sha256. The index (``index.json``,
tfgpu.kb-index/1) lists every bundle in the output directory, newest first, with its size and sha256; publish the
directory as it is (a release's assets, a web server, a shared folder) and give its URL to `tfgpu kb update
--from`. Run by `nox -s kb_bundle`; standard library plus tfgpu's own list of files.

Usage:
  python3 scripts/build_kb_bundle.py [--compat compat] [--out dist/kb]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INDEX_SCHEMA = "tfgpu.kb-index/1"
_META = re.compile(r'^(data_version|date)\s*=\s*"([^"\n]+)"\s*$', re.MULTILINE)


def data_files() -> tuple[str, ...]:
    """The file names a bundle may hold: the loader's own list (tfgpu.kb.knowledge.SCHEMAS)."""
    sys.path.insert(0, str(ROOT / "src"))
    from tfgpu.kb.parse import SCHEMAS

    return tuple(f"{name}.toml" for name in SCHEMAS)


def make_tar(files: dict[str, bytes]) -> bytes:
    """A reproducible gzip'd tar of ``files`` (name -> content), in name order."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def meta_of(files: dict[str, bytes]) -> dict[str, str]:
    """data_version and date of the bundle's meta.toml."""
    return dict(_META.findall(files["meta.toml"].decode("utf-8")))


def build(compat: Path, out: Path) -> dict[str, object]:
    """Write the bundle of ``compat`` into ``out`` and the index of every bundle there; the new index entry."""
    files = {name: (compat / name).read_bytes() for name in data_files() if (compat / name).is_file()}
    meta = meta_of(files)
    version = meta["data_version"]
    blob = make_tar(files)
    out.mkdir(parents=True, exist_ok=True)
    name = f"tfgpu-kb-{version}.tar.gz"
    (out / name).write_bytes(blob)
    entry = {"data_version": version, "date": meta.get("date", ""), "url": name, "size": len(blob),
             "sha256": hashlib.sha256(blob).hexdigest(), "files": sorted(files)}
    write_index(out, entry)
    return entry


def write_index(out: Path, entry: dict[str, object]) -> Path:
    """index.json in ``out``: its bundles, this one added (or replacing the same data version), newest first."""
    path = out / "index.json"
    bundles = json.loads(path.read_text(encoding="utf-8"))["bundles"] if path.is_file() else []
    bundles = [b for b in bundles if b["data_version"] != entry["data_version"]] + [entry]
    bundles.sort(key=lambda b: tuple(int(p) for p in str(b["data_version"]).split(".")), reverse=True)
    path.write_text(json.dumps({"schema": INDEX_SCHEMA, "bundles": bundles}, indent=2) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compat", type=Path, default=ROOT / "compat", help="the data to bundle (default compat/)")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "kb", help="where to write (default dist/kb)")
    args = parser.parse_args(argv)
    entry = build(args.compat, args.out)
    print(f"{args.out / str(entry['url'])}: data {entry['data_version']}, {entry['size']} bytes, "
          f"sha256 {entry['sha256']}")
    print(f"{args.out / 'index.json'}: sha256 {hashlib.sha256((args.out / 'index.json').read_bytes()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
