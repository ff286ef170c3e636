"""Platform, CPU flags, Python interpreters, conda/mamba/micromamba, installed distributions."""

# Machine paths are strings re-based under ctx.root, in the machine's own path rules (ctx.paths: ntpath for Windows).
# ruff: noqa: PTH110, PTH118, PTH119, PTH123
from __future__ import annotations

import os
import re
import sys

from tfgpu.core.tfnames import TF_BUILDS, TF_COMPANIONS
from tfgpu.facts.probe._ctx import Ctx
from tfgpu.facts.probe.parsers import (
    executable_bits,
    parse_cpuinfo_flags,
    parse_ldd_version,
    parse_nv_tegra_release,
    parse_os_release,
    parse_proc_version_wsl,
    parse_py_launcher,
    parse_version_output,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

#: TensorFlow distributions (PyPI names) a user may have installed instead of / beside `tensorflow`.
TF_DISTRIBUTIONS = (*TF_BUILDS, *TF_COMPANIONS)


def detect_os(ctx: Ctx) -> str:
    """linux | windows | macos | other. For a profile tree: a Windows/ folder means Windows, a
    System/Library folder macOS, anything else Linux."""
    if ctx.native:
        from tfgpu.facts.probe import native_os

        return native_os()
    if ctx.exists("/Windows/System32") or ctx.exists("/C/Windows/System32"):
        return "windows"
    if ctx.exists("/System/Library/CoreServices"):
        return "macos"
    return "linux"


#: platform.python_implementation()'s names for sys.implementation.name.
_IMPLEMENTATIONS = {"cpython": "CPython", "pypy": "PyPy", "graalpy": "GraalVM", "ironpython": "IronPython"}


def _machine() -> str | None:
    """platform.machine() without importing platform (~3 ms): os.uname() on POSIX."""
    if hasattr(os, "uname"):
        return os.uname().machine or None
    import platform as _platform  # pragma: no cover - Windows

    return _platform.machine() or None


def probe_platform(ctx: Ctx) -> dict[str, Any]:
    """{"platform": {...}, "cpu": {...}}."""
    os_name = detect_os(ctx)
    plat: dict[str, Any] = {"os": os_name, "arch": None, "distro": None, "glibc": None, "wsl": None,
                            "container": False, "container_kind": None, "kernel": None}
    if ctx.native:
        plat["arch"] = _machine()
    if os_name == "linux":
        osr = parse_os_release(ctx.read("/etc/os-release") or ctx.read("/usr/lib/os-release") or "")
        if osr.get("ID"):
            plat["distro"] = f"{osr['ID']} {osr.get('VERSION_ID', '')}".strip()
            plat["distro_name"] = osr.get("PRETTY_NAME")
        tegra = ctx.read("/etc/nv_tegra_release")
        plat["jetson"] = parse_nv_tegra_release(tegra) if tegra else None  # L4T release and board of a Jetson
        pv = ctx.read("/proc/version")
        if pv:
            plat["wsl"] = parse_proc_version_wsl(pv)
            if m := re.search(r"Linux version (\S+)", pv):
                plat["kernel"] = m.group(1)
        if plat["wsl"] is None and (ctx.exists("/dev/dxg") or ctx.exists("/usr/lib/wsl/lib")):
            plat["wsl"] = 2
        if ctx.exists("/.dockerenv"):
            plat["container"], plat["container_kind"] = True, "docker"
        elif ctx.exists("/run/.containerenv"):
            plat["container"], plat["container_kind"] = True, "podman"
        else:
            cg = ctx.read("/proc/1/cgroup") or ""
            if re.search(r"docker|kubepods|containerd|lxc|libpod", cg):
                plat["container"], plat["container_kind"] = True, "cgroup"
        if ctx.native:
            try:
                libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
            except (ValueError, OSError, AttributeError):
                libc = ""
            if m := re.match(r"glibc (\d+\.\d+)", libc):
                plat["glibc"] = m.group(1)
        if plat["glibc"] is None:
            res = ctx.run(["ldd", "--version"])
            plat["glibc"] = parse_ldd_version(res.stdout or res.stderr) if res.returncode is not None else None
        if plat["arch"] is None:
            res_arch = ctx.run(["uname", "-m"])
            plat["arch"] = res_arch.stdout.strip() or None if res_arch.ok else None
        if plat["arch"] is None and plat["jetson"]:
            plat["arch"] = "aarch64"  # every Jetson L4T release is aarch64 (EABI field of the same file)
    elif os_name == "macos":
        plat["note"] = "macOS has no CUDA GPU support; TensorFlow on a Mac uses tensorflow-metal, not CUDA"
    elif os_name == "windows" and ctx.native:
        import platform as _platform  # Windows only: its release needs the registry logic

        plat["distro"] = f"windows {_platform.release()}".strip()
    return {"platform": plat, "cpu": probe_cpu(ctx, os_name, plat["arch"])}


def probe_cpu(ctx: Ctx, os_name: str, arch: str | None) -> dict[str, Any]:
    """AVX/AVX2 (TensorFlow wheels since 1.6 need AVX). None when unknown."""
    cpu: dict[str, Any] = {"avx": None, "avx2": None, "source": None, "model": None}
    if os_name == "linux":
        text = ctx.read("/proc/cpuinfo")
        if text:
            if m := re.search(r"^model name\s*:\s*(.+)$", text, re.M):
                cpu["model"] = m.group(1).strip()
            flags = parse_cpuinfo_flags(text)
            if flags is not None:
                cpu["avx"], cpu["avx2"], cpu["source"] = "avx" in flags, "avx2" in flags, "/proc/cpuinfo"
                cpu["avx512f"] = "avx512f" in flags
    elif os_name == "windows" and ctx.native and sys.platform == "win32":  # pragma: no cover - Windows only
        import ctypes

        k32 = ctypes.windll.kernel32  # type: ignore[attr-defined,unused-ignore]
        # PF_AVX_INSTRUCTIONS_AVAILABLE = 39, PF_AVX2_INSTRUCTIONS_AVAILABLE = 40 (winnt.h)
        cpu["avx"], cpu["avx2"] = bool(k32.IsProcessorFeaturePresent(39)), bool(k32.IsProcessorFeaturePresent(40))
        cpu["source"] = "IsProcessorFeaturePresent"
    if arch and arch.lower() in ("aarch64", "arm64", "ppc64le", "s390x") and cpu["avx"] is None:
        cpu.update({"avx": False, "avx2": False, "source": f"arch {arch}"})
    return cpu


def _version_from_name(path: str) -> str | None:
    m = re.search(r"python(\d\.\d+)(?:\.exe)?$", os.path.basename(path))
    return m.group(1) if m else None


def probe_python(ctx: Ctx, os_name: str) -> dict[str, Any]:
    """The running interpreter plus every other one: python3.X on PATH, pyenv, uv-managed, conda envs
    and (Windows) `py -0p`. Versions come from names; an unversioned `python3` is asked, concurrently."""
    current = sys.version.split()[0]  # what platform.python_version() returns, without importing platform
    found: dict[str, dict[str, Any]] = {}

    def add(path: str, version: str | None, source: str, bits: int | None = None) -> None:
        machine = ctx.unroot(path)
        real = os.path.realpath(ctx.path(machine))
        key = real if os.path.exists(real) else machine
        entry = found.get(key)
        if entry is None:
            # a 32-bit interpreter cannot install TensorFlow (64-bit wheels only): its word size, from its
            # header (a wrapper script or an alias says nothing: null)
            found[key] = {"version": version, "path": machine, "source": source,
                          "bits": bits or executable_bits(ctx.head(real, 1024))}
        elif entry["version"] is None or (version and len(version) > len(entry["version"])):
            entry["version"] = version or entry["version"]

    on_path, ask = _pythons_on_path(ctx)
    for path, version in on_path:
        add(path, version, "PATH")
    for path, version, source in (*_pyenv_pythons(ctx, os_name), *_uv_pythons(ctx, os_name),
                                  *_conda_pythons(ctx, os_name)):
        add(path, version, source)
    if os_name == "windows":
        res = ctx.run(["py", "-0p"])
        if res.ok:
            for e in parse_py_launcher(res.stdout):
                bits = {"32": 32, "64": 64, "arm64": 64}.get(str(e.get("bits")))
                add(e["path"] or f"py -{e['version']}", e["version"], "py -0p", bits)
    for path, version in _ask_versions(ctx, ask):
        add(path, version, "PATH")
    interpreters = sorted(found.values(), key=lambda e: (e["source"], e["path"]))
    return {"current": current, "bits": 64 if sys.maxsize > 2**32 else 32, "executable": sys.executable,
            "implementation": _IMPLEMENTATIONS.get(sys.implementation.name, sys.implementation.name),
            "interpreters": interpreters}


def _pythons_on_path(ctx: Ctx) -> tuple[list[tuple[str, str | None]], list[str]]:
    """Interpreters in PATH's trusted folders: ([(path, version from its name)], [unversioned ones to ask])."""
    from tfgpu.core.process import trusted_dir

    join = ctx.paths.join
    named: list[tuple[str, str | None]] = []
    ask: list[str] = []
    listed: set[str] = set()
    for d in [x for x in (ctx.env.get("PATH") or "").split(ctx.pathsep) if x]:
        if not ctx.paths.isabs(d) or not trusted_dir(ctx.path(d)):
            continue  # `.`, relative entries and folders anyone can write: never interpreters to run
        if d.rstrip("/\\").endswith("shims"):
            continue  # pyenv/asdf shims are slow wrappers; the versions they wrap are listed below
        real = os.path.realpath(ctx.path(d))
        if real in listed:
            continue  # /bin after /usr/bin on a merged-/usr system: the same folder (and interpreters) again
        listed.add(real)
        for name in ctx.listdir(d):
            if not name.startswith("python"):
                continue  # most of a bin directory; a regex per name cost ~5 ms
            if re.fullmatch(r"python\d\.\d+(\.exe)?", name):
                named.append((join(d, name), _version_from_name(name)))
            elif re.fullmatch(r"python3?(\.exe)?", name):
                target = os.path.realpath(ctx.path(join(d, name)))
                v = _version_from_name(target)
                if v:
                    named.append((join(d, name), v))
                else:
                    ask.append(join(d, name))
    return named, ask


def _pyenv_pythons(ctx: Ctx, os_name: str) -> list[tuple[str, str, str]]:
    """(path, version, "pyenv") for each pyenv-installed Python (pyenv-win's PYENV_ROOT is its pyenv-win
    folder): bin/pythonX.Y in its folder, python.exe at the top on Windows."""
    join = ctx.paths.join
    home = ctx.home()
    windows = os_name == "windows"
    out: list[tuple[str, str, str]] = []
    pyenv_root = ctx.env.get("PYENV_ROOT") or (join(home, ".pyenv") if home else None)
    if pyenv_root:
        for v in ctx.listdir(join(pyenv_root, "versions")):
            if re.fullmatch(r"\d+\.\d+\.\d+\w*", v):
                names = ("python.exe",) if windows else (f"bin/python{v.rsplit('.', 1)[0]}", "bin/python")
                exe = next((e for n in names if ctx.exists(e := join(pyenv_root, "versions", v, *n.split("/")))), None)
                if exe:
                    out.append((exe, v, "pyenv"))
    return out


def _uv_pythons(ctx: Ctx, os_name: str) -> list[tuple[str, str, str]]:
    """(path, version, "uv") for each uv-managed Python, in a folder of its own under uv's install folder."""
    join = ctx.paths.join
    home = ctx.home()
    windows = os_name == "windows"
    out: list[tuple[str, str, str]] = []
    uv_default = (join(ctx.env["APPDATA"], "uv", "python") if windows and ctx.env.get("APPDATA") else
                  join(home, ".local", "share", "uv", "python") if home and not windows else None)
    uv_dir = ctx.env.get("UV_PYTHON_INSTALL_DIR") or uv_default
    if uv_dir:
        for name in ctx.listdir(uv_dir):
            m = re.match(r"^(?:cpython|pypy)-(\d+\.\d+\.\d+)", name)
            if m:
                short = m.group(1).rsplit(".", 1)[0]
                exe = join(uv_dir, name, "python.exe") if windows else join(uv_dir, name, "bin", f"python{short}")
                out.append((exe if ctx.exists(exe) else join(uv_dir, name), m.group(1), "uv"))
    return out


def _conda_pythons(ctx: Ctx, os_name: str) -> list[tuple[str, str, str]]:
    """(path, version, "conda") for the Python each conda environment's conda-meta lists."""
    join = ctx.paths.join
    out: list[tuple[str, str, str]] = []
    for prefix in conda_prefixes(ctx):
        for meta in ctx.listdir(join(prefix, "conda-meta")):
            m = re.fullmatch(r"python-(\d+\.\d+\.\d+)-[^-]+\.json", meta)
            if m:
                short = m.group(1).rsplit(".", 1)[0]
                exe = join(prefix, "bin", f"python{short}") if os_name != "windows" else join(prefix, "python.exe")
                out.append((exe, m.group(1), "conda"))
    return out


def _ask_versions(ctx: Ctx, ask: list[str]) -> list[tuple[str, str | None]]:
    """Run each unversioned interpreter (concurrently, at most 4 at once) for its version; None when it fails."""
    if not ask:
        return []
    code = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
    from concurrent.futures import ThreadPoolExecutor  # only when there is something to ask

    with ThreadPoolExecutor(max_workers=min(4, len(ask))) as pool:
        return [(path, parse_version_output(res.stdout) if res.ok else None)
                for path, res in zip(ask, pool.map(lambda p: ctx.run([str(ctx.path(p)), "-c", code]), ask))]

def conda_roots(ctx: Ctx) -> list[str]:
    """Conda installations (machine paths): from CONDA_EXE / MAMBA_EXE / MAMBA_ROOT_PREFIX and the usual
    install folders in the home directory."""
    roots = []
    paths = ctx.paths
    for var in ("CONDA_EXE", "MAMBA_EXE", "_CONDA_EXE"):
        exe = ctx.env.get(var)
        if exe:
            roots.append(paths.dirname(paths.dirname(exe)))
    if ctx.env.get("MAMBA_ROOT_PREFIX"):
        roots.append(ctx.env["MAMBA_ROOT_PREFIX"])
    home = ctx.home()
    if home:
        for name in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", "Miniconda3", "Anaconda3"):
            roots.append(paths.join(home, name))
    if ctx.os_name != "windows":
        roots.append("/opt/conda")
    return [r for r in dict.fromkeys(roots)
            if ctx.exists(paths.join(r, "conda-meta")) or ctx.exists(paths.join(r, "envs"))]


def conda_prefixes(ctx: Ctx) -> list[str]:
    """Every conda environment: the roots, their envs/*, ~/.conda/environments.txt, $CONDA_PREFIX."""
    prefixes = []
    join = ctx.paths.join
    for root in conda_roots(ctx):
        prefixes.append(root)
        prefixes += [join(root, "envs", e) for e in ctx.listdir(join(root, "envs"))]
    home = ctx.home()
    if home:
        for line in (ctx.read(join(home, ".conda", "environments.txt")) or "").splitlines():
            if line.strip():
                prefixes.append(line.strip())
    if ctx.env.get("CONDA_PREFIX"):
        prefixes.append(ctx.env["CONDA_PREFIX"])
    return [p for p in dict.fromkeys(prefixes) if ctx.exists(join(p, "conda-meta"))]


def probe_conda(ctx: Ctx) -> dict[str, Any]:
    """conda / mamba / micromamba executables with versions (from conda-meta when possible, else
    `X --version`, concurrently), the active prefix and every environment."""
    exes: dict[str, str] = {}
    paths = ctx.paths
    for kind, var in (("conda", "CONDA_EXE"), ("mamba", "MAMBA_EXE")):
        if ctx.env.get(var) and ctx.exists(ctx.env[var]):
            exe_name = paths.basename(ctx.env[var]).lower()
            exes.setdefault("micromamba" if exe_name.startswith("micromamba") else kind, str(ctx.path(ctx.env[var])))
    for kind in ("conda", "mamba", "micromamba"):
        if kind not in exes and (w := ctx.which(kind)):
            exes[kind] = w
    for root in conda_roots(ctx):
        for kind in ("conda", "mamba"):
            for sub in (("bin", kind), ("condabin", kind), ("Scripts", f"{kind}.exe")):
                if kind not in exes and ctx.exists(paths.join(root, *sub)):
                    exes[kind] = str(ctx.path(paths.join(root, *sub)))
    tools: list[dict[str, Any]] = []

    def version_of(kind: str, exe: str) -> dict[str, Any]:
        machine = ctx.unroot(exe)
        root = paths.dirname(paths.dirname(machine))
        for meta in ctx.listdir(paths.join(root, "conda-meta")):
            m = re.fullmatch(rf"{kind}-(\d+\.\d+(?:\.\d+)*)-[^-]+\.json", meta)
            if m:
                return {"kind": kind, "path": machine, "version": m.group(1), "source": "conda-meta"}
        res = ctx.run([exe, "--version"])
        return {"kind": kind, "path": machine, "version": parse_version_output(res.stdout) if res.ok else None,
                "source": "--version", **({} if res.ok else {"error": res.describe()})}

    if exes:
        from concurrent.futures import ThreadPoolExecutor  # only when there is something to ask

        with ThreadPoolExecutor(max_workers=len(exes)) as pool:
            tools = list(pool.map(lambda kv: version_of(*kv), exes.items()))
    primary = next((t for k in ("mamba", "micromamba", "conda") for t in tools if t["kind"] == k), None)
    envs = conda_prefixes(ctx)
    return {"conda": {
        "kind": primary["kind"] if primary else None,
        "path": primary["path"] if primary else None,
        "version": primary["version"] if primary else None,
        "tools": tools,
        "active_prefix": ctx.env.get("CONDA_PREFIX"),
        "active_env": ctx.env.get("CONDA_DEFAULT_ENV"),
        "envs": envs,
        "error": None if tools else "no conda, mamba or micromamba found",
    }}


def probe_distributions(ctx: Ctx, site_dirs: list[str]) -> dict[str, Any]:
    """TensorFlow and nvidia-* wheels installed in the current environment.

    Reads the ``*.dist-info`` folder names (the names carry name and version) and, for the matching
    ones only, the Name/Version headers of their METADATA (``importlib.metadata`` costs ~60 ms to
    import and ~0.3 s to scan a big environment).
    """
    tf: dict[str, dict[str, Any]] = {}
    nv: dict[str, dict[str, Any]] = {}
    for sp in site_dirs:
        for folder in ctx.listdir(sp):
            m = re.fullmatch(r"([A-Za-z0-9_.]+?)-(\d[^-]*?)\.(dist-info|egg-info)", folder)
            if not m:
                continue
            norm = re.sub(r"[-_.]+", "-", m.group(1)).lower()
            if norm not in TF_DISTRIBUTIONS and not norm.startswith("nvidia-"):
                continue
            path = ctx.path(ctx.paths.join(sp, folder))
            version = m.group(2)
            name, meta_version = _metadata_headers(path)
            version = meta_version or version
            if name:
                norm = re.sub(r"[-_.]+", "-", name).lower()
            entry = {"distribution": norm, "version": version, "path": ctx.unroot(path)}
            if norm in TF_DISTRIBUTIONS:
                tf.setdefault(norm, entry)
            elif norm.startswith("nvidia-"):
                nv.setdefault(norm, entry)
    return {"tensorflow": sorted(tf.values(), key=lambda e: str(e["distribution"])),
            "pip_nvidia": sorted(nv.values(), key=lambda e: str(e["distribution"]))}


def _metadata_headers(folder: str) -> tuple[str | None, str | None]:
    """Name and Version from a dist-info METADATA / egg-info PKG-INFO (RFC 822 headers at the top)."""
    name = ver = None
    for fname in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, fname), encoding="utf-8", errors="replace") as fh:
                for _, line in zip(range(50), fh):
                    if not line.strip():
                        break  # end of the headers
                    key, _, value = line.partition(":")
                    if key == "Name":
                        name = value.strip() or None
                    elif key == "Version":
                        ver = value.strip() or None
        except OSError:  # absent, a directory, unreadable: keep the folder's name
            continue
        break
    return name, ver


