"""The container route, decided: which GPU image of TensorFlow fits this host, and which runtime runs it.

Pure: facts (``facts["containers"]``, the driver, the GPUs) + compat/containers.toml -> a
:class:`~tfgpu.judge.findings.BackendVerdict` with backend "container" (ready when the host driver meets the
image's floor, or its forward-compatibility branch on a data-center GPU; the GPU's compute capability is in
the image; and a runtime with GPU support is configured), and the argv that pulls and runs it.
Fixes install what NVIDIA's documentation says; tfgpu never runs sudo itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from packaging.version import Version

# re-exported: where the container code looks for them
from tfgpu.backends.runners import (
    CONTAINER,
    RUNNERS,
    WORKDIR,
    Choice,
    ContainerRunner,
    Context,
    gpu_run_argv,
    pick_container_runner,
)
from tfgpu.core.record import record
from tfgpu.core.tfnames import ALLOW_GROWTH
from tfgpu.facts.machine import Machine, machine_memo
from tfgpu.judge.findings import INFORMATIONAL, BackendVerdict, Finding
from tfgpu.judge.gpu_rules import gpu_findings
from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.kb.queries import container_images, ngc_images
from tfgpu.kb.records import ContainerImage, ImageFault, Recipe
from tfgpu.kb.specifiers import VersionSpec
from tfgpu.kb.versions import series_of, version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts


TOOLKIT_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
CDI_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"
DOCKER_DOCS = "https://docs.docker.com/engine/install/"
DOCKER_POSTINSTALL = "https://docs.docker.com/engine/install/linux-postinstall/"
APPTAINER_DOCS = "https://apptainer.org/docs/admin/main/installation.html"
PODMAN_DOCS = "https://podman.io/docs/installation"

#: The toolkit's package is in NVIDIA's own repository, not the distribution's: `apt-get install
#: nvidia-container-toolkit` fails until its "Configure the production repository" step has run.
TOOLKIT_FIX = (f"install the NVIDIA Container Toolkit from NVIDIA's package repository (add the repository first, "
               f"as its install guide says: {TOOLKIT_DOCS}), then: sudo nvidia-ctk runtime configure --runtime=docker "
               "and restart the Docker daemon")
CDI_FIX = (f"generate the CDI spec as NVIDIA documents it ({CDI_DOCS}): "
           "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
NO_RUNTIME_FIX = (f"install Docker Engine ({DOCKER_DOCS}) and the NVIDIA Container Toolkit ({TOOLKIT_DOCS}); "
                  f"on an HPC cluster use its Apptainer ({APPTAINER_DOCS})")

@functools.lru_cache(maxsize=4)
def _datacenter_patterns(match: str, exclude: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(match, re.IGNORECASE), re.compile(exclude, re.IGNORECASE)


def prepare(kb: KnowledgeBase) -> None:
    """What judging the container route needs from the knowledge base alone, made ready ahead of the facts
    (tfgpu.api.doctor does it while the probes run): the data-center GPU patterns, compiled."""
    _datacenter_patterns(*kb.datacenter_gpu)


def is_datacenter_gpu(name: str, kb: KnowledgeBase) -> bool:
    """A data-center GPU, where CUDA forward compatibility lowers an image's driver floor (compat/containers.toml
    datacenter_gpu: NVIDIA's release notes, "if you are running on a data center GPU (for example, T4 ...)")."""
    match, exclude = _datacenter_patterns(*kb.datacenter_gpu)
    return bool(match.search(name)) and not exclude.search(name)


@record
class Runtime:
    """A container runtime as the facts show it, judged: can it run a GPU container now?"""

    name: str
    version: str
    gpu_ready: bool
    blockers: tuple[tuple[str, str, str], ...] = ()  # (check, summary, fix)
    caveats: tuple[tuple[str, str, str], ...] = ()
    #: How a run gives the container the GPUs ("" = the runtime's usual flag: docker --gpus all, podman's
    #: CDI device, apptainer --nv); for Docker through CDI, the devices the daemon discovered.
    gpu_args: tuple[str, ...] = ()
    route: str = ""  # "cdi" when Docker reaches the GPUs through CDI alone (no nvidia runtime, no hook)


def docker_cdi_gpu_args(devices: list[str]) -> tuple[str, ...]:
    """`docker run` flags for the NVIDIA GPUs among the CDI devices the daemon discovered (docker info's
    DiscoveredDevices): ``--device nvidia.com/gpu=all`` when the daemon lists it (nvidia-ctk's spec has it),
    else each GPU device it lists. Docker's docs: ``docker run --device=vendor.com/class=device-name``."""
    gpus = sorted({d for d in devices if d.startswith("nvidia.com/gpu=")})
    if not gpus:
        return ()
    chosen = ["nvidia.com/gpu=all"] if "nvidia.com/gpu=all" in gpus else gpus
    return tuple(a for d in chosen for a in ("--device", d))


def docker_start_fix(service: Any) -> str:
    """How to start the Docker daemon here, from how it is installed (facts: containers.runtimes[docker].service):
    a command only where it runs (no `systemctl start docker` without a docker.service unit)."""
    if not isinstance(service, Mapping):  # facts from an older tfgpu: nothing known about the service
        return "start the Docker daemon the way this machine runs it (Docker Desktop, or its system service)"
    if service.get("systemd") and service.get("unit"):
        return "start it: sudo systemctl start docker"
    if service.get("systemd") and service.get("user_unit"):
        return "start rootless Docker: systemctl --user start docker"
    if service.get("init_script"):
        return "start it: sudo service docker start"
    return (f"only the docker command is installed here, no Docker Engine service: install Docker Engine "
            f"({DOCKER_DOCS}), start Docker Desktop, or set DOCKER_HOST to a running daemon")


def _toolkit(section: Mapping[str, Any]) -> Mapping[str, Any]:
    tk = section.get("toolkit")
    return tk if isinstance(tk, Mapping) else {}


def judge_runtime(section: Mapping[str, Any], entry: Mapping[str, Any]) -> Runtime:
    """One runtime of ``facts["containers"]["runtimes"]``: what stops it from running a GPU container."""
    name = str(entry.get("name"))
    tk = _toolkit(section)
    blockers: list[tuple[str, str, str]] = []
    caveats: list[tuple[str, str, str]] = []
    daemon_raw = entry.get("daemon")
    daemon: Mapping[str, Any] = daemon_raw if isinstance(daemon_raw, Mapping) else {}
    route = ""
    gpu_args: tuple[str, ...] = ()
    if name == "docker":
        group_raw = section.get("docker_group")
        group: Mapping[str, Any] = group_raw if isinstance(group_raw, Mapping) else {}
        if daemon.get("reachable") is False:
            err = str(daemon.get("error") or "not reachable")
            if "permission denied" in err.lower() and not group.get("root"):
                blockers.append(("container.docker_group", f"the Docker daemon refuses this user ({err})",
                                 f"add yourself to the docker group ({DOCKER_POSTINSTALL}): sudo usermod -aG docker "
                                 "$USER, then log out and in"))
            else:
                blockers.append(("container.daemon", f"the Docker daemon is not running ({err})",
                                 docker_start_fix(entry.get("service"))))
        elif group and group.get("member") is False and not group.get("root") and not entry.get("rootless"):
            caveats.append(("container.docker_group", f"user {group.get('user')} is not in the docker group",
                            f"sudo usermod -aG docker $USER, then log out and in ({DOCKER_POSTINSTALL})"))
        has_hook = bool(tk.get("present"))
        live = [str(r) for r in entry.get("runtimes") or []]
        cdi_args = docker_cdi_gpu_args([str(d) for d in entry.get("cdi_devices") or []])
        if not has_hook and not any("nvidia" in r for r in live):
            if cdi_args and daemon.get("reachable") is not False:
                # Docker's CDI (docker run --device vendor.com/class=name; Engine 25+, on by default since 28.3):
                # the daemon lists the NVIDIA devices it discovered, so no nvidia runtime is needed
                route, gpu_args = "cdi", cdi_args
            else:
                cdi_specs = tk.get("cdi_gpu_devices")
                blockers.append(("container.toolkit", "Docker has no GPU support: the NVIDIA Container Toolkit is not "
                                 "installed (docker run --gpus fails with 'could not select device driver \"\" with "
                                 "capabilities: [[gpu]]')", TOOLKIT_FIX + (
                                     "; or, with the NVIDIA CDI spec already here, enable CDI in Docker (Engine >= 25): "
                                     "sudo nvidia-ctk runtime configure --runtime=docker --cdi.enabled && sudo "
                                     "systemctl restart docker, then docker run --device nvidia.com/gpu=all"
                                     if cdi_specs else "")))
        dj_raw = tk.get("daemon_json")
        daemon_json: Mapping[str, Any] = dj_raw if isinstance(dj_raw, Mapping) else {}
        if daemon.get("reachable") and daemon_json.get("nvidia") and live and not any("nvidia" in r for r in live):
            caveats.append(("container.restart", "/etc/docker/daemon.json registers the nvidia runtime but the "
                            "running daemon does not list it (not restarted since)", "sudo systemctl restart docker"))
    elif name == "podman" and not tk.get("cdi_gpu_devices") and not any(
            str(s.get("kind", "")).startswith("nvidia.com/") for s in tk.get("cdi_specs") or [] if isinstance(s, Mapping)):
        blockers.append(("container.cdi", "Podman sees GPUs through CDI, and no NVIDIA CDI spec is in /etc/cdi or "
                             "/var/run/cdi (podman run --device nvidia.com/gpu=all fails)",
                             (CDI_FIX if tk.get("present") else f"{TOOLKIT_FIX.split(':', 1)[0]}, then {CDI_FIX}")))
    # apptainer / singularity: --nv binds the host driver's libraries; nothing else to set up
    return Runtime(name=name, version=str(entry.get("version") or ""), gpu_ready=not blockers,
                   blockers=tuple(blockers), caveats=tuple(caveats), gpu_args=gpu_args, route=route)


def runtime_states(facts: Mapping[str, Any]) -> dict[str, Runtime] | None:
    """Every container runtime the facts show, judged (None: no container facts)."""
    section = facts.get("containers")
    if not isinstance(section, Mapping):
        return None
    entries = [e for e in section.get("runtimes") or [] if isinstance(e, Mapping) and e.get("name")]
    states: dict[str, Runtime] = {}
    for e in entries:
        states.setdefault(str(e["name"]), judge_runtime(section, e))
    return states


def runtime_context(facts: Mapping[str, Any], v: Version) -> Context:
    """What the container runners of tfgpu.backends.runners.RUNNERS decide with: the judged runtimes."""
    return Context(v=v, os="linux", tools={}, interpreters={}, wheel_pythons=(), python=None,
                   runtimes=runtime_states(facts) or {})


def pick_runtime(facts: Mapping[str, Any], wanted: str = "container") -> Runtime | None:
    """The runtime the container route uses: the first runner of ``wanted``'s row of tfgpu.backends.runners.RUNNERS
    that can run a GPU container here, else the first installed (to report what blocks it). None: none of
    the row is installed. tfgpu.plan.choose picks the runtime of a plan with the same row and loop."""
    states = runtime_states(facts)
    if not states:
        return None
    _runner, program, _why = pick_container_runner(wanted if wanted in RUNNERS else "container",
                                                   runtime_context(facts, version("0")))
    return states.get(program) if program else None


# --------------------------------------------------------------------------- images


def image_findings(image: ContainerImage, m: Machine, kb: KnowledgeBase) -> tuple[list[Finding], list[Finding]]:
    """The host driver and the GPUs against one image (worked out once per machine and image)."""
    memo = machine_memo(m)
    key = ("image", image.ref, image.family, id(kb))  # a reference names one image of the knowledge base
    if key not in memo:
        memo[key] = _image_findings(image, m, kb)
    blockers, caveats = memo[key]
    return list(blockers), list(caveats)


def _all_datacenter(m: Machine, kb: KnowledgeBase) -> bool:
    """Whether every visible GPU is a data-center GPU (:func:`is_datacenter_gpu`), worked out once per machine."""
    memo = machine_memo(m)
    key = ("datacenter", id(kb))
    if key not in memo:
        names = {str(g.get("name") or "") for g in m.gpus or ()}
        memo[key] = bool(names) and all(is_datacenter_gpu(n, kb) for n in names)
    found: bool = memo[key]
    return found


def _image_findings(image: ContainerImage, m: Machine, kb: KnowledgeBase) -> tuple[list[Finding], list[Finding]]:
    blockers: list[Finding] = []
    caveats: list[Finding] = []
    datacenter = _all_datacenter(m, kb)
    if m.driver is not None and image.driver is not None and not image.driver_ok(m.driver, datacenter=datacenter):
        compat = ", ".join(f"R{c.major} >= {c}" for c in image.compat_drivers)
        extra = (f" (on a data-center GPU also {compat}, through CUDA forward compatibility)" if compat else "")
        blockers.append(Finding(
            "container.driver", f"{image.ref} needs host driver >= {image.driver_text or image.driver}{extra}; "
            f"this host has {m.driver_text}", fix=f"install NVIDIA driver >= {image.driver_text or image.driver}, or "
            "choose an image with an older CUDA (tfgpu doctor lists them)"))
    elif m.driver is not None and image.driver is not None and m.driver < image.driver:
        caveats.append(Finding("container.forward_compat", f"{image.ref} runs on driver {m.driver_text} only through "
                               "CUDA forward compatibility (data-center GPU)", severity=INFORMATIONAL))
    fault = fault_finding(image, kb)
    if fault is not None:
        (blockers if image.fault is not None and image.fault.verdict == "blocked" else caveats).append(fault)
    if image.family == "tensorflow":
        if m.avx is False and kb.cpu_requirement("avx", image.tf) is not None:  # the image holds the pip wheel
            blockers.append(Finding("cpu.avx", f"{image.ref}: TensorFlow {image.tf}'s wheels in the image need AVX; "
                                    "this CPU has none ('Illegal instruction')",
                                    fix="use a release whose build runs without AVX: tfgpu doctor names one"))
        g_block, g_cav, _jit = gpu_findings(m, kb, image.tf, image.cuda, "pip")
        blockers += [Finding(f.check, f"{image.ref}: {f.summary}", f.fix) for f in g_block]
        caveats += g_cav
        return blockers, caveats
    if not image.cuda:  # an image named with --image that tfgpu knows nothing about: nothing to judge
        return blockers, caveats
    toolkit = kb.toolkit(_xy(image.cuda))
    for cc_text in sorted(set(m.ccs())):
        cc = version(cc_text)
        if image.cc_min and cc < version(image.cc_min):
            blockers.append(Finding("container.gpu_arch", f"{image.ref} supports compute capability >= {image.cc_min}; "
                                    f"this GPU has {cc_text}", fix="use an older image"))
        elif toolkit and toolkit.cc_max and cc.major > version(toolkit.cc_max).major:
            blockers.append(Finding("container.gpu_arch", f"{image.ref} has CUDA {image.cuda} (up to compute "
                                    f"capability {toolkit.cc_max}); this GPU has {cc_text}", fix="use a newer image"))
    return blockers, caveats


def fault_finding(image: ContainerImage, kb: KnowledgeBase) -> Finding | None:
    """What a tf_image_faults row says about ``image`` as published (None: no row covers it). The doctor's and
    the plan's verdict (:func:`judge_container`) and `tfgpu lint` (a FROM line) all report this finding."""
    f = image.fault
    if f is None:
        return None
    return Finding("container.image_cudnn", f"{image.ref} carries cuDNN {f.cudnn} ({f.carries}) while TensorFlow "
                   f"{image.tf} needs cuDNN {f.needs_cudnn}: TensorFlow finds no GPU in it ({_fault_refs(kb, f)})",
                   fix=fault_fix(image, kb))


def _fault_refs(kb: KnowledgeBase, fault: ImageFault) -> str:
    """The threads a fault row cites, as a user can open them."""
    sources = kb.sources("containers")
    urls = [str(sources[k]["url"]) for k in (fault.source, fault.source2) if k and k in sources]
    return ", ".join(u.replace("https://github.com/", "").replace("/issues/", "#") for u in urls)


def fault_fix(image: ContainerImage, kb: KnowledgeBase) -> str:
    """The exact fix for an image of a tf_image_faults row: the newest unaffected TensorFlow image (and NGC's
    image of that series), or the threads' workaround built on top of the published tag."""
    f = image.fault
    if f is None:
        return ""
    good = newest_unaffected(kb, f)
    out = []
    if good is not None:
        out.append(f"use {good.ref} (TensorFlow {good.tf}, cuDNN {good.cudnn}: tfgpu plan --tf {good.tf} "
                   f"--backend docker)")
    if f.workaround:
        out.append(f"or build FROM {image.ref} with '{f.workaround}' (the workaround reported in "
                   f"{_fault_refs(kb, f).split(', ')[0]})")
    return "; ".join(out)


def newest_unaffected(kb: KnowledgeBase, fault: ImageFault) -> ContainerImage | None:
    """TensorFlow's own image of the newest Linux GPU release of ``fault.last_good``'s series (or below) that
    no fault row covers. A derived index of the knowledge base (it depends on the tables and ``last_good``
    alone): every faulted image's fix names it, and the search reads every release."""
    return kb.derived("newest_unaffected", fault.last_good, lambda: _newest_unaffected(kb, fault.last_good))


def _newest_unaffected(kb: KnowledgeBase, last_good: str) -> ContainerImage | None:
    candidates = sorted({b.tf for b in kb.builds if b.os == "linux"}, reverse=True)
    limit = version(last_good) if last_good else None
    for v in candidates:
        if limit is not None and (v.major, v.minor) > (limit.major, limit.minor):
            continue
        newest = max((r.version for r in kb.releases if r.dist == "tensorflow" and not r.yanked
                      and (r.version.major, r.version.minor) == (v.major, v.minor) and not r.version.is_prerelease),
                     default=v)
        own = next((i for i in container_images(kb, newest) if i.family == "tensorflow" and i.fault is None), None)
        if own is not None:
            return own
    return None


def _xy(text: str) -> str:
    return series_of(version(text))  # X.Y, memoized


def images_for_gpu(kb: KnowledgeBase, m: Machine) -> list[ContainerImage]:
    """NGC images whose CUDA and GPU range cover every visible GPU and whose floor the driver meets,
    newest first (what to name when no wheel runs on the GPU: an RTX 50-series needs CUDA >= 12.8)."""
    memo = machine_memo(m)
    key = ("fits", id(kb))
    if key not in memo:
        memo[key] = [i for i in sorted(ngc_images(), key=lambda i: i.ref, reverse=True)
                     if not image_findings(i, m, kb)[0]]
    return list(memo[key])


def judge_container(facts: Mapping[str, Any], kb: KnowledgeBase, v: Version, m: Machine, *,
                    wanted: str = "container", image_ref: str | None = None) -> BackendVerdict:
    """The container route for TensorFlow ``v``: the first image (TensorFlow's own, then NGC's of the same
    series) that fits this host, run by the first GPU-ready runtime."""
    images = container_images(kb, v)
    if image_ref:
        named = ([i for i in images if i.ref == image_ref] or [i for i in ngc_images() if i.ref == image_ref]
                 or tensorflow_tag(kb, image_ref))
        images = named or [ContainerImage(ref=image_ref, family="custom", tf=v, cuda="", cudnn="", python="",
                                          driver=None, compat_drivers=(), cc_min="", published="", source="")]
    runtime, r_block, r_cav = _runtime_findings(facts, m, wanted)
    if not images:
        blocker = Finding("container.image", f"no GPU image of TensorFlow {v} is known",
                          fix="pass --image REF, or choose a release listed by tfgpu compat")
        return BackendVerdict("container", "", False, (*r_block, blocker), r_cav,
                              runtime=runtime.name if runtime else "")
    judged = [(i, *image_findings(i, m, kb)) for i in images]
    best = next(((i, b, c) for i, b, c in judged if not b), judged[0])
    image, i_block, i_cav = best
    if i_block and m.gpus:
        runs = _image_that_runs(kb, m)
        if runs is not None:  # a suggestion, not a blocker: the image that does run here (no ✗; the route stays blocked)
            i_cav.append(runs)
    blockers = (*r_block, *i_block)
    return BackendVerdict("container", image.ref, not blockers, blockers, (*r_cav, *i_cav), image.cuda,
                          image.cudnn, (image.python,) if image.python else (), runtime=runtime.name if runtime else "")


def _runtime_findings(facts: Mapping[str, Any], m: Machine,
                      wanted: str) -> tuple[Runtime | None, tuple[Finding, ...], tuple[Finding, ...]]:
    """The runtime the container route uses here (:func:`pick_runtime`) and what it puts on the route: (runtime,
    blockers, caveats). Worked out once per machine: the runtime depends on the machine only, not on the release."""
    memo = machine_memo(m)
    if ("runtime", wanted) not in memo:
        memo[("runtime", wanted)] = _judge_runtime_route(facts, wanted)
    found: tuple[Runtime | None, tuple[Finding, ...], tuple[Finding, ...]] = memo[("runtime", wanted)]
    return found


def _judge_runtime_route(facts: Mapping[str, Any],
                         wanted: str) -> tuple[Runtime | None, tuple[Finding, ...], tuple[Finding, ...]]:
    runtime = pick_runtime(facts, wanted)
    r_block: list[Finding] = []
    r_cav: list[Finding] = []
    if "containers" not in facts:
        r_cav.append(Finding("container.unknown", "no container facts (a facts file from an older tfgpu)"))
    elif runtime is None:
        what = "no container runtime" if wanted == "container" else f"{wanted} is not installed"
        fix = {"apptainer": f"install Apptainer ({APPTAINER_DOCS}); --nv needs only the NVIDIA driver",
               "podman": f"install Podman ({PODMAN_DOCS}) and the NVIDIA Container Toolkit ({TOOLKIT_DOCS}), then {CDI_FIX}",
               "docker": f"install Docker Engine ({DOCKER_DOCS}) and the NVIDIA Container Toolkit ({TOOLKIT_DOCS})",
               }.get(wanted, NO_RUNTIME_FIX)
        r_block.append(Finding("container.runtime", f"{what}: install one to use the container route", fix=fix))
    else:
        r_block += [Finding(c, s, f) for c, s, f in runtime.blockers]
        r_cav += [Finding(c, s, f) for c, s, f in runtime.caveats]
        if runtime.route == "cdi":
            r_cav.append(Finding("container.cdi", f"Docker reaches the GPUs through CDI here (the daemon lists "
                                 f"{', '.join(a for a in runtime.gpu_args if a != '--device')}; no nvidia runtime is "
                                 "registered)", mitigated_by=f"tfgpu runs docker run {' '.join(runtime.gpu_args)}"))
    return runtime, tuple(r_block), tuple(r_cav)


def _image_that_runs(kb: KnowledgeBase, m: Machine) -> Finding | None:
    """The caveat of a blocked container route that names NVIDIA's image that does run on this GPU and driver (None:
    none does). Worked out once per machine: it names the same image whatever the release."""
    memo = machine_memo(m)
    key = ("image_that_runs", id(kb))
    if key not in memo:
        fits = images_for_gpu(kb, m)
        memo[key] = (Finding("container.alternative", f"NVIDIA's {fits[0].ref} (TensorFlow {fits[0].tf}, CUDA "
                             f"{fits[0].cuda}) runs on this GPU and driver",
                             fix=f"tfgpu plan --tf {fits[0].tf} --backend container --image {fits[0].ref}")
                     if fits else None)
    found: Finding | None = memo[key]
    return found


#: TensorFlow's own release tags, as --image may name them: X.Y.Z-gpu and its variants (-gpu-jupyter).
_TF_TAG = re.compile(r"^(?:docker\.io/)?tensorflow/tensorflow:(\d+\.\d+\.\d+)-gpu(?:-[a-z]+)?$")


def tensorflow_tag(kb: KnowledgeBase, ref: str) -> list[ContainerImage]:
    """TensorFlow's own image of the release a tag names (``tensorflow/tensorflow:2.18.0-gpu-jupyter``), under
    the tag as written; [] for any other reference (``latest-gpu`` names no release)."""
    from tfgpu.core.record import replace

    m = _TF_TAG.match(ref)
    if not m:
        return []
    own = [i for i in container_images(kb, m.group(1)) if i.family == "tensorflow"]
    return [replace(i, ref=ref) for i in own]


def container_alternative(kb: KnowledgeBase, m: Machine, v: Version) -> Finding | None:
    """When no wheel of ``v`` runs on the GPU: the NGC image that can (its own TensorFlow release). Worked out
    once per machine and series (every patch release of a blocked series asks)."""
    memo = machine_memo(m)
    key = ("alternative", id(kb), v.major, v.minor)
    if key not in memo:
        memo[key] = _container_alternative(kb, m, v)
    found: Finding | None = memo[key]
    return found


def _container_alternative(kb: KnowledgeBase, m: Machine, v: Version) -> Finding | None:
    fits = images_for_gpu(kb, m) if m.gpus else []
    if not fits:
        return None
    series = series_of(v)
    best = next((i for i in fits if series_of(i.tf) == series), fits[0])
    return Finding("container.alternative", f"NVIDIA's container {best.ref} (TensorFlow {best.tf}, CUDA {best.cuda}) "
                   "carries code for this GPU", fix=f"tfgpu doctor --tf {best.tf} --backend container")


# --------------------------------------------------------------------------- plans (pure): pull, smoke, run

#: An image reference as Docker's reference grammar allows it (registry/path:tag@digest), nothing else:
#: values that reach argv, a Dockerfile or a definition file are checked here first.
_IMAGE_REF = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
                        r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")


def check_image_ref(ref: str) -> str:
    from tfgpu.core.errors import UsageError

    if not _IMAGE_REF.match(ref) or len(ref) > 255:
        msg = f"--image {ref!r} is not an image reference"
        raise UsageError(msg, hint="e.g. --image nvcr.io/nvidia/tensorflow:25.02-tf2-py3")
    return ref


#: A CDI device flag tfgpu itself writes: --device nvidia.com/gpu=NAME (NAME: an index, a UUID, "all", gpuN).
_CDI_GPU = re.compile(r"nvidia\.com/gpu=[A-Za-z0-9_.:-]{1,80}")


def gpu_args_of(argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The CDI GPU flags of a `docker run` argv tfgpu planned (() when it uses the usual --gpus all): what the
    registry keeps so that `tfgpu run` gives the container the same devices."""
    if len(argv) < 2 or argv[0] != "docker" or argv[1] != "run":
        return ()
    out: list[str] = []
    for flag, value in zip(argv, argv[1:]):
        if flag == "--device" and _CDI_GPU.fullmatch(value):
            out += [flag, value]
    return tuple(out)


def run_in_container(runtime: str, image: str, command: list[str], cwd: str,
                     gpu_args: Any = ()) -> tuple[str, ...]:
    """`tfgpu run NAME -- CMD` for a container environment: CMD in the image with the current directory
    mounted at /workspace (the function the run command calls). ``gpu_args``: the CDI devices the registry
    recorded for it (read from a file another user may write: only nvidia.com/gpu=... device flags pass)."""
    return gpu_run_argv(runtime, image, command, mounts=((cwd, WORKDIR, False),), workdir=WORKDIR,
                        env=(ALLOW_GROWTH,), gpu_args=recorded_gpu_args(runtime, gpu_args))


def recorded_gpu_args(runtime: str, recorded: Any) -> tuple[str, ...]:
    """The GPU flags a registry entry recorded (its ``gpu_args``), checked: the registry is a file another user
    may write, so only Docker's ``--device nvidia.com/gpu=...`` pairs pass; anything else gives ()."""
    if runtime != "docker" or not isinstance(recorded, (list, tuple)):
        return ()
    return gpu_args_of(["docker", "run", *(str(a) for a in recorded)])


def image_recipe(ref: str, row: ContainerImage | None, v: Version) -> Recipe:
    """A GPU image as a recipe of the container route (backend "container"): what the runners of
    tfgpu.backends.runners run, and what the doctor's row, the plan and the registry call ``recipe_id``."""
    return Recipe(id=ref, backend=CONTAINER, os=frozenset({"linux", "wsl2"}), tf=VersionSpec(f"=={row.tf if row else v}"),
                  channels=(), packages=ref, pins="", python=(row.python if row else "") or "", provides_cuda=True,
                  activation=(), activation_file="", note=row.note if row else "", source=row.source if row else "",
                  confidence=row.confidence if row else "sourced")


def choose_image(kb: KnowledgeBase, facts: Facts, v: Version, *, backend: str, image_ref: str | None = None,
                 judged: BackendVerdict | None = None) -> Choice:
    """The container route's choice for --backend docker|podman|apptainer|container (tfgpu.plan.choose.choose
    calls it): the image the verdict judges best here (:func:`judge_container`: the first that fits, else
    the first), run by the first runner of ``backend``'s row of tfgpu.backends.runners.RUNNERS that can run a GPU
    container here, else the first installed, else the row's first. A blocked route is still chosen, so
    that `tfgpu plan` can show it; ``Choice.blocked`` says why (create refuses it). ``judged``: the target's
    container row as the verdict judged it with the same backend (the doctor's; not judged again)."""
    from tfgpu.core.errors import UsageError

    if backend not in RUNNERS or not all(isinstance(r, ContainerRunner) for r in RUNNERS[backend]):
        msg = f"{backend!r} is not a container backend"
        raise UsageError(msg, hint="use docker, podman, apptainer or container")
    if image_ref is not None:
        check_image_ref(image_ref)
    runner, _program, why_not = pick_container_runner(backend, runtime_context(facts, v))
    verdict = (judged if judged is not None and image_ref is None
               else judge_container(facts, kb, v, Machine.from_facts(facts, kb), wanted=backend, image_ref=image_ref))
    image = image_ref or verdict.recipe
    if not image:
        msg = f"no GPU image of TensorFlow {v} is known"
        raise UsageError(msg, hint="pass --image REF (e.g. a tensorflow/tensorflow:X-gpu tag)")
    row = next((i for i in container_images(kb, v) if i.ref == image), None)
    why_image = (f"TensorFlow {row.tf} with CUDA {row.cuda}" + (f", cuDNN {row.cudnn}" if row.cudnn else "")
                 if row else "the image given with --image")
    blocked = "" if verdict.viable else "; ".join(f.summary for f in verdict.blockers) or why_not
    return Choice(image_recipe(image, row, v), runner.name, runner.name,
                  f"--backend {backend}: {image} ({why_image}) run by {runner.name}"
                  + ("" if not blocked else " — the container route is blocked on this machine (see the notes)"),
                  python=(row.python if row else "") or "", blocked=blocked)


def gpu_args_for(facts: Mapping[str, Any], backend: str) -> tuple[str, ...]:
    """The GPU flags of the runtime a plan of ``backend`` runs (() = the runtime's usual flag; Docker through
    CDI: the devices its daemon discovered). tfgpu.plan.planner.plan_container hands them to the runner's steps."""
    runtime = pick_runtime(facts, backend)
    return runtime.gpu_args if runtime is not None else ()


def image_source_urls(kb: KnowledgeBase, row: ContainerImage | None) -> list[str]:
    if row is None:
        return []
    sources = kb.sources("containers")
    return [str(sources[k]["url"]) for k in (row.source, row.source2) if k and k in sources]


def _safe_path(path: str) -> str:
    from tfgpu.core.errors import UsageError

    if not path or any(ch in path for ch in "\n\r\t\"'`$\\ ") or path.startswith("-"):
        msg = f"--requirements {path!r}: use a plain relative path without spaces or quotes"
        raise UsageError(msg, hint="e.g. --requirements requirements.txt")
    return path


def render_dockerfile(image: str, *, tf: str, requirements: str | None = None, kb: KnowledgeBase | None = None) -> str:
    """A Dockerfile FROM the chosen image, plus the user's requirements.txt when given. The image is a
    checked reference; the requirements path goes into COPY's JSON form (json.dumps escapes it). An image
    of a tf_image_faults row (TensorFlow's 2.18+ tags carry cuDNN 8.9) gets the workaround its threads
    report, with the reason and the source in a comment (`tfgpu lint` then sees it)."""
    import json

    from tfgpu.kb.knowledge import load_kb

    check_image_ref(image)
    kb = kb or load_kb()
    row = next((i for i in container_images(kb, tf) if i.ref == image), None)
    fault = row.fault if row is not None else None
    out = [f"# tfgpu plan --format dockerfile: TensorFlow {tf} on {image}",
           "# run: docker build -t my-tf . && docker run --rm --gpus all my-tf python3 -c "
           "\"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\"",
           f"FROM {image}", f"ENV {ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]}"]
    if fault is not None and fault.workaround:
        url = str(kb.sources("containers").get(fault.workaround_source or fault.source, {}).get("url", ""))
        out += [f"# {image} carries cuDNN {fault.cudnn}; TensorFlow {tf} needs cuDNN {fault.needs_cudnn}. The "
                f"workaround reported in {url}:", fault.workaround]
    if requirements:
        out += [f"COPY {json.dumps([_safe_path(requirements), '/tmp/requirements.txt'])}",
                "RUN python3 -m pip install --no-cache-dir -r /tmp/requirements.txt"]
    return "\n".join(out) + "\n"


def render_apptainer(image: str, *, tf: str, requirements: str | None = None) -> str:
    """An Apptainer definition file bootstrapping from the image (apptainer build my-tf.sif tf.def)."""
    check_image_ref(image)
    out = [f"# tfgpu plan --format apptainer: TensorFlow {tf} on {image}",
           "# build: apptainer build my-tf.sif this.def ; run: apptainer exec --nv my-tf.sif python3 ...",
           "Bootstrap: docker", f"From: {image}", ""]
    if requirements:
        out += ["%files", f"    {_safe_path(requirements)} /opt/requirements.txt", "",
                "%post", "    python3 -m pip install --no-cache-dir -r /opt/requirements.txt", ""]
    out += ["%environment", f"    export {ALLOW_GROWTH[0]}={ALLOW_GROWTH[1]}"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- explain: what the probes add

_TOOLKIT_ERRORS = frozenset({"container.no_gpu_runtime", "container.runtime_hook_missing", "container.cli_init_error",
                             "container.docker_unknown_flag_gpus", "container.unknown_device"})


def explain_cause(entry_id: str, groups: Mapping[str, str], facts: Mapping[str, Any]) -> str | None:
    """A machine-specific cause for a container error of the runtime or the toolkit, from
    ``facts["containers"]`` and the driver (None: the facts add nothing). Used by tfgpu.judge.explain."""
    section = facts.get("containers")
    if not isinstance(section, Mapping) or not entry_id.startswith("container."):
        return None
    tk = _toolkit(section)
    runtimes = {str(e.get("name")): e for e in section.get("runtimes") or [] if isinstance(e, Mapping)}
    docker = runtimes.get("docker") or {}
    dj_raw = tk.get("daemon_json")
    dj: Mapping[str, Any] = dj_raw if isinstance(dj_raw, Mapping) else {}
    cdi = docker_cdi_gpu_args([str(d) for d in docker.get("cdi_devices") or []])
    if entry_id in _TOOLKIT_ERRORS and cdi:
        return (f"The Docker daemon here lists NVIDIA CDI devices ({', '.join(cdi[1::2])}): Docker reaches the GPUs "
                f"through CDI without the nvidia runtime, so run with `docker run {' '.join(cdi)}` instead of --gpus "
                "all (or --runtime=nvidia).")
    if entry_id in _TOOLKIT_ERRORS:
        tools = [n.replace("_", "-") for n in ("nvidia_ctk", "nvidia_container_cli", "nvidia_container_runtime",
                                                 "nvidia_container_runtime_hook") if tk.get(n)]
        if not tools:
            return ("On this machine no NVIDIA Container Toolkit program (nvidia-ctk, nvidia-container-cli, "
                    f"nvidia-container-runtime-hook) is on PATH: {TOOLKIT_FIX}.")
        return (f"The toolkit is installed here ({', '.join(tools)}); "
                + ("Docker's daemon.json registers the nvidia runtime" if dj.get("nvidia")
                   else "but /etc/docker/daemon.json registers no nvidia runtime: sudo nvidia-ctk runtime configure "
                        "--runtime=docker && sudo systemctl restart docker")
                + (f"; the running daemon lists runtimes {', '.join(docker.get('runtimes') or [])}"
                   if docker.get("runtimes") else "") + ".")
    if entry_id == "container.unknown_runtime_nvidia":
        if dj.get("nvidia") and docker.get("runtimes") and not any("nvidia" in str(r) for r in docker["runtimes"]):
            return ("/etc/docker/daemon.json registers the nvidia runtime, but the running daemon does not list it: "
                    "restart it (sudo systemctl restart docker).")
        if not dj.get("present"):
            return "There is no /etc/docker/daemon.json on this machine: sudo nvidia-ctk runtime configure --runtime=docker."
        return None
    if entry_id in ("container.cuda_requirement", "container.require_driver"):
        drv_raw = facts.get("driver")
        drv: Mapping[str, Any] = drv_raw if isinstance(drv_raw, Mapping) else {}
        if drv.get("version"):
            return (f"The host driver here is {drv['version']}"
                    + (f" (CUDA up to {drv['cuda']})" if drv.get("cuda") else "")
                    + "; use an image whose CUDA that driver supports (tfgpu doctor --tf X --backend container "
                      "names one), or update the driver.")
    return None
