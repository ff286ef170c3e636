"""The machine as a verdict sees it: the facts document (schema tfgpu.facts/1) read once into a
:class:`Machine` (None = unknown, never "absent"), which GPUs CUDA_VISIBLE_DEVICES leaves visible, a GPU's
compute capability, and what a ``--tf`` value means on this machine's OS. Pure: nothing here probes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from tfgpu.core.record import record
from tfgpu.kb.versions import series_of, version

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase

#: Linux on these CPUs has no TensorFlow build that uses an NVIDIA GPU: PyPI's aarch64 wheels are AWS's
#: CPU-only builds (tensorflow-cpu-aws; TF docs pip.md, "Starting with TensorFlow 2.10, Linux CPU-builds for
#: Aarch64/ARM64 processors are built ... by AWS") and conda-forge skips aarch64 CUDA builds
#: (tensorflow-feedstock recipe/meta.yaml: `skip: true  # [aarch64 and cuda_compiler_version != "None"]`).
ARM_ARCHS = frozenset({"aarch64", "arm64", "armv8l", "armv7l"})


def maybe_version(text: Any) -> Version | None:
    """A version from a facts value; None when it is missing or not a version."""
    if text is None or text == "":
        return None
    try:
        return version(str(text))
    except InvalidVersion:
        return None


@record
class Machine:
    """The facts a verdict needs, read once from the facts document. None = unknown."""

    os: str | None  # linux | windows | macos | wsl2
    wsl: int | None
    glibc: Version | None
    avx: bool | None
    driver: Version | None
    driver_text: str
    driver_cuda: Version | None
    driver_known: bool
    driver_error: str
    kernel_module: Version | None
    user_library: Version | None
    gpus: tuple[dict[str, Any], ...] | None  # visible GPUs
    all_gpus: tuple[dict[str, Any], ...] | None
    nvidia_pci: int | None  # NVIDIA devices lspci saw, when known
    cuda_visible: str | None
    ld_library_path: str | None
    toolkits: tuple[dict[str, Any], ...]
    cudnns: tuple[dict[str, Any], ...]
    pythons: tuple[str, ...] | None  # X.Y available on the machine
    conda: dict[str, Any] | None
    tensorflow: tuple[dict[str, Any], ...] | None
    arch: str | None = None  # CPU architecture as uname -m says (x86_64, aarch64)
    l4t: str | None = None  # a Jetson's L4T release (/etc/nv_tegra_release)
    # whether the facts describe the system CUDA toolkits / cuDNN at all: the probe always does (an empty list
    # is "none installed"); a hand-written facts document that leaves the section out leaves them unknown
    toolkits_known: bool = True
    cudnns_known: bool = True
    driver_source: str = ""  # "override" when --driver / TFGPU_DRIVER_VERSION set it
    #: X.Y of the interpreters known to be 32-bit builds and not also present as a 64-bit (or unknown) one: they
    #: are not in ``pythons``, as no TensorFlow wheel installs into them (compat/rules.toml wheels-64-bit-only)
    pythons_32bit: tuple[str, ...] = ()
    #: the driver's state beyond its version (see driver_state): its kernel module and user-space libraries differ
    #: (the probe's flag, or NVML's "Driver/library version mismatch"); its CUDA library libcuda.so.1 loads (None:
    #: unknown); the kernel driver does not answer although a version was read from files
    driver_mismatch: bool = False
    libcuda: bool | None = None
    driver_not_loaded: bool = False

    @classmethod
    def from_facts(cls, facts: Facts, kb: KnowledgeBase | None = None) -> Machine:
        """The machine a facts document describes; ``kb`` answers which GPU a MIG device names (see _apply_cvd)."""
        plat = facts.get("platform") or {}
        raw_os = str(plat.get("os") or "").lower() or None
        wsl = plat.get("wsl")
        os_name: str | None
        if raw_os in ("darwin", "macos", "mac"):
            os_name = "macos"
        elif raw_os == "linux" and wsl == 2:
            os_name = "wsl2"
        else:
            os_name = raw_os
        cpu = facts.get("cpu") or {}
        conda = facts.get("conda")
        drv = facts.get("driver") if "driver" in facts else None
        drv = drv or {}
        gpus_raw = facts.get("gpus") if "gpus" in facts else None
        env = facts.get("env") or {}
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        all_gpus = tuple(gpus_raw) if isinstance(gpus_raw, list) else None
        visible = None
        if all_gpus is not None:
            visible = tuple(g for g in all_gpus if g.get("visible", True) is not False)
            if cvd is not None and all(g.get("visible") is None for g in all_gpus):
                visible = _apply_cvd(all_gpus, str(cvd), kb)
        py = facts.get("python") if "python" in facts else None
        pythons: tuple[str, ...] | None = None
        only_32: tuple[str, ...] = ()
        if isinstance(py, dict):
            found: list[str] = []
            found_32: list[str] = []
            for entry in [{"version": py.get("current"), "bits": py.get("bits")}, *(py.get("interpreters") or [])]:
                vv = maybe_version((entry or {}).get("version")) if isinstance(entry, dict) else None
                if vv is not None:
                    (found_32 if entry.get("bits") == 32 else found).append(series_of(vv))  # X.Y
            pythons = tuple(dict.fromkeys(found))
            only_32 = tuple(p for p in dict.fromkeys(found_32) if p not in pythons)
        lspci = facts.get("lspci_nvidia")
        tf = facts.get("tensorflow") if "tensorflow" in facts else None
        return cls(
            os=os_name, wsl=wsl if isinstance(wsl, int) else None, glibc=maybe_version(plat.get("glibc")),
            avx=cpu.get("avx") if isinstance(cpu.get("avx"), bool) else None,
            driver=maybe_version(drv.get("version")), driver_text=str(drv.get("version") or ""), driver_cuda=maybe_version(drv.get("cuda")),
            driver_known="driver" in facts, driver_error=str(drv.get("error") or ""),
            driver_source=str(drv.get("source") or ""),
            kernel_module=maybe_version(drv.get("kernel_module")),
            user_library=maybe_version(drv.get("user_library") or drv.get("library_version")),
            gpus=visible, all_gpus=all_gpus,
            nvidia_pci=len(lspci) if isinstance(lspci, list) else None,
            cuda_visible=None if cvd is None else str(cvd),
            ld_library_path=env.get("LD_LIBRARY_PATH"),
            toolkits=tuple(facts.get("cuda_toolkits") or ()), cudnns=tuple(facts.get("cudnn") or ()),
            pythons=pythons, pythons_32bit=only_32,
            conda=conda if isinstance(conda, dict) and conda.get("kind") else None,
            tensorflow=tuple(tf) if isinstance(tf, list) else None,
            arch=str(plat.get("arch") or "").strip().lower() or None,
            l4t=str(plat["jetson"].get("l4t") or "") or None if isinstance(plat.get("jetson"), dict) else None,
            toolkits_known="cuda_toolkits" in facts, cudnns_known="cudnn" in facts,
            **driver_state(drv),
        )

    @property
    def arm_linux(self) -> bool:
        """Linux (not macOS) on an ARM CPU."""
        return self.tf_os == "linux" and self.os != "macos" and (self.arch or "") in ARM_ARCHS

    @property
    def jetson(self) -> bool:
        """An NVIDIA Jetson: /etc/nv_tegra_release names its L4T release, or (without that file) ARM Linux whose
        driver is versioned by its L4T release (32.x-36.x) rather than 5xx."""
        if self.l4t is not None:
            return True
        return self.arm_linux and self.driver is not None and self.driver.major < 100

    @property
    def tf_os(self) -> str:
        """The OS key of the knowledge base (WSL2 installs Linux wheels)."""
        return "linux" if self.os in (None, "linux", "wsl2") else self.os

    def has_gpu(self) -> bool | None:
        return None if self.gpus is None else bool(self.gpus)

    def ccs(self) -> list[str]:
        return [str(g["compute_capability"]) for g in (self.gpus or []) if g.get("compute_capability")]

    def driver_cuda_version(self, kb: KnowledgeBase) -> Version | None:
        """The newest CUDA the driver supports: reported, or derived from the driver table."""
        if self.driver_cuda is not None:
            return self.driver_cuda
        if self.driver is None:
            return None
        from tfgpu.kb.knowledge import newest_cuda_for_driver

        os_key = "windows" if self.os in ("windows", "wsl2") else "linux"  # WSL2 reports the Windows driver
        return newest_cuda_for_driver(kb, self.driver, os_key)


#: What NVML, nvidia-smi and TensorFlow print about a driver whose state blocks CUDA, as a facts document's driver
#: error may hold them (a probe's, or one a report quotes).
_MISMATCH = ("driver/library version mismatch", "does not match dso version")  # NVML / nvidia-smi; TF's cuda_diagnostics
_NO_LIBCUDA = ("cuda version: n/a", "libcuda.so.1: cannot open", "could not load dynamic library 'libcuda.so.1'",
               "libcuda reported version is: not found")
_NOT_LOADED = ("driver not loaded", "couldn't communicate with the nvidia driver")


def driver_state(drv: Mapping[str, Any]) -> dict[str, Any]:
    """The driver's state beyond its version, from a facts document's driver section: the probe's ``mismatch``
    and ``libcuda`` fields, else what its ``error`` quotes (nvidia-smi "Failed to initialize NVML: Driver/library
    version mismatch" or "CUDA Version: N/A", NVML "Driver Not Loaded", TensorFlow's "kernel version X does not
    match DSO version Y" and "Could not load dynamic library 'libcuda.so.1'")."""
    error = str(drv.get("error") or "").lower()
    libcuda = drv.get("libcuda")
    if not isinstance(libcuda, bool):
        libcuda = False if any(k in error for k in _NO_LIBCUDA) else None
    return {"driver_mismatch": drv.get("mismatch") is True or any(k in error for k in _MISMATCH),
            "libcuda": libcuda, "driver_not_loaded": any(k in error for k in _NOT_LOADED)}


def _apply_cvd(gpus: Iterable[dict[str, Any]], cvd: str, kb: KnowledgeBase | None = None) -> tuple[dict[str, Any], ...]:
    """CUDA_VISIBLE_DEVICES semantics: indices or UUIDs, in order; an empty value hides all;
    parsing stops at the first invalid entry (CUDA C Programming Guide, "CUDA Environment Variables").

    A MIG device (`MIG-GPU-<gpu uuid>/<gi>/<ci>` with R450-R465 drivers, `MIG-<uuid>` from R470) is a slice of
    one GPU, and a CUDA process enumerates one MIG device only (NVIDIA MIG user guide, section
    "CUDA_VISIBLE_DEVICES": "only enumeration of a single MIG instance is supported", quoted in
    pytorch/pytorch#130181). Its GPU is the one whose UUID the name embeds; a `MIG-<uuid>` name does not say,
    so the first GPU that can be partitioned (compat/rules.toml `mig`: compute capability >= 8.0) stands for
    it; without ``kb`` no GPU is known to be one."""
    gpus = list(gpus)
    out: list[dict[str, Any]] = []
    for raw in cvd.split(","):
        item = raw.strip()
        if not item:
            break
        match = None
        if item.isdigit():
            match = next((g for g in gpus if g.get("index") == int(item)), None)
        elif item.startswith("MIG-"):
            parent = None if out else _mig_parent(gpus, item, kb)
            return tuple(out) if parent is None else (parent,)  # one MIG device per process, nothing after it
        else:
            match = next((g for g in gpus if str(g.get("uuid", "")).startswith(item)), None)
        if match is None:
            break
        out.append(match)
    return tuple(out)


def gpu_cc_of(kb: KnowledgeBase, gpu: Mapping[str, Any]) -> str:
    """A GPU's compute capability: the one the machine reported (NVML, nvidia-smi, a TF log), else the
    tables' answer for its PCI device ID, else for its whole model name; "" when nobody knows."""
    return str(gpu.get("compute_capability")
               or kb.gpu_cc(str(gpu.get("name") or ""), gpu.get("pci_device_id")) or "")


def _mig_parent(gpus: list[dict[str, Any]], item: str, kb: KnowledgeBase | None) -> dict[str, Any] | None:
    """The GPU a MIG device name refers to (see _apply_cvd); None when no listed GPU can hold MIG slices."""
    gpu_uuid = item[len("MIG-"):].split("/")[0]
    if gpu_uuid.startswith("GPU-"):
        return next((g for g in gpus if str(g.get("uuid") or "") == gpu_uuid), None)
    mig = kb.rule("mig") if kb is not None else None
    for g in gpus:
        cc = maybe_version(g.get("compute_capability"))
        if cc is not None and mig is not None and mig.holds(cc):
            return g
    return None


def resolve_version(kb: KnowledgeBase, tf: str, m: Machine) -> Version:
    """Resolve on the machine's OS; a release that exists only elsewhere (TF >= 2.11 on native
    Windows, anything on macOS) still resolves, so that the verdict can say why it is blocked."""
    from tfgpu.core.errors import UsageError

    try:
        return kb.resolve_tf(tf, m.tf_os)
    except UsageError:
        if m.tf_os == "linux":
            raise
        return kb.resolve_tf(tf, "linux")


#: One doctor run judges one machine for every release (every patch of every series, each recipe and image):
#: what depends only on the machine and a few inputs is worked out once per machine. Keyed by identity; the
#: next machine starts afresh.
_MACHINE_MEMO: list[Any] = [None, {}]


def machine_memo(m: Machine) -> dict[Any, Any]:
    """The memo of machine ``m``'s pure look-ups (tfgpu.judge.gpu_rules' GPU findings, tfgpu.judge.containers' runtime and
    image findings)."""
    if _MACHINE_MEMO[0] is not m:
        _MACHINE_MEMO[0], _MACHINE_MEMO[1] = m, {}
    memo: dict[Any, Any] = _MACHINE_MEMO[1]
    return memo
