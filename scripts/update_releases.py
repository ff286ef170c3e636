#!/usr/bin/env python3
"""Regenerate compat/releases.toml: every final TensorFlow GPU release, from PyPI metadata.

Reads the PyPI JSON API (https://pypi.org/pypi/tensorflow/json, .../tensorflow-gpu/json) and, for
`tensorflow` >= 2.14, the wheel's own METADATA (the `and-cuda` extra's pinned NVIDIA wheels). The
per-version JSON (/pypi/tensorflow/<v>/json) would give the same `requires_dist`; where it cannot be
reached, METADATA is read straight out of one Linux wheel with HTTP range requests (zip central
directory, then the one member), a few kB per release instead of the ~500 MB wheel.

Usage:
  python3 scripts/update_releases.py           # same as --check
  python3 scripts/update_releases.py --check   # print a unified diff against compat/releases.toml
  python3 scripts/update_releases.py --force   # write compat/releases.toml

Rows: one per (distribution, final release); pre-releases (a/b/rc/dev) are skipped. `tensorflow`
rows start at 2.1.0, the first release whose `tensorflow` wheel carries GPU support (before that GPU
needed `tensorflow-gpu`). Output is deterministic: sorted newest version first, then dist; the
`retrieved` dates only change when the generated rows change. Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import email.parser
import json
import re
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

import tomllib

PYPI = "https://pypi.org/pypi/{name}/json"
PYPI_VERSION = "https://pypi.org/pypi/{name}/{version}/json"
DISTS = ("tensorflow", "tensorflow-gpu")
SOURCE = {"tensorflow": "pypi-tensorflow", "tensorflow-gpu": "pypi-tensorflow-gpu"}
# TF 2.1.0 RELEASE.md: "The tensorflow pip package now includes GPU support by default (same as
# tensorflow-gpu) for both Linux and Windows."
FIRST_GPU_TENSORFLOW = (2, 1, 0)
# The `and-cuda` extra exists from TF 2.14.0 on.
FIRST_AND_CUDA = (2, 14, 0)
# tensorflow-gpu from 2.12 on: a tiny sdist whose setup.py only raises an error ("Removed: please
# install "tensorflow" instead.", PyPI summary of tensorflow-gpu 2.12.0).
PLACEHOLDER_FROM = (2, 12, 0)
PLACEHOLDER_MAX_BYTES = 100_000
GLIBC = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}
USER_AGENT = "tfgpu-update-releases/1 (+stdlib urllib)"

HEADER = """\
# Every final TensorFlow GPU release on PyPI, one row per (distribution, release). GENERATED:
#   python3 scripts/update_releases.py --check   (diff)   |   --force   (write)
# Do not edit by hand; change scripts/update_releases.py and regenerate.
#
# Fields (all from the PyPI JSON API unless said otherwise):
#   uploaded         date of the earliest file of that release
#   requires_python  the files' Requires-Python ("" when absent)
#   linux            CPython tags (cpXY) that have an x86_64 Linux wheel
#   linux_platform   the OLDEST manylinux tag among those wheels; linux_glibc = its glibc floor
#                    (manylinux1 = 2.5, manylinux2010 = 2.12, manylinux2014 = 2.17, manylinux_2_X = 2.X)
#   linux_aarch64    CPython tags with an aarch64 Linux wheel (those wheels are CPU-only builds)
#   windows          CPython tags with a win_amd64 wheel. GPU on native Windows ends at 2.10: the
#                    `tensorflow` Windows wheels of 2.11+ are CPU-only, and tensorflow-gpu 2.11.0
#                    has no Windows wheel at all.
#   macos            CPython tags with a macOS wheel (CPU-only: no CUDA build for macOS since 1.1)
#   yanked           every file of the release is yanked
#   placeholder      tensorflow-gpu >= 2.12: only a tiny sdist that raises an error when installed
#                    (PyPI summary: 'Removed: please install "tensorflow" instead.')
#   and_cuda         tensorflow >= 2.14: the pins of the `and-cuda` extra (pip install
#                    "tensorflow[and-cuda]"), from the Requires-Dist of an x86_64 Linux wheel's
#                    METADATA; requirements separated by ";" (each is "name<specifiers>", and a
#                    specifier set has its own commas, e.g. "nvidia-cudnn-cu12<10.0,>=9.3.0.75")
# `tensorflow` rows start at 2.1.0: earlier `tensorflow` wheels are CPU-only (GPU was tensorflow-gpu).
#
# This file is the evidence for which Pythons can actually install a release: the Python range of
# the docs' tested-build table (compat/tensorflow.toml) is nominal where no wheels exist, e.g.
# "2.7,3.3-3.7" for 1.15.0 and 2.0.0 although PyPI has no cp33/cp34 wheels for them.
"""


def http_get(url: str, *, headers: dict[str, str] | None = None, tries: int = 3) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.read()
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, TimeoutError):
            if attempt == tries - 1:
                raise
            time.sleep(2 * (attempt + 1))
    raise AssertionError  # unreachable


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split(".post")[0]))


def is_final(version: str) -> bool:
    return re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", version) is not None


_WHEEL_RE = re.compile(r"^(?P<name>.+?)-(?P<ver>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


def _tag_key(tag: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"cp(\d)(\d+)", tag)
    return (int(m.group(1)), int(m.group(2)), "") if m else (99, 99, tag)


def _tags(tags: set[str]) -> str:
    return ",".join(sorted(tags, key=_tag_key))


def _glibc(plat: str) -> tuple[int, ...] | None:
    legacy = re.match(r"(manylinux1|manylinux2010|manylinux2014)_", plat)
    if legacy:
        return vkey(GLIBC[legacy.group(1)])
    m = re.match(r"manylinux_(\d+)_(\d+)_", plat)
    return (int(m.group(1)), int(m.group(2))) if m else None


def summarise(files: list[dict[str, object]]) -> dict[str, object]:
    linux: set[str] = set()
    aarch64: set[str] = set()
    windows: set[str] = set()
    macos: set[str] = set()
    manylinux: set[str] = set()
    for f in files:
        m = _WHEEL_RE.match(str(f["filename"]))
        if not m:
            continue
        pys = [p for p in m.group("py").split(".") if p.startswith("cp")]
        plats = m.group("plat").split(".")
        for plat in plats:
            if "linux" in plat and plat.endswith("x86_64"):
                linux.update(pys)
                if _glibc(plat) is not None:
                    manylinux.add(plat)
            elif "linux" in plat and plat.endswith("aarch64"):
                aarch64.update(pys)
            elif plat == "win_amd64":
                windows.update(pys)
            elif plat.startswith("macosx"):
                macos.update(pys)
    oldest = min(manylinux, key=lambda p: (_glibc(p), p)) if manylinux else ""
    glibc = ".".join(map(str, _glibc(oldest) or ())) if oldest else ""
    rps = sorted({str(f.get("requires_python") or "") for f in files})
    rps_non_empty = [r for r in rps if r]
    return {
        "requires_python": ";".join(rps_non_empty) if rps_non_empty else "",
        "linux": _tags(linux),
        "linux_platform": oldest,
        "linux_glibc": glibc,
        "linux_aarch64": _tags(aarch64),
        "windows": _tags(windows),
        "macos": _tags(macos),
    }


# ---------------------------------------------------------------- METADATA out of a remote wheel


def _range(url: str, spec: str) -> bytes:
    return http_get(url, headers={"Range": f"bytes={spec}"})


def wheel_metadata(url: str) -> str:
    """The .dist-info/METADATA text of a remote wheel, read with HTTP range requests."""
    tail = _range(url, "-65536")
    eocd = tail.rfind(b"PK\x05\x06")
    if eocd < 0:
        msg = f"no zip end-of-central-directory in the last 64 kB of {url}"
        raise ValueError(msg)
    cd_size, cd_offset = struct.unpack("<II", tail[eocd + 12 : eocd + 20])
    if cd_offset == 0xFFFFFFFF:  # zip64
        loc = tail.rfind(b"PK\x06\x07", 0, eocd)
        (z64_off,) = struct.unpack("<Q", tail[loc + 8 : loc + 16])
        z64 = _range(url, f"{z64_off}-{z64_off + 56 - 1}")
        cd_size, cd_offset = struct.unpack("<QQ", z64[40:56])
    cd = _range(url, f"{cd_offset}-{cd_offset + cd_size - 1}")
    pos = 0
    while pos < len(cd) and cd[pos : pos + 4] == b"PK\x01\x02":
        method, = struct.unpack("<H", cd[pos + 10 : pos + 12])
        csize, _usize = struct.unpack("<II", cd[pos + 20 : pos + 28])
        nlen, xlen, clen = struct.unpack("<HHH", cd[pos + 28 : pos + 34])
        (local_off,) = struct.unpack("<I", cd[pos + 42 : pos + 46])
        name = cd[pos + 46 : pos + 46 + nlen].decode("utf-8")
        if re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
            head = _range(url, f"{local_off}-{local_off + 30 - 1}")
            lnlen, lxlen = struct.unpack("<HH", head[26:30])
            start = local_off + 30 + lnlen + lxlen
            data = _range(url, f"{start}-{start + csize - 1}")
            raw = zlib.decompress(data, -15) if method == 8 else data
            return raw.decode("utf-8")
        pos += 46 + nlen + xlen + clen
    msg = f"no .dist-info/METADATA in {url}"
    raise ValueError(msg)


def requires_dist(name: str, version: str, files: list[dict[str, object]], base: str) -> list[str]:
    try:
        info = json.loads(http_get(PYPI_VERSION.format(name=name, version=version)))["info"]
        return list(info.get("requires_dist") or [])
    except (urllib.error.HTTPError, urllib.error.URLError, ValueError):
        pass
    wheels = sorted(
        (f for f in files if str(f["filename"]).endswith(".whl") and "x86_64" in str(f["filename"])
         and "linux" in str(f["filename"])),
        key=lambda f: str(f["filename"]),
    )
    if not wheels:
        return []
    url = urllib.parse.urljoin(base, str(wheels[0]["url"]))
    msg = email.parser.Parser().parsestr(wheel_metadata(url), headersonly=True)
    return list(msg.get_all("Requires-Dist") or [])


def and_cuda(reqs: list[str]) -> str:
    pins = []
    for r in reqs:
        req, _, marker = r.partition(";")
        if re.search(r"""extra\s*==\s*['"]and[-_]cuda['"]""", marker):
            pins.append(re.sub(r"\s+", "", req).replace("(", "").replace(")", ""))
    # ";" separates requirements: a requirement's own specifier set contains commas (">=12.5,<13")
    return ";".join(sorted(pins, key=str.lower))


# ---------------------------------------------------------------- build + render


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def build_rows(projects: dict[str, dict[str, object]], *, verbose: bool = False) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name in DISTS:
        data = projects[name]
        base = PYPI.format(name=name)
        releases = data["releases"]
        assert isinstance(releases, dict)
        for version, files in releases.items():
            if not is_final(version) or not files:
                continue
            if name == "tensorflow" and vkey(version) < FIRST_GPU_TENSORFLOW:
                continue
            row: dict[str, object] = {
                "dist": name,
                "version": version,
                "uploaded": min(str(f["upload_time"]) for f in files)[:10],
            }
            row.update(summarise(files))
            row["yanked"] = all(bool(f.get("yanked")) for f in files)
            if (
                name == "tensorflow-gpu"
                and vkey(version) >= PLACEHOLDER_FROM
                and all(f["packagetype"] == "sdist" and int(f["size"]) < PLACEHOLDER_MAX_BYTES for f in files)
            ):
                row["placeholder"] = True
            if name == "tensorflow" and vkey(version) >= FIRST_AND_CUDA:
                if verbose:
                    print(f"reading METADATA of {name} {version}", file=sys.stderr)
                row["and_cuda"] = and_cuda(requires_dist(name, version, files, base))
            row["source"] = SOURCE[name]
            rows.append(row)
    rows.sort(key=lambda r: (tuple(-x for x in vkey(str(r["version"]))), str(r["dist"])))
    return rows


def render(rows: list[dict[str, object]], retrieved: dict[str, str]) -> str:
    out = [HEADER, 'schema = "tfgpu.compat.releases/1"', "", "releases = ["]
    for r in rows:
        out.append("  { " + ", ".join(f"{k} = {toml_value(v)}" for k, v in r.items()) + " },")
    out.append("]")
    out += ["", "# [sources] comes last: in TOML every key after a [table] header belongs to that table.", "[sources]"]
    out.append(
        f'pypi-tensorflow = {{ title = "PyPI JSON API: tensorflow (files, upload dates, Requires-Python;'
        f' and_cuda from the wheels\' METADATA Requires-Dist)", url = "https://pypi.org/pypi/tensorflow/json",'
        f' retrieved = "{retrieved["pypi-tensorflow"]}" }}'
    )
    out.append(
        f'pypi-tensorflow-gpu = {{ title = "PyPI JSON API: tensorflow-gpu", url = "https://pypi.org/pypi/tensorflow-gpu/json",'
        f' retrieved = "{retrieved["pypi-tensorflow-gpu"]}" }}'
    )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="print a diff (default)")
    mode.add_argument("--force", action="store_true", help="write the file")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "compat" / "releases.toml")
    ap.add_argument("--from-json", type=Path, nargs=2, metavar=("TENSORFLOW_JSON", "TENSORFLOW_GPU_JSON"),
                    help="use saved project JSON instead of fetching it (METADATA is still fetched)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    if args.from_json:
        projects = {n: json.loads(p.read_text(encoding="utf-8")) for n, p in zip(DISTS, args.from_json)}
    else:
        projects = {n: json.loads(http_get(PYPI.format(name=n))) for n in DISTS}
    rows = build_rows(projects, verbose=args.verbose)

    old_text = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    old_retrieved: dict[str, str] = {}
    if old_text:
        sources = tomllib.loads(old_text).get("sources", {})
        old_retrieved = {k: v.get("retrieved", "") for k, v in sources.items() if isinstance(v, dict)}
    today = _dt.date.today().isoformat()
    keys = ("pypi-tensorflow", "pypi-tensorflow-gpu")
    new_text = render(rows, {k: old_retrieved.get(k) or today for k in keys})
    if new_text != old_text:  # rows changed: stamp today's date
        new_text = render(rows, dict.fromkeys(keys, today))
    tomllib.loads(new_text)

    if new_text == old_text:
        print(f"{args.out}: up to date ({len(rows)} releases)")
        return 0
    if args.force:
        args.out.write_text(new_text, encoding="utf-8")
        print(f"{args.out}: written ({len(rows)} releases)")
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                             fromfile=str(args.out), tofile=f"{args.out} (regenerated)")
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
