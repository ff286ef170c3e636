"""Load and validate the knowledge base in compat/ into typed, cached records.

The data lives in TOML files (one row per line, every row with a ``source``) shipped inside the
package; this module only parses, checks and indexes them. Nothing here touches the machine.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version

from tfgpu.core.errors import DataError, UsageError
from tfgpu.core.pci import normalize_pci_device_id
from tfgpu.core.record import field, record, replace
from tfgpu.kb.cache import defer_fields
from tfgpu.kb.gpunames import normalize_gpu_name
from tfgpu.kb.parse import (
    _parse_archs,
    _parse_builds,
    _parse_conda_names,
    _parse_conda_packages,
    _parse_container_table,
    _parse_gpu_devices,
    _parse_image_faults,
    _parse_installs,
    _parse_macos_tags,
    _parse_minor_compats,
    _parse_notes,
    _parse_pins,
    _parse_python_limits,
    _parse_recipes,
    _parse_releases,
    _parse_rules,
    _parse_toolkits,
    _parse_verified,
    _parse_wheels,
    _rows,
    _source_tables,
    _spec,
    load_toml,
)
from tfgpu.kb.records import (
    ArchTargets,
    Build,
    CondaPackage,
    ContainerImage,
    ContainerSeries,
    CpuRequirement,
    GpuDevice,
    GpuModel,
    ImageFault,
    InstallAs,
    MinorCompat,
    Note,
    Pin,
    PlatformBuild,
    PythonLimit,
    Recipe,
    Release,
    Rule,
    Toolkit,
    Verified,
    WheelFacts,
)
from tfgpu.kb.specifiers import PyRange, _split
from tfgpu.kb.store import _cache_file, _cached_section, _read_cache, _section_file, _write_cache
from tfgpu.kb.versions import normalize_cuda, series_of, version, version_text

_T = TypeVar("_T")


# --------------------------------------------------------------------------- parsing helpers


# --------------------------------------------------------------------------- records


# --------------------------------------------------------------------------- the knowledge base


@record
class KnowledgeBase:
    data_version: str
    date: str
    builds: tuple[Build, ...]
    releases: tuple[Release, ...]
    archs: tuple[ArchTargets, ...]
    toolkits: tuple[Toolkit, ...]
    minor_compats: tuple[MinorCompat, ...]
    recipes: tuple[Recipe, ...]
    conda: tuple[CondaPackage, ...]
    arch_names: tuple[tuple[str, str], ...]
    models: tuple[GpuModel, ...]
    wheels: tuple[WheelFacts, ...] = ()
    devices: tuple[GpuDevice, ...] = ()
    cpu_requirements: tuple[CpuRequirement, ...] = ()
    platform_builds: tuple[PlatformBuild, ...] = ()
    # The rest of compat/ (issue 17, item 4): the knowledge base owns every table its users read, so a
    # warm cache answers `tfgpu compat` and `tfgpu doctor` without parsing any TOML.
    notes: tuple[Note, ...] = ()
    pins: tuple[Pin, ...] = ()
    python_limits: tuple[PythonLimit, ...] = ()
    installs: tuple[InstallAs, ...] = ()
    verified: tuple[Verified, ...] = ()
    container_images: tuple[ContainerImage, ...] = ()
    container_series: tuple[ContainerSeries, ...] = ()
    container_rules: tuple[dict[str, Any], ...] = ()
    rules: tuple[Rule, ...] = ()  # compat/rules.toml
    container_faults: tuple[ImageFault, ...] = ()  # compat/containers.toml tf_image_faults
    ngc_repo: str = ""  # compat/containers.toml ngc_repo: where NVIDIA's TensorFlow images are
    datacenter_gpu: tuple[str, str] = ("", "")  # compat/containers.toml datacenter_gpu: (match, exclude) regexes
    anaconda_channels: tuple[str, ...] = ()  # compat/conda.toml anaconda_channels: names under Anaconda's ToS
    anaconda_url: str = ""  # ... and the regex of their URLs
    #: compat/conda.toml virtual_packages: (platform, name, version, build) of each platform's default virtual packages
    virtual_packages: tuple[tuple[str, str, str, str], ...] = ()
    #: compat/cuda.toml cuda_runtime_wheels / cudnn_wheels: the PyPI names of NVIDIA's runtime and cuDNN wheels
    cuda_runtime_dists: tuple[str, ...] = ()
    cudnn_dists: tuple[str, ...] = ()
    #: The Python tags of each release's macOS wheels, by (dist, version) (compat/releases.toml `macos`).
    macos_tags: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    #: Every data file's `[sources]` table, by file name (e.g. "cuda").
    source_tables: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict, compare=False, repr=False)
    #: True in a cached knowledge base: ``devices`` are in a section of the cache of their own (gpu_devices()).
    devices_elsewhere: bool = False

    def gpu_devices(self) -> tuple[GpuDevice, ...]:
        """compat/gpus.toml `devices` (pci.ids' NVIDIA device IDs, ~900 rows, a fifth of the cached tables). Only a GPU
        whose probe reported no compute capability needs them, so the cache keeps them in a section of their own
        (kb-<key>.devices.json) that is read on first use: `tfgpu doctor` does not decode them otherwise."""
        return load_gpu_devices() if self.devices_elsewhere else self.devices

    def platform_build(self, platform: str) -> PlatformBuild | None:
        """How platform ``platform`` (e.g. "jetson") gets TensorFlow, if compat/ knows."""
        return next((p for p in self.platform_builds if p.platform == platform), None)

    def python_limit_for(self, v: Version, recipe_id: str) -> PythonLimit | None:
        """The Pythons pip recipe ``recipe_id`` can install release ``v`` with, where narrower than the
        release's wheels (compat/pins.toml `pythons`); None when the wheels' range holds."""
        return next((lim for lim in self.python_limits if lim.recipe == recipe_id and v in lim.tf), None)

    def install_as_for(self, v: Version, recipe_id: str) -> InstallAs | None:
        """The release recipe ``recipe_id`` installs in place of ``v`` (compat/pins.toml `installs`), if any."""
        return next((i for i in self.installs if i.recipe == recipe_id and v in i.tf), None)

    def rule(self, rule_id: str) -> Rule:
        """The rule ``rule_id`` of compat/rules.toml (one of RULE_IDS, which loading checks are all there)."""
        index: dict[str, Rule] = self.derived("rules_by_id", "", lambda: {r.id: r for r in self.rules})
        found = index.get(rule_id)
        if found is None:
            msg = f"compat/rules.toml has no rule {rule_id!r}"
            raise DataError(msg, hint="reinstall tfgpu: python3 -m pip install --force-reinstall tfgpu")
        return found

    def cpu_floor(self, feature: str) -> CpuRequirement:
        """The requirement of CPU ``feature`` (e.g. "avx") from compat/tensorflow.toml `cpu_requirements`, which
        must have it (no default in code)."""
        found = next((r for r in self.cpu_requirements if r.feature == feature and r.build == "pip" and r.required), None)
        if found is None:
            msg = f"compat/tensorflow.toml `cpu_requirements` has no {feature!r} row"
            raise DataError(msg, hint="reinstall tfgpu: python3 -m pip install --force-reinstall tfgpu")
        return found

    def newest_python(self, os: str = "linux") -> str:
        """The newest Python any GPU release has wheels for on ``os`` (compat/releases.toml), "" when none."""

        def newest() -> str:
            found = {p for r in self.gpu_releases(os) for p in r.pythons("windows" if os == "windows" else "linux")}
            return max(found, key=version, default="")

        return self.derived("newest_python", os, newest)

    def and_cuda_from(self) -> Version | None:
        """The first GPU release whose wheels have pip's [and-cuda] extra, which brings CUDA and cuDNN as
        nvidia-* wheels (compat/releases.toml `and_cuda`: 2.14.0); None when no release has it."""
        return min((r.version for r in self.gpu_releases("linux") if r.and_cuda), default=None)

    def placeholder_from(self, dist: str) -> Version | None:
        """The first release of ``dist`` that PyPI holds only as an empty placeholder raising an error on install
        (compat/releases.toml `placeholder`: tensorflow-gpu 2.12.0); None when ``dist`` has none."""
        return min((r.version for r in self.releases if r.dist == dist and r.placeholder), default=None)

    def cpu_requirement(self, feature: str, v: Version, build: str = "pip") -> CpuRequirement | None:
        """The requirement of CPU ``feature`` (e.g. "avx") that release ``v``'s ``build`` binaries have, if any: the
        build's own rows (Anaconda's builds need no AVX), else the official wheels'."""
        rows = [r for r in self.cpu_requirements if r.feature == feature and v in r.tf]
        row = next((r for r in rows if r.build == build), None) or next((r for r in rows if r.build == "pip"), None)
        return row if row is not None and row.required else None

    # -- TensorFlow -----------------------------------------------------------------------
    @functools.cached_property
    def _memo(self) -> dict[tuple[str, str], Any]:
        """Derived indexes, computed once per KnowledgeBase (the records themselves are immutable)."""
        return {}

    def derived(self, kind: str, key: str, build: Callable[[], _T]) -> _T:
        """A derived index the knowledge base keeps and caches with its tables (``kind``/``key``), built
        once by ``build``: the verdicts' own look-ups (e.g. the first series whose CUDA knows a GPU) are
        kept here without anyone writing into the knowledge base's private dictionaries."""
        memo = self._memo
        full = (kind, key)
        if full not in memo:
            memo[full] = build()
        found: _T = memo[full]
        return found

    def series(self, os: str = "linux") -> list[str]:
        """GPU minor series on ``os``, newest first (from the tested build configurations)."""
        os = "linux" if os == "wsl2" else os
        key = ("series", os)
        if key not in self._memo:
            seen = {series_of(b.tf): b.tf for b in self.builds if b.os == os}
            self._memo[key] = sorted(seen, key=lambda s: version(s), reverse=True)
        return list(self._memo[key])

    def build_for(self, v: Version | str, os: str = "linux") -> Build | None:
        vv = v if isinstance(v, Version) else version(str(v))
        os = "linux" if os == "wsl2" else os
        index = self._memo.get(("builds_by_series", ""))
        if index is None:
            index = {}
            for b in self.builds:
                index.setdefault((b.os, series_of(b.tf)), []).append(b)
            self._memo[("builds_by_series", "")] = index
        rows: list[Build] = index.get((os, series_of(vv))) or []
        if not rows:
            return None
        older = [b for b in rows if b.tf <= vv]
        return max(older, key=lambda b: b.tf) if older else min(rows, key=lambda b: b.tf)

    def gpu_dist(self, v: Version | str) -> str:
        """The PyPI distribution that carries GPU support for a release."""
        vv = v if isinstance(v, Version) else version(str(v))
        return "tensorflow" if self.rule("gpu-in-tensorflow-package").holds(vv) else "tensorflow-gpu"

    def release(self, dist: str, v: Version | str) -> Release | None:
        vv = v if isinstance(v, Version) else version(str(v))
        index = self._memo.get(("releases_by_key", ""))
        if index is None:
            index = {(r.dist, r.version): r for r in self.releases}
            self._memo[("releases_by_key", "")] = index
        found: Release | None = index.get((dist, vv))
        return found

    def gpu_release(self, v: Version | str, os: str = "linux") -> Release | None:
        rel = self.release(self.gpu_dist(v), v)
        if rel is None or rel.placeholder:
            return None
        return rel

    def gpu_releases(self, os: str = "linux") -> list[Release]:
        """Every final, non-placeholder release with GPU support on ``os``, newest first."""
        os_key = "linux" if os == "wsl2" else os
        key = ("gpu_releases", os_key)
        if key not in self._memo:
            series = set(self.series(os_key))
            out = [
                r for r in self.releases
                if not r.placeholder and not r.yanked and r.dist == self.gpu_dist(r.version)
                and series_of(r.version) in series and r.pythons(os_key)
            ]
            self._memo[key] = sorted(out, key=lambda r: r.version, reverse=True)
        return list(self._memo[key])

    def gpu_versions_in(self, series: str, os: str = "linux") -> list[Version]:
        """The GPU releases of one series ("2.15") on ``os``, newest first."""
        key = ("gpu_versions_by_series", os)
        index = self._memo.get(key)
        if index is None:
            index = {}
            for r in self.gpu_releases(os):  # already newest first
                index.setdefault(series_of(r.version), []).append(r.version)
            self._memo[key] = index
        return list(index.get(series, ()))

    def resolve_tf(self, text: str, os: str = "linux") -> Version:
        """A release ("2.2.0") or a series ("2.2" -> its newest release) -> an exact version."""
        raw = str(text).strip()
        known = self.gpu_releases(os)
        try:
            wanted = version(raw)
        except InvalidVersion:
            msg = f"--tf {raw!r} is not a TensorFlow version"
            raise UsageError(
                msg,
                hint=f"use a release or a series, e.g. --tf {known[0].version if known else '2.15'} "
                f"or --tf {series_of(known[0].version) if known else '2.15'}; see `tfgpu compat`",
            ) from None
        parts = raw.split(".")
        if len(parts) == 2:
            matches = self.gpu_versions_in(raw, os)
            if matches:
                return max(matches)
        else:
            # the known release equal to ``wanted`` (2.15 == 2.15.0), by a look-up: the chooser resolves every
            # target of the doctor's table, and a scan of the releases compared ~25 versions each time
            found = self.derived("gpu_release_versions", os, lambda: _first_of_each(r.version for r in known))
            if wanted in found:
                return found[wanted]
        if len(parts) == 2:
            close = _nearest(wanted, [version(s) for s in self.series(os)])
        else:
            close = _nearest(wanted, [r.version for r in known])
        from tfgpu.kb.fresh import newer_release_error

        newer = newer_release_error(raw, wanted, [r.version for r in self.releases if r.dist == "tensorflow"],
                                    self.date or self.data_version)
        if newer is not None:
            raise UsageError(newer.message, hint=f"{newer.hint}; closest known: {', '.join(close) or 'none'}")
        where = {"linux": "Linux", "windows": "native Windows", "macos": "macOS", "wsl2": "WSL2"}.get(os, os)
        msg = f"TensorFlow {raw} has no GPU release on {where} in tfgpu's knowledge base"
        raise UsageError(
            msg,
            hint=f"closest known: {', '.join(close) if close else 'none'}; see `tfgpu compat`",
        )

    def pythons_for(self, v: Version | str, os: str = "linux") -> list[str]:
        """Python X.Y that both the tested configuration and PyPI's wheels support."""
        return list(self.derived("pythons_for", f"{version_text(v)}/{os}", lambda: self._pythons_for(v, os)))

    def _pythons_for(self, v: Version | str, os: str) -> list[str]:
        build = self.build_for(v, os)
        rel = self.gpu_release(v, os)
        table = build.python.versions() if build else []
        wheels = list(rel.pythons("windows" if os == "windows" else "linux")) if rel else []
        if table and wheels:
            both = [p for p in table if p in wheels]
            return both or wheels
        return table or wheels

    def archs_for(self, v: Version | str, os: str = "linux", build: str = "pip",
                  cuda: str | None = None) -> ArchTargets | None:
        """The GPU code of ``build``'s binaries of release ``v`` (conda-forge: of its CUDA ``cuda`` variant).
        A build family without a matching row falls back to the official wheels' row."""
        vv = v if isinstance(v, Version) else version(str(v))
        os = "linux" if os == "wsl2" else os
        key = ("archs_for", f"{version_text(vv)}/{os}/{build}/{cuda}")
        if key not in self._memo:
            cv = version(normalize_cuda(cuda)) if cuda else None
            # the cheap tests first, the version ranges last; file order kept: the first matching row wins
            row = next((a for a in self.archs if a.build == build and a.os in (os, "any")
                        and (a.cuda is None or cv is None or cv in a.cuda) and vv in a.tf), None)
            self._memo[key] = row if row is not None else (self.archs_for(vv, os) if build != "pip" else None)
        found: ArchTargets | None = self._memo[key]
        return found

    # -- facts read from the wheels ------------------------------------------------------------
    def wheel_facts(self, dist: str, v: Version | str, os: str = "linux") -> list[WheelFacts]:
        """Every wheel of ``dist`` ``v`` on ``os`` that was read (compat/wheels.toml), one per Python tag."""
        vv = v if isinstance(v, Version) else version(str(v))
        os = "linux" if os == "wsl2" else os
        key = ("wheel_facts", "")
        if key not in self._memo:
            index: dict[tuple[str, Version, str], list[WheelFacts]] = {}
            for w in self.wheels:
                index.setdefault((w.dist, w.version, w.os), []).append(w)
            self._memo[key] = index
        found: list[WheelFacts] = self._memo[key].get((dist, vv, os), [])
        return found

    def glibc_floor(self, dist: str, v: Version | str, pythons: Iterable[str] | None = None) -> WheelFacts | None:
        """The Linux wheel of ``dist`` ``v`` with the lowest scanned glibc floor among ``pythons`` ("3.7"
        style; all tags when None): the wheel that needs the least of the machine's glibc."""
        tags = {f"cp{p.replace('.', '')}" for p in pythons} if pythons is not None else None
        read = [w for w in self.wheel_facts(dist, v, "linux")
                if w.glibc is not None and (tags is None or w.python in tags)]
        return min(read, key=lambda w: (w.glibc, w.python)) if read else None

    def cuda_build(self, dist: str, v: Version | str, os: str = "linux") -> bool | None:
        """Whether the wheels of ``dist`` ``v`` are CUDA builds, as read from them (None: not read)."""
        known = [w.cuda_build for w in self.wheel_facts(dist, v, os) if w.cuda_build is not None]
        return any(known) if known else None

    # -- install recipes --------------------------------------------------------------------
    def recipes_for(self, v: Version | str, os: str = "linux", backend: str | None = None) -> list[Recipe]:
        vv = v if isinstance(v, Version) else version(str(v))
        key = ("recipes_for", f"{version_text(vv)}/{os}")
        if key not in self._memo:
            self._memo[key] = [r for r in self.recipes if r.applies(vv, os)]
        return [r for r in self._memo[key] if backend is None or r.backend == backend]

    def conda_packages(
        self, name: str | None = None, v: Version | str | None = None, os: str | None = None
    ) -> list[CondaPackage]:
        os = "linux" if os == "wsl2" else os
        key = ("conda_packages", f"{name}/{version_text(v) if v is not None else v}/{os}")
        if key not in self._memo:
            vv = version(str(v)) if v is not None else None
            self._memo[key] = [
                p for p in self.conda
                if (name is None or p.name == name) and (vv is None or p.version == vv) and (os is None or p.os == os)
            ]
        return list(self._memo[key])

    def conda_forge_tf_builds(self) -> list[CondaPackage]:
        """conda-forge's own CUDA builds of TensorFlow (Linux), newest release and CUDA variant first."""
        key = ("conda_forge_tf_builds", "")
        if key not in self._memo:
            rows = [p for p in self.conda_packages(name="tensorflow", os="linux") if p.channel == "conda-forge" and p.cuda]
            self._memo[key] = sorted(rows, key=lambda p: (p.version, version(normalize_cuda(p.cuda))), reverse=True)
        return list(self._memo[key])

    # -- CUDA and GPUs ------------------------------------------------------------------------
    def toolkit(self, cuda: str) -> Toolkit | None:
        memo_key = ("toolkit", str(cuda))
        if memo_key not in self._memo:
            key = version(normalize_cuda(cuda))
            self._memo[memo_key] = next((t for t in self.toolkits if t.cuda == key), None)
        found: Toolkit | None = self._memo[memo_key]
        return found

    def minor_compat(self, major: int) -> MinorCompat | None:
        for m in self.minor_compats:
            if m.major == major:
                return m
        return None

    def arch_name(self, cc: str) -> str | None:
        for key, name in self.arch_names:
            if key == str(cc):
                return name
        return None

    def gpu_cc(self, name: str, device_id: str | None = None) -> str | None:
        """Compute capability of a GPU from the tables: by PCI device ID when known, else by its whole
        model name after :func:`normalize_gpu_name` (NVIDIA's model table first, then the names pci.ids
        gives the device IDs). None when neither table knows the GPU: never a guess from part of a name.
        A capability the machine reports (NVML, nvidia-smi, a TF log) wins over this; callers ask only
        when there is none."""
        key = ("gpu_cc", f"{name}\x00{device_id}")
        if key not in self._memo:
            found = self.gpu_cc_by_id(device_id) if device_id else None
            if found is None:
                wanted = normalize_gpu_name(name)
                found = self._gpu_name_index()[0].get(wanted) or self._gpu_name_index()[1].get(wanted)
            self._memo[key] = found
        result: str | None = self._memo[key]
        return result

    def gpu_cc_by_id(self, device_id: str | None) -> str | None:
        """Compute capability of an NVIDIA PCI device ID ("1e81", "0x1E81", "0x1E8110DE", "1E8110DE")."""
        wanted = normalize_pci_device_id(device_id)
        if wanted is None:
            return None
        index = self._memo.get(("gpu_ids", ""))
        if index is None:
            index = {d.id: d.cc for d in self.gpu_devices()}
            self._memo[("gpu_ids", "")] = index
        found: str | None = index.get(wanted) or None  # "" = pci.ids lists the device, its CC is unknown
        return found

    def _gpu_name_index(self) -> tuple[dict[str, str], dict[str, str]]:
        """(normalized model name -> CC from `models`, normalized pci.ids name -> CC from `devices`, the
        latter only for names all of whose device IDs agree)."""
        index = self._memo.get(("gpu_names", ""))
        if index is None:
            models = {normalize_gpu_name(c): m.cc for m in self.models for c in (m.name, *m.aliases)}
            by_pci: dict[str, set[str]] = {}
            for d in self.gpu_devices():
                m = re.search(r"\[([^\]]+)\]\s*$", d.pci_name)
                for part in (m.group(1).split(" / ") if m else ()):
                    key = normalize_gpu_name(part)
                    if key:
                        by_pci.setdefault(key, set()).add(d.cc)
            pci = {k: next(iter(v)) for k, v in by_pci.items() if len(v) == 1}
            index = (models, pci)
            self._memo[("gpu_names", "")] = index
        result: tuple[dict[str, str], dict[str, str]] = index
        return result

    def sources(self, file: str) -> dict[str, dict[str, Any]]:
        """The `[sources]` table of compat/``file``.toml (kept in the knowledge base and its cache; the tables that
        judging cites are kept with its indexes too, so that a cached knowledge base need not decode them all)."""
        return dict(self.derived("sources", file, lambda: self.source_tables.get(file, {})))


#: The fields a cached knowledge base keeps as text until they are first read (tfgpu.kb.cache.defer_fields): none
#: of them is read by `tfgpu doctor` on Linux (its look-ups of the recipes, builds and GPU code come from the cached
#: indexes), and they are about a third of the cache file. `plan`, `compat` and `lock` read them as before.
DEFERRED = ("models", "verified", "macos_tags", "source_tables", "notes", "pins", "installs", "rules",
            "cpu_requirements", "platform_builds", "virtual_packages")
defer_fields(KnowledgeBase, DEFERRED)


def _nearest(wanted: Version, candidates: Iterable[Version]) -> list[str]:
    def distance(v: Version) -> tuple[int, int, int]:
        return (abs(v.major - wanted.major), abs(v.minor - wanted.minor), abs(v.micro - wanted.micro))

    return [str(v) for v in sorted(candidates, key=distance)[:3]]


def _parse_kb() -> KnowledgeBase:
    """Every compat/*.toml table, parsed and checked, as one KnowledgeBase."""
    meta = load_toml("meta")
    tf = load_toml("tensorflow")
    rel = load_toml("releases")
    cuda = load_toml("cuda")
    gpus = load_toml("gpus")
    recipes = load_toml("recipes")
    conda = load_toml("conda")
    try:
        wheels_data = load_toml("wheels")
    except DataError:
        wheels_data = {"wheels": [], "sources": {}}
    try:
        archs_data = load_toml("tf_archs")
    except DataError:
        archs_data = {"archs": [], "sources": {}}

    toolkits, minor = _parse_toolkits(cuda), _parse_minor_compats(cuda)
    archs, recs, packages = _parse_archs(archs_data), _parse_recipes(recipes), _parse_conda_packages(conda)
    releases = _parse_releases("releases", rel)
    images, series, rules = _parse_container_table()
    containers, (names, url, vps) = load_toml("containers"), _parse_conda_names(conda)
    return KnowledgeBase(
        data_version=str(meta["data_version"]), date=str(meta.get("date", "")),
        builds=_parse_builds("tensorflow", tf), releases=releases, archs=archs,
        toolkits=toolkits, minor_compats=minor, recipes=recs, conda=packages,
        arch_names=tuple((str(r["cc"]), str(r["arch"])) for r in _rows("gpus", gpus, "archs")),
        models=tuple(
            GpuModel(name=str(r["name"]), cc=str(r["cc"]), aliases=_split(r.get("aliases", "")), source=r["source"])
            for r in _rows("gpus", gpus, "models")
        ),
        wheels=_parse_wheels("wheels", wheels_data),
        devices=tuple(_parse_gpu_devices(gpus)),
        cpu_requirements=tuple(
            CpuRequirement(feature=str(r["feature"]), tf=_spec("tensorflow", r), text=str(r["text"]), source=r["source"],
                           build=str(r.get("build", "pip")), required=bool(r.get("required", True)))
            for r in _rows("tensorflow", tf, "cpu_requirements")
        ),
        platform_builds=tuple(
            PlatformBuild(platform=str(r["platform"]), text=str(r["text"]), source=str(r["source"]))
            for r in _rows("tensorflow", tf, "platform_builds", required=False)
        ),
        notes=_parse_notes(), pins=_parse_pins(), python_limits=_parse_python_limits(), installs=_parse_installs(), verified=_parse_verified(),
        container_images=images, container_series=series, container_rules=rules, rules=_parse_rules(),
        container_faults=_parse_image_faults(),
        macos_tags=_parse_macos_tags(rel), source_tables=_source_tables(),
        ngc_repo=str(containers["ngc_repo"]["repo"]),
        datacenter_gpu=(str(containers["datacenter_gpu"]["match"]), str(containers["datacenter_gpu"]["exclude"])),
        anaconda_channels=names, anaconda_url=url, virtual_packages=vps,
        cuda_runtime_dists=tuple(dict.fromkeys(str(r["dist"]) for r in _rows("cuda", cuda, "cuda_runtime_wheels"))),
        cudnn_dists=tuple(dict.fromkeys(str(r["dist"]) for r in _rows("cuda", cuda, "cudnn_wheels"))),
    )


def _cache_classes() -> dict[str, type]:
    """The record classes a cache file may hold (an allow-list: nothing else is ever rebuilt)."""
    return {c.__name__: c for c in (KnowledgeBase, Build, Release, PyRange, Toolkit, MinorCompat, ArchTargets,
                                    Recipe, CondaPackage, GpuModel, WheelFacts, GpuDevice, CpuRequirement, PlatformBuild, Note,
                                    Pin, PythonLimit, InstallAs, Verified, ContainerImage, ContainerSeries, Rule,
                                    ImageFault)}


def newest_cuda_for_driver(kb: KnowledgeBase, driver: Version, os_key: str) -> Version | None:
    """The newest CUDA a driver runs (compat/cuda.toml's minimum drivers for ``os_key``: linux | windows), or None."""
    best = None
    for t in kb.toolkits:
        floor = t.min_driver(os_key)
        if floor is not None and floor <= driver and (best is None or t.cuda > best):
            best = t.cuda
    return best


@functools.lru_cache(maxsize=1)
def load_kb() -> KnowledgeBase:
    """The whole knowledge base, parsed and checked once per process (and cached across runs in a
    data-only file, tfgpu.kb.cache)."""
    from tfgpu.kb import cache as _kbcache

    cache = _cache_file()
    usable = cache is not None
    if cache is not None:
        kb, usable = _read_cache(cache, _cache_classes(), fallback=lambda name: getattr(_parse_kb(), name))
        if isinstance(kb, KnowledgeBase):
            if usable and _INDEXERS and _INDEXED not in kb._memo:  # cached by a process without the verdicts
                _build_indexes(kb)
                _write_cache(cache, kb, _cache_classes())
            return kb
        if kb is not None:
            _kbcache.note(f"ignored the corrupt cache {cache}; rebuilt it")
    kb = _parse_kb()
    if cache is not None and usable:
        _build_indexes(kb)
        cached = replace(kb, devices=(), devices_elsewhere=True)
        if "_memo" in kb.__dict__:  # the indexes just built (none of them reads the devices)
            cached.__dict__["_memo"] = kb.__dict__["_memo"]
        _write_cache(cache, cached, _cache_classes())
        _write_cache(_section_file(cache, "devices"), kb.devices, {"GpuDevice": GpuDevice})
        return cached  # as every later run reads it back
    return kb


@functools.lru_cache(maxsize=1)
def load_explain_data() -> dict[str, Any]:
    """compat/explain.toml as data (what tfgpu.judge.explain builds its catalog from), cached next to the
    knowledge base in a section of its own (`tfgpu doctor` never reads it)."""
    return _cached_section("explain", dict, lambda: load_toml("explain"), {})


@functools.lru_cache(maxsize=1)
def load_gpu_devices() -> tuple[GpuDevice, ...]:
    """compat/gpus.toml `devices` (KnowledgeBase.gpu_devices), cached in a section of their own."""
    return _cached_section("devices", tuple, lambda: tuple(_parse_gpu_devices(load_toml("gpus"))),
                           {"GpuDevice": GpuDevice})


#: What fills a knowledge base's derived indexes before it is cached (:func:`_build_indexes`). The verdicts
#: define which indexes matter, and the knowledge base sits below them (it imports none of their code):
#: tfgpu.judge.verdict registers its warm-up here when it is imported.
_INDEXERS: list[Callable[[KnowledgeBase], None]] = []
_INDEXED = ("indexed", "")  # the derived-index key that says the registered indexers have run


def register_indexer(index: Callable[[KnowledgeBase], None]) -> None:
    """Have ``index`` fill a knowledge base's derived indexes (via :meth:`KnowledgeBase.derived` and its
    look-ups) before the knowledge base is cached."""
    if index not in _INDEXERS:
        _INDEXERS.append(index)


def _build_indexes(kb: KnowledgeBase) -> None:
    """Fill the knowledge base's derived indexes (``_memo``) before it is cached, so that every later
    run reads them back instead of building them (~8 ms of an 8-GPU machine's verdicts). A cache written
    by a process that had no indexer registered is indexed and rewritten by the next one that has."""
    try:  # (not the GPU-name index: it is built from the devices, which the cache keeps apart)
        for index in _INDEXERS:
            index(kb)
        if _INDEXERS:
            kb._memo[_INDEXED] = True
    except Exception:  # an optimisation: a verdict bug surfaces when real facts are judged
        kb.__dict__.pop("_memo", None)


def _first_of_each(versions: Iterable[Version]) -> dict[Version, Version]:
    """Each version -> the first of ``versions`` equal to it (for :meth:`KnowledgeBase.resolve_tf`)."""
    out: dict[Version, Version] = {}
    for v in versions:
        out.setdefault(v, v)
    return out


# --------------------------------------------------------------------------- release notes (additive)


# --------------------------------------------------------------------------- pins (additive)


# --------------------------------------------------------------------------- verified installs (additive)


# --------------------------------------------------------------------------- container images (additive)


