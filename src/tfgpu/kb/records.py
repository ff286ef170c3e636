"""The knowledge base's records: one immutable class per kind of row of compat/ (builds, releases, CUDA
toolkits, GPU code, recipes, conda packages, GPUs, rules, notes, pins, verified installs, container images)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import Version

from tfgpu.core.record import field, record
from tfgpu.kb.specifiers import PyRange, VersionSpec
from tfgpu.kb.versions import series_of, version


@record
class Build:
    """One row of TensorFlow's "Tested build configurations" (GPU) tables."""

    tf: Version
    os: str
    python: PyRange
    cuda: str
    cudnn: str
    compiler: str
    bazel: str
    dist: str
    source: str
    note: str = ""
    # Where the release's own wheel disagrees with the docs table (compat/tensorflow.toml `corrections` rows
    # with a `wheel`, written by scripts/scan_build_info.py), `cuda`/`cudnn` hold the wheel's value and these
    # the docs' (empty where they agree); `wheel_source` is the [sources] key of the wheel read.
    docs_cuda: str = ""
    docs_cudnn: str = ""
    wheel_source: str = ""

    @property
    def series(self) -> str:
        return series_of(self.tf)


@record
class Release:
    """One final release of a TensorFlow distribution on PyPI."""

    dist: str
    version: Version
    requires_python: str
    linux_pythons: tuple[str, ...]
    windows_pythons: tuple[str, ...]
    linux_platform: str
    glibc: Version | None
    and_cuda: tuple[str, ...]
    placeholder: bool
    yanked: bool
    uploaded: str
    source: str

    def pythons(self, os: str) -> tuple[str, ...]:
        return self.windows_pythons if os == "windows" else self.linux_pythons


class _DriverFloors:
    """Linux and Windows driver floors of a CUDA table row (Toolkit, MinorCompat)."""

    linux_min_driver: Version | None
    windows_min_driver: Version | None
    raw: dict[str, Any]

    def min_driver(self, os: str) -> Version | None:
        return self.windows_min_driver if os == "windows" else self.linux_min_driver

    def min_driver_text(self, os: str) -> str:
        """The floor as NVIDIA writes it (Version() would print 535.54.03 as 535.54.3)."""
        return str(self.raw.get("windows_min_driver" if os == "windows" else "linux_min_driver") or "")


@record
class Toolkit(_DriverFloors):
    cuda: Version
    linux_min_driver: Version | None
    windows_min_driver: Version | None
    cc_min: str
    cc_max: str
    source: str
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)


@record
class MinorCompat(_DriverFloors):
    major: int
    linux_min_driver: Version | None
    windows_min_driver: Version | None
    not_covered: str
    source: str
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)


@record
class ArchTargets:
    """GPU code a TensorFlow build carries (``build``: the official wheels or conda-forge's own builds):
    SASS per compute capability, and a PTX target."""

    tf: VersionSpec
    os: str
    sass: tuple[str, ...]
    ptx: str | None  # the highest PTX target
    source: str
    confidence: str = "sourced"
    note: str = ""
    ptx_fails: tuple[str, ...] = ()  # compute capabilities on which that PTX is reported not to load
    source2: str = ""  # the report behind ptx_fails
    build: str = "pip"  # whose binaries: "pip" (official wheels) or "conda-forge" (the feedstock's builds)
    cuda: VersionSpec | None = None  # conda-forge: the CUDA variants the row covers
    # read from the wheel's fatbins (scripts/scan_wheel_archs.py): SASS / PTX only some kernels carry,
    # as (compute capability, share of the fatbin containers); every PTX >= 90%; how many containers
    sass_partial: tuple[tuple[str, float], ...] = ()
    ptx_all: tuple[str, ...] = ()
    ptx_partial: tuple[tuple[str, float], ...] = ()
    kernels: int = 0
    wheel: str = ""  # the wheel file the row was read from, and PyPI's sha256 of it
    sha256: str = ""
    wheel_newest: str = ""  # the series' newest patch, read too and found alike
    sha256_newest: str = ""

    def partial_share(self, cc: Version) -> float:
        """Share of the kernels whose SASS runs on compute capability ``cc`` (same major, minor <= cc's),
        among the architectures only some kernels carry; 0.0 when none does."""
        return max((share for arch, share in self.sass_partial
                    if (v := version(arch)).major == cc.major and v <= cc), default=0.0)


@record
class WheelFacts:
    """Facts read from one TensorFlow wheel (compat/wheels.toml): CUDA build, glibc symbol floor."""

    dist: str
    version: Version
    os: str
    python: str  # CPython tag, e.g. cp37
    file: str
    sha256: str
    cuda_build: bool | None = None  # None: not known (build info absent, shared objects not read)
    cuda: str = ""
    cudnn: str = ""
    glibc: Version | None = None  # the highest GLIBC_x.y symbol version its .so files need
    glibcxx: str = ""
    fatbins: int | None = None  # None: shared objects not read


@record
class Recipe:
    id: str
    backend: str
    os: frozenset[str]
    tf: VersionSpec
    channels: tuple[str, ...]
    packages: str
    pins: str
    python: str
    provides_cuda: bool
    activation: tuple[str, ...]
    activation_file: str
    note: str
    source: str
    gpu: bool = True
    confidence: str = "sourced"
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)

    def applies(self, v: Version, os: str) -> bool:
        return v in self.tf and os in self.os

    def conda_preference(self) -> int:
        """Order among conda recipes (lower first): the official TF docs' conda+pip recipes, then
        conda-forge's own CUDA builds, then Anaconda's `defaults` (its Terms of Service:
        compat/recipes.toml header)."""
        if self.backend == "conda+pip":
            return 0
        return 1 if "conda-forge" in self.channels else 2


@record
class CondaPackage:
    channel: str
    name: str
    version: Version
    os: str
    python: tuple[str, ...]
    cudatoolkit: str
    cudnn: str
    cuda: str
    build: str
    source: str
    confidence: str = "sourced"
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)


@record
class GpuModel:
    name: str
    cc: str
    aliases: tuple[str, ...]
    source: str


@record
class GpuDevice:
    """One NVIDIA PCI device ID of compat/gpus.toml `devices` (generated from pci.ids)."""

    id: str  # 4 lowercase hex digits, e.g. "1e81"
    chip: str
    cc: str
    via: str
    pci_name: str
    source: str


@record
class CpuRequirement:
    """A CPU instruction set the prebuilt binaries of some releases need, or a build that does not (compat/
    tensorflow.toml `cpu_requirements`)."""

    feature: str  # e.g. "avx"
    tf: VersionSpec
    text: str
    source: str
    build: str = "pip"  # whose binaries: "pip" (the official wheels), "anaconda", ...
    required: bool = True  # False: a build that does not need the feature (Anaconda's -march=nocona builds)


@record
class PlatformBuild:
    """Where a platform without official or conda-forge GPU builds gets TensorFlow (compat/tensorflow.toml
    `platform_builds`), e.g. NVIDIA's own wheels for Jetson."""

    platform: str  # e.g. "jetson"
    text: str  # the install command as the vendor documents it
    source: str

    def fix(self, sources: Mapping[str, Mapping[str, Any]]) -> str:
        """The install command followed by where it is documented (``sources``: compat/tensorflow.toml's)."""
        url = sources.get(self.source, {}).get("url", "")
        return f"{self.text} ({url})" if url else self.text


@record
class PythonLimit:
    """The Pythons recipe ``recipe`` can install releases ``tf`` with (compat/pins.toml `pythons`)."""

    tf: VersionSpec
    recipe: str
    python: tuple[str, ...]
    why: str
    source: str


@record
class InstallAs:
    """Release ``tf`` is installed as release ``install`` by recipe ``recipe`` because the named release
    cannot be installed from PyPI (compat/pins.toml `installs`)."""

    tf: VersionSpec
    recipe: str
    install: str
    why: str
    source: str


#: What a compat/rules.toml row's `applies` ranges over.
RULE_SUBJECTS = ("tf", "cuda", "cc")


#: The rules tfgpu's code asks for by id: compat/rules.toml must have each (a missing one is a DataError when
#: the table is loaded, not a silent default in code).
RULE_IDS = ("cuda-libraries-per-major", "system-cuda-any-minor", "mig", "tensorflow-cpu-package",
            "gpu-in-tensorflow-package", "nvidia-wheels-need-library-path", "wheels-64-bit-only", "cudnn-newer-minor")


@record
class Rule:
    """One decision rule of compat/rules.toml: it holds for the versions of ``subject`` (a TensorFlow release,
    a CUDA toolkit, a compute capability) in ``applies``, on ``os`` and ``arch`` (empty: every one)."""

    id: str
    subject: str
    applies: VersionSpec
    os: tuple[str, ...]
    arch: tuple[str, ...]
    text: str
    source: str
    source2: str = ""

    def holds(self, v: Version | str, os: str | None = None, arch: str | None = None) -> bool:
        """Does the rule hold for version ``v`` on ``os``/``arch``? An OS or architecture that is None or ""
        (not known) is not checked."""
        if os and self.os and os not in self.os:
            return False
        if arch and self.arch and arch not in self.arch:
            return False
        return (v if isinstance(v, Version) else version(str(v))) in self.applies


@record
class Note:
    """A fact about installing some releases that the tested-build tables do not show
    (compat/tensorflow.toml `notes`), with its source key."""

    id: str
    tf: VersionSpec
    os: frozenset[str]
    text: str
    source: str
    confidence: str = "sourced"

    def applies(self, v: Version | str, os: str) -> bool:
        return version(str(v)) in self.tf and (os in self.os or "any" in self.os)


@record
class Pin:
    """A requirement tfgpu adds next to TensorFlow because an unbounded dependency now breaks it
    (compat/pins.toml), with the evidence for it."""

    tf: VersionSpec
    requirement: str
    why: str
    source: str
    confidence: str = "sourced"
    source2: str = ""


#: The results a row of compat/verified.toml may carry.
VERIFY_RESULTS = ("ok", "failed", "skipped")


#: The resolved versions each row records, in column order (TOML keys).
VERIFIED_PACKAGES = ("numpy", "protobuf", "keras", "h5py", "typing_extensions")


#: Columns of a verified row, in the order the file writes them.
VERIFIED_KEYS = ("tf", "recipe", "python", "date", "result", "reason", *VERIFIED_PACKAGES, "cuda_libs", "pins",
                 "source")


@record
class Verified:
    """One install `nox -s recipes` made: release, recipe, Python, when, and what it resolved to."""

    tf: Version
    recipe: str
    python: str
    date: str
    result: str  # ok | failed | skipped
    reason: str
    versions: tuple[tuple[str, str], ...]  # (package, version) for VERIFIED_PACKAGES, "" when absent
    cuda_libs: str
    pins: str
    source: str

    def to_row(self) -> dict[str, str]:
        row = {"tf": str(self.tf), "recipe": self.recipe, "python": self.python, "date": self.date,
               "result": self.result, "reason": self.reason}
        row.update(dict(self.versions))
        row.update(cuda_libs=self.cuda_libs, pins=self.pins, source=self.source)
        return row

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(self.to_row())
        doc["versions"] = {k: v for k, v in self.versions if v}
        for k in VERIFIED_PACKAGES:
            doc.pop(k)
        return doc




@record
class ContainerImage:
    """One GPU image of TensorFlow (compat/containers.toml): what it carries and what the host needs."""

    ref: str
    family: str
    tf: Version
    cuda: str
    cudnn: str
    python: str
    driver: Version | None  # host driver floor (outside forward compatibility)
    compat_drivers: tuple[Version, ...]  # data-center GPUs only: first release of each allowed older branch
    cc_min: str
    published: str  # YYYY-MM; "" for TensorFlow's own images (published with the release)
    source: str
    confidence: str = "sourced"
    note: str = ""
    jupyter_ref: str = ""
    source2: str = ""
    driver_text: str = ""  # the floor as NVIDIA writes it (Version prints 535.54.03 as 535.54.3)
    fault: ImageFault | None = None  # a tf_image_faults row: the published tag does not carry what it should

    def driver_ok(self, driver: Version, *, datacenter: bool) -> bool:
        """Host driver ``driver`` runs this image: at or above the floor, or (data-center GPUs only) in a
        branch that CUDA forward compatibility allows (same major branch, at or above its first release)."""
        if self.driver is None or driver >= self.driver:
            return True
        return datacenter and any(driver.major == c.major and driver >= c for c in self.compat_drivers)


@record
class ImageFault:
    """Tags of an image repository that do not carry what their release needs (compat/containers.toml
    ``tf_image_faults``): TensorFlow's 2.18+ GPU images ship cuDNN 8.9 while those releases need cuDNN 9."""

    repo: str
    tf: VersionSpec  # the releases whose tags are affected
    tags: str  # the tags the reports name, as they name them
    carries: str  # what the image carries instead (a package and version)
    cudnn: str  # the cuDNN the image carries
    needs_cudnn: str  # the cuDNN the release needs
    last_good: str  # the newest unaffected series ("2.17")
    fixed_in: str  # "" = no fixed tag known
    verdict: str  # "blocked" | "caveats"
    quote: str
    workaround: str  # a Dockerfile line the threads report to work ("" = none)
    source: str
    also: tuple[str, ...] = ()  # the row's further [sources] keys, in order (source2, source3, ...)
    workaround_source: str = ""
    confidence: str = "sourced"
    note: str = ""

    @property
    def source2(self) -> str:
        return self.also[0] if self.also else ""

    def covers(self, repo: str, tf: Version) -> bool:
        return repo == self.repo and tf in self.tf and not (self.fixed_in and tf >= version(self.fixed_in))


#: The verdicts an ImageFault row may give.
FAULT_VERDICTS = ("blocked", "caveats")


@record
class ContainerSeries:
    id: str
    image: str
    first: str
    last: str  # "" = still published
    source: str
    note: str = ""
