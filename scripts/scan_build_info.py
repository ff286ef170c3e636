#!/usr/bin/env python3
"""Read the CUDA / cuDNN a TensorFlow GPU wheel actually loads, from the wheel itself, and compare it with
the docs' "tested build configurations" (compat/tensorflow.toml `builds`).

Two steps, like scripts/scan_wheel_archs.py (whose zip-by-range streaming this reuses):
  1. scan (network, `--scan`): for every final patch of every GPU minor series
     (tensorflow-gpu 1.0-2.0, tensorflow 2.1-2.11; Linux x86_64 and win_amd64; the newest CPython tag),
     read `tensorflow/python/platform/build_info.py` and stream the wheel's large shared objects
     (.so / .pyd, never written to disk) for
       - DT_NEEDED (Linux): libcudart.so.X.Y / libcudnn.so.N where the wheel links them;
       - the cuDNN API names compiled into the binary: from 1.14 TensorFlow loads cuDNN with dlopen and
         looks each function up by name (tensorflow/stream_executor/cuda/cudnn_stub.cc), choosing the
         list of names by the CUDNN_MAJOR / CUDNN_MINOR of the cudnn.h it was compiled with
         (cudnn_7_0.inc ... cudnn_7_6.inc, cudnn_8_0.inc). A name that only the cuDNN 7.6 list has
         (the fused-ops API) shows that the build's cudnn.h was 7.6 or newer: the same CUDNN_VERSION that
         cuda_dnn.cc compares at start-up ("Loaded runtime CuDNN library: A but source was compiled
         with: B").
     The result goes to compat/build_info_scan.json (the record: per wheel its file name, PyPI's sha256,
     what was read and from which member).
  2. render (offline, always): the wheel rows of compat/tensorflow.toml `corrections` (those with
     `wheel = ...`), one per (series, os) and field where the wheel disagrees with the docs table.
     tfgpu follows the wheel there (tfgpu.kb.knowledge applies these rows to the build it returns): the
     wheel is what a machine loads; the docs table is kept (`old`) and cited.

Usage:
  python3 scripts/scan_build_info.py                  # render from the record, print a diff (= --check)
  python3 scripts/scan_build_info.py --force          # render and write compat/tensorflow.toml
  python3 scripts/scan_build_info.py --scan [--force] # read wheels missing from the record first
  python3 scripts/scan_build_info.py --scan --only 1.15.0 -v
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import json
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

import scan_wheel_archs as swa  # noqa: E402

RECORD = ROOT / "compat" / "build_info_scan.json"
TABLE = ROOT / "compat" / "tensorflow.toml"
RECORD_SCHEMA = "tfgpu.build_info_scan/1"
#: shared objects smaller than this hold no CUDA code paths worth reading (op libraries)
MIN_OBJECT = 20 << 20
#: releases whose binaries load cuDNN 7 with dlopen by name (the stub lists): [1.14, 2.4)
STUB_ERA = ((1, 14), (2, 4))
CUDNN_NAME = re.compile(rb"\x00(cudnn[A-Z][A-Za-z0-9_]{2,80})\x00")
LIB_NAME = re.compile(rb"(?<![A-Za-z0-9_.])(lib(?:cudart|cudnn|cublas)\.so(?:\.\d+)+|c(?:udart|udnn|ublas)64_\d+\.dll)\x00")

#: cuDNN API names that only the newest cuDNN 7 stub list has, and the cuDNN they show. TensorFlow's
#: tensorflow/stream_executor/cuda/cudnn_stub.cc (tensorflow/tensorflow@150c6ed7051dfb87da60a393b8cb7397d264498b)
#: includes cudnn_7_6.inc when the cudnn.h it is compiled with has CUDNN_MAJOR 7 and CUDNN_MINOR >= 6,
#: else cudnn_7_4.inc / 7_3 / 7_1 / 7_0; each list holds the functions of that cudnn.h, and the fused-ops
#: API below is new in cuDNN 7.6 (the 1.14.0 wheel's list lacks it, the 1.15.0 wheel's has it).
CUDNN_MARKERS: dict[str, str] = {
    "cudnnCreateFusedOpsConstParamPack": "7.6",
    "cudnnMakeFusedOpsPlan": "7.6",
    "cudnnFusedOpsExecute": "7.6",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- which wheels


def plan(arch_record: dict[str, Any], only: str | None) -> list[dict[str, Any]]:
    """One wheel per (release, os): the GPU distribution, the newest CPython tag; every final patch of
    every series. Taken from the wheel list of compat/wheel_scan.json (PyPI's JSON API)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for w in arch_record["wheels"]:
        v = w["version"]
        want = "tensorflow-gpu" if swa.vkey(v) < (2, 1) else "tensorflow"
        if w["dist"] != want or swa.vkey(v) >= (2, 12) or not swa.is_final(v):
            continue
        if w["os"] == "windows" and swa.vkey(v) >= (2, 11):
            continue
        key = (v, w["os"])
        tag = swa.vkey(swa._tag(w["file"]).replace("cp", "")[:1] + "." + swa._tag(w["file"])[3:])
        old = best.get(key)
        if old is None or tag > old["_tag"]:
            best[key] = {**{k: w[k] for k in ("dist", "version", "os", "file", "sha256", "url")}, "_tag": tag}
    series: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for v, os_name in best:
        series.setdefault((os_name, swa.vkey(v)[:2]), []).append(v)
    jobs = []
    for (os_name, _s), vs in sorted(series.items()):
        for v in sorted(vs, key=swa.vkey):  # every final patch: build info is one small member
            if only and v != only:
                continue
            job = dict(best[(v, os_name)])
            job.pop("_tag")
            arch = next((w for w in arch_record["wheels"] if w["sha256"] == job["sha256"]), {})
            if arch.get("cuda_libs"):  # DT_NEEDED, read by scripts/scan_wheel_archs.py from the same wheel
                job["needed"] = [n for n in arch["cuda_libs"] if re.match(r"lib(cudart|cudnn)\.", n)]
                job["needed_from"] = "DT_NEEDED, compat/wheel_scan.json (scripts/scan_wheel_archs.py)"
            jobs.append(job)
    return jobs


# ---------------------------------------------------------------- one wheel


class StringScan:
    """cuDNN API names and CUDA library names in a byte stream (null-terminated strings)."""

    def __init__(self) -> None:
        self.cudnn: set[str] = set()
        self.libs: set[str] = set()
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        buf = self._tail + chunk
        self.cudnn.update(m.group(1).decode() for m in CUDNN_NAME.finditer(buf))
        self.libs.update(m.group(1).decode() for m in LIB_NAME.finditer(buf))
        self._tail = buf[-100:]


def scan_wheel(job: dict[str, Any], verbose: bool = False) -> dict[str, Any]:
    """build_info.py always; the large shared objects (smallest first, until one names cuDNN API functions)
    only for the releases that load cuDNN 7 by dlopen (1.14-2.3), where the stub list tells the minor."""
    url = job["url"]
    members = swa.central_directory(url)
    info = [m for m in members if swa.BUILD_INFO.match(m["name"])]
    out: dict[str, Any] = {"build_info_file": info[0]["name"] if info else "", "build_info": {},
                           "objects": {}}
    if info:
        raw = b"".join(swa._inflate(swa._member_raw(url, info[0]), info[0]["method"]))
        out["build_info"] = swa.parse_build_info(raw.decode("utf-8"))
    # the Windows binaries of those releases import cuDNN by name (only the functions they call: no stub
    # list, 75-82 names), so they do not show the minor and are not streamed for it
    stub_era = STUB_ERA[0] <= swa.vkey(job["version"]) < STUB_ERA[1] and job["os"] == "linux"
    bi = out["build_info"]
    # Windows wheels whose build info names no CUDA (1.0-1.3, 1.11-1.13): the DLL names the .pyd imports
    dll_names = job["os"] == "windows" and not (bi.get("cudart_dll_name") or bi.get("cuda_version"))
    # Linux wheels the arch scan did not read (no DT_NEEDED at hand) and whose build info names no CUDA:
    # the sonames in .dynstr
    dll_names = dll_names or (job["os"] == "linux" and not job.get("needed") and not stub_era
                              and not (bi.get("cuda_version") or bi.get("cuda_version_number")))
    if not (stub_era or dll_names):
        return out
    big = sorted((m for m in members if swa.SHARED.search(m["name"]) and m["usize"] >= MIN_OBJECT),
                 key=lambda m: m["usize"])
    for m in big:
        t0 = time.monotonic()
        strings = StringScan()
        for chunk in swa._inflate(swa._member_raw(url, m), m["method"]):
            strings.feed(chunk)
        if verbose:
            log(f"  {m['name']}: {m['usize'] >> 20} MB, {len(strings.cudnn)} cuDNN names, "
                f"{time.monotonic() - t0:.1f} s")
        if (stub_era and strings.cudnn) or (not stub_era and any("cudart" in n for n in strings.libs)):
            out["objects"][m["name"]] = {
                "lib_strings": sorted(strings.libs),
                "cudnn_markers": sorted(n for n in strings.cudnn if n in CUDNN_MARKERS),
                "cudnn_names": len(strings.cudnn),
            }
            break
    return out


# ---------------------------------------------------------------- record


def load_record(path: Path = RECORD) -> dict[str, Any]:
    """The record (laid out like compat/wheel_scan.json: one wheel per line, sorted; swa.dump_record)."""
    record: dict[str, Any] = swa.load_record(path) if path.exists() else {"schema": RECORD_SCHEMA, "wheels": []}
    return record


def run_scan(args: argparse.Namespace, record: dict[str, Any]) -> None:
    arch_record = swa.load_record()
    have = {w["sha256"] for w in record["wheels"]}
    jobs = [j for j in plan(arch_record, args.only) if args.rescan or j["sha256"] not in have]
    log(f"{len(jobs)} wheels to read")
    today = _dt.date.today().isoformat()
    for job in jobs:
        t0 = time.monotonic()
        res = scan_wheel(job, args.verbose)
        row = {**job, "scanned": today, **res}
        record["wheels"] = [w for w in record["wheels"] if w["sha256"] != job["sha256"]] + [row]
        tmp = RECORD.with_suffix(".json.tmp")
        tmp.write_text(swa.dump_record(record), encoding="utf-8")
        tmp.replace(RECORD)
        log(f"{job['file']}: {time.monotonic() - t0:.0f} s, {wheel_facts(row)}")


# ---------------------------------------------------------------- what a wheel loads (offline)


def _dotted(raw: str) -> str:
    """'10' / '10.0' / '64_101' / '64_8' (build_info spellings) -> '10' / '10.0' / '10.1' / '8'."""
    raw = raw.replace("64_", "")
    if re.fullmatch(r"\d{3}", raw):  # 101 = 10.1, 110 = 11.0
        return f"{raw[:2]}.{raw[2]}"
    return raw


def wheel_facts(w: dict[str, Any]) -> dict[str, str]:
    """CUDA major.minor, cuDNN major (and the compiled-with minor floor where the binary shows it), each
    with where it was read."""
    bi = w.get("build_info", {})
    out: dict[str, str] = {}
    libs = list(w.get("needed", [])) + [n for o in w.get("objects", {}).values() for n in o["lib_strings"]]
    cuda_raw = str(bi.get("cuda_version") or bi.get("cuda_version_number") or "")
    cudart = next((m.group(1) for n in libs for m in [re.fullmatch(r"libcudart\.so\.(\d+\.\d+)", n)] if m), "")
    dll = next((m for n in [str(bi.get("cudart_dll_name") or ""), *libs]
                for m in [re.fullmatch(r"cudart64_(\d+)(\d)\.dll", n)] if m), None)
    if re.fullmatch(r"\d+\.\d+", _dotted(cuda_raw)):
        out["cuda"], out["cuda_from"] = _dotted(cuda_raw), "build_info.py cuda_version"
    elif dll:
        where = "build_info.py cudart_dll_name" if bi.get("cudart_dll_name") else "cudart64 DLL name in the binary"
        out["cuda"], out["cuda_from"] = f"{dll.group(1)}.{dll.group(2)}", where
    elif cudart:
        out["cuda"], out["cuda_from"] = cudart, "libcudart soname"
    elif cuda_raw:
        out["cuda"], out["cuda_from"] = _dotted(cuda_raw), "build_info.py cuda_version"
    cudnn_raw = str(bi.get("cudnn_version") or bi.get("cudnn_version_number") or "")
    sonames = [m.group(1) for n in libs for m in [re.fullmatch(r"libcudnn\.so\.(\d+)", n)] if m]
    dlls = [m.group(1) for n in [*libs, str(bi.get("cudnn_dll_name") or "")]
            for m in [re.fullmatch(r"cudnn64_(\d+)\.dll", n)] if m]
    if cudnn_raw:
        out["cudnn"], out["cudnn_from"] = _dotted(cudnn_raw), "build_info.py cudnn_version"
    elif sonames:
        out["cudnn"], out["cudnn_from"] = sonames[0], "libcudnn soname"
    elif dlls:
        out["cudnn"], out["cudnn_from"] = dlls[0], "cudnn64 DLL name"
    markers = sorted({CUDNN_MARKERS[n] for o in w.get("objects", {}).values() for n in o["cudnn_markers"]},
                     key=swa.vkey)
    if markers and out.get("cudnn") == markers[-1].split(".")[0]:
        out["cudnn"], out["cudnn_from"] = markers[-1], "cuDNN API names in the binary (cudnn stub list)"
    return out


def _major(v: str) -> str:
    return v.split(".")[0]


def _cuda_mm(v: str) -> str:
    return v if "." in v else f"{v}.0"


def disagreements(record: dict[str, Any], table: dict[str, Any]) -> list[dict[str, Any]]:
    """(series, os, field) where a wheel disagrees with the docs row of its series: CUDA major.minor,
    cuDNN major, or the cuDNN minor where the binary states it (it is then higher than the docs')."""
    builds = {(b["os"], swa.vkey(b["tf"])[:2]): b for b in table["builds"]}
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for w in sorted(record["wheels"], key=lambda w: (swa.vkey(w["version"]), w["os"])):
        b = builds.get((w["os"], swa.vkey(w["version"])[:2]))
        if b is None:
            continue
        facts = wheel_facts(w)
        checks = []
        if facts.get("cuda") and _cuda_mm(facts["cuda"]) != _cuda_mm(str(b["cuda"])) and "." in facts["cuda"]:
            checks.append(("cuda", str(b["cuda"]), facts["cuda"], facts["cuda_from"]))
        if facts.get("cudnn"):
            docs = str(b["cudnn"])
            newer_minor = "." in facts["cudnn"] and swa.vkey(facts["cudnn"]) > swa.vkey(docs)
            if _major(facts["cudnn"]) != _major(docs) or newer_minor:
                checks.append(("cudnn", docs, facts["cudnn"], facts["cudnn_from"]))
        for field, old, new, where in checks:
            key = (b["tf"], b["os"], field)
            if key in out:  # the first patch of the series decides the row; the newest patch read is cited too
                if out[key]["new"] == new:
                    out[key]["wheel_newest"], out[key]["sha256_newest"] = w["file"], w["sha256"]
                    out[key]["patches"] += 1
                else:
                    out[key]["differs"] = ",".join(filter(None, [out[key].get("differs", ""), w["version"]]))
                continue
            out[key] = {"tf": b["tf"], "os": b["os"], "field": field, "old": old, "new": new, "read": where,
                        "wheel": w["file"], "sha256": w["sha256"], "patches": 1,
                        "source": _source_key(w), "_w": w}
    return list(out.values())


def _source_key(w: dict[str, Any]) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"bi {w['dist']} {w['version']} {w['os']}".lower())


# ---------------------------------------------------------------- render into compat/tensorflow.toml

BEGIN = "  # -- wheel rows: GENERATED by scripts/scan_build_info.py from compat/build_info_scan.json; do not edit --"
END = "  # -- end of wheel rows --"
SRC_BEGIN = "# -- wheel sources: GENERATED by scripts/scan_build_info.py --"
SRC_END = "# -- end of wheel sources --"


def _row(d: dict[str, Any]) -> str:
    keys = ("tf", "os", "field", "old", "new", "read", "patches", "differs", "wheel", "sha256", "wheel_newest",
            "sha256_newest", "source")
    return "  { " + ", ".join(f"{k} = {json.dumps(d[k])}" for k in keys if d.get(k)) + " },"


def _replace_block(text: str, begin: str, end: str, body: list[str], anchor: str) -> str:
    lines = text.splitlines()
    if begin in lines:
        i, j = lines.index(begin), lines.index(end)
        lines[i : j + 1] = [begin, *body, end]
    else:
        k = lines.index(anchor)
        lines[k:k] = [begin, *body, end]
    return "\n".join(lines) + "\n"


def render(record: dict[str, Any], text: str) -> str:
    table = tomllib.loads(text)
    rows = disagreements(record, table)
    body = [
        "  # A wheel that disagrees with the docs table (field = cuda / cudnn; old = the docs' value, new = what",
        "  # the wheel loads, `read` = where in the wheel; `patches` = how many patch releases of the series were",
        "  # read and agree, from `wheel` (the first) to `wheel_newest`; `differs` = patches that read otherwise).",
        "  # tfgpu follows the wheel (tfgpu.kb.knowledge.build_for):",
        "  # a machine runs the wheel, not the table; the docs value stays quoted in `old`.",
        *(_row(r) for r in rows),
    ]
    # the wheel rows go just before the closing bracket of `corrections`
    start = text.index("corrections = [")
    close = text.index("\n]\n", start) + 1
    lines_before = text[:close].count("\n")
    lines = text.splitlines()
    if BEGIN not in lines:
        lines[lines_before:lines_before] = [BEGIN, END]
        text = "\n".join(lines) + "\n"
    text = _replace_block(text, BEGIN, END, body, "")
    sources = []
    for r in rows:
        w = r["_w"]
        sources.append(f'{r["source"]} = {{ title = {json.dumps(_title(w))}, url = "{swa.public_url(w["url"])}",'
                       f' retrieved = "{w["scanned"]}" }}')
    sources = sorted(set(sources))
    lines = text.splitlines()
    if SRC_BEGIN not in lines:
        lines += [SRC_BEGIN, SRC_END]
        text = "\n".join(lines) + "\n"
    return _replace_block(text, SRC_BEGIN, SRC_END, sources, "")


def _title(w: dict[str, Any]) -> str:
    parts = []
    if w.get("build_info_file"):
        parts.append(w["build_info_file"].split("/purelib/")[-1])
    parts += sorted(w.get("objects", {}))
    return f"{w['file']} (PyPI sha256 {w['sha256']}): " + ", ".join(parts)


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="print the diff (default)")
    mode.add_argument("--force", action="store_true", help="write compat/tensorflow.toml")
    ap.add_argument("--scan", action="store_true", help="read wheels from PyPI that the record lacks")
    ap.add_argument("--rescan", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(list(argv) if argv is not None else None)
    record = load_record()
    if args.scan:
        run_scan(args, record)
    old = TABLE.read_text(encoding="utf-8")
    new = render(record, old)
    if new == old:
        print("tensorflow.toml: up to date")
        return 0
    if args.force:
        TABLE.write_text(new, encoding="utf-8")
        print("tensorflow.toml: written")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                               "a/compat/tensorflow.toml", "b/compat/tensorflow.toml"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
