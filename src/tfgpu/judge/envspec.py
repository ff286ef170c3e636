"""The environment spec (tfgpu.envspec/1): what a working TensorFlow environment is -- its TensorFlow, the CUDA and
cuDNN it loads, the driver floor, the GPU code its build carries, its Python and its key pins -- made from the
environment verdict (tfgpu.judge.environment) and its facts; and what differs between a spec and another environment,
and whether it matters (`tfgpu validate`). Pure: plain values and the knowledge base in, plain values out.

A difference is ``info`` (nothing to do), ``risky`` (it may break: a pin outside the spec's range, a GPU that only
JIT-compiles PTX) or ``blocking`` (the environment will not work as the exported one did: a driver below the
floor, a GPU the build carries no code for, another CUDA or cuDNN major, another TensorFlow series)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tfgpu.facts.environment import norm_name
from tfgpu.facts.machine import gpu_cc_of
from tfgpu.judge.environment import (
    cc_pair,
    driver_floor,
    gpu_code_for,
    main_distribution,
    markers_env,
    requirements_of,
)
from tfgpu.judge.gpu_rules import outside_cc_range

SCHEMA = "tfgpu.envspec/1"
VALIDATION_SCHEMA = "tfgpu.validate/1"
INFO, RISKY, BLOCKING = "info", "risky", "blocking"
SEVERITIES = (INFO, RISKY, BLOCKING)
#: The distributions a spec pins besides TensorFlow (and every nvidia-* wheel): what `import tensorflow` and
#: tf.keras break on when they move (compat/pins.toml's subjects).
KEY_PINS = ("numpy", "protobuf", "keras", "tf-keras", "ml-dtypes")
#: Verdict findings about the machine rather than the environment: validate judges the machine against the
#: spec itself (the driver floor, the build's GPU code), so a machine described by --facts is judged by its facts
#: and not by this machine's loader cache.
_MACHINE_FINDINGS = ("driver.", "gpu.")
_CC = re.compile(r"\d{1,3}\.\d{1,3}")


def _v(text: Any) -> Version | None:
    try:
        return Version(str(text)) if text is not None and len(str(text)) <= 64 else None
    except InvalidVersion:
        return None


def is_key_pin(name: str) -> bool:
    return name in KEY_PINS or name.startswith("nvidia-")


# -------------------------------------------------------------------------------------------- making a spec

def make_spec(env: Mapping[str, Any], verdict: Mapping[str, Any], facts: Mapping[str, Any], kb: Any, *,
              tfgpu_version: str = "", data_version: str = "") -> dict[str, Any]:
    """The spec of the environment ``env`` (its facts, tfgpu.facts.environment) as ``verdict`` judged it on the
    machine ``facts`` describe. Optional values are left out (TOML has no null): a CPU build has no cuda, cudnn,
    driver or gpu section. Without a TensorFlow the spec has no tensorflow section (validate's `tf.missing`)."""
    machine = machine_of(facts, kb)
    doc: dict[str, Any] = {
        "schema": SCHEMA, "tfgpu_version": tfgpu_version, "data_version": data_version,
        "verdict": str(verdict.get("verdict") or ""), "summary": str(verdict.get("summary") or ""),
        "blockers": [{"id": str(f.get("id")), "summary": str(f.get("summary") or "")}
                     for f in verdict.get("blockers") or []],
    }
    py = re.match(r"\d+(?:\.\d+){0,2}", str(env.get("python_version") or ""))  # pyvenv.cfg: 3.11.7.final.0
    if py:
        doc["python"] = {"version": py.group(0)}
    tf = verdict.get("tensorflow")
    if tf:
        cuda_build = bool(tf.get("cuda_build"))
        doc["tensorflow"] = {"distribution": str(tf.get("distribution")), "version": str(tf.get("version") or ""),
                             "cuda_build": cuda_build}
        libs = verdict.get("libraries") or []
        for key, family, build in (("cuda", "cudart", tf.get("cuda")), ("cudnn", "cudnn", tf.get("cudnn"))):
            section = _library(libs, family, build)
            if section and cuda_build:
                doc[key] = section
        if cuda_build:
            floor, row = driver_floor(kb, tf.get("cuda"), machine["os"])
            if floor is not None:
                doc["driver"] = {"floor": str(floor), "cuda": str(row.cuda), "source": f"compat/cuda.toml ({row.source})"}
            archs = arch_targets(tf, env, kb, machine["os"])
            if archs:
                doc["gpu"] = {**archs, **_cc_range(kb, doc.get("cuda") or {})}
        main = main_distribution(env.get("tensorflow") or [])
        doc["pins"] = key_pins(env, main, kb, machine["os"]) if main else {}
    doc["machine"] = machine
    return doc


def _library(libs: Sequence[Mapping[str, Any]], family: str, build: Any) -> dict[str, Any] | None:
    """What the environment loads of a library family (the verdict's simulated loader): its file name, version
    and status, beside the version the build was compiled for."""
    lib = next((x for x in libs if x.get("family") == family), None)
    out: dict[str, Any] = {}
    if build:
        out["build"] = str(build)
    if lib is not None:
        out["library"] = str(lib.get("name"))
        out["status"] = str(lib.get("status"))
        if lib.get("version"):
            out["version"] = str(lib["version"])
    return out or None


def arch_targets(tf: Mapping[str, Any], env: Mapping[str, Any], kb: Any, os_name: str) -> dict[str, Any] | None:
    """The GPU code the build carries: SASS per compute capability and PTX targets. An official wheel's from the
    knowledge base (compat/tf_archs.toml, read from the wheel's fatbins: more exact than build_info.py, which
    names `compute_80` where the wheel carries sm_80 SASS too); a conda environment's (conda-forge builds its own)
    from the installed build_info.py first."""
    built = _build_info_archs(env.get("build_info") or {})
    conda = env.get("kind") == "conda"
    if conda and built:
        return built
    v = _v(tf.get("version"))
    row = kb.archs_for(v, os_name, "conda-forge" if conda else "pip", str(tf.get("cuda")) if conda and tf.get("cuda")
                       else None) if v is not None else None
    if row is not None:
        return {"sass": list(row.sass), "ptx": list(row.ptx_all or ((row.ptx,) if row.ptx else ())),
                "source": f"compat/tf_archs.toml ({row.source})"}
    return built


def _cc_range(kb: Any, cuda: Mapping[str, Any]) -> dict[str, str]:
    """The compute capabilities the loaded CUDA's libraries (cuDNN, cuBLAS) carry kernels for: a GPU outside them
    gets none whatever TensorFlow's own code (tfgpu.judge.gpu_rules, the doctor's first GPU rule)."""
    loaded = _library_version(cuda) if cuda.get("status") not in (None, "missing") else None
    for v in (loaded, _v(cuda.get("build"))):
        toolkit = kb.toolkit(f"{v.major}.{v.minor}") if v is not None and len(v.release) > 1 else None
        if toolkit is not None and toolkit.cc_min and toolkit.cc_max:
            return {"cc_min": str(toolkit.cc_min), "cc_max": str(toolkit.cc_max),
                    "cc_source": f"compat/cuda.toml ({toolkit.source}): CUDA {toolkit.cuda}"}
    return {}


def _build_info_archs(build_info: Mapping[str, Any]) -> dict[str, Any] | None:
    sass: list[str] = []
    ptx: list[str] = []
    for arch in build_info.get("cuda_compute_capabilities") or []:
        m = re.fullmatch(r"(sm|compute)_(\d{2,3})[a-z]?", str(arch))  # sm_86, compute_90, sm_90a, sm_120
        if m:
            n = int(m.group(2))
            (sass if m.group(1) == "sm" else ptx).append(f"{n // 10}.{n % 10}")
    if not (sass or ptx):
        return None
    return {"sass": list(dict.fromkeys(sass)), "ptx": list(dict.fromkeys(ptx)), "source": "tensorflow/python/platform/build_info.py (cuda_compute_capabilities)"}


def key_pins(env: Mapping[str, Any], tf: Mapping[str, Any], kb: Any, os_name: str) -> dict[str, dict[str, str]]:
    """name -> {version, range, from} for every key pin installed: the range TensorFlow's own Requires-Dist (its
    [and-cuda] extra included) and compat/pins.toml allow, when it holds the installed version; else the installed
    version's minor series (a hand-made environment that works outside the published ranges)."""
    markers = markers_env(env, os_name)
    allowed: dict[str, list[tuple[str, str]]] = {}
    for req in requirements_of(tf, markers) + requirements_of(tf, markers, extra="and-cuda"):
        allowed.setdefault(norm_name(req.name), []).append(
            (str(req.specifier), f"{tf.get('distribution')} {tf.get('version')}'s Requires-Dist"))
    tfv = _v(tf.get("version"))
    for pin in kb.pins if tfv is not None else ():
        if tfv in pin.tf:
            try:
                req = Requirement(pin.requirement)
            except InvalidRequirement:
                continue
            allowed.setdefault(norm_name(req.name), []).append((str(req.specifier), f"compat/pins.toml ({pin.source})"))
    dists: Mapping[str, Any] = env.get("distributions") or {}
    return {name: pin_range(str(dists[name]), allowed.get(name, [])) for name in sorted(dists) if is_key_pin(name)}


def pin_range(version: str, allowed: Sequence[tuple[str, str]]) -> dict[str, str]:
    """One pin: the installed ``version`` and the range it may move in (see :func:`key_pins`)."""
    spec = SpecifierSet(",".join(s for s, _ in allowed if s))
    v = _v(version)
    if v is not None and str(spec) and spec.contains(v, prereleases=True):
        return {"version": version, "range": str(spec), "from": "; ".join(dict.fromkeys(f for s, f in allowed if s))}
    if v is None:
        return {"version": version, "range": "", "from": "not a PEP 440 version: any"}
    why = f" ({spec} from {'; '.join(dict.fromkeys(f for s, f in allowed if s))} does not hold it)" if str(spec) else ""
    return {"version": version, "range": f"=={v.major}.{v.minor}.*" if len(v.release) > 1 else f"=={v.major}.*",
            "from": "the installed version's series" + why}


def machine_of(facts: Mapping[str, Any], kb: Any) -> dict[str, Any]:
    """The machine an environment is judged on: its OS, driver and GPUs (each with its compute capability, "" when
    nobody knows it); ``gpus`` absent when the facts do not describe them."""
    os_name = str((facts.get("platform") or {}).get("os") or "linux")
    out: dict[str, Any] = {"os": os_name}
    driver = (facts.get("driver") or {}).get("version")
    if driver:
        out["driver"] = str(driver)
    gpus = facts.get("gpus")
    if isinstance(gpus, list):
        out["gpus"] = [{"name": str(g.get("name") or "GPU of unknown model"), "compute_capability": gpu_cc_of(kb, g)}
                       for g in gpus if isinstance(g, Mapping)]
    return out


# ----------------------------------------------------------------------------------------------- comparing

def difference(fid: str, severity: str, summary: str, *, field: str, spec: Any = None, actual: Any = None,
               fix: str = "") -> dict[str, Any]:
    """One difference: its rule id, how much it matters, the spec's field, both values, and what to do."""
    return {"id": fid, "severity": severity, "field": field, "spec": None if spec is None else str(spec),
            "actual": None if actual is None else str(actual), "summary": summary, "fix": fix}


def _tf_text(doc: Mapping[str, Any]) -> str:
    tf = doc.get("tensorflow") or {}
    return f"{tf.get('distribution')}=={tf.get('version')}"


def _tf_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """TensorFlow: another patch is informational; another series, or a CPU build where the spec's used CUDA, blocks."""
    want, have = spec.get("tensorflow") or {}, actual.get("tensorflow") or {}
    install = f"pip install \"{_tf_text(spec)}\" (or tfgpu create --tf {want.get('version')})"
    out = []
    if have.get("distribution") != want.get("distribution"):
        out.append(difference("tf.distribution", RISKY, f"TensorFlow is installed as {have.get('distribution')}, the spec's "
                              f"as {want.get('distribution')} (another build of the same code)",
                              field="tensorflow.distribution", spec=want.get("distribution"),
                              actual=have.get("distribution"), fix=install))
    if want.get("cuda_build") and not have.get("cuda_build"):
        out.append(difference("tf.cuda_build", BLOCKING, f"{_tf_text(actual)} is not a CUDA build: it runs on the CPU only",
                              field="tensorflow.cuda_build", spec=True, actual=False, fix=install))
    elif have.get("cuda_build") and not want.get("cuda_build"):
        out.append(difference("tf.cuda_build", INFO, f"{_tf_text(actual)} is a CUDA build; the spec's is not",
                              field="tensorflow.cuda_build", spec=False, actual=True))
    wv, hv = _v(want.get("version")), _v(have.get("version"))
    if want.get("version") != have.get("version") and not (wv is not None and wv == hv):
        same_series = wv is not None and hv is not None and wv.release[:2] == hv.release[:2]
        out.append(difference(
            "tf.patch" if same_series else "tf.version", INFO if same_series else BLOCKING,
            f"TensorFlow {have.get('version')} here, {want.get('version')} in the spec: "
            + ("another patch of the same series" if same_series else
               "another release series (built for other CUDA, cuDNN and pins)"),
            field="tensorflow.version", spec=want.get("version"), actual=have.get("version"),
            fix="" if same_series else install))
    return out


def _python_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Python: another minor is risky (other wheels, pins resolved for another interpreter), a patch informational."""
    want, have = (spec.get("python") or {}).get("version"), (actual.get("python") or {}).get("version")
    wv, hv = _v(want), _v(have)
    if wv is None or hv is None or wv == hv or (min(len(wv.release), len(hv.release)) < 3
                                                and wv.release[:2] == hv.release[:2]):
        return []
    minor = wv.release[:2] != hv.release[:2]
    return [difference("python.version" if minor else "python.patch", RISKY if minor else INFO,
                       f"Python {have} here, {want} in the spec"
                       + (": other wheels, and pins resolved for another interpreter" if minor else ""),
                       field="python.version", spec=want, actual=have,
                       fix=f"make the environment with Python {wv.major}.{wv.minor}" if minor else "")]


def _library_version(section: Mapping[str, Any]) -> Version | None:
    """The version of a loaded library: the file's (a wheel's, a header's), else its soname's (libcudart.so.12)."""
    v = _v(section.get("version"))
    if v is not None:
        return v
    m = re.search(r"\.so\.(\d+(?:\.\d+)*)$", str(section.get("library") or ""))
    return _v(m.group(1)) if m else None


def _library_rule(key: str, what: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], list[dict[str, Any]]]:
    def rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
        want, have = spec.get(key), actual.get(key) or {}
        if not isinstance(want, Mapping) or want.get("status") in (None, "missing"):
            return []
        fix = f"tfgpu doctor --python ENV/bin/python shows where {what} should come from; tfgpu fix installs it"
        if have.get("status") in (None, "missing"):
            return [difference(f"{key}.missing", BLOCKING, f"{what} is not found here ({want.get('library')} in the "
                               "spec): TensorFlow runs on the CPU only", field=f"{key}.status",
                               spec=want.get("library"), actual="missing", fix=fix)]
        wv, hv = _library_version(want), _library_version(have)
        if wv is None or hv is None or wv == hv:
            return []
        shown = (want.get("version") or want.get("library"), have.get("version") or have.get("library"))
        if wv.major != hv.major:
            return [difference(f"{key}.major", BLOCKING, f"{what} {shown[1]} here, {shown[0]} in the spec: another "
                               "major version, which this TensorFlow build does not load", field=f"{key}.version",
                               spec=shown[0], actual=shown[1], fix=fix)]
        older = hv.release[:2] < wv.release[:2]
        return [difference(f"{key}.older" if older else f"{key}.version", RISKY if older else INFO,
                           f"{what} {shown[1]} here, {shown[0]} in the spec"
                           + (": an older minor than the exported environment loads" if older else ""),
                           field=f"{key}.version", spec=shown[0], actual=shown[1], fix=fix if older else "")]
    return rule


def _driver_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The driver against the spec's floor (the knowledge base's minimum for the build's CUDA)."""
    floor = (spec.get("driver") or {}).get("floor")
    if not floor:
        return []
    have = (actual.get("machine") or {}).get("driver")
    fix = f"install an NVIDIA driver >= {floor}"
    if not have:
        return [difference("driver.none", BLOCKING, f"no NVIDIA driver here (or the facts name none): the spec's "
                           f"CUDA {(spec.get('driver') or {}).get('cuda')} needs >= {floor}", field="driver.floor",
                           spec=floor, actual=None, fix=fix)]
    hv, fv = _v(have), _v(floor)
    if hv is not None and fv is not None and hv < fv:
        return [difference("driver.below_floor", BLOCKING, f"driver {have} is below the spec's floor {floor} (CUDA "
                           f"{(spec.get('driver') or {}).get('cuda')})", field="driver.floor", spec=floor,
                           actual=have, fix=fix)]
    exported = (spec.get("machine") or {}).get("driver")
    if exported and exported != have:
        return [difference("driver.version", INFO, f"driver {have} here, {exported} where the spec was exported "
                           f"(both >= the floor {floor})", field="machine.driver", spec=exported, actual=have)]
    return []


def _gpu_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each kind of GPU here against the code the build carries (SASS runs natively; PTX only is JIT-compiled)."""
    archs = spec.get("gpu")
    if not isinstance(archs, Mapping):
        return []
    gpus = (actual.get("machine") or {}).get("gpus")
    carried = f"SASS {', '.join(archs.get('sass') or []) or 'none'}; PTX {', '.join(archs.get('ptx') or []) or 'none'}"
    if gpus is None:
        return [difference("gpu.unknown", RISKY, "the facts do not describe the GPUs: not checked against the build's "
                           f"code ({carried})", field="gpu", spec=carried, fix="run it on the machine, or pass --gpu-cc X.Y")]
    if not gpus:
        return [difference("gpu.none", BLOCKING, "no NVIDIA GPU here: TensorFlow runs on the CPU only", field="gpu",
                           spec=carried, actual="no GPU", fix="run on a machine with an NVIDIA GPU")]
    sass = [cc_pair(a) for a in archs.get("sass") or [] if _CC.fullmatch(str(a))]
    ptx = [cc_pair(a) for a in archs.get("ptx") or [] if _CC.fullmatch(str(a))]
    out = []
    for name, cc in dict.fromkeys((str(g.get("name")), str(g.get("compute_capability") or "")) for g in gpus):
        if not _CC.fullmatch(cc):
            out.append(difference("gpu.unknown", RISKY, f"{name}: its compute capability is not known: not checked "
                                  f"against the build's code ({carried})", field="gpu", spec=carried, actual=name,
                                  fix="pass --gpu-cc X.Y"))
            continue
        outside = outside_cc_range(Version(cc), str(archs.get("cc_min") or ""), str(archs.get("cc_max") or ""))
        code = gpu_code_for(cc_pair(cc), sass, ptx)
        if outside:
            out.append(difference("gpu.arch", BLOCKING, f"{name} (compute capability {cc}) is {outside} than the CUDA "
                                  f"libraries of the spec support ({archs.get('cc_min')} to {archs.get('cc_max')}): "
                                  "cuDNN and cuBLAS carry no kernels for it", field="gpu", spec=carried, actual=cc,
                                  fix="tfgpu doctor names a TensorFlow release built for this GPU"))
        elif code is None:
            out.append(difference("gpu.arch", BLOCKING, f"{name} (compute capability {cc}): the build carries no code "
                                  f"that runs on it ({carried})", field="gpu", spec=carried, actual=cc,
                                  fix="tfgpu doctor names a TensorFlow release built for this GPU"))
        elif code == "ptx":
            out.append(difference("gpu.ptx_jit", RISKY, f"{name} (compute capability {cc}): no SASS for it; its kernels "
                                  f"are JIT-compiled from PTX at start-up (minutes on first run; {carried})",
                                  field="gpu", spec=carried, actual=cc,
                                  fix="export CUDA_CACHE_MAXSIZE=4294967296 to keep the JIT cache"))
    exported = {str(g.get("name")) for g in (spec.get("machine") or {}).get("gpus") or []}
    here = {str(g.get("name")) for g in gpus}
    if exported and here != exported and not out:
        out.append(difference("gpu.model", INFO, f"GPUs here: {', '.join(sorted(here))}; where the spec was exported: "
                              f"{', '.join(sorted(exported))} (the build carries code for both)", field="machine.gpus",
                              spec=", ".join(sorted(exported)), actual=", ".join(sorted(here))))
    return out


def _pin_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each key pin: in the spec's range is informational; outside it, or gone, risky."""
    want: Mapping[str, Any] = spec.get("pins") or {}
    have: Mapping[str, Any] = actual.get("pins") or {}
    out = []
    for name, pin in sorted(want.items()):
        rng, version = str(pin.get("range") or ""), (have.get(name) or {}).get("version")
        if version is None:
            out.append(difference("pin.missing", RISKY, f"{name} is not installed here ({pin.get('version')} in the spec)",
                                  field=f"pins.{name}", spec=pin.get("version"),
                                  fix=f"pip install \"{name}=={pin.get('version')}\""))
            continue
        if version == pin.get("version"):
            continue
        hv = _v(version)
        inside = hv is not None and SpecifierSet(rng).contains(hv, prereleases=True)
        out.append(difference(
            "pin.version" if inside else "pin.range", INFO if inside else RISKY,
            f"{name} {version} here, {pin.get('version')} in the spec" + (f" (within {rng})" if inside and rng else "")
            + ("" if inside else f": outside the spec's range {rng or '(none)'} ({pin.get('from')})"),
            field=f"pins.{name}", spec=pin.get("version"), actual=version,
            fix="" if inside else f"pip install \"{name}=={pin.get('version')}\""))
    for name in sorted(set(have) - set(want)):
        out.append(difference("pin.extra", INFO, f"{name} {(have[name] or {}).get('version')} is installed here; the "
                              "spec does not pin it", field=f"pins.{name}", actual=(have[name] or {}).get("version")))
    return out


def _environment_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The environment verdict's own blockers here (libraries not found, a broken pin, two TensorFlows): blocking
    unless the exported environment had the same one. Findings about the machine are the rules above."""
    known = {str(b.get("id")) for b in spec.get("blockers") or []}
    out = []
    for b in actual.get("blockers") or []:
        fid = str(b.get("id"))
        if fid.startswith(_MACHINE_FINDINGS):
            continue
        same = fid in known
        out.append(difference(f"environment.{fid}", INFO if same else BLOCKING, str(b.get("summary"))
                              + (" (the exported environment had this too)" if same else ""), field="blockers",
                              actual=fid, fix="" if same else "tfgpu doctor --python ENV/bin/python explains it; "
                                                             "tfgpu fix repairs it in place"))
    return out


def _os_rule(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Another OS: other wheels and libraries (WSL2 runs Linux's: informational)."""
    want, have = (spec.get("machine") or {}).get("os"), (actual.get("machine") or {}).get("os")
    if not want or not have or want == have:
        return []
    family = {"wsl2": "linux"}
    same = family.get(str(want), want) == family.get(str(have), have)
    return [difference("os.family" if not same else "os.variant", INFO if same else RISKY,
                       f"{have} here, {want} where the spec was exported"
                       + ("" if same else ": other wheels, other CUDA libraries"), field="machine.os", spec=want,
                       actual=have)]


#: Every rule, in the order the differences are listed. Each takes (spec, actual) and returns differences.
RULES: tuple[Callable[[Mapping[str, Any], Mapping[str, Any]], list[dict[str, Any]]], ...] = (
    _os_rule, _tf_rule, _python_rule, _library_rule("cuda", "the CUDA runtime"), _library_rule("cudnn", "cuDNN"),
    _driver_rule, _gpu_rule, _pin_rule, _environment_rule,
)


def compare(spec: Mapping[str, Any], actual: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What differs between a spec and another environment's (:func:`make_spec` of it), each difference classified."""
    if not actual.get("tensorflow"):
        return [difference("tf.missing", BLOCKING, f"no TensorFlow in this environment ({_tf_text(spec)} in the spec)",
                           field="tensorflow", spec=_tf_text(spec), fix=f"pip install \"{_tf_text(spec)}\"")]
    return [d for rule in RULES for d in rule(spec, actual)]


def outcome(differences: Sequence[Mapping[str, Any]], *, strict: bool = False) -> tuple[str, int]:
    """(the result in a word, the exit code): 1 with a blocking difference (or a risky one with ``strict``)."""
    worst = {d["severity"] for d in differences}
    result = ("blocked" if BLOCKING in worst else "risky" if RISKY in worst else "compatible" if worst
              else "matches")
    return result, int(BLOCKING in worst or (strict and RISKY in worst))


def validation_document(spec: Mapping[str, Any], actual: Mapping[str, Any], *, spec_file: str,
                        environment: Mapping[str, Any], strict: bool = False) -> dict[str, Any]:
    """The `tfgpu validate --json` document (tfgpu.validate/1): the differences, their counts and the exit code."""
    diffs = compare(spec, actual)
    result, code = outcome(diffs, strict=strict)
    return {"schema": VALIDATION_SCHEMA, "spec_file": spec_file, "spec": dict(spec), "environment": dict(environment),
            "actual": dict(actual), "result": result,
            "counts": {s: sum(d["severity"] == s for d in diffs) for s in SEVERITIES},
            "differences": diffs, "exit_code": code}


# ------------------------------------------------------------------------------------ a spec someone gave

@lru_cache(maxsize=1)
def spec_schema() -> dict[str, Any]:
    """The shipped JSON Schema (src/tfgpu/core/schemas/envspec.schema.json)."""
    text = (Path(__file__).parent.parent / "core" / "schemas" / "envspec.schema.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def check_spec(doc: Any) -> str | None:
    """The first problem with a spec document someone gave (its schema, then every version and range parses),
    or None."""
    from tfgpu.facts.document import schema_problem

    problem = schema_problem(doc, spec_schema(), "spec")
    if problem:
        return problem
    for key in ("driver", "python", "tensorflow"):
        field = "floor" if key == "driver" else "version"
        value = (doc.get(key) or {}).get(field)
        if value is not None and _v(value) is None:
            return f"spec.{key}.{field}: {value!r} is not a version"
    for name, pin in (doc.get("pins") or {}).items():
        try:
            SpecifierSet(str(pin.get("range") or ""))
        except InvalidSpecifier:
            return f"spec.pins.{name}.range: {pin.get('range')!r} is not a version range (PEP 440, e.g. \">=1.26,<2\")"
    return None
