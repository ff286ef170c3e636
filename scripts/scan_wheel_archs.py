#!/usr/bin/env python3
"""Read the GPU code, glibc needs and build info out of TensorFlow's official wheels on PyPI.

Two steps:
  1. scan (network, `--scan`): for each chosen wheel, read the zip central directory with HTTP range
     requests, then stream-decompress only its shared objects (.so / .pyd / .dll) and parse them as they
     stream (src/tfgpu/facts/binscan.py): fatbin containers in `.nv_fatbin` (SASS sm_XX, PTX compute_XX),
     the highest GLIBC_/GLIBCXX_ symbol version from `.gnu.version_r`, DT_NEEDED CUDA libraries.
     tensorflow/python/platform/build_info.py is read as one small member. Nothing is stored but the
     result; a wheel is never written to disk. Results go to compat/wheel_scan.json (the scan record:
     per wheel its file name, PyPI's sha256 and per-architecture counts).
  2. render (offline, always): compat/tf_archs.toml (the official wheels' rows) and compat/wheels.toml
     are written from the record alone, so regenerating them is reproducible without a network.

Usage:
  python3 scripts/scan_wheel_archs.py                 # render from the record, print a diff (= --check)
  python3 scripts/scan_wheel_archs.py --force         # render and write
  python3 scripts/scan_wheel_archs.py --scan [--force]   # scan wheels missing from the record first
  python3 scripts/scan_wheel_archs.py --scan --only 2.4.0 -v   # one release (tests, debugging)

Which wheels: the first and the newest final patch of every minor series from 1.0 to the newest, for
`tensorflow-gpu` (1.0-2.11) and `tensorflow` (2.1+; also 1.15.x and 2.0.x, whose GPU status is read
from their build info); x86_64 Linux (every CPython tag: the glibc floor differs per tag) and
win_amd64 (one tag; native Windows GPU ends at 2.10). build_info.py is read for every final release.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime as _dt
import difflib
import json
import re
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tfgpu.facts import binscan  # noqa: E402

PYPI = "https://pypi.org/pypi/{name}/json"
USER_AGENT = "tfgpu-scan-wheel-archs/1 (+stdlib urllib)"
RECORD = ROOT / "compat" / "wheel_scan.json"
SHARED = re.compile(r"\.(so(\.\d+)*|pyd|dll)$")
# tensorflow_core/ in 1.15 and 2.0 (the package moved there, `tensorflow` was a virtual pip package)
BUILD_INFO = re.compile(r"^(?:[^/]+\.data/purelib/)?tensorflow(?:_core)?/python/platform/build_info\.py$")
CHUNK = 4 << 20
RECORD_SCHEMA = "tfgpu.wheel_scan/1"
_print_lock = threading.Lock()
_cache_lock = threading.Lock()
_object_cache: dict[tuple[int, int, str], binscan.ObjectScan] = {}


def log(msg: str) -> None:
    with _print_lock:
        print(msg, file=sys.stderr, flush=True)


def http_get(url: str, headers: dict[str, str] | None = None, tries: int = 4) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return bytes(resp.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            if attempt == tries - 1:
                raise
            time.sleep(2 * (attempt + 1))
    raise AssertionError


def http_stream(url: str, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of ``url`` in chunks, as they arrive."""
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Range": f"bytes={start}-{end - 1}"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        while True:
            chunk = resp.read(CHUNK)
            if not chunk:
                return
            yield chunk


# ---------------------------------------------------------------- zip by range


def central_directory(url: str) -> list[dict[str, Any]]:
    tail = http_get(url, {"Range": "bytes=-65536"})
    eocd = tail.rfind(b"PK\x05\x06")
    if eocd < 0:
        msg = f"no zip end-of-central-directory in {url}"
        raise ValueError(msg)
    cd_size, cd_offset = struct.unpack("<II", tail[eocd + 12 : eocd + 20])
    if cd_offset == 0xFFFFFFFF:
        loc = tail.rfind(b"PK\x06\x07", 0, eocd)
        (z64,) = struct.unpack("<Q", tail[loc + 8 : loc + 16])
        rec = http_get(url, {"Range": f"bytes={z64}-{z64 + 55}"})
        cd_size, cd_offset = struct.unpack("<QQ", rec[40:56])
    cd = http_get(url, {"Range": f"bytes={cd_offset}-{cd_offset + cd_size - 1}"})
    out, pos = [], 0
    while cd[pos : pos + 4] == b"PK\x01\x02":
        (method,) = struct.unpack("<H", cd[pos + 10 : pos + 12])
        (crc,) = struct.unpack("<I", cd[pos + 16 : pos + 20])
        csize, usize = struct.unpack("<II", cd[pos + 20 : pos + 28])
        nlen, xlen, clen = struct.unpack("<HHH", cd[pos + 28 : pos + 34])
        (local,) = struct.unpack("<I", cd[pos + 42 : pos + 46])
        name = cd[pos + 46 : pos + 46 + nlen].decode("utf-8")
        extra = cd[pos + 46 + nlen : pos + 46 + nlen + xlen]
        vals = [v for v, big in ((usize, usize == 0xFFFFFFFF), (csize, csize == 0xFFFFFFFF),
                                 (local, local == 0xFFFFFFFF)) if big]
        if vals:  # zip64 extra field 0x0001 holds the values that overflowed, in this order
            xp = 0
            while xp + 4 <= len(extra):
                hid, hlen = struct.unpack("<HH", extra[xp : xp + 4])
                if hid == 1:
                    nums = list(struct.unpack(f"<{hlen // 8}Q", extra[xp + 4 : xp + 4 + hlen // 8 * 8]))
                    if usize == 0xFFFFFFFF:
                        usize = nums.pop(0)
                    if csize == 0xFFFFFFFF:
                        csize = nums.pop(0)
                    if local == 0xFFFFFFFF:
                        local = nums.pop(0)
                xp += 4 + hlen
        out.append({"name": name, "crc": crc, "method": method, "csize": csize, "usize": usize, "local": local})
        pos += 46 + nlen + xlen + clen
    return out


def _member_raw(url: str, m: dict[str, Any]) -> Iterator[bytes]:
    """The stored (compressed) bytes of zip member ``m``, streamed."""
    head = http_get(url, {"Range": f"bytes={m['local']}-{m['local'] + 29}"})
    nlen, xlen = struct.unpack("<HH", head[26:30])
    start = m["local"] + 30 + nlen + xlen
    yield from http_stream(url, start, start + m["csize"])


# ---------------------------------------------------------------- one wheel


def parse_build_info(text: str) -> dict[str, Any]:
    """Literal assignments of a build_info.py (1.x: module constants; 2.x: a `build_info` dict)."""
    out: dict[str, Any] = {}
    tree = ast.parse(text)
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Call) and value.args:  # collections.OrderedDict([...])
            value = value.args[0]
        try:
            lit = ast.literal_eval(value)
        except ValueError:
            continue
        if name == "build_info" and isinstance(lit, (list, dict)):
            out.update(dict(lit))
        elif isinstance(lit, (str, bool, int, list)):
            out[name] = lit
    return {k: v for k, v in out.items() if isinstance(v, (str, bool, int, list))}


class Stream:
    """Sequential reads over an HTTP byte stream (one request for a whole wheel)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""
        self.pos = 0

    def _fill(self) -> bool:
        nxt = next(self._chunks, b"")
        if not nxt:
            return False
        self._buf = self._buf + nxt if self._buf else nxt
        return True

    def read(self, n: int) -> Iterator[bytes]:
        """Exactly ``n`` bytes, in pieces."""
        while n > 0:
            if not self._buf and not self._fill():
                msg = "stream ended early"
                raise EOFError(msg)
            piece, self._buf = self._buf[:n], self._buf[n:]
            n -= len(piece)
            self.pos += len(piece)
            yield piece

    def skip_to(self, offset: int) -> None:
        for _ in self.read(offset - self.pos):
            pass


def _inflate(pieces: Iterator[bytes], method: int) -> Iterator[bytes]:
    if method == 0:
        yield from pieces
        return
    if method != 8:
        msg = f"zip method {method} is not deflate"
        raise ValueError(msg)
    d = zlib.decompressobj(-15)
    for chunk in pieces:
        out = d.decompress(chunk, CHUNK)
        while out:
            yield out
            out = d.decompress(d.unconsumed_tail, CHUNK) if d.unconsumed_tail else b""
    tail = d.flush()
    if tail:
        yield tail


def _drain(it: Iterator[bytes]) -> None:
    for _ in it:
        pass


def scan_wheel(url: str, *, full: bool = True, verbose: bool = False) -> dict[str, Any]:
    """Scan one wheel: build info always; the shared objects when ``full``. One pass over the zip: the
    wanted members are inflated and parsed as they stream by, the others skipped."""
    members = central_directory(url)
    result: dict[str, Any] = {"build_info": {}}
    info = [m for m in members if BUILD_INFO.match(m["name"])]
    result["build_info_file"] = info[0]["name"] if info else ""
    wanted = info[:1] + [m for m in members if full and SHARED.search(m["name"])]
    wanted.sort(key=lambda m: m["local"])
    if not wanted:
        return result
    if not full:  # one small member: its own range request
        (m,) = wanted[:1]
        head = http_get(url, {"Range": f"bytes={m['local']}-{m['local'] + 29}"})
        nlen, xlen = struct.unpack("<HH", head[26:30])
        start = m["local"] + 30 + nlen + xlen
        raw = b"".join(_inflate(http_stream(url, start, start + m["csize"]), m["method"]))
        result["build_info"] = parse_build_info(raw.decode("utf-8"))
        return result
    stream = Stream(http_stream(url, wanted[0]["local"], wanted[-1]["local"] + wanted[-1]["csize"] + 65536 + 30))
    stream.pos = wanted[0]["local"]
    objects: dict[str, Any] = {}
    versions: list[tuple[str, str]] = []
    needed: set[str] = set()
    for m in wanted:
        stream.skip_to(m["local"])
        head = b"".join(stream.read(30))
        nlen, xlen = struct.unpack("<HH", head[26:30])
        stream.skip_to(m["local"] + 30 + nlen + xlen)
        t0 = time.monotonic()
        pieces = stream.read(m["csize"])
        if BUILD_INFO.match(m["name"]):
            result["build_info"] = parse_build_info(b"".join(_inflate(pieces, m["method"])).decode("utf-8"))
            continue
        key = (m["crc"], m["usize"], m["name"])
        with _cache_lock:
            cached = _object_cache.get(key)
        if cached is not None:  # the same file in another wheel of the release (CRC-32 and size)
            _drain(pieces)
            scan = cached
        else:
            scan = _scan_member(url, m, pieces)
            with _cache_lock:
                _object_cache[key] = scan
        if verbose:
            log(f"  {m['name']}: {scan.size >> 20} MB, {len(scan.containers)} fatbins, "
                f"{time.monotonic() - t0:.1f} s")
        versions += [("", f"{k}_{v}") for k, v in scan.versions.items()]
        needed.update(scan.needed)
        if scan.containers or scan.stray:
            summ = binscan.summarize(scan.containers)
            objects[m["name"]] = {
                "containers": len(scan.containers), "stray": scan.stray,
                "sass": {str(a): list(v) for a, v in sorted(summ["sass"].items())},
                "ptx": {str(a): list(v) for a, v in sorted(summ["ptx"].items())},
            }
    return _totals(result, objects, versions, needed)


def _scan_member(url: str, m: dict[str, Any], pieces: Iterator[bytes]) -> binscan.ObjectScan:
    scanner = binscan.ObjectScanner()
    for chunk in _inflate(pieces, m["method"]):
        scanner.feed(chunk)
    _drain(pieces)
    scan = scanner.finish()
    if scan.need:  # sections the first pass did not keep: read the member's front again
        binscan.rescan(scan, _inflate(_member_raw(url, m), m["method"]))
        if scan.need:
            msg = f"{m['name']}: ranges {scan.need} still missing after a second pass"
            raise ValueError(msg)
    return scan


def _totals(result: dict[str, Any], objects: dict[str, Any], versions: list[tuple[str, str]],
            needed: set[str]) -> dict[str, Any]:
    total: dict[str, dict[str, list[int]]] = {"sass": {}, "ptx": {}}
    for obj in objects.values():
        for kind in ("sass", "ptx"):
            for arch, (n_cont, n_ent) in obj[kind].items():
                have = total[kind].setdefault(arch, [0, 0])
                have[0] += n_cont
                have[1] += n_ent
    result.update({
        "containers": sum(o["containers"] for o in objects.values()),
        "sass": {k: total["sass"][k] for k in sorted(total["sass"], key=int)},
        "ptx": {k: total["ptx"][k] for k in sorted(total["ptx"], key=int)},
        "versions": binscan.max_versions(versions),
        "cuda_libs": sorted(n for n in needed if re.match(r"lib(cud|cublas|cufft|curand|cusolver|cusparse|nvinfer)", n)),
        "objects": objects,
    })
    return result


# ---------------------------------------------------------------- which wheels


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split(".post")[0]))


def is_final(version: str) -> bool:
    return re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", version) is not None


def _tag(filename: str) -> str:
    return filename.split("-")[-3]


def _os(filename: str) -> str | None:
    if filename.endswith("win_amd64.whl"):
        return "windows"
    if "linux" in filename and filename.endswith("x86_64.whl"):
        return "linux"
    return None


def plan(projects: dict[str, dict[str, Any]], only: str | None) -> list[dict[str, Any]]:
    """Every wheel to read: full scans (first/newest patch per series) and build-info-only reads."""
    jobs: list[dict[str, Any]] = []
    for dist, data in projects.items():
        releases = {v: fs for v, fs in data["releases"].items() if is_final(v) and fs}
        series: dict[tuple[int, ...], list[str]] = {}
        for v in releases:
            series.setdefault(vkey(v)[:2], []).append(v)
        picked: set[str] = set()
        for vs in series.values():
            vs.sort(key=lambda v: (vkey(v), v))
            picked.update({vs[0], vs[-1]})
        for v, files in releases.items():
            if (only and v != only) or vkey(v) < (1, 0):
                continue
            if dist == "tensorflow" and vkey(v) < (1, 15):
                continue  # CPU-only: GPU was tensorflow-gpu
            wheels = [f for f in files if f["packagetype"] == "bdist_wheel" and _os(f["filename"])]
            for os_name in ("linux", "windows"):
                mine = sorted((f for f in wheels if _os(f["filename"]) == os_name),
                              key=lambda f: (vkey(_tag(f["filename"]).replace("cp", "")[:1] + "."
                                                  + _tag(f["filename"]).replace("cp", "")[1:]), f["filename"]))
                if not mine:
                    continue
                gpu_era = not (os_name == "windows" and vkey(v) >= (2, 11))
                if dist == "tensorflow-gpu" and vkey(v) >= (2, 1) and os_name == "windows":
                    gpu_era = False  # the same build as `tensorflow` (checked on Linux)
                full_scan = v in picked and gpu_era and (dist == "tensorflow-gpu" or vkey(v) >= (2, 1)
                                                          or vkey(v)[:2] == (1, 15))
                for i, f in enumerate(reversed(mine)):  # newest Python first
                    full = full_scan and (i == 0 or (os_name == "linux" and dist_all_tags(dist, v)))
                    if dist == "tensorflow-gpu" and vkey(v) >= (2, 1) and i > 0:
                        full = False
                    if i > 0 and not full:
                        continue
                    jobs.append({"tier": int(i > 0), "dist": dist, "version": v, "os": os_name,
                                 "file": f["filename"],
                                 "url": urllib.parse.urljoin(PYPI.format(name=dist), f["url"]), "sha256": f["digests"]["sha256"], "full": full})
    # the first tier (one wheel per release and OS) before the other Python tags (glibc floors)
    # then the other tags, newest releases first, those of 1.x (tagged manylinux1 = glibc 2.5, while their
    # .so files need 2.17 or, for cp37 of 1.13-1.14, 2.23) before all
    def order(j: dict[str, Any]) -> tuple[Any, ...]:
        first = j["tier"] == 1 and vkey(j["version"])[0] == 1  # manylinux1-tagged: where the tag lies
        ver = vkey(j["version"]) if j["tier"] == 0 else tuple(-x for x in vkey(j["version"]))
        return (j["tier"], not first, ver, j["dist"], j["os"], j["file"])

    jobs.sort(key=order)
    return jobs


def dist_all_tags(dist: str, version: str) -> bool:
    """Every Linux tag of a fully scanned release is read (the glibc floor differs between tags), for
    the distribution that carries the GPU build of the release."""
    return dist == "tensorflow-gpu" if vkey(version) < (2, 1) else dist == "tensorflow"


# ---------------------------------------------------------------- record


def load_record(path: Path = RECORD) -> dict[str, Any]:
    if path.exists():
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    return {"schema": RECORD_SCHEMA, "wheels": []}


def dump_record(record: dict[str, Any]) -> str:
    """One wheel per line, sorted, keys in a fixed order: a small diff when the scan changes."""
    wheels = sorted(record["wheels"], key=lambda w: (vkey(w["version"]), w["dist"], w["os"], w["file"]))
    lines = ["{", f'  "schema": {json.dumps(record["schema"])},', '  "wheels": [']
    for i, w in enumerate(wheels):
        lines.append("    " + json.dumps(w, sort_keys=False, separators=(", ", ": "))
                     + ("," if i < len(wheels) - 1 else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


KEY_ORDER = ("dist", "version", "os", "file", "sha256", "url", "scanned", "full", "build_info_file", "build_info",
             "containers",
             "sass", "ptx", "versions", "cuda_libs", "objects")


def run_scan(args: argparse.Namespace, record: dict[str, Any]) -> None:
    projects = {n: json.loads(http_get(PYPI.format(name=n))) for n in ("tensorflow-gpu", "tensorflow")}
    have = {w["sha256"]: w for w in record["wheels"]}
    jobs = [j for j in plan(projects, args.only)
            if args.rescan or j["sha256"] not in have or (j["full"] and not have[j["sha256"]].get("full"))
            or "build_info_file" not in have[j["sha256"]]]
    for j in jobs:  # a row read before build_info_file was recorded: only its build info is read again
        old = have.get(j["sha256"])
        if old is not None and not args.rescan and (old.get("full") or not j["full"]):
            j["refresh"], j["full"] = True, False
    jobs.sort(key=lambda j: not j.get("refresh"))  # the cheap build-info reads first (a stable sort)
    log(f"{len(jobs)} wheels to read ({sum(j['full'] for j in jobs)} full scans)")
    lock = threading.Lock()
    today = _dt.date.today().isoformat()

    def work(job: dict[str, Any]) -> None:
        t0 = time.monotonic()
        res = scan_wheel(job["url"], full=job["full"], verbose=args.verbose)
        if job.get("refresh"):
            row = {**have[job["sha256"]], "build_info": res["build_info"], "build_info_file": res["build_info_file"]}
        else:
            row = {**{k: job[k] for k in ("dist", "version", "os", "file", "sha256", "url", "full")},
                   "scanned": today, **res}
        row = {k: row[k] for k in KEY_ORDER if k in row}
        with lock:
            record["wheels"] = [w for w in record["wheels"] if w["sha256"] != job["sha256"]] + [row]
            tmp = RECORD.with_suffix(".json.tmp")
            tmp.write_text(dump_record(record), encoding="utf-8")
            tmp.replace(RECORD)  # a scan stopped half-way leaves the record whole
        log(f"{job['file']}: {time.monotonic() - t0:.0f} s"
            + (" (build info again)" if job.get("refresh") else "")
            + (f", {row.get('containers')} fatbins, sass {sorted(row.get('sass', {}), key=int)},"
               f" ptx {sorted(row.get('ptx', {}), key=int)}, {row.get('versions')}" if job["full"] else "")
            + (f", build info {row['build_info_file']}" if row.get("build_info_file") else ""))

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for fut in [pool.submit(work, j) for j in jobs]:
            fut.result()


# ---------------------------------------------------------------- render (offline, from the record)

#: An architecture counts as carried when at least this share of TensorFlow's own fatbin containers
#: hold it; below that it is "partial" (the verdict rule is in the tf_archs.toml header).
FULL_SHARE = 0.9
#: NVIDIA libraries some wheels bundle (TensorRT in 1.7-1.8): their code is not TensorFlow's kernels.
BUNDLED = re.compile(r"^lib(nvinfer|nvonnxparser|nvparsers|nvrtc|cublas|cudnn|cufft|curand|cusolver|cusparse|nccl|"
                     r"cudart|cupti)")
ARCHS_FILE, WHEELS_FILE = "tf_archs.toml", "wheels.toml"


def _cc(arch: str | int) -> str:
    n = int(arch)
    return f"{n // 10}.{n % 10}"


def _quote(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    text = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _inline(row: dict[str, Any]) -> str:
    return "  { " + ", ".join(f"{k} = {_quote(v)}" for k, v in row.items() if v not in (None, "")) + " },"


def arch_facts(wheel: dict[str, Any]) -> dict[str, Any]:
    """SASS / PTX of a fully scanned wheel, over TensorFlow's own fatbin containers."""
    own = {n: o for n, o in wheel.get("objects", {}).items() if not BUNDLED.match(n.rsplit("/", 1)[-1])}
    total = sum(o["containers"] for o in own.values())
    share: dict[str, dict[int, int]] = {"sass": {}, "ptx": {}}
    for o in own.values():
        for kind in ("sass", "ptx"):
            for arch, (n_cont, _n_ent) in o[kind].items():
                share[kind][int(arch)] = share[kind].get(int(arch), 0) + n_cont
    out: dict[str, Any] = {"kernels": total}
    for kind in ("sass", "ptx"):
        full = [a for a, n in sorted(share[kind].items()) if total and n / total >= FULL_SHARE]
        part = [(a, n / total) for a, n in sorted(share[kind].items()) if total and n < total]
        out[kind] = [_cc(a) for a in full]
        out[f"{kind}_partial"] = ",".join(f"{_cc(a)}={f:.3f}" for a, f in part)
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a[k] == b[k] for k in ("sass", "ptx", "sass_partial", "ptx_partial"))


def _primary(wheels: list[dict[str, Any]], version: str) -> dict[str, Any]:
    """The wheel a row cites: the GPU distribution of the release, newest Python tag."""
    want = "tensorflow-gpu" if vkey(version) < (2, 1) else "tensorflow"
    pool = [w for w in wheels if w["dist"] == want] or wheels
    return max(pool, key=lambda w: (vkey(_tag(w["file"]).replace("cp", "")[:1] + "." + _tag(w["file"])[3:]), w["file"]))


def public_url(url: str) -> str:
    """The wheel's address on files.pythonhosted.org (what PyPI's JSON API links to), whichever index
    mirror the scan read it through."""
    m = re.search(r"/packages/(?:packages/)?([0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]+/[^/]+\.whl)$", url)
    return f"https://files.pythonhosted.org/packages/{m.group(1)}" if m else url


def _source_key(w: dict[str, Any]) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"whl {w['dist']} {w['version']} {_tag(w['file'])} {w['os']}".lower())


def _old_rows(text: str) -> tuple[list[str], dict[str, str], list[dict[str, Any]]]:
    """The hand-curated rows of other builds (conda-forge's, Anaconda's: kept verbatim), every source line by key,
    and the old pip rows."""
    keep, sources = [], {}
    for line in text.splitlines():
        if line.startswith("  {") and re.search(r'build = "(?!pip")', line):
            keep.append(line)
        m = re.match(r"^([A-Za-z0-9_-]+) = \{ title = ", line)
        if m:
            sources[m.group(1)] = line
    data = tomllib.loads(text) if text else {"archs": []}
    old = [r for r in data.get("archs", []) if r.get("build", "pip") == "pip"]
    return keep, sources, old


def _in_spec(version: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return version in SpecifierSet(spec)


ARCHS_HEADER = """\
# GPU architectures (CUDA compute capabilities) compiled into TensorFlow builds. GENERATED for the official
# wheels (rows without `build`) by scripts/scan_wheel_archs.py from the scan record compat/wheel_scan.json:
#   python3 scripts/scan_wheel_archs.py --check | --force      (offline: render from the record)
#   python3 scripts/scan_wheel_archs.py --scan --force         (read new wheels from PyPI first)
# The conda-forge rows (build = "conda-forge") are hand-curated from the feedstock, the Anaconda rows (build =
# "anaconda") from Anaconda's recipes (tensorflow-base-gpu/build.sh: TF_CUDA_COMPUTE_CAPABILITIES per
# cudatoolkit); both are kept verbatim.
#
# How the official rows were read: each wheel's .so/.pyd files were streamed out of the zip on PyPI and
# their `.nv_fatbin` sections parsed (one fatbin container per compiled unit; each holds ELF cubins =
# SASS sm_XX and PTX compute_XX). Shares are over TensorFlow's own containers (`kernels` = how many);
# NVIDIA libraries a wheel bundles (TensorRT's libnvinfer in 1.7-1.8) are left out. Fatbins outside
# `.nv_fatbin` (from 2.8 on: `__nv_relfatbin`, the relocatable copies kept for device linking, which the
# runtime does not load) do not count; cuobjdump --list-elf does not list them either (tests/data/binscan).
#   sass      = "X.Y" list: SASS present in >= 90% of the containers
#   sass_partial = "X.Y=share" list: SASS missing from some containers (share = the fraction of containers
#               that carry it, 3 decimals); an entry >= 0.9 is also in `sass`
#   ptx       = the highest PTX present in >= 90% of the containers (the driver JIT-compiles it for any
#               NEWER GPU: slow first start; CUDA_CACHE_MAXSIZE helps); ptx_all = every such PTX
#   ptx_partial = PTX missing from some containers, as sass_partial
#   ptx_fails = compute capabilities on which that PTX is REPORTED not to load (CUDA_ERROR_INVALID_PTX);
#               `source2` cites the report (carried over from the hand-curated table)
#   wheel, sha256 = the wheel the row was read from (PyPI's digest); wheel_newest, sha256_newest = the
#               newest patch of the series when it was read too and found alike
# A row covers its minor series: when the first and the newest patch differ, the first patch's row covers
# the patches before the newest. Patches in between were not read (assumed like the row's wheel).
#
# Rule the verdict applies (tfgpu.judge.verdict, gpu.arch / gpu.ptx_jit): a GPU runs a container's SASS when
# the SASS has its major and a minor <= its own. SASS in `sass` -> native. SASS only below 90% (in
# `sass_partial`, not in `sass`) -> that share of the kernels is native and the rest needs PTX: with a
# PTX <= the GPU (the highest such one in ptx_all) it is JIT-compiled (warning, the share is named),
# without one the GPU fails (those kernels have no image). No SASS at all -> JIT from that PTX if there
# is one, else the GPU cannot run TensorFlow's kernels.
# In the official wheels read so far no SASS architecture is partial: every .nv_fatbin container of a
# release carries the same SASS list (the 2.10.0 listing was checked with cuobjdump); PTX is missing
# from one container of most releases (e.g. compute_80 in 258 of 259 containers of 2.10).
#
# What the binaries settled (they replace the hand-curated rows, which followed docs and build configs):
# - 1.x carries far more than the documented 3.5 floor. Linux: 1.0-1.2 SASS + PTX 3.0, 3.5, 5.2; 1.3-1.4
#   add 3.7, 6.0, 6.1; 1.5-2.2 3.5, 3.7, 5.2, 6.0, 6.1, 7.0. Windows: 1.0-1.10 only 3.0, 3.5, 5.2;
#   1.11-1.12 only sm_37 + compute_37 (so does the Linux 1.12.3 wheel); 1.13+ as Linux.
# - PTX for older architectures: 1.0-2.2 carry PTX for every SASS architecture (ptx_all), as the TF 2.3
#   release notes say of releases before 2.3; 2.3+ carry one PTX, the newest.
# - 2.4-2.15 carry sm_80 SASS (the build's `compute_80` entry makes both sm_80 and compute_80), not only
#   compute_80 as the docs say; 2.15 drops 3.5; 2.16 carries sm_90 SASS (5.0-9.0 + compute_90);
#   2.17+ carry 6.0, 7.0, 8.0, 8.9, 9.0 + compute_90.
schema = "tfgpu.compat.tf_archs/1"

archs = ["""


def render_archs(record: dict[str, Any], old_text: str) -> str:
    keep, old_sources, old_rows = _old_rows(old_text)
    full = [w for w in record["wheels"] if w.get("full")]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for w in full:
        by.setdefault((w["os"], w["version"]), []).append(w)
    rows: list[dict[str, Any]] = []
    sources: dict[str, str] = {}
    warnings: list[str] = []
    for os_name in ("linux", "windows"):
        series: dict[tuple[int, ...], list[str]] = {}
        for (o, v), ws in by.items():
            if o == os_name and any(w.get("containers") for w in ws):
                series.setdefault(vkey(v)[:2], []).append(v)
        keys = sorted(series)
        for idx, key in enumerate(keys):
            vs = sorted(series[key], key=lambda v: (vkey(v), v))
            scans = []
            for v in (vs[0], vs[-1]) if len(vs) > 1 else (vs[0],):
                prim = _primary(by[(os_name, v)], v)
                facts = arch_facts(prim)
                for other in by[(os_name, v)]:
                    if other is not prim and other.get("containers") and not _same(arch_facts(other), facts):
                        warnings.append(f"{other['file']} differs from {prim['file']}")
                scans.append((v, prim, facts))
            # the first final release of a series opens it (1.13.1 is 1.13's first: no final 1.13.0)
            start, nxt = f"{key[0]}.{key[1]}", f"{key[0]}.{key[1] + 1}"
            if len(scans) == 2 and _same(scans[0][2], scans[1][2]):
                groups = [(f">={start},<{nxt}", scans[0], scans[1])]
            elif len(scans) == 2:
                groups = [(f">={start},<{scans[1][0]}", scans[0], None),
                          (f">={scans[1][0]},<{nxt}", scans[1], None)]
            else:
                groups = [(f">={start},<{nxt}", scans[0], None)]
            newest_on_pypi = max(vkey(w["version"])[:2] for w in record["wheels"] if w["os"] == os_name)
            if idx == len(keys) - 1 and key == newest_on_pypi:  # also covers later releases until they are read
                groups[-1] = (groups[-1][0].split(",<")[0], *groups[-1][1:])
            for spec, (v, prim, facts), newest in groups:
                row: dict[str, Any] = {"tf": spec, "os": os_name, "sass": ",".join(facts["sass"]),
                                       "ptx": facts["ptx"][-1] if facts["ptx"] else ""}
                if facts["sass_partial"]:
                    row["sass_partial"] = facts["sass_partial"]
                row["ptx_all"] = ",".join(facts["ptx"])
                if facts["ptx_partial"]:
                    row["ptx_partial"] = facts["ptx_partial"]
                row["kernels"] = facts["kernels"]
                carried = next((r for r in old_rows if r.get("os", "linux") == os_name and r.get("ptx_fails")
                                and _in_spec(v, r["tf"])), None)
                if carried:
                    row["ptx_fails"] = carried["ptx_fails"]
                row.update({"wheel": prim["file"], "sha256": prim["sha256"]})
                if newest:
                    row.update({"wheel_newest": newest[1]["file"], "sha256_newest": newest[1]["sha256"]})
                row["source"] = _source_key(prim)
                if carried:
                    row["source2"] = carried["source2"]
                    sources[carried["source2"]] = old_sources[carried["source2"]]
                for w in [prim] + ([newest[1]] if newest else []):
                    sources[_source_key(w)] = (
                        f'{_source_key(w)} = {{ title = "{w["file"]} (PyPI sha256 {w["sha256"]}): .nv_fatbin sections'
                        f' of its shared objects, read {w["scanned"]}", url = "{public_url(w["url"])}", retrieved = "{w["scanned"]}" }}')
                rows.append(row)
    for w in warnings:
        log(f"warning: {w}")
    # hand-curated rows of series the record does not cover yet stay (after the scanned ones) until it does
    candidates = [f"1.{m}.0" for m in range(16)] + [f"2.{m}.0" for m in range(40)]
    kept_old = []
    for old in (r for r in old_rows if "wheel" not in r):  # the hand-curated ones
        os_name = old.get("os", "linux")
        uncovered = [c for c in candidates if _in_spec(c, old["tf"])
                     and not any(r["os"] == os_name and _in_spec(c, r["tf"]) for r in rows)]
        if uncovered:
            kept_old.append(next(line for line in old_text.splitlines()
                                 if line.startswith("  {") and f'tf = "{old["tf"]}", os = "{os_name}"' in line))
            log(f"kept hand-curated row {old['tf']} {os_name}: series {', '.join(c[:-2] for c in uncovered)} not scanned")
    keep = kept_old + keep
    for line in keep:
        for key in re.findall(r'source2? = "([^"]+)"', line):
            sources[key] = old_sources[key]
    out = [ARCHS_HEADER] + [_inline(r) for r in rows] + keep + [
        "]", "", "# [sources] comes last: in TOML every key after a [table] header belongs to that table.", "[sources]"]
    out += [sources[k] for k in sorted(sources)]
    return "\n".join(out) + "\n"


WHEELS_HEADER = """\
# Facts read from TensorFlow's wheels themselves, one row per wheel read. GENERATED by
# scripts/scan_wheel_archs.py from the scan record compat/wheel_scan.json (see its docstring).
#   python      the wheel's CPython tag
#   cuda_build  the wheel is a CUDA build: `is_cuda_build` of tensorflow/python/platform/build_info.py
#               (1.4+), else fatbins in its shared objects (1.0-1.3 have no build_info.py); absent = unknown
#   cuda, cudnn the build info's CUDA / cuDNN versions (else the soname of the libcudart it links)
#   glibc       Linux: the highest GLIBC_x.y symbol version any of its .so files needs (ELF .gnu.version_r):
#               the wheel does not load on an older glibc, whatever its manylinux tag promises
#   glibcxx     the same for GLIBCXX_ (libstdc++)
#   fatbins     fatbin containers in its shared objects (0 for CPU builds)
# Rows with only build info (no glibc/fatbins) are releases whose shared objects were not read; the
# full scans cover the first and the newest patch of every series (every Linux tag).
schema = "tfgpu.compat.wheels/1"

wheels = ["""


def _cuda_version(w: dict[str, Any]) -> str:
    bi = w.get("build_info", {})
    for key in ("cuda_version", "cuda_version_number"):
        val = str(bi.get(key) or "")
        m = re.fullmatch(r"(?:64_)?(\d+)(\d)", val) if "_" in val else None
        if m:
            return f"{m.group(1)}.{m.group(2)}"
        if re.fullmatch(r"\d+(\.\d+)*", val):
            return val
    dll = re.fullmatch(r"cudart64_(\d+)(\d)\.dll", str(bi.get("cudart_dll_name") or ""))
    if dll:
        return f"{dll.group(1)}.{dll.group(2)}"
    for lib in w.get("cuda_libs", []):
        m = re.fullmatch(r"libcudart\.so\.(\d+\.\d+)", lib)
        if m:
            return m.group(1)
    return ""


def render_wheels(record: dict[str, Any]) -> str:
    rows = []
    for w in sorted(record["wheels"], key=lambda w: (tuple(-x for x in vkey(w["version"])), w["dist"], w["os"],
                                                     _tag(w["file"]))):
        bi = w.get("build_info", {})
        cuda_build: bool | None = None
        if "is_cuda_build" in bi:
            cuda_build = bool(bi["is_cuda_build"])
        elif w.get("full"):
            cuda_build = bool(w.get("containers"))
        row: dict[str, Any] = {"dist": w["dist"], "version": w["version"], "os": w["os"], "python": _tag(w["file"])}
        if cuda_build is not None:
            row["cuda_build"] = cuda_build
        if cuda_build is not False:
            row["cuda"] = _cuda_version(w)
            cudnn = str(bi.get("cudnn_version") or bi.get("cudnn_version_number") or "").replace("64_", "")
            row["cudnn"] = cudnn
        if w.get("full"):
            versions = w.get("versions", {})
            if w["os"] == "linux":
                row["glibc"] = versions.get("GLIBC", "")
                row["glibcxx"] = versions.get("GLIBCXX", "")
            row["fatbins"] = int(w.get("containers") or 0)
        row.update({"file": w["file"], "sha256": w["sha256"], "source": "pypi-files"})
        rows.append(row)
    out = [WHEELS_HEADER] + [_inline(r) for r in rows] + [
        "]", "", "# [sources] comes last: in TOML every key after a [table] header belongs to that table.", "[sources]",
        'pypi-files = { title = "The wheel files on PyPI (file name and sha256 per row; PyPI JSON API for the list'
        ' and digests)", url = "https://pypi.org/project/tensorflow/#files", retrieved = "'
        + max((w["scanned"] for w in record["wheels"]), default="") + '" }']
    return "\n".join(out) + "\n"


def render_all(record: dict[str, Any], compat: Path) -> dict[Path, str]:
    archs = compat / ARCHS_FILE
    old = archs.read_text(encoding="utf-8") if archs.exists() else ""
    return {archs: render_archs(record, old), compat / WHEELS_FILE: render_wheels(record)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="print diffs (default)")
    mode.add_argument("--force", action="store_true", help="write the tables")
    ap.add_argument("--scan", action="store_true", help="read wheels from PyPI that the record lacks")
    ap.add_argument("--rescan", action="store_true", help="with --scan: read every wheel again")
    ap.add_argument("--only", help="with --scan: only this release (e.g. 2.4.0)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    record = load_record()
    if args.scan:
        run_scan(args, record)
        record = load_record()
    rc = 0
    for path, text in render_all(record, ROOT / "compat").items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old == text:
            print(f"{path.name}: up to date")
            continue
        if args.force:
            path.write_text(text, encoding="utf-8")
            print(f"{path.name}: written")
        else:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(keepends=True), text.splitlines(keepends=True),
                fromfile=f"a/compat/{path.name}", tofile=f"b/compat/{path.name}"))
            rc = 1
    return rc if not args.force else 0


if __name__ == "__main__":
    sys.exit(main())
