"""`tfgpu lint`: the GPU problems of a user's own Dockerfiles and compose files, in the doctor's check format.

Pure apart from :func:`lint_paths` reading the files: a small Dockerfile parser (line continuations, the
``escape`` directive, comments inside continued lines, heredocs, ``ARG`` substitution in ``FROM``), compose
files through PyYAML's safe loader (bounded: size, aliases), and checks against compat/ (the base image's
CUDA and the host driver, the TensorFlow that ``pip install`` brings against the image's CUDA/cuDNN,
``tensorflow[and-cuda]`` on a CUDA image, ``LD_LIBRARY_PATH``, variables that hide every GPU, compose
services without a GPU reservation). The host is this machine's facts or ``--facts``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.version import Version

from tfgpu.core.errors import InputError
from tfgpu.core.record import record
from tfgpu.facts.document import as_facts
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import ERROR, FAIL, PASS, SKIP, WARN, Check
from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.kb.queries import container_images, ngc_images
from tfgpu.kb.versions import version
from tfgpu.tools.compose import COMPOSE_DOCS, _env_items, load_yaml_bounded
from tfgpu.tools.dockerfile import _words, parse_dockerfile, stages

SCHEMA = "tfgpu.lint/1"
MAX_BYTES = 1024 * 1024
CUDA_IMAGE_REPOS = ("nvidia/cuda", "nvcr.io/nvidia/cuda")


# --------------------------------------------------------------------------- Dockerfile parsing


# --------------------------------------------------------------------------- images and pip installs


@record
class BaseImage:
    ref: str
    kind: str  # "cuda" | "tensorflow" | "ngc" | "other"
    cuda: str = ""
    cudnn: str = ""  # "" unknown/absent; "8", "9" or "yes" (a 12.x "-cudnn-" tag: the cuDNN of that release)
    tf: str = ""
    driver: Version | None = None
    driver_text: str = ""
    ngc: Any = None
    image: Any = None  # TensorFlow's own image (a tfgpu.kb.knowledge.ContainerImage), judged by tfgpu.judge.containers


#: A version at the start of an image tag (12.4, 12.4.1, 2.15.0): a few digits per part, as real versions have; a
#: tag of 5,000-digit "versions" is no version (and would not convert), so it does not match.
_TAG_VERSION = re.compile(r"^(\d{1,6}\.\d{1,6}(?:\.\d{1,6})?)(?![\d.]*\d)")
_TAG_RELEASE = re.compile(r"^(\d{1,6}\.\d{1,6}\.\d{1,6})(?!\d)")


def classify_image(ref: str, kb: KnowledgeBase) -> BaseImage:
    """What a base image carries: nvidia/cuda's CUDA/cuDNN from its tag, TensorFlow's -gpu images from
    compat/containers.toml's rule, NGC TensorFlow images from its rows."""
    repo, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
    repo = repo.lower()
    if repo in CUDA_IMAGE_REPOS:
        m = _TAG_VERSION.match(tag)
        cuda = m.group(1) if m else ""
        cm = re.search(r"cudnn(\d*)", tag)
        toolkit = kb.toolkit(".".join(cuda.split(".")[:2])) if cuda else None
        return BaseImage(ref, "cuda", cuda, (cm.group(1) or "yes") if cm else "",
                         driver=toolkit.linux_min_driver if toolkit else None,
                         driver_text=toolkit.min_driver_text("linux") if toolkit else "")
    if repo in ("tensorflow/tensorflow", "docker.io/tensorflow/tensorflow") and "gpu" in tag:
        m = _TAG_RELEASE.match(tag)
        if m:
            images = container_images(kb, m.group(1))
            own = next((i for i in images if i.family == "tensorflow"), None)
            if own is not None:
                return BaseImage(ref, "tensorflow", own.cuda, own.cudnn, m.group(1), own.driver, own.driver_text,
                                 image=own)
        return BaseImage(ref, "tensorflow", tf=m.group(1) if m else "")
    if repo == "nvcr.io/nvidia/tensorflow":
        row = next((i for i in ngc_images() if i.ref.lower() == ref.lower()), None)
        if row is not None:
            return BaseImage(ref, "ngc", row.cuda, row.cudnn, str(row.tf), row.driver, row.driver_text, row)
        return BaseImage(ref, "ngc")
    return BaseImage(ref, "other")


_PIP = re.compile(r"(?:^|[\s;&|(])(?:python[\d.]*\s+-m\s+)?pip[\d.]*\s+install\b([^;&|]*)")
_OP = r"(?:~=|==|>=|<=|!=|<|>)"
#: name, extras, then the whole specifier set (its first clause's operator and version apart, for the messages)
_TF_REQ = re.compile(rf"^(tensorflow(?:-gpu|-cpu)?)(\[[^\]]*\])?\s*(({_OP})\s*([\w.*]+)(?:\s*,\s*{_OP}\s*[\w.*]+)*)?",
                     re.IGNORECASE)


@record
class TfInstall:
    dist: str
    extras: str
    op: str
    version: str
    line: int
    spec: str = ""  # the whole specifier set as written, e.g. "~=2.4" or ">=2.4,<2.6"


def tf_installs(run_args: str, line: int) -> list[TfInstall]:
    """The TensorFlow requirements a RUN line's pip installs name (``tensorflow==2.15``,
    ``'tensorflow[and-cuda]'``, ``tensorflow-gpu==1.0``), by tokenising each ``pip install`` command."""
    out = []
    for m in _PIP.finditer(run_args):
        for w in _words(m.group(1)):
            if w.startswith("-"):
                continue
            req = _TF_REQ.match(w)
            if req and (len(w) == req.end() or w[req.end()] in ",;<>!="):
                out.append(TfInstall(req.group(1).lower(), (req.group(2) or "").lower(), req.group(4) or "",
                                     req.group(5) or "", line, re.sub(r"\s+", "", req.group(3) or "")))
    return out


# --------------------------------------------------------------------------- checks


def _check(cid: str, status: str, summary: str, *, evidence: str = "", fix: str = "", source: str = "") -> Check:
    return Check(cid, status, summary, evidence, source, fix)


def hides_every_gpu(name: str, value: str) -> bool:
    """NVIDIA_VISIBLE_DEVICES none/void/empty; CUDA_VISIBLE_DEVICES empty, -1 or starting with an entry that is
    neither an index, a GPU-/MIG- UUID (CUDA stops at the first invalid entry: no GPU at all)."""
    v = value.strip().strip("'\"")
    if name == "NVIDIA_VISIBLE_DEVICES":
        return v.lower() in ("", "none", "void")
    if name == "CUDA_VISIBLE_DEVICES":
        first = v.split(",")[0].strip()
        if not first:
            return True
        return not (first.isdigit() or first.upper().startswith(("GPU-", "MIG-")))
    return False


def visible_devices_fix(name: str, where: str = "it") -> str:
    """How to stop hiding the GPUs, with a value the variable takes: NVIDIA_VISIBLE_DEVICES takes ``all``
    (the NVIDIA Container Toolkit), CUDA_VISIBLE_DEVICES only indices or GPU-/MIG- UUIDs (``all`` hides every GPU)."""
    if name == "NVIDIA_VISIBLE_DEVICES":
        return f"remove {where}, or set NVIDIA_VISIBLE_DEVICES=all"
    return f"remove {where}, or list the GPUs by index: CUDA_VISIBLE_DEVICES=0 (0,1 for two)"


def _driver_check(base: BaseImage, m: Machine | None, where: str) -> Check:
    if not base.driver:
        return _check("image.driver", SKIP, f"{where}: {base.ref} — its CUDA is not known to tfgpu")
    floor = base.driver_text or str(base.driver)
    what = f"{where}: {base.ref} carries CUDA {base.cuda}, which needs host driver >= {floor}"
    if m is None or m.driver is None:
        return _check("image.driver", SKIP, what, evidence="no host driver known",
                      fix="run tfgpu lint on the GPU machine, or pass --facts FILE from it (tfgpu doctor --json)")
    ok = m.driver >= base.driver
    if not ok and base.ngc is not None:
        from tfgpu.judge.containers import is_datacenter_gpu
        from tfgpu.kb.knowledge import load_kb

        names = [str(g.get("name") or "") for g in m.gpus or ()]
        ok = (bool(names) and all(is_datacenter_gpu(n, load_kb()) for n in names)
              and base.ngc.driver_ok(m.driver, datacenter=True))
    if ok:
        return _check("image.driver", PASS, f"{what}; the host has {m.driver_text}")
    return _check("image.driver", FAIL, f"{what}; the host has {m.driver_text} (nvidia-container-cli: 'requirement "
                  f"error: unsatisfied condition: cuda>={'.'.join(base.cuda.split('.')[:2])}')",
                  fix=f"install NVIDIA driver >= {floor} on the host, or use a base image whose CUDA the driver "
                  f"supports (the host's driver reports CUDA {m.driver_cuda or '?'})")


#: What a RUN line installs that puts cuDNN 9 into an image whose tag carries cuDNN 8 (tfgpu.kb.knowledge.ImageFault):
#: NVIDIA's apt package (the workaround of tensorflow/tensorflow#62412), pip's cuDNN wheel, or the [and-cuda] extra.
_CUDNN9 = re.compile(r"\bcudnn9(?:-cuda-12)?\b|\bnvidia-cudnn-cu12\b|tensorflow\[[^\]]*and-cuda")


def _fault_check(base: BaseImage, kb: KnowledgeBase, where: str, runs: Sequence[tuple[str, int]]) -> Check | None:
    """The FROM image as tfgpu.judge.containers judges it (a tf_image_faults row): FAIL for a blocked tag, WARN when a
    RUN line of the same stage installs cuDNN 9 on top (the workaround; the built image still needs a GPU check)."""
    from tfgpu.core.record import replace
    from tfgpu.judge.containers import fault_finding

    # the tag as written (a -gpu-jupyter tag carries the same cuDNN as its -gpu image)
    finding = fault_finding(replace(base.image, ref=base.ref), kb) if base.image is not None else None
    if finding is None:
        return None
    url = str(kb.sources("containers").get(base.image.fault.source, {}).get("url", ""))
    fixed = next((line for args, line in runs if _CUDNN9.search(args)), None)
    if fixed is not None:
        return _check("image.cudnn", WARN, f"{where}: {finding.summary}; line {fixed} installs cuDNN 9 on top",
                      evidence="the workaround the threads report; check that TensorFlow lists the GPU in the built image",
                      source=url, fix="build it, then check that TensorFlow lists the GPU: docker run --rm --gpus all "
                      "IMAGE python3 -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\"")
    status = FAIL if base.image.fault.verdict == "blocked" else WARN
    return _check("image.cudnn", status, f"{where}: {finding.summary}", source=url, fix=finding.fix)


def _tf_checks(base: BaseImage, inst: TfInstall, kb: KnowledgeBase, where: str) -> list[Check]:
    """A pip-installed TensorFlow against the CUDA/cuDNN its base image carries."""
    out: list[Check] = []
    label = f"{where}: RUN pip install {inst.dist}{inst.extras}{inst.spec}"
    and_cuda = "and-cuda" in inst.extras
    if and_cuda and base.kind in ("cuda", "tensorflow", "ngc"):
        out.append(_check("pip.and_cuda", WARN, f"{label} on {base.ref}: two CUDAs — the nvidia-* wheels of "
                          f"[and-cuda] and the image's own CUDA {base.cuda or ''}".rstrip(),
                          evidence="the image's LD_LIBRARY_PATH / ld.so.conf find its CUDA first; versions that differ "
                          "end in 'Could not load dynamic library' or cuDNN version mismatches",
                          fix="base the image on python:3.X-slim or ubuntu (the wheels bring CUDA), or drop [and-cuda] "
                          "and match TensorFlow to the image's CUDA"))
    if inst.spec and inst.op != "==" and not and_cuda:
        return out + _range_checks(base, inst, kb, label)
    if inst.op != "==" or not inst.version:
        return out
    wanted = inst.version if inst.version.count(".") >= 2 or "*" in inst.version else f"{inst.version}.0"
    try:  # pip's ==2.15 means 2.15.0, not the newest 2.15.x
        v = kb.resolve_tf(wanted if inst.op == "==" else inst.version, "linux")
    except Exception:
        out.append(_check("pip.tensorflow", WARN, f"{label}: tfgpu knows no TensorFlow {inst.version} GPU build"))
        return out
    build = kb.build_for(v, "linux")
    if build is None:
        return out
    if base.kind == "tensorflow" and base.tf and version(base.tf) != v:
        out.append(_check("pip.tensorflow", WARN, f"{label} replaces the image's TensorFlow {base.tf}; {v} is built "
                          f"for CUDA {build.cuda} / cuDNN {build.cudnn}, the image carries CUDA {base.cuda}",
                          fix=f"use FROM tensorflow/tensorflow:{v}-gpu instead"))
        return out
    if and_cuda:  # the nvidia-* wheels bring CUDA and cuDNN (judged above against the image's own)
        return out
    if base.kind == "other":
        release = kb.gpu_release(v, "linux")
        if release is not None and release.and_cuda:  # compat/releases.toml: the [and-cuda] extra (2.14+)
            out.append(_check("pip.tensorflow", WARN, f"{label}: from {_and_cuda_since(kb)} the GPU libraries come with "
                              f"tensorflow[and-cuda]; plain '{inst.dist}' on {base.ref} finds no CUDA",
                              fix=f"pip install 'tensorflow[and-cuda]=={v}'"))
        else:
            out.append(_check("pip.tensorflow", FAIL, f"{label}: TensorFlow {v} loads the system CUDA {build.cuda} and "
                              f"cuDNN {build.cudnn}; {base.ref} has neither",
                              fix=f"FROM nvidia/cuda:{build.cuda}.x-cudnn{build.cudnn.split('.')[0]}-runtime-<os>, or "
                              f"FROM tensorflow/tensorflow:{v}-gpu"))
        return out
    if base.kind != "cuda" or not base.cuda:
        return out
    problems = _image_problems(base, build, v, kb)
    want_cudnn = str(build.cudnn).split(".")[0]
    if problems:
        out.append(_check("pip.tensorflow", FAIL, f"{label}: " + "; ".join(problems.values()) + " — TensorFlow will "
                          "print 'Could not load dynamic library' and run on the CPU",
                          fix=f"FROM nvidia/cuda:{build.cuda}-cudnn{want_cudnn}-runtime-<os> (TensorFlow {v}'s tested "
                          f"build), or FROM tensorflow/tensorflow:{v}-gpu"))
    else:
        out.append(_check("pip.tensorflow", PASS, f"{label}: its CUDA {build.cuda} / cuDNN {build.cudnn} match {base.ref}"))
    return out


def _image_problems(base: BaseImage, build: Any, v: Version, kb: KnowledgeBase) -> dict[str, str]:
    """What TensorFlow ``v`` (its tested ``build``) misses in a CUDA image, by kind: "cuda", "cudnn"."""
    from tfgpu.judge.system import system_cuda_serves

    have = version(".".join(base.cuda.split(".")[:2]))
    built = version(".".join(str(build.cuda).split(".")[:2])) if "." in str(build.cuda) else version(f"{build.cuda}.0")
    problems = {}
    if not system_cuda_serves(have, built, v, kb):
        problems["cuda"] = f"it loads CUDA {build.cuda}, the image has CUDA {base.cuda}"
    want_cudnn = str(build.cudnn).split(".")[0]
    if not base.cudnn:
        problems["cudnn"] = f"it loads cuDNN {build.cudnn}, and {base.ref} has no cuDNN (no 'cudnn' in its tag)"
    elif base.cudnn.isdigit() and base.cudnn != want_cudnn:
        problems["cudnn"] = f"it loads cuDNN {build.cudnn}, the image has cuDNN {base.cudnn}"
    return problems


def _range_checks(base: BaseImage, inst: TfInstall, kb: KnowledgeBase, label: str) -> list[Check]:
    """A version range (``tensorflow~=2.4``, ``tensorflow-gpu>=2.1.*``) on a CUDA image: pip may pick any GPU
    release the range allows, so a problem is reported only when every one of them has it (the same kind
    for all: the image's CUDA, or its cuDNN). ``>=X.*`` (accepted by pip before 20.3) reads as ``>=X``."""
    from tfgpu.kb.specifiers import InvalidSpecifier, VersionSpec

    if base.kind != "cuda" or not base.cuda:
        return []
    text = re.sub(r"(>=|<=|>|<|~=)\s*([\w.]+?)\.\*", r"\1\2", inst.spec)
    try:
        spec = VersionSpec(text)
    except InvalidSpecifier:
        return [_check("pip.tensorflow", WARN, f"{label}: '{inst.spec}' is not a version range pip accepts")]
    found: list[tuple[Version, dict[str, str]]] = []
    for r in sorted(kb.gpu_releases("linux"), key=lambda r: r.version):
        build = kb.build_for(r.version, "linux")
        if r.version in spec and build is not None:
            found.append((r.version, _image_problems(base, build, r.version, kb)))
    if not found:
        return [_check("pip.tensorflow", WARN, f"{label}: tfgpu knows no TensorFlow GPU release in '{inst.spec}'")]
    common = set(found[0][1]).intersection(*(set(p) for _v, p in found[1:]))
    first, first_problems = found[0]
    if not any(problems for _v, problems in found):
        return [_check("pip.tensorflow", PASS, f"{label}: every GPU release it allows ({first}..{found[-1][0]}) matches "
                       f"{base.ref}'s CUDA and cuDNN")]
    if not common:
        return [_check("pip.tensorflow", SKIP, f"{label}: pip picks one of {first}..{found[-1][0]}; some of them match "
                       f"{base.ref}, some do not", fix=f"pin one: pip install '{inst.dist}=={found[-1][0]}'")]
    what = "; ".join(first_problems[k] for k in sorted(common))
    later = f" (and every later release the range allows, up to {found[-1][0]})" if len(found) > 1 else ""
    build = kb.build_for(first, "linux")
    tested = (f"FROM nvidia/cuda:{build.cuda}-cudnn{str(build.cudnn).split('.')[0]}-runtime-<os> (its tested build), or "
              if build is not None else "")
    return [_check("pip.tensorflow", FAIL, f"{label}: the oldest TensorFlow it allows, {first}: {what}{later} — "
                   "TensorFlow will print 'Could not load dynamic library' and run on the CPU",
                   evidence=f"{len(found)} GPU releases match '{inst.spec}'",
                   fix=f"pin TensorFlow ({inst.dist}=={first}) and base the image on it: {tested}"
                   f"FROM tensorflow/tensorflow:{first}-gpu")]


#: TensorFlow requirements of one RUN instruction judged one by one: real ones name one (pip merges several into
#: one requirement); a 1 MB line of them would cost a judgement (every GPU release against the image) each.
MAX_TF_INSTALLS = 8


def _run_checks(base: BaseImage, installs: list[TfInstall], kb: KnowledgeBase, line: int) -> list[Check]:
    """The checks of one RUN instruction's TensorFlow requirements: each distinct one judged once, the first
    :data:`MAX_TF_INSTALLS` of them, and one warning saying what was repeated or left unjudged."""
    distinct = list({(i.dist.lower(), i.extras, i.spec): i for i in reversed(installs)}.values())[::-1]
    out: list[Check] = []
    for inst in distinct[:MAX_TF_INSTALLS]:
        out += _tf_checks(base, inst, kb, f"line {inst.line}")
    if len(installs) > 1:
        judged = min(len(distinct), MAX_TF_INSTALLS)
        out.append(_check("pip.tensorflow", WARN, f"line {line}: pip install names TensorFlow {len(installs)} times "
                          f"({len(distinct)} distinct requirements; tfgpu judged {judged}); pip merges them into one",
                          fix="name TensorFlow once, with the one version you want"))
    return out


def lint_dockerfile(text: str, kb: KnowledgeBase, m: Machine | None) -> list[Check]:
    instructions = parse_dockerfile(text)
    checks: list[Check] = []
    for ins in instructions:
        if not ins.known:
            checks.append(_check("dockerfile.syntax", FAIL, f"line {ins.line}: '{ins.cmd[:40]}' is not a Dockerfile "
                                 "instruction (docker build stops here: 'unknown instruction')",
                                 fix="remove it (an unresolved merge conflict leaves <<<<<<< / ======= / >>>>>>> lines)"))
    all_stages = stages(instructions)
    if not all_stages:
        checks.append(_check("dockerfile.from", ERROR, "no FROM instruction"))
        return checks
    final = all_stages[-1]
    for st in all_stages:
        where = f"line {st.line}"
        base = classify_image(st.image, kb)
        if base.kind != "other" and st is final:  # the image that runs; build stages' CUDA is build-time only
            checks.append(_driver_check(base, m, where))
            fault = _fault_check(base, kb, where, st.runs)
            if fault is not None:
                checks.append(fault)
        for args, line in st.runs:
            checks += _run_checks(base, tf_installs(args, line), kb, line)
        for name, (value, line) in st.env.items():
            if name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") and hides_every_gpu(name, value):
                checks.append(_check("env.visible_devices", FAIL, f"line {line}: ENV {name}={value} hides every GPU",
                                     fix=visible_devices_fix(name)))
            if name == "LD_LIBRARY_PATH" and any(k in base.kind for k in ("cuda", "tensorflow", "ngc")):
                checks.append(_check("env.ld_library_path", WARN, f"line {line}: ENV LD_LIBRARY_PATH={value} replaces "
                                     f"the one {base.ref} sets, so its CUDA libraries (or pip's) may be shadowed",
                                     fix="append instead: ENV LD_LIBRARY_PATH=/your/dir:${LD_LIBRARY_PATH}"
                                     if "$LD_LIBRARY_PATH" not in value and "${LD_LIBRARY_PATH" not in value
                                     else "keep the image's directories first"))
    if not any(c.id in ("image.driver", "pip.tensorflow", "pip.and_cuda") for c in checks):
        checks.append(_check("image.gpu", SKIP, f"{final.image}: not a CUDA or TensorFlow GPU image, and no TensorFlow "
                             "is pip-installed here; nothing GPU-specific to check"))
    return checks


# --------------------------------------------------------------------------- compose


def _gpu_access(svc: Mapping[str, Any]) -> str:
    """"reservation" (deploy.resources.reservations.devices with capability gpu), "gpus" (the `gpus:`
    attribute), "runtime" (legacy `runtime: nvidia`), or ""."""
    deploy = svc.get("deploy")
    if isinstance(deploy, Mapping):
        res = deploy.get("resources")
        res = res.get("reservations") if isinstance(res, Mapping) else None
        devices = res.get("devices") if isinstance(res, Mapping) else None
        for d in devices if isinstance(devices, list) else []:
            caps = d.get("capabilities") if isinstance(d, Mapping) else None
            flat: list[str] = []
            for x in caps if isinstance(caps, list) else []:  # [gpu] or [[gpu, utility]] (the engine's form)
                flat += [str(c) for c in x] if isinstance(x, list) else [str(x)]
            if "gpu" in flat:
                return "reservation"
    if svc.get("gpus"):
        return "gpus"
    if str(svc.get("runtime") or "") == "nvidia":
        return "runtime"
    return ""


def _looks_gpu(svc: Mapping[str, Any], kb: KnowledgeBase) -> str:
    image = str(svc.get("image") or "")
    if image and classify_image(image, kb).kind != "other":
        return f"its image {image} is a GPU image"
    for k, v in _env_items(svc.get("environment")):
        if k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES") and not hides_every_gpu(k, v):
            return f"it sets {k}"
    return ""


def lint_compose(text: str, kb: KnowledgeBase, m: Machine | None) -> list[Check]:
    doc = load_yaml_bounded(text)
    services = doc.get("services") if isinstance(doc, Mapping) else None
    if not isinstance(services, Mapping):
        return [_check("compose.services", ERROR, "no services mapping")]
    checks: list[Check] = []
    with_gpu = []
    for name, svc in services.items():
        if not isinstance(svc, Mapping):
            continue
        access = _gpu_access(svc)
        hidden = [(k, v) for k, v in _env_items(svc.get("environment"))
                  if k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") and hides_every_gpu(k, v)]
        if str(svc.get("runtime") or "") == "nvidia":  # with a reservation too: the daemon refuses an unknown runtime
            checks.append(_check("compose.gpu_runtime", WARN, f"service {name}: `runtime: nvidia` needs the nvidia "
                                 "runtime registered in the daemon's daemon.json ('unknown or invalid runtime name: "
                                 "nvidia' otherwise)",
                                 fix=f"remove `runtime: nvidia`: the service's {'gpus: attribute' if access == 'gpus' else 'reservation'}"
                                 " already gives it the GPU" if access in ("reservation", "gpus") else
                                 f"reserve the GPU instead ({COMPOSE_DOCS}): deploy.resources."
                                 "reservations.devices: [{driver: nvidia, count: all, capabilities: [gpu]}]"))
        if access and not hidden:  # a reservation whose GPUs the environment then hides gives no GPU access
            with_gpu.append(str(name))
        elif not access:
            why = _looks_gpu(svc, kb)
            if why:
                checks.append(_check("compose.gpu_reservation", FAIL, f"service {name}: {why} but reserves no GPU, so "
                                     "the container starts without one", fix=f"add ({COMPOSE_DOCS}): deploy.resources."
                                     "reservations.devices: [{driver: nvidia, count: all, capabilities: [gpu]}]"))
        for k, v in hidden:
            checks.append(_check("env.visible_devices", FAIL, f"service {name}: {k}={v or '(empty)'} hides every GPU",
                                 fix=visible_devices_fix(k, k)))
        image = str(svc.get("image") or "")
        if access and image:
            base = classify_image(image, kb)
            if base.kind != "other":
                checks.append(_driver_check(base, m, f"service {name}"))
                fault = _fault_check(base, kb, f"service {name}", ())
                if fault is not None:
                    checks.append(fault)
    if with_gpu:
        checks.append(_check("compose.gpu_reservation", PASS, f"GPU access: {', '.join(with_gpu)}"))
    elif not any(c.id == "compose.gpu_reservation" for c in checks):
        checks.append(_check("compose.gpu_reservation", WARN, f"no service of {len(services)} reserves a GPU: each "
                             "container starts without one (nvidia-smi and CUDA find nothing)",
                             fix=f"add to the service that needs it ({COMPOSE_DOCS}): deploy.resources.reservations."
                             "devices: [{driver: nvidia, count: all, capabilities: [gpu]}]"))
    return checks


# --------------------------------------------------------------------------- files


def detect_kind(text: str) -> str | None:
    """"dockerfile" when the first instruction is FROM/ARG (or a parser directive starts it), "compose" when
    a top-level ``services:`` key exists; by content, not by name."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word = line.split()[0].upper()
        if word in ("FROM", "ARG") and not line.endswith(":"):
            return "dockerfile"
        break
    if re.search(r"(?m)^services\s*:", text):
        return "compose"
    if re.search(r"(?im)^\s*FROM\s+\S+", text) and not re.search(r"(?m)^\S+\s*:\s*$", text):
        return "dockerfile"
    return None


def lint_text(text: str, kb: KnowledgeBase, m: Machine | None) -> tuple[str, list[Check]]:
    kind = detect_kind(text)
    if kind == "dockerfile":
        return kind, lint_dockerfile(text, kb, m)
    if kind == "compose":
        return kind, lint_compose(text, kb, m)
    msg = "neither a Dockerfile (no FROM) nor a compose file (no top-level services:)"
    raise InputError(msg)


def read_input(path: str) -> str:
    p = Path(path)
    try:
        if not p.is_file():
            msg = f"{path}: not a file"
            raise InputError(msg)
        if p.stat().st_size > MAX_BYTES:
            msg = f"{path}: larger than {MAX_BYTES // 1024} KiB; not a Dockerfile or compose file"
            raise InputError(msg)
        data = p.read_bytes()
    except OSError as exc:
        msg = f"{path}: cannot be read ({exc.strerror or exc})"
        raise InputError(msg) from None
    if b"\x00" in data:
        msg = f"{path}: binary data, not a Dockerfile or compose file"
        raise InputError(msg)
    return data.decode("utf-8", "replace")


def _and_cuda_since(kb: KnowledgeBase) -> str:
    """The first series whose wheels have the [and-cuda] extra (compat/releases.toml: 2.14)."""
    first = kb.and_cuda_from()
    return f"{first.major}.{first.minor}" if first is not None else "?"


def lint_paths(paths: Sequence[str], kb: KnowledgeBase, facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """The lint document (tfgpu.lint/1) for ``paths``; raises InputError (exit 2) on unreadable input."""
    m = Machine.from_facts(as_facts(facts), kb) if facts else None
    files = []
    for path in paths:
        text = read_input(path)
        try:
            kind, checks = lint_text(text, kb, m)
        except InputError as exc:
            msg = f"{path}: {exc.message}"
            raise InputError(msg, hint="tfgpu lint reads Dockerfiles and docker compose files") from None
        files.append({"path": path, "kind": kind, "checks": [c.to_json() for c in checks]})
    return {"schema": SCHEMA, "files": files,
            "host": {"driver": m.driver_text if m else None, "gpus": [g.get("name") for g in (m.gpus or ())] if m else []}}


def exit_code(doc: Mapping[str, Any], *, strict: bool) -> int:
    """0: no ✗ finding (warnings allowed); 1: a ✗ finding (fail or error), or with ``strict`` a warning too.
    Bad usage or a file that cannot be read is 2, raised before a document exists."""
    statuses = {c["status"] for f in doc["files"] for c in f["checks"]}
    return 1 if statuses & {FAIL, ERROR} or (strict and WARN in statuses) else 0
