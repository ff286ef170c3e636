"""The environment verdict: will the TensorFlow installed in this environment use the GPU, run on the CPU
only, or not work at all -- and every reason, with its evidence and its fix. Pure: the environment's facts
(tfgpu.facts.environment) and the machine's, the knowledge base, compat/sonames.toml and compat/pins.toml.

A finding carries a ``repair``: what `tfgpu fix` can do about it in place (tfgpu.plan.envfix turns repairs
into a Plan), or ``{"kind": "none", ...}`` with the step that must happen elsewhere (a driver, a new
environment)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from tfgpu.core.tfnames import SMALL_GPU_MIB, TF_BUILDS
from tfgpu.facts import loader

GPU, CPU_ONLY, BROKEN, NO_TF = "gpu", "cpu-only", "broken", "no-tensorflow"
VERDICT_TEXT = {GPU: "uses the GPU", CPU_ONLY: "CPU only", BROKEN: "broken", NO_TF: "no TensorFlow"}
#: A requirement of TensorFlow whose violation stops `import tensorflow` (the others are caveats).
_IMPORT_CRITICAL = ("numpy", "protobuf", "ml-dtypes", "keras")
_LEGACY_TRUE = ("1", "true", "yes")


def _v(text: Any) -> Version | None:
    try:
        return Version(str(text))
    except (InvalidVersion, TypeError):
        return None


def _finding(fid: str, summary: str, *, effect: str, fix: str, evidence: str = "", repair: dict[str, Any] | None = None,
             source: str = "") -> dict[str, Any]:
    out = {"id": fid, "summary": summary, "evidence": evidence, "fix": fix, "effect": effect,
           "repair": repair or {"kind": "none"}}
    if source:
        out["source"] = source
    return out


def main_distribution(tfs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The TensorFlow distribution that owns the `tensorflow` package (the GPU one first when several)."""
    order = {n: i for i, n in enumerate(("tensorflow-gpu", "tensorflow", "tf-nightly", "tensorflow-cpu",
                                         "tensorflow-intel"))}
    cands = [t for t in tfs if t.get("distribution") in TF_BUILDS]
    return min(cands, key=lambda t: order.get(str(t["distribution"]), 99)) if cands else (tfs[0] if tfs else None)


def markers_env(doc: Mapping[str, Any], os_name: str) -> dict[str, str]:
    py = str(doc.get("python_version") or "3")
    short = ".".join(py.split(".")[:2])
    system = {"windows": "Windows", "macos": "Darwin"}.get(os_name, "Linux")
    return {"python_version": short, "python_full_version": py, "platform_system": system,
            "sys_platform": {"Windows": "win32", "Darwin": "darwin"}.get(system, "linux"),
            "platform_machine": "x86_64", "os_name": "nt" if system == "Windows" else "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def requirements_of(tf: Mapping[str, Any], env: Mapping[str, str], extra: str = "") -> list[Requirement]:
    """TensorFlow's Requires-Dist that apply here (``extra``: those of that extra only)."""
    out = []
    for line in tf.get("requires") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None:
            if not extra:
                out.append(req)
            continue
        if extra:
            if "extra" in str(req.marker) and req.marker.evaluate({**env, "extra": extra}):
                out.append(req)
        elif "extra" not in str(req.marker) and req.marker.evaluate(dict(env)):
            out.append(req)
    return out


def python_findings(doc: Mapping[str, Any], tf: Mapping[str, Any], kb: Any, os_name: str,
                    activation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Python-level breakage: two TensorFlows, the release's own requirements, compat/pins.toml, Keras."""
    out: list[dict[str, Any]] = []
    dists: Mapping[str, str] = doc.get("distributions") or {}
    tfv = _v(tf.get("version"))
    family = [t for t in doc.get("tensorflow") or [] if t.get("distribution") in TF_BUILDS]
    windows_pair = os_name == "windows" and {str(t["distribution"]) for t in family} == {"tensorflow",
                                                                                          "tensorflow-intel"}
    if len(family) > 1 and not windows_pair:
        names = ", ".join(f"{t['distribution']}=={t['version']}" for t in family)
        others = [str(t["distribution"]) for t in family if t is not tf]
        out.append(_finding(
            "python.tf_conflict", f"{names} are installed together: each writes the same tensorflow/ files, and "
            "whichever was installed last wins (the GPU build may be gone)", evidence=names, effect=CPU_ONLY,
            fix=f"pip uninstall -y {' '.join(others)} && pip install --force-reinstall --no-deps "
                f"{tf['distribution']}=={tf['version']}",
            repair={"kind": "replace", "remove": others, "reinstall": f"{tf['distribution']}=={tf['version']}"}))
    env = markers_env(doc, os_name)
    pins = [p for p in kb.pins if tfv in p.tf] if tfv is not None else []
    seen: set[str] = set()
    for req in requirements_of(tf, env) + [Requirement(p.requirement) for p in pins]:
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        have = dists.get(name)
        hv = _v(have)
        if have is None or hv is None or name in seen or req.specifier.contains(hv, prereleases=True):
            continue
        seen.add(name)
        pin = next((p for p in pins if Requirement(p.requirement).name == req.name), None)
        critical = name in _IMPORT_CRITICAL and not (pin is not None and pin.confidence == "inferred")
        why = pin.why.split(";")[0] if pin else f"TensorFlow {tfv}'s wheel metadata requires {req}"
        out.append(_finding(
            f"python.{name}", f"{name} {have} is installed, but TensorFlow {tfv} needs {name}{req.specifier}"
            + (" (`import tensorflow` fails or breaks)" if critical else ""),
            evidence=f"installed {name}=={have}; required {req} ({'compat/pins.toml' if pin else 'Requires-Dist'})",
            effect=BROKEN if critical else "caveat", fix=f"pip install \"{name}{req.specifier}\"",
            repair={"kind": "pip", "requirements": [f"{name}{req.specifier}"], "why": why},
            source=pin.source if pin else "the wheel's METADATA"))
    legacy = str(activation.get("TF_USE_LEGACY_KERAS") or "").lower() in _LEGACY_TRUE
    if tfv is not None and tfv >= Version("2.16"):
        want = f"tf-keras~={tfv.major}.{tfv.minor}.0"
        tk = _v(dists.get("tf-keras"))
        if legacy and tk is None:
            out.append(_finding(
                "python.tf_keras", f"TF_USE_LEGACY_KERAS is set, but tf-keras is not installed: TensorFlow {tfv} "
                "then fails at `tf.keras` (Keras 3 is the default since 2.16; Keras 2 code needs tf-keras)",
                evidence="TF_USE_LEGACY_KERAS=" + str(activation.get("TF_USE_LEGACY_KERAS")), effect=BROKEN,
                fix=f"pip install \"{want}\"", repair={"kind": "pip", "requirements": [want]}, source="tf-2-16-0-notes"))
        elif tk is not None and (tk.major, tk.minor) != (tfv.major, tfv.minor):
            out.append(_finding(
                "python.tf_keras", f"tf-keras {tk} does not match TensorFlow {tfv}: tf-keras releases follow "
                "TensorFlow's minor version", evidence=f"tf-keras=={tk}", effect=BROKEN if legacy else "caveat",
                fix=f"pip install \"{want}\"", repair={"kind": "pip", "requirements": [want]}))
    gpu_v = _v(dists.get("tensorflow-gpu"))
    if gpu_v is not None and gpu_v >= Version("2.12"):
        out.append(_finding("python.tf_gpu_placeholder", f"tensorflow-gpu {gpu_v} is an empty placeholder that raises "
                            "an error on install and import", effect=BROKEN,
                            fix="pip uninstall -y tensorflow-gpu && pip install \"tensorflow[and-cuda]\"",
                            repair={"kind": "none", "instead": "pip install \"tensorflow[and-cuda]\""}))
    return out


def _caller(objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The object TensorFlow's loader calls dlopen from (compat/sonames.toml `caller`)."""
    return next((o for o in objects if posixpath.basename(str(o.get("path"))).startswith("libtensorflow_framework.so")),
                None)


def _family(name: str) -> str:
    m = re.match(r"^(?:lib)?([A-Za-z]+?)(?:64_\d+\.dll|\.so(?:\.[\d.]+)?)$", name)
    return m.group(1) if m else name


def _found_instead(name: str, listing: Mapping[str, Sequence[str]], real: Mapping[str, str]) -> list[str]:
    """Other versions of the same library anywhere we looked (each real directory once)."""
    fam = _family(name)
    hits: dict[str, str] = {}
    for d, names in listing.items():
        for n in names:
            if n != name and _family(n) == fam and re.search(r"\.so\.\d|64_\d", n):
                hits.setdefault(posixpath.join(real.get(d, d), n), posixpath.join(d, n))
    return sorted(hits.values())[:6]


def resolve_libraries(doc: Mapping[str, Any], names: Mapping[str, str], linked: Sequence[str]) -> list[dict[str, Any]]:
    """Each needed library: the file the loader would take (tfgpu.facts.loader's order, from the object that calls
    dlopen: libtensorflow_framework), its version, where it came from, the other copies, and what was found
    instead when it is missing. A name that search misses but another TensorFlow object's RUNPATH holds is
    marked ``found-elsewhere`` (``from`` names that object): which object opens it decides."""
    objects = doc.get("objects") or []
    caller = _caller(objects) or (objects[0] if objects else {"path": ""})
    listing = {k: list(v) for k, v in (doc.get("dirs") or {}).items()}
    versions: Mapping[str, Mapping[str, str]] = doc.get("versions") or {}
    cache = [tuple(e) for e in doc.get("ld_cache") or []]
    ld_path = (doc.get("activation") or {}).get("LD_LIBRARY_PATH")

    def search_of(obj: Mapping[str, Any]) -> list[loader.SearchDir]:
        return loader.linux_search(caller=str(obj.get("path")), rpath=obj.get("rpath"), runpath=obj.get("runpath"),
                                   ld_library_path=ld_path)

    search = search_of(caller)
    out = []
    wanted = [(fam, n, "dlopen") for fam, n in names.items()] + [(_family(n), n, "DT_NEEDED") for n in linked]
    wanted.append(("cuda", "libcuda.so.1", "dlopen (the driver)"))
    for fam, name, how in wanted:
        res = loader.resolve(name, search, listing, cache)
        status, origin = ("found" if res.path else "missing"), posixpath.basename(str(caller.get("path")))
        if res.path is None and fam != "cuda":
            for obj in objects:
                if obj is caller:
                    continue
                alt = loader.resolve(name, search_of(obj), listing, cache)
                if alt.path:
                    res, status, origin = alt, "found-elsewhere", posixpath.basename(str(obj.get("path")))
                    break
        d = posixpath.dirname(res.path) if res.path else None
        out.append({"name": name, "family": fam, "how": how, "path": res.path, "via": res.via, "from": origin,
                    "version": (versions.get(d) or {}).get(name) if d else None,
                    "others": [p for p, _ in res.others], "found_instead": [] if res.path else _found_instead(name, listing, doc.get("real_dirs") or {}),
                    "status": status})
    return out


def _cuda_of(tf: Version, build_info: Mapping[str, Any], kb: Any, os_name: str) -> tuple[str | None, str | None, str | None]:
    """(CUDA major.minor, cuDNN major, cuDNN major.minor the build was compiled with)."""
    build = kb.build_for(tf, "windows" if os_name == "windows" else "linux")
    bi_cuda = str(build_info.get("cuda_version") or build_info.get("cuda_version_number") or "")
    cuda = bi_cuda if "." in bi_cuda else (str(build.cuda) if build is not None else bi_cuda or None)
    bi_cudnn = str(build_info.get("cudnn_version") or build_info.get("cudnn_version_number") or "")
    compiled = str(build.cudnn) if build is not None and build.cudnn else None
    major = bi_cudnn.split(".")[0] if bi_cudnn else (compiled.split(".")[0] if compiled else None)
    if compiled and major and compiled.split(".")[0] != major:
        compiled = None
    return cuda, major, compiled


def _repair_libs(tf: Mapping[str, Any], doc: Mapping[str, Any], os_name: str, fams: Sequence[str]) -> dict[str, Any]:
    """What installs the missing CUDA libraries in place: the nvidia-* wheels of the release's own `and-cuda`
    extra (their exact versions, read from its installed METADATA), or conda packages in a conda prefix."""
    reqs = requirements_of(tf, markers_env(doc, os_name), extra="and-cuda")
    if reqs:
        return {"kind": "pip", "requirements": [f"{r.name}{r.specifier}" for r in reqs],
                "why": f"the nvidia-* wheels {tf['distribution']} {tf['version']}'s own [and-cuda] extra pins"}
    return {"kind": "cuda", "families": list(fams)}


def library_findings(doc: Mapping[str, Any], tf: Mapping[str, Any], libs: Sequence[Mapping[str, Any]], *,
                     cuda: str | None, compiled_cudnn: str | None, os_name: str,
                     kb_rule_applies: Any = lambda v: False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    tfv = _v(tf.get("version"))
    needs_path = tfv is not None and kb_rule_applies(tfv)
    elsewhere = [lib for lib in libs if lib["status"] == "found-elsewhere"]
    missing = [lib for lib in libs if lib["family"] != "cuda" and (
        lib["status"] == "missing" or (lib["status"] == "found-elsewhere" and needs_path))]
    if elsewhere and not needs_path:
        out.append(_finding(
            "libs.runpath_of_another_object", f"{', '.join(lib['name'] for lib in elsewhere)}: not on "
            "libtensorflow_framework's RUNPATH (where TensorFlow's loader looked in 2.16, tensorflow#63362) but on "
            f"{elsewhere[0]['from']}'s: found if that object opens them", effect="caveat", source="tf-issue-63362",
            evidence="; ".join(f"{lib['name']} -> {lib['path']}" for lib in elsewhere),
            fix="if TensorFlow reports them missing: tfgpu fix puts the nvidia/*/lib directories on LD_LIBRARY_PATH",
            repair={"kind": "activation", "nvidia_libpath": True, "optional": True}))
    linked = [lib for lib in missing if lib["how"] == "DT_NEEDED"]
    if missing:
        names = ", ".join(lib["name"] for lib in missing)
        instead = sorted({p for lib in missing for p in lib["found_instead"]})
        env_dirs = [d for d, n in (doc.get("dirs") or {}).items() if "/nvidia/" in d and n]
        on_disk = [lib["name"] for lib in missing
                   if any(lib["name"] in (doc.get("dirs") or {}).get(d, ()) for d in env_dirs)]
        if on_disk and len(on_disk) == len(missing):
            out.append(_finding(
                "libs.not_on_search_path", f"{names}: installed in this environment's nvidia/*/lib directories, but "
                "not where the loader looks (TensorFlow's loader searches only libtensorflow_framework's RUNPATH, "
                "LD_LIBRARY_PATH, the ld.so cache and the default directories)",
                evidence="; ".join(sorted({d for d in env_dirs for n in on_disk if n in doc['dirs'][d]})),
                effect=CPU_ONLY, source="tf-issue-63362",
                fix="put the nvidia/*/lib directories on LD_LIBRARY_PATH in the environment's activation (tfgpu fix)",
                repair={"kind": "activation", "nvidia_libpath": True}))
        else:
            what = f"CUDA {cuda}" if cuda else "the CUDA libraries"
            fams = [lib["family"] for lib in missing]
            if any(f == "cudnn" for f in fams) and compiled_cudnn:
                what += f" + cuDNN >= {compiled_cudnn}"
            summary = (f"`import tensorflow` fails: it is linked to {', '.join(x['name'] for x in linked)}, which the "
                       "loader cannot find" if linked else
                       f"TensorFlow {tfv} will run on the CPU only: {names} ({what}) cannot be found")
            if instead:
                summary += "; found instead: " + ", ".join(instead[:4])
            out.append(_finding("libs.missing", summary, evidence=_search_evidence(doc),
                                effect=BROKEN if linked else CPU_ONLY,
                                fix=f"install {what} where this environment finds it (tfgpu fix)",
                                repair=_repair_libs(tf, doc, os_name, fams)))
    for lib in libs:
        if lib["family"] != "cudnn" or lib["status"] != "found" or not compiled_cudnn:
            continue
        have = _v(lib.get("version"))
        want = _v(compiled_cudnn)
        if have is not None and want is not None and have.release[:2] < want.release[:2]:
            better = list(lib["others"])
            out.append(_finding(
                "libs.cudnn_too_old", f"cuDNN {have} ({lib['path']}) is older than the cuDNN {compiled_cudnn} "
                f"TensorFlow {tfv} was built with: TensorFlow refuses it ('Loaded runtime CuDNN library: {have} but "
                f"source was compiled with: {compiled_cudnn}') and runs no convolution on the GPU"
                + (f"; another copy comes later in the search: {better[0]}" if better else ""),
                evidence=f"{lib['name']} via {lib['via']}: {lib['path']}", effect=CPU_ONLY, source="tf-50217",
                fix=f"install cuDNN >= {compiled_cudnn} of the same major in this environment (tfgpu fix)",
                repair=_repair_libs(tf, doc, os_name, ["cudnn"])))
        elif lib["others"]:
            out.append(_finding(
                "libs.two_cudnns", f"two cuDNNs: {lib['path']} (via {lib['via']}) wins over {lib['others'][0]}",
                evidence=", ".join([lib["path"], *lib["others"]]), effect="caveat",
                fix="keep one cuDNN on the loader's path (unset a system cuDNN on LD_LIBRARY_PATH)"))
    return out


def _search_evidence(doc: Mapping[str, Any]) -> str:
    act = doc.get("activation") or {}
    return (f"LD_LIBRARY_PATH={act.get('LD_LIBRARY_PATH') or '(unset)'}; "
            f"{len(doc.get('ld_cache') or [])} CUDA entries in the ld.so cache")


def machine_findings(facts: Mapping[str, Any], libs: Sequence[Mapping[str, Any]], build_info: Mapping[str, Any],
                     kb: Any, cuda: str | None, activation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The driver (libcuda.so.1, its version against the CUDA runtime), the GPUs' architectures, small GPUs."""
    out: list[dict[str, Any]] = []
    drv = facts.get("driver") or {}
    dver = _v(drv.get("version"))
    libcuda = next((lib for lib in libs if lib["family"] == "cuda"), None)
    if libcuda is not None and libcuda["status"] == "missing":
        out.append(_finding(
            "driver.libcuda", "libcuda.so.1 is absent: the NVIDIA driver's user-space library is not installed (or "
            "not on the loader's path), so TensorFlow sees no GPU ('CUDA Version: N/A')",
            evidence="no libcuda.so.1 in the ld.so cache, LD_LIBRARY_PATH or the default directories"
            + (f"; driver {dver}" if dver else "; no NVIDIA driver found"), effect=CPU_ONLY,
            fix="install the NVIDIA driver (on WSL2: the Windows driver only); `tfgpu doctor` names the version",
            repair={"kind": "none", "instead": "install the NVIDIA driver"}))
    cudart = next((lib for lib in libs if lib["family"] == "cudart" and lib["status"] == "found"), None)
    if dver is not None and cuda and cudart is not None:
        cv = _v(cuda)
        tk = kb.toolkit(f"{cv.major}.{cv.minor}") if cv is not None else None
        floor = kb.toolkit(f"{cv.major}.0") if cv is not None and cv.major >= 11 else tk
        need = floor.linux_min_driver if floor is not None else None
        if need is not None and dver < need:
            out.append(_finding(
                "driver.too_old", f"driver {dver} is too old for the CUDA {cuda} runtime found ({cudart['path']}): "
                f"it needs >= {need}", evidence=f"driver {dver}", effect=CPU_ONLY, source=str(getattr(floor, "source", "")),
                fix=f"upgrade the NVIDIA driver to >= {need}, or `tfgpu create` a TensorFlow built for an older CUDA",
                repair={"kind": "none", "instead": f"upgrade the NVIDIA driver to >= {need}"}))
    archs = [str(a) for a in build_info.get("cuda_compute_capabilities") or []]
    sass = sorted({int(a[3:]) for a in archs if a.startswith("sm_") and a[3:].isdigit()})
    ptx = sorted({int(a[8:]) for a in archs if a.startswith("compute_") and a[8:].isdigit()})
    for g in facts.get("gpus") or []:
        cc = str(g.get("compute_capability") or "")
        if not re.fullmatch(r"\d+\.\d+", cc) or not (sass or ptx):
            continue
        n = int(cc.replace(".", ""))
        runs = any(s // 10 == n // 10 and s <= n for s in sass) or any(p <= n for p in ptx)
        if not runs:
            out.append(_finding(
                "gpu.arch", f"GPU {g.get('index')} ({g.get('name')}, compute capability {cc}) is not among this "
                f"build's architectures ({', '.join(archs)})", evidence="build_info.py cuda_compute_capabilities",
                effect=CPU_ONLY, fix="tfgpu doctor names a TensorFlow release built for this GPU; tfgpu create --tf X",
                repair={"kind": "none", "instead": "tfgpu create --tf latest"}))
    grow = str(activation.get("TF_FORCE_GPU_ALLOW_GROWTH") or "").lower() == "true"
    small = [g for g in facts.get("gpus") or [] if isinstance(g.get("memory_mib"), (int, float))
             and 0 < g["memory_mib"] <= SMALL_GPU_MIB]
    if small and not grow:
        g = small[0]
        out.append(_finding(
            "gpu.memory_growth", f"GPU {g.get('index')} has {g['memory_mib']} MiB and TF_FORCE_GPU_ALLOW_GROWTH is "
            "not set: TensorFlow maps nearly all GPU memory at start, which ends in CUDNN_STATUS_INTERNAL_ERROR / "
            "'Failed to get convolution algorithm' on small GPUs", effect="caveat",
            fix="export TF_FORCE_GPU_ALLOW_GROWTH=true (tfgpu fix writes it into the activation)",
            repair={"kind": "activation", "vars": {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}}))
    return out


def judge_environment(doc: Mapping[str, Any], facts: Mapping[str, Any], kb: Any, sonames: Any) -> dict[str, Any]:
    """The `environment` object of the doctor's JSON (doctor.schema.json)."""
    os_name = str((facts.get("platform") or {}).get("os") or "linux")
    tf = main_distribution(doc.get("tensorflow") or [])
    base = {"python": doc.get("python"), "python_version": doc.get("python_version"), "prefix": doc.get("prefix"),
            "kind": doc.get("kind"), "how": doc.get("how")}
    if tf is None:
        return {**base, "tensorflow": None, "verdict": NO_TF, "summary": "no TensorFlow in this environment",
                "blockers": [], "caveats": [], "libraries": [], "fix": None}
    tfv = _v(tf.get("version"))
    bi: Mapping[str, Any] = doc.get("build_info") or {}
    activation: Mapping[str, Any] = doc.get("activation") or {}
    findings = python_findings(doc, tf, kb, os_name, activation)
    libs: list[dict[str, Any]] = []
    cuda = compiled = None
    if not bi:
        findings.append(_finding("tf.no_build_info", "TensorFlow's build_info.py is missing: the installation is "
                                 "incomplete", effect=BROKEN, fix=f"pip install --force-reinstall "
                                 f"{tf['distribution']}=={tf['version']}",
                                 repair={"kind": "pip", "requirements": [f"{tf['distribution']}=={tf['version']}"],
                                         "force": True}))
    elif not bi.get("is_cuda_build"):
        rocm = bool(bi.get("is_rocm_build"))
        findings.append(_finding(
            "tf.cpu_build", f"{tf['distribution']} {tfv} is a {'ROCm (AMD)' if rocm else 'CPU-only'} build: "
            "build_info.py says is_cuda_build = False", evidence="tensorflow/python/platform/build_info.py",
            effect=CPU_ONLY, fix="install a CUDA build of TensorFlow (tfgpu create --tf latest)",
            repair={"kind": "none", "instead": "tfgpu create --tf latest"}))
    elif tfv is not None and os_name != "windows":
        cuda, cudnn_major, compiled = _cuda_of(tfv, bi, kb, os_name)
        names = sonames.names_for(tfv, cuda or "", cudnn_major)
        linked = sorted({n for o in doc.get("objects") or [] for n in o.get("needed") or []
                         if loader.CUDA_LIB.match(n) and not n.startswith("libcuda.so")})
        libs = resolve_libraries(doc, {} if linked else names, linked)
        rule = kb.rule("nvidia-wheels-need-library-path")
        findings += library_findings(doc, tf, libs, cuda=cuda, compiled_cudnn=compiled, os_name=os_name,
                                     kb_rule_applies=lambda v: rule is not None and v in rule.applies)
        findings += machine_findings(facts, libs, bi, kb, cuda, activation)
    blockers = [f for f in findings if f["effect"] in (BROKEN, CPU_ONLY)]
    caveats = [f for f in findings if f["effect"] == "caveat"]
    verdict = BROKEN if any(f["effect"] == BROKEN for f in blockers) else CPU_ONLY if blockers else GPU
    repairable = [f for f in findings if f["repair"]["kind"] != "none"]
    exe = doc.get("python") or ""
    return {**base, "tensorflow": {"distribution": tf["distribution"], "version": tf.get("version"),
                                   "cuda_build": bi.get("is_cuda_build") if bi else None, "cuda": cuda,
                                   "cudnn": compiled, "compute_capabilities": list(bi.get("cuda_compute_capabilities")
                                                                                   or [])},
            "verdict": verdict, "summary": f"{tf['distribution']} {tf.get('version')}: {VERDICT_TEXT[verdict]}"
            + (f" ({blockers[0]['summary']})" if blockers else ""),
            "blockers": blockers, "caveats": caveats, "libraries": libs,
            "fix": f"tfgpu fix --python {exe}" if repairable and exe else None}
