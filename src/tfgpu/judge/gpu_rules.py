"""The GPU rules: can a release's binaries run on this machine's GPUs? A GPU's compute capability against
the CUDA a build uses (its range of compute capabilities) and the code its binaries carry (SASS per
architecture, PTX to JIT-compile; compat/tf_archs.toml, read from the wheels). tfgpu.judge.verdict judges
releases with them, tfgpu.judge.containers the TensorFlow images (which hold the pip wheels)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from packaging.version import Version

from tfgpu.core.record import replace
from tfgpu.facts.machine import gpu_cc_of, machine_memo
from tfgpu.judge.findings import Finding
from tfgpu.kb.versions import normalize_cuda, version

if TYPE_CHECKING:
    from tfgpu.facts.machine import Machine
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import ArchTargets, Toolkit


#: How a finding names whose binaries it judges (tfgpu.judge.release_checks.arch_build).
BUILD_NAMES = {"pip": "official wheels", "conda-forge": "conda-forge builds", "anaconda": "Anaconda's builds"}


def _cc(text: str) -> Version:
    return version(str(text))


def gpu_findings(m: Machine, kb: KnowledgeBase, v: Version, cuda: str,
                 build: str = "pip") -> tuple[list[Finding], list[Finding], bool]:
    """Compute capability of each visible GPU against the code of ``build``'s binaries ("pip": the official
    wheels, "conda-forge": the feedstock's) and their CUDA. Returns (blockers, caveats, needs_ptx_jit).
    Judged once per machine and (release, CUDA, build): the recipes of a release and TensorFlow's own image
    of it mostly ask the same question."""
    memo = machine_memo(m)
    key = ("gpu", id(kb), v, cuda, build)
    if key not in memo:
        memo[key] = _judge_gpus(m, kb, v, cuda, build)
    blockers, caveats, jit = memo[key]
    return list(blockers), list(caveats), jit


def _gpu_kinds(m: Machine, kb: KnowledgeBase) -> list[tuple[str, str, tuple[dict[str, Any], ...]]]:
    """The visible GPUs by kind, each kind once (8 x H100 are judged once): (how a finding names them, compute
    capability, the GPUs of the kind), for the GPUs whose compute capability is known. Worked out once per machine."""
    memo = machine_memo(m)
    key = ("gpu_kinds", id(kb))
    if key not in memo:
        kinds: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for g in m.gpus or ():
            cc_text = gpu_cc_of(kb, g)
            if cc_text:
                kinds.setdefault((str(g.get("name") or "GPU of unknown model"), cc_text), []).append(g)
        memo[key] = [(f"{f'{len(gs)} x ' if len(gs) > 1 else ''}{gpu_name} (compute capability {cc_text}, "
                      f"{kb.arch_name(cc_text) or 'unknown arch'})", cc_text, tuple(gs))
                     for (gpu_name, cc_text), gs in kinds.items()]
    found: list[tuple[str, str, tuple[dict[str, Any], ...]]] = memo[key]
    return found


def _judge_gpus(m: Machine, kb: KnowledgeBase, v: Version, cuda: str,
                build: str) -> tuple[list[Finding], list[Finding], bool]:
    """Each kind of GPU against the build (:func:`_judge_kind`). A GPU the build cannot run beside GPUs it can
    does not block the machine (:func:`_mixed_gpus`)."""
    caveats: list[Finding] = []
    if m.all_gpus is None:  # as for an undescribed driver, CUDA or cuDNN: said, not taken for fine
        caveats.append(Finding(
            "gpu.unknown", f"the facts do not describe the GPUs: whether TensorFlow {v}'s GPU code runs on them is not "
            "checked", fix="run tfgpu doctor on the machine itself (it reads the GPUs), or pass --gpu-cc X.Y"))
    archs = kb.archs_for(v, m.tf_os, build, cuda if build != "pip" else None)
    toolkit = kb.toolkit(_libs_cuda(kb, v, cuda, m.tf_os))
    judged = [(gs, *_judge_kind(kb, v, cuda, m.tf_os, name, cc_text, archs, toolkit, build))
              for name, cc_text, gs in _gpu_kinds(m, kb)]
    runs = [(gs, c, j) for gs, b, c, j in judged if not b]
    fails = [(gs, [replace(f, summary=_without_name(f.summary, name)) for f in b])
             for (name, _cc, _gs), (gs, b, _c, _j) in zip(_gpu_kinds(m, kb), judged) if b]
    if runs and fails:
        return [], caveats + [c for _gs, cs, _j in runs for c in cs] + [_mixed_gpus(v, runs, fails)], any(
            j for _gs, _c, j in runs)
    return ([f for _gs, b, _c, _j in judged for f in b], caveats + [f for _gs, _b, c, _j in judged for f in c],
            any(j for _gs, _b, _c, j in judged))


def _mixed_gpus(v: Version, runs: list[tuple[tuple[dict[str, Any], ...], list[Finding], bool]],
                fails: list[tuple[tuple[dict[str, Any], ...], list[Finding]]]) -> Finding:
    """Some GPUs the build runs on and some it cannot: TensorFlow is to use the first and never see the others
    (it may ignore a GPU below its compute-capability floor, 'Ignoring visible gpu device', but a GPU newer than
    its code fails every op placed on it, and the threads show both failing until hidden: nvidia-docker#262,
    tensorflow#117538). CUDA_VISIBLE_DEVICES names the GPUs to use; nvidia-smi numbers them in PCI bus order,
    CUDA fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA C Programming Guide, "CUDA Environment
    Variables"), so the indices go with that order; UUIDs, when every GPU to keep has one, need no order."""
    def by_index(gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(gpus, key=lambda g: int(g.get("index") or 0))

    keep = by_index([g for gs, _c, _j in runs for g in gs])
    hide = by_index([g for gs, _b in fails for g in gs])
    uuids = [str(g.get("uuid")) for g in keep if g.get("uuid")]
    value = ",".join(uuids) if len(uuids) == len(keep) else ",".join(str(g.get("index")) for g in keep)
    order = "" if len(uuids) == len(keep) else "CUDA_DEVICE_ORDER=PCI_BUS_ID "
    why = fails[0][1][0].summary
    return Finding(
        "gpu.mixed",
        f"TensorFlow {v} will use GPU {', '.join(_gpu_label(g) for g in keep)}; it cannot run on GPU "
        f"{', '.join(_gpu_label(g) for g in hide)} ({why}): hide it, or TensorFlow fails when it places work there",
        fix=f"export {order}CUDA_VISIBLE_DEVICES={value}",
    )


def _without_name(summary: str, name: str) -> str:
    """A GPU finding's summary without the GPU's name in front (the mixed-GPU caveat names the GPUs itself)."""
    rest = summary.removeprefix(name)
    return rest.lstrip(": ") if rest != summary else summary


def _gpu_label(g: dict[str, Any]) -> str:
    return f"{g.get('index')} ({g.get('name') or 'unknown model'})"


def _judge_kind(kb: KnowledgeBase, v: Version, cuda: str, os: str, name: str, cc_text: str, archs: ArchTargets | None,
                toolkit: Toolkit | None, build: str = "pip") -> tuple[list[Finding], list[Finding], bool]:
    """One kind of GPU against the CUDA and the code of a build: (blockers, caveats, needs_ptx_jit)."""
    cc = _cc(cc_text)
    outside = _outside_toolkit(cc, toolkit)
    if outside == "newer" and toolkit is not None:
        newer = _first_series_supporting(kb, cc, os)
        return [Finding(
            "gpu.arch",
            f"{name} is newer than CUDA {cuda} (up to compute capability {toolkit.cc_max}): its cuDNN/cuBLAS carry no "
            "kernels for this GPU ('no kernel image is available', CUDNN_STATUS_ARCH_MISMATCH, or minutes of PTX JIT)",
            fix=f"use TensorFlow >= {newer}" if newer else _no_wheel_fix(kb, cc, cc_text, os),
        )], [], False
    if outside == "older" and toolkit is not None:
        return [Finding("gpu.arch", f"{name} is older than CUDA {cuda} supports (compute capability >= {toolkit.cc_min})",
                        fix=f"use an older TensorFlow whose CUDA supports compute capability {cc_text}")], [], False
    if archs is None:
        return [], [], False
    return _judge_code(kb, v, os, name, cc, cc_text, archs, BUILD_NAMES.get(build, build))


def _judge_code(kb: KnowledgeBase, v: Version, os: str, name: str, cc: Version, cc_text: str,
                archs: ArchTargets, whose: str = "official wheels") -> tuple[list[Finding], list[Finding], bool]:
    """One kind of GPU against the SASS and PTX a build carries (``whose``: how the findings name the build)."""
    sass = [_cc(s) for s in archs.sass]
    ptx = _usable_ptx(archs, cc)
    if sass and cc < min(sass) and (ptx is None or cc < ptx):
        return [Finding(
            "gpu.arch",
            f"{name}: TensorFlow {v}'s {whose} carry code for compute capability >= {min(sass)} only "
            f"(SASS {', '.join(archs.sass)})",
            fix="use an older TensorFlow that still supports this GPU, or build TensorFlow from source",
        )], [], False
    if any(s.major == cc.major and s <= cc for s in sass):
        return [], [], False  # SASS runs on later minors of the same major
    share = archs.partial_share(cc)
    if share and not (ptx is not None and ptx <= cc):
        return [Finding(
            "gpu.arch", f"{name}: only {share:.0%} of TensorFlow {v}'s kernels carry SASS for it and there is no "
            f"PTX it can JIT-compile (SASS {', '.join(archs.sass)}, PTX {archs.ptx or 'none'}): the others have "
            "no kernel image", fix=_no_wheel_fix(kb, cc, cc_text, os))], [], False
    if ptx is not None and ptx <= cc and any(_cc(f) == cc for f in archs.ptx_fails):
        return [Finding(
            "gpu.arch",
            f"{name}: TensorFlow {v}'s {whose} carry no SASS for it, and their compute_"
            f"{str(ptx).replace('.', '')} PTX is reported not to load on it (CUDA_ERROR_INVALID_PTX, then "
            "CUDA_ERROR_INVALID_HANDLE at the first GPU op)",
            fix=_no_wheel_fix(kb, cc, cc_text, os),
        )], [], False
    if ptx is not None and ptx <= cc:
        some = (f"SASS for it in only {share:.0%} of TensorFlow {v}'s kernels (SASS {', '.join(archs.sass)}); "
                "the others" if share else
                f"no SASS for it in TensorFlow {v} (SASS {', '.join(archs.sass)}); kernels")
        return [], [Finding(
            "gpu.ptx_jit",
            f"{name}: {some} will be JIT-compiled "
            f"from compute_{str(ptx).replace('.', '')} PTX at start-up (minutes on first run)",
            fix="export CUDA_CACHE_MAXSIZE=4294967296 to keep the JIT cache, or use a newer TensorFlow",
        )], True
    return [Finding(
        "gpu.arch", f"{name}: TensorFlow {v} carries no code that can run on it (SASS {', '.join(archs.sass)}, PTX "
        f"{archs.ptx or 'none'})", fix="use a newer TensorFlow",
    )], [], False


def _outside_toolkit(cc: Version, toolkit: Toolkit | None) -> str | None:
    """The first GPU rule: "newer" when a GPU's architecture is newer than any a CUDA toolkit knows (its
    libraries carry no kernels for it), "older" when the toolkit no longer supports it, else None."""
    return outside_cc_range(cc, toolkit.cc_min, toolkit.cc_max) if toolkit else None


def outside_cc_range(cc: Version, cc_min: str, cc_max: str) -> str | None:
    """:func:`_outside_toolkit` for a toolkit's compute capability range (an environment spec records it)."""
    if cc_max and cc.major > _cc(cc_max).major:
        return "newer"
    if cc_min and cc < _cc(cc_min):
        return "older"
    return None


def cuda_rules_out(m: Machine, kb: KnowledgeBase, v: Version, cuda: str) -> bool:
    """Whether release ``v`` with CUDA ``cuda`` is blocked for every visible GPU by the first rule alone
    (:func:`_outside_toolkit`): then :func:`gpu_findings` blocks it whatever the binaries carry. Worked out once
    per machine and (release, CUDA): the recipes of a release mostly share their CUDA."""
    memo = machine_memo(m)
    key = ("cuda_rules_out", id(kb), v, cuda)
    if key not in memo:
        toolkit = kb.toolkit(_libs_cuda(kb, v, cuda, m.tf_os))
        kinds = _gpu_kinds(m, kb)  # every one of them: a GPU the CUDA knows beside one it does not is not blocked
        memo[key] = toolkit is not None and bool(kinds) and all(_outside_toolkit(_cc(cc_text), toolkit)
                                                                for _name, cc_text, _gs in kinds)
    ruled_out: bool = memo[key]
    return ruled_out


def _usable_ptx(archs: ArchTargets, cc: Version) -> Version | None:
    """The PTX a GPU of compute capability ``cc`` JIT-compiles from: the highest target not above ``cc``
    (PTX compiles forward only); when every target is above it, the lowest (the verdict then blocks).
    Rows list every PTX target where a build carries several: TF <= 2.2 embedded PTX for each listed
    architecture (compat/tf_archs.toml; tests/cases: a Maxwell MX110, 5.0, runs TF 2.0.1 after minutes of JIT)."""
    ptxs = sorted(_cc(p) for p in (archs.ptx_all or ((archs.ptx,) if archs.ptx else ())))
    if not ptxs:
        return None
    below = [p for p in ptxs if p <= cc]
    return below[-1] if below else ptxs[0]


def _no_wheel_fix(kb: KnowledgeBase, cc: Version, cc_text: str, os: str) -> str:
    """What to do when no official wheel runs on a GPU: conda-forge's build if one carries its code."""
    cf = _conda_forge_release_supporting(kb, cc, "linux")
    if cf:
        where = "inside WSL2 (native Windows has no such build), " if os == "windows" else ""
        return (f"{where}use conda-forge's TensorFlow {cf}, built with code for compute capability {cc_text}: "
                f"tfgpu create --tf {cf} --backend conda")
    return (f"no TensorFlow release known to tfgpu runs on compute capability {cc_text}: use NVIDIA's NGC TensorFlow "
            "container (nvcr.io/nvidia/tensorflow, 25.02 or later is reported to work on RTX 50-series) or build "
            "TensorFlow from source")


def _conda_forge_release_supporting(kb: KnowledgeBase, cc: Version, os: str) -> str | None:
    """The newest conda-forge TensorFlow whose CUDA and GPU code both cover ``cc`` (None: none does)."""

    def find() -> str | None:
        if os != "linux":
            return None
        for r in kb.conda_forge_tf_builds():
            t = kb.toolkit(r.cuda)
            archs = kb.archs_for(r.version, "linux", "conda-forge", r.cuda)
            if not (t and t.cc_max and _cc(t.cc_max).major >= cc.major and archs and archs.build == "conda-forge"):
                continue
            if any(_cc(s).major == cc.major and _cc(s) <= cc for s in archs.sass):
                return str(r.version)
        return None

    return kb.derived("conda_forge_supporting", f"{cc}/{os}", find)


def _libs_cuda(kb: KnowledgeBase, v: Version, cuda: str, os: str) -> str:
    """The newest CUDA whose libraries a pip install may bring: `tensorflow[and-cuda]` from 2.20 pins
    ranges such as nvidia-cublas-cu12<13.0,>=12.5.3.2 (PyPI metadata), so pip takes the newest 12.x."""
    rel = kb.gpu_release(v, os)
    if rel is None or not rel.and_cuda or any("==" in req for req in rel.and_cuda):
        return cuda
    major = version(normalize_cuda(cuda)).major
    same = [t.cuda for t in kb.toolkits if t.cuda.major == major]
    return str(max(same)) if same else cuda


def index_gpu_generations(kb: KnowledgeBase) -> None:
    """Fill the knowledge base's answer to what a GPU asks of every series (the first series whose CUDA knows it)
    for every compute capability its tables name, on Linux and Windows, before it is cached: the warm-up machine of
    tfgpu.judge.verdict has no GPU, and a machine's first verdicts would work it out (~0.6 ms on an H100)."""
    for cc_text, _arch in kb.arch_names:
        for os in ("linux", "windows"):
            _first_series_supporting(kb, _cc(cc_text), os)


def _first_series_supporting(kb: KnowledgeBase, cc: Version, os: str) -> str | None:
    return kb.derived("first_series_supporting", f"{cc}/{os}", lambda: _find_first_series_supporting(kb, cc, os))


def _find_first_series_supporting(kb: KnowledgeBase, cc: Version, os: str) -> str | None:
    for series in reversed(kb.series(os)):
        build = kb.build_for(series + ".0", os)
        if build is None:
            continue
        newest = kb.resolve_tf(series, os)
        t = kb.toolkit(_libs_cuda(kb, newest, build.cuda, os))
        archs = kb.archs_for(newest, os)
        if archs is not None and any(_cc(f) == cc for f in archs.ptx_fails):
            continue  # its CUDA knows the GPU, but its PTX is reported not to load on it
        if t and t.cc_max and _cc(t.cc_max).major >= cc.major:
            return series
    return None
