"""CUDA toolkits, CUDA/cuDNN libraries on the loader path, cuDNN versions, pip nvidia-* wheels.

Why not NVIDIA's cuda-pathfinder (PyPI ``cuda-pathfinder``, github NVIDIA/cuda-python, cuda_pathfinder/):
its ``load_nvidia_dynamic_lib`` finds a library by *loading* it (dlopen into our process, one winner),
reads ``os.environ`` once and caches it (``get_cuda_path_or_home`` is ``functools.cache``d), has no way
to point it at another root, and needs Python >= 3.11 (1.9.0) while tfgpu supports 3.9. A doctor needs
every candidate, without loading anything, for a machine profile as well as this machine. So this
module follows the same search order as its ``search_steps.py`` - site-packages ``nvidia/*/lib``, then
``$CONDA_PREFIX/lib``, then ``CUDA_PATH``/``CUDA_HOME`` - and adds the loader's own sources (the
ldconfig cache, LD_LIBRARY_PATH) and the classic /usr/local/cuda* installs.
"""

# Machine paths are strings re-based under ctx.root, in the machine's own path rules (ctx.paths: ntpath for Windows);
# the files they name here (ctx.path) are read with os.path.
# ruff: noqa: PTH110, PTH112, PTH118, PTH120, PTH123, PTH207
from __future__ import annotations

import glob
import os
import re

from tfgpu.facts.probe._ctx import Ctx
from tfgpu.facts.probe.parsers import (
    parse_cuda_version_json,
    parse_cuda_version_txt,
    parse_cudart_header,
    parse_cudnn_header,
    parse_ldconfig,
    parse_nvcc_full_version,
    parse_nvcc_version,
    soname_version,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

    from tfgpu.core.process import Result

_LIB_PATTERNS = re.compile(r"^(libcudart\.so\.\d[\d.]*|libcudnn\.so\.\d[\d.]*|cudart64_\d+\.dll|cudnn64_\d+\.dll)$")


def _short(version: str | None) -> str | None:
    if not version:
        return None
    m = re.match(r"^(\d+)\.(\d+)", version)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _lib_entry(name: str, path: str, source: str) -> dict[str, Any] | None:
    sv = soname_version(name)
    if sv:
        kind, ver = sv
    else:
        m = re.match(r"^(cudart|cudnn)64_(\d+)\.dll$", name)
        if not m:
            return None
        kind = m.group(1)
        digits = m.group(2)  # cudart64_110.dll = 11.0, cudart64_12.dll = 12; cudnn64_8.dll = 8
        ver = f"{digits[:-1]}.{digits[-1]}" if kind == "cudart" and len(digits) == 3 else digits
    return {"kind": kind, "name": name, "version": ver, "path": path, "source": source}


def _scan_lib_dir(ctx: Ctx, d: str, source: str) -> list[dict[str, Any]]:
    out = []
    for name in ctx.listdir(d):
        if _LIB_PATTERNS.match(name) and (e := _lib_entry(name, ctx.paths.join(d, name), source)):
            out.append(e)
    return out


def site_packages_dirs(ctx: Ctx) -> list[str]:
    """The current environment's site-packages (machine paths): sys.path when native; in a profile, the
    ones under $VIRTUAL_ENV / $CONDA_PREFIX."""
    if ctx.native and ctx.env.get("TFGPU_PROBE_SITE") is None:
        import sys

        return [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    out = []
    for prefix in (ctx.env.get("VIRTUAL_ENV"), ctx.env.get("CONDA_PREFIX"), ctx.env.get("TFGPU_PROBE_SITE")):
        if not prefix:
            continue
        base = ctx.unroot(str(ctx.path(prefix)))
        for pattern in (("lib", "python*", "site-packages"), ("Lib", "site-packages"), ()):
            for hit in sorted(glob.glob(str(ctx.path(ctx.paths.join(base, *pattern))))):
                if hit.endswith("site-packages") and os.path.isdir(hit):
                    out.append(ctx.unroot(hit))
    return list(dict.fromkeys(out))


def probe_toolkits(ctx: Ctx, os_name: str) -> list[dict[str, Any]]:
    """Every CUDA toolkit: /usr/local/cuda*, /opt/cuda, CUDA_HOME/CUDA_PATH(_V*), nvcc on PATH (a symlink
    or a wrapper script is followed to its toolkit)."""
    found: dict[str, dict[str, Any]] = {}  # real path (inside root) -> entry

    def add(machine_path: str, via: str) -> None:
        _add_toolkit(ctx, found, machine_path, via)

    for d in sorted(glob.glob(str(ctx.path("/usr/local")) + "/cuda*")):
        add(ctx.unroot(d), "/usr/local/cuda*")
    add("/opt/cuda", "/opt/cuda")
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR",
                *sorted(k for k in ctx.env if k.startswith("CUDA_PATH_V"))):
        if ctx.env.get(var):
            add(ctx.env[var], var)
    if os_name == "windows":
        pf = ctx.env.get("ProgramFiles") or r"C:\Program Files"
        for d in sorted(glob.glob(str(ctx.path(ctx.paths.join(pf, "NVIDIA GPU Computing Toolkit", "CUDA"))) + "/v*")):
            add(ctx.unroot(d), "Program Files")
    nvcc_path = ctx.which("nvcc")
    nvcc_res = None
    if nvcc_path:
        add(ctx.unroot(os.path.dirname(os.path.dirname(_nvcc_target(ctx, nvcc_path)))), "nvcc on PATH")
        nvcc_res = ctx.run([nvcc_path, "--version"])

    toolkits = [_describe_toolkit(ctx, real, entry, nvcc_path, nvcc_res) for real, entry in found.items()]
    if nvcc_path and not any("nvcc on PATH" in t["found_via"] for t in toolkits) and nvcc_res is not None:
        nv = parse_nvcc_version(nvcc_res.stdout) if nvcc_res.ok else None
        toolkits.append({"version": nv, "full_version": parse_nvcc_full_version(nvcc_res.stdout),
                         "path": None, "source": "nvcc --version", "found_via": ["nvcc on PATH"],
                         "nvcc": ctx.unroot(nvcc_path), "aliases": [], "libcudart": []})
    order = {k: i for i, k in enumerate(t["path"] or "" for t in toolkits)}
    return sorted(toolkits, key=lambda t: order.get(t["path"] or "", 0))


def _add_toolkit(ctx: Ctx, found: dict[str, dict[str, Any]], machine_path: str, via: str) -> None:
    """Record the toolkit folder at ``machine_path`` (found through ``via``) in ``found``, keyed by its real path;
    a folder that is not a toolkit is skipped."""
    p = ctx.path(machine_path)
    try:
        real = os.path.realpath(p)
    except OSError:
        return
    if not os.path.isdir(real):
        return
    if not any(os.path.exists(os.path.join(real, x)) for x in ("bin", "include", "lib64", "lib", "version.json",
                                                                 "version.txt", "dist-info")):
        return
    entry = found.setdefault(real, {"path": ctx.unroot(real), "aliases": [], "found_via": []})
    alias = ctx.unroot(str(p))
    if alias != entry["path"] and alias not in entry["aliases"]:
        entry["aliases"].append(alias)
    if via not in entry["found_via"]:
        entry["found_via"].append(via)


def _nvcc_target(ctx: Ctx, nvcc_path: str) -> str:
    """The nvcc that ``nvcc_path`` runs: its real path, or the one a wrapper script execs."""
    real = os.path.realpath(nvcc_path)
    target = real
    try:
        with open(real, "rb") as fh:
            head = fh.read(4096)
        if head.startswith(b"#!"):
            # a wrapper script (e.g. `exec /usr/local/cuda-13.0/bin/nvcc "$@"`): follow the path it names
            named = re.search(rb"(/[^\s\"']+)/bin/nvcc\b", head)
            if named:
                target = str(ctx.path(named.group(1).decode("utf-8", "replace") + "/bin/nvcc"))
    except OSError:
        pass
    return target


def _toolkit_files_version(ctx: Ctx, real: str) -> tuple[str | None, str | None, str | None]:
    """(version, full version, source) from the toolkit's own files: version.json, version.txt, else the
    cuda_runtime_api.h header and a cuda-runtime wheel's dist-info name."""
    version, full, source = None, None, None
    if (t := ctx.read(os.path.join(real, "version.json"))) and (full := parse_cuda_version_json(t)):
        source = "version.json"
    elif (t := ctx.read(os.path.join(real, "version.txt"))) and (full := parse_cuda_version_txt(t)):
        source = "version.txt"
    else:
        full = None
        for hdr in [os.path.join(real, "include", "cuda_runtime_api.h"),
                    *sorted(glob.glob(os.path.join(real, "targets", "*", "include", "cuda_runtime_api.h")))]:
            if (t := ctx.read(hdr)) and (v := parse_cudart_header(t)):
                version, source = v, "cuda_runtime_api.h"
                break
        for name in ctx.listdir(os.path.join(real, "dist-info")):
            m = re.fullmatch(r"nvidia_cuda_runtime(?:_cu\d+)?-(\d+\.\d+(?:\.\d+)*)\.dist-info", name)
            if m:
                full = m.group(1)
                if source is None:
                    source = "dist-info"
    return version, full, source


def _describe_toolkit(ctx: Ctx, real: str, entry: dict[str, Any], nvcc_path: str | None,
                      nvcc_res: Result | None) -> dict[str, Any]:
    """Complete ``entry`` (the toolkit at ``real``) with its nvcc, version, source and libcudart files."""
    version, full, source = _toolkit_files_version(ctx, real)
    version = version or _short(full)
    nvcc_here = None
    for cand in ("bin/nvcc", "bin/nvcc.exe"):
        if os.path.exists(os.path.join(real, cand)):
            nvcc_here = ctx.unroot(os.path.join(real, cand))
    entry["nvcc"] = nvcc_here
    if "nvcc on PATH" in entry["found_via"] and nvcc_res is not None:
        entry["nvcc_on_path"] = ctx.unroot(nvcc_path) if nvcc_path else None
        nv = parse_nvcc_version(nvcc_res.stdout) if nvcc_res.ok else None
        entry["nvcc_version"] = nv
        if nv is None:
            entry["nvcc_error"] = nvcc_res.describe()
        if version is None and nv:
            version, source = nv, "nvcc --version"
            full = parse_nvcc_full_version(nvcc_res.stdout)
    if version is None and (m := re.search(r"cuda-(\d+\.\d+)$", entry["path"])):
        version, source = m.group(1), "directory name"
    libs = []
    for sub in ("lib64", "lib", "bin", "lib/x64", *[os.path.relpath(x, real) for x in
                                                   sorted(glob.glob(os.path.join(real, "targets", "*", "lib")))]):
        libs += [e["name"] for e in _scan_lib_dir(ctx, ctx.unroot(os.path.join(real, sub)), "toolkit")
                 if e["kind"] == "cudart"]
    entry.update({"version": version, "full_version": full, "source": source,
                  "libcudart": sorted(set(libs))})
    return entry

def probe_libraries(ctx: Ctx, site_dirs: list[str]) -> dict[str, Any]:
    """libcudart / libcudnn on the loader path: the ldconfig cache, LD_LIBRARY_PATH (searched first),
    $CONDA_PREFIX/lib, pip wheels (site-packages/nvidia/*/lib)."""
    libs: list[dict[str, Any]] = []
    ldconfig = ctx.which("ldconfig") or next(
        (str(ctx.path(p)) for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if ctx.exists(p)), None)
    ld_error = None
    if ldconfig:
        res = ctx.run([ldconfig, "-p"])
        if res.ok:
            for name, path in parse_ldconfig(res.stdout, containing=("libcudart.so.", "libcudnn.so.")):
                if _LIB_PATTERNS.match(name) and (e := _lib_entry(name, path, "ldconfig")):
                    libs.append(e)
        else:
            ld_error = res.describe()
    # the loader's search path: LD_LIBRARY_PATH on Linux; on Windows the DLL search path is PATH, where the
    # CUDA installer puts its bin folder and where TensorFlow <= 2.10 finds cudart64_*.dll and cudnn64_*.dll
    search = ("PATH", ctx.env.get("PATH")) if ctx.os_name == "windows" else ("LD_LIBRARY_PATH", ctx.env.get("LD_LIBRARY_PATH"))
    for d in [x for x in (search[1] or "").split(ctx.pathsep) if x]:
        libs += _scan_lib_dir(ctx, d, search[0])
    join = ctx.paths.join
    prefix = ctx.env.get("CONDA_PREFIX")
    if prefix:
        libs += _scan_lib_dir(ctx, join(prefix, "lib"), "conda")
        libs += _scan_lib_dir(ctx, join(prefix, "Library", "bin"), "conda")
    for sp in site_dirs:
        for pkg in ctx.listdir(join(sp, "nvidia")):
            for sub in ("lib", "bin"):
                libs += _scan_lib_dir(ctx, join(sp, "nvidia", pkg, sub), "pip")
    seen = set()
    unique = []
    for e in libs:
        key = (e["path"], e["source"])
        if key not in seen:
            seen.add(key)
            unique.append(e)
    return {"libcudart": [e for e in unique if e["kind"] == "cudart"],
            "libcudnn": [e for e in unique if e["kind"] == "cudnn"],
            "ldconfig_error": ld_error}


def probe_cudnn(ctx: Ctx, toolkits: list[dict[str, Any]], libraries: dict[str, Any],
                site_dirs: list[str], pip_nvidia: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """cuDNN versions: headers (cudnn_version.h for >= 8, cudnn.h for <= 7), pip nvidia-cudnn-cu*, conda
    packages ($CONDA_PREFIX/conda-meta/cudnn-*.json), and libcudnn sonames (major only). A system copy
    on LD_LIBRARY_PATH while the environment has its own is flagged: LD_LIBRARY_PATH is searched before
    the environment's RUNPATH, so the system copy wins."""
    out: list[dict[str, Any]] = []
    include_dirs = ["/usr/include", "/usr/local/include", "/usr/include/x86_64-linux-gnu",
                    "/usr/include/aarch64-linux-gnu"]
    join = ctx.paths.join
    include_dirs += [join(t["path"], "include") for t in toolkits if t.get("path")]
    prefix = ctx.env.get("CONDA_PREFIX")
    if prefix:
        include_dirs += [join(prefix, "include"), join(prefix, "Library", "include")]
    include_dirs += [join(sp, "nvidia", "cudnn", "include") for sp in site_dirs]
    seen_paths = set()
    for d in dict.fromkeys(include_dirs):
        for name in ("cudnn_version.h", "cudnn_version_v9.h", "cudnn_version_v8.h", "cudnn.h", "cudnn_v7.h"):
            path = join(d, name)
            text = ctx.read(path)
            if text is None:
                continue
            real = os.path.realpath(ctx.path(path))
            if real in seen_paths:
                continue
            seen_paths.add(real)
            v = parse_cudnn_header(text)
            if v:
                sep = ctx.paths.sep
                origin = ("conda" if prefix and d.startswith(prefix) else
                          "pip" if f"{sep}nvidia{sep}cudnn{sep}" in d else "system")
                out.append({"version": v, "path": path, "source": name, "origin": origin})
                break  # cudnn.h of >= 8 only includes cudnn_version.h
    for dist in pip_nvidia:
        if re.fullmatch(r"nvidia-cudnn(-cu\d+)?", dist["distribution"]):
            out.append({"version": dist["version"], "path": dist.get("path"), "source": "pip " + dist["distribution"],
                        "origin": "pip"})
    if prefix:
        for name in ctx.listdir(join(prefix, "conda-meta")):
            m = re.fullmatch(r"cudnn-(\d+(?:\.\d+)+)-[^-]+\.json", name)
            if m:
                out.append({"version": m.group(1), "path": join(prefix, "conda-meta", name), "source": "conda package",
                            "origin": "conda"})
    known_majors = {e["version"].split(".")[0] for e in out}
    for lib in libraries.get("libcudnn", []):
        if lib["version"].split(".")[0] not in known_majors:
            out.append({"version": lib["version"], "path": lib["path"], "source": "soname", "origin": lib["source"]})
            known_majors.add(lib["version"].split(".")[0])
    env_copies = [lib for lib in libraries.get("libcudnn", []) if lib["source"] in ("conda", "pip")]
    system_on_ld = [lib for lib in libraries.get("libcudnn", []) if lib["source"] == "LD_LIBRARY_PATH"
                    and not (prefix and lib["path"].startswith(prefix))]
    for e in out:
        e["shadowing"] = None
    if env_copies and system_on_ld:
        shadow = {"by": system_on_ld[0]["path"], "env_copy": env_copies[0]["path"],
                  "why": "LD_LIBRARY_PATH is searched before the environment's own library directory"}
        for e in out:
            if e["origin"] in ("conda", "pip"):
                e["shadowing"] = shadow
        if not any(e["shadowing"] for e in out):
            out.append({"version": env_copies[0]["version"], "path": env_copies[0]["path"], "source": "soname",
                        "origin": env_copies[0]["source"], "shadowing": shadow})
    return out
