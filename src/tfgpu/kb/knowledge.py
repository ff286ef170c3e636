"""Load and validate the knowledge base in compat/ into typed, cached records.

The data lives in TOML files (one row per line, every row with a ``source``) shipped inside the
package; this module only parses, checks and indexes them. Nothing here touches the machine.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version

from tfgpu import __version__
from tfgpu.core.errors import DataError, UsageError
from tfgpu.core.pci import (
    normalize_pci_device_id as normalize_pci_device_id,  # re-exported: the device table uses it
)
from tfgpu.core.record import field, record, replace
from tfgpu.kb.versions import normalize_cuda as normalize_cuda  # re-exported: compat is where callers look
from tfgpu.kb.versions import series_of as series_of
from tfgpu.kb.versions import version as version
from tfgpu.kb.versions import version_text

_T = TypeVar("_T")

#: Files of the knowledge base and the schema each must declare.
SCHEMAS = {
    "meta": "tfgpu.compat.meta/1",
    "tensorflow": "tfgpu.compat.tensorflow/1",
    "releases": "tfgpu.compat.releases/1",
    "tf_archs": "tfgpu.compat.tf_archs/1",
    "cuda": "tfgpu.compat.cuda/1",
    "gpus": "tfgpu.compat.gpus/1",
    "recipes": "tfgpu.compat.recipes/1",
    "conda": "tfgpu.compat.conda/1",
    "wheels": "tfgpu.compat.wheels/1",
    "explain": "tfgpu.compat.explain/1",
    "pins": "tfgpu.compat.pins/1",
    "verified": "tfgpu.compat.verified/1",
    "containers": "tfgpu.compat.containers/1",
    "rules": "tfgpu.compat.rules/1",
}

OSES = ("linux", "windows", "macos")
#: Whose binaries a compat/tf_archs.toml row describes.
ARCH_BUILDS = ("pip", "conda-forge")


@functools.lru_cache(maxsize=1)
def compat_dir() -> Path:
    """The data in use: the bundled data, or newer data that `tfgpu kb update` fetched (tfgpu.kb.store)."""
    from tfgpu.kb.store import newer_than

    bundled = bundled_compat_dir()
    return newer_than(bundled) or bundled


def bundled_compat_dir() -> Path:
    """Where the bundled data lives: inside the installed package, or compat/ of a source checkout."""
    here = Path(__file__).resolve().parent.parent  # the tfgpu package
    for candidate in (here / "compat", here.parent.parent / "compat"):
        if (candidate / "meta.toml").is_file():
            return candidate
    msg = f"tfgpu's knowledge base is missing (looked in {here / 'compat'})"
    raise DataError(msg, hint="reinstall tfgpu: python3 -m pip install --force-reinstall tfgpu")


@functools.cache
def load_toml(name: str) -> dict[str, Any]:
    """Parse one data file, e.g. ``load_toml("cuda")`` for compat/cuda.toml."""
    if sys.version_info >= (3, 11):  # imported here: a cached knowledge base needs no TOML parser
        import tomllib
    else:  # pragma: no cover - Python < 3.11
        import tomli as tomllib

    path = compat_dir() / f"{name}.toml"
    try:
        with path.open("rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
    except FileNotFoundError as exc:
        msg = f"knowledge-base file {path} is missing"
        raise DataError(msg) from exc
    except tomllib.TOMLDecodeError as exc:
        msg = f"knowledge-base file {path} is malformed: {exc}"
        raise DataError(msg) from exc
    expected = SCHEMAS.get(name)
    if expected and data.get("schema") != expected:
        msg = f"{path}: schema is {data.get('schema')!r}, expected {expected!r}"
        raise DataError(msg)
    return data


def data_version() -> str:
    """compat/meta.toml's data version (read from the knowledge base, so from its cache when warm)."""
    return load_kb().data_version


# --------------------------------------------------------------------------- parsing helpers


def _where(name: str, row: dict[str, Any]) -> str:
    """``compat/x.toml:LINE`` of a row, found by its first field (rows are one per line)."""
    path = compat_dir() / f"{name}.toml"
    if row:
        key, value = next(iter(row.items()))
        needle = f"{key} = {value!r}".replace("'", '"') if isinstance(value, str) else f"{key} = {value}"
        try:
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if needle in line and line.lstrip().startswith("{"):
                    return f"{path}:{number}"
        except OSError:
            pass
    return str(path)


def _bad(name: str, row: dict[str, Any], problem: str) -> DataError:
    return DataError(f"{_where(name, row)}: {problem}")




def _opt_version(name: str, row: dict[str, Any], key: str) -> Version | None:
    value = str(row.get(key, "") or "").strip()
    if not value:
        return None
    try:
        return version(value)
    except InvalidVersion:
        raise _bad(name, row, f"{key} {value!r} is not a version") from None


def _split(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(p.strip() for p in str(value or "").split(",") if p.strip())


class InvalidSpecifier(ValueError):
    """A version range in compat/ that is not a PEP 440 specifier set."""


_SPEC_RE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([0-9][0-9a-zA-Z.*+!-]*)\s*$")
#: The versions a knowledge-base range may name: final releases (N, N.N, N.N.N ...), optionally ==/!= X.*.
_FINAL_RE = re.compile(r"^[0-9]+(\.[0-9]+)*(\.\*)?$")


class VersionSpec:
    """A PEP 440 specifier set such as ">=2.4,<2.5" for the knowledge base's version ranges.

    packaging.specifiers would do, but importing it pulls packaging.tags and logging (~20 ms) into
    every `tfgpu doctor`; the tables only need comparisons of final releases, which this does.

    Its grammar is narrower than PEP 440's, so that it agrees with packaging.specifiers on everything it
    accepts: the versions in a range are final releases (no pre-, post-, dev-release, local version or
    epoch), and ``===`` (arbitrary equality) is refused (InvalidSpecifier). A version tested against a range
    that is not a plain final release (2.15.0.post1, 2.16.0rc0, 2.1+local) is decided by
    packaging.specifiers itself, imported only then (its rules for those are subtle: pre-releases are
    excluded, ``>V`` excludes V's post-releases, ``<V`` excludes V's pre-releases, ...)."""

    __slots__ = ("_clauses", "_memo", "_parsed", "_text")

    def __init__(self, text: str) -> None:
        clauses: list[tuple[str, str]] = []
        parsed: list[tuple[str, Version, bool]] = []
        for part in str(text).split(","):
            if not part.strip():
                continue
            m = _SPEC_RE.match(part)
            if not m:
                msg = f"{part.strip()!r} is not a version specifier"
                raise InvalidSpecifier(msg)
            op, ver = m.groups()
            if op == "===" or not _FINAL_RE.match(ver):
                msg = (f"{part.strip()!r}: tfgpu's ranges name final releases only (no ===, pre-, post- or "
                       "dev-release, local version or epoch)")
                raise InvalidSpecifier(msg)
            if op == "~=" and "." not in ver:
                msg = f"{part.strip()!r}: ~= needs at least two release components (~=2.0)"
                raise InvalidSpecifier(msg)
            if "*" in ver and (op not in ("==", "!=") or not ver.endswith(".*")):
                msg = f"{part.strip()!r}: a wildcard is only allowed as ==X.* or !=X.*"
                raise InvalidSpecifier(msg)
            try:
                parsed.append((op, version(ver[:-2] if ver.endswith(".*") else ver), ver.endswith(".*")))
            except InvalidVersion:
                msg = f"{part.strip()!r} is not a version specifier"
                raise InvalidSpecifier(msg) from None
            clauses.append((op, ver))
        self._clauses = tuple(clauses)
        self._text = ",".join(op + ver for op, ver in clauses)
        self._parsed = tuple(parsed)
        self._memo: dict[Version, bool] = {}

    def __contains__(self, item: object) -> bool:
        v = item if isinstance(item, Version) else Version(str(item))
        found = self._memo.get(v)
        if found is None:
            # post-releases (TF 2.15.0.post1 is a real release) follow the same ordering, with one PEP 440
            # exception handled in _clause_holds; pre/dev/local/epoch versions go to packaging itself
            if v.pre is None and v.dev is None and v.local is None and not v.epoch:
                found = all(_clause_holds(op, spec, wild, v) for op, spec, wild in self._parsed)
            else:
                from packaging.specifiers import SpecifierSet

                found = SpecifierSet(self._text).contains(v)
            self._memo[v] = found
        return found

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<VersionSpec({self._text!r})>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionSpec) and sorted(self._clauses) == sorted(other._clauses)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._clauses)))

    def __getstate__(self) -> tuple[str]:
        return (self._text,)

    def __setstate__(self, state: tuple[str]) -> None:
        self.__init__(state[0])  # type: ignore[misc]


def _release(v: Version, n: int) -> tuple[int, ...]:
    rel = tuple(v.release) + (0,) * max(0, n - len(v.release))
    return rel[:n]


def _clause_holds(op: str, spec: Version, wildcard: bool, v: Version) -> bool:
    if wildcard:  # ==X.Y.* / !=X.Y.*: spec is X.Y
        same = _release(v, len(spec.release)) == tuple(spec.release)
        return same if op == "==" else not same
    if op in ("==", "==="):
        return v == spec
    if op == "!=":
        return v != spec
    if op == ">=":
        return v >= spec
    if op == "<=":
        return v <= spec
    if op == ">":  # PEP 440: >V does not admit a post-release of V itself
        return v > spec and not (v.post is not None and spec.post is None and Version(v.base_version) == spec)
    if op == "<":
        return v < spec
    # ~=X.Y(.Z): >= X.Y(.Z) and == X.* (one release component less)
    n = max(1, len(spec.release) - 1)
    return v >= spec and _release(v, n) == _release(spec, n)


@record
class PyRange:
    """A Python range as the official tables write it, e.g. "2.7,3.3-3.7"."""

    text: str
    parts: tuple[tuple[Version, Version], ...]

    @classmethod
    def parse(cls, text: str) -> PyRange:
        parts = []
        for piece in _split(text):
            lo, _, hi = piece.partition("-")
            parts.append((version(lo), version(hi or lo)))
        if not parts:
            msg = f"empty Python range {text!r}"
            raise ValueError(msg)
        return cls(text, tuple(parts))

    @property
    def min(self) -> Version:
        return min(lo for lo, _ in self.parts)

    @property
    def max(self) -> Version:
        return max(hi for _, hi in self.parts)

    def contains(self, v: Version | str) -> bool:
        vv = version(str(v))
        key = Version(f"{vv.major}.{vv.minor}")
        return any(lo <= key <= hi for lo, hi in self.parts)

    def versions(self) -> list[str]:
        out: list[str] = []
        for lo, hi in self.parts:
            if lo.major != hi.major:
                msg = f"Python range {self.text!r} spans majors"
                raise ValueError(msg)
            out.extend(f"{lo.major}.{m}" for m in range(lo.minor, hi.minor + 1))
        return out


# --------------------------------------------------------------------------- records


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


_ACTIVATION_SPLIT = re.compile(r";(?=\s*[A-Za-z_][A-Za-z0-9_]*=)")


#: The keys of a row that cite a [sources] key: source, source2, source3, ..., and any *_source (arch_source,
#: compat_source, tf_source, workaround_source). Each must name a key of the file's [sources].
_SOURCE_KEY = re.compile(r"source\d*|[a-z0-9]+_source")


def _rows(name: str, data: dict[str, Any], key: str, *, required: bool = True) -> list[dict[str, Any]]:
    rows = data.get(key)
    if rows is None and isinstance(data.get("sources"), dict) and key in data["sources"]:
        msg = f"{compat_dir() / (name + '.toml')}: `{key}` sits inside [sources]; put arrays before [sources]"
        raise DataError(msg)
    if rows is None:
        if required:
            msg = f"{compat_dir() / (name + '.toml')}: no `{key}` array"
            raise DataError(msg)
        return []
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        msg = f"{compat_dir() / (name + '.toml')}: `{key}` must be an array of inline tables"
        raise DataError(msg)
    sources = data.get("sources", {})
    for row in rows:
        for skey in [k for k in row if _SOURCE_KEY.fullmatch(k)]:
            if row[skey] not in sources:
                raise _bad(name, row, f"{skey} {row[skey]!r} is not in [sources]")
        if "source" not in row:
            raise _bad(name, row, "row has no source")
    return rows


def _parse_builds(name: str, data: dict[str, Any]) -> tuple[Build, ...]:
    out = []
    for row in _rows(name, data, "builds"):
        try:
            out.append(Build(
                tf=version(row["tf"]), os=row["os"], python=PyRange.parse(row["python"]),
                cuda=str(row["cuda"]), cudnn=str(row["cudnn"]), compiler=str(row.get("compiler", "")),
                bazel=str(row.get("bazel", "")), dist=str(row.get("dist", "")), source=row["source"],
                note=str(row.get("note", "")),
            ))
        except (KeyError, ValueError, InvalidVersion) as exc:
            raise _bad(name, row, f"bad build row: {exc}") from None
        if row["os"] not in OSES:
            raise _bad(name, row, f"os {row['os']!r} is not one of {OSES}")
    return tuple(_apply_wheel_corrections(name, data, out))


def _apply_wheel_corrections(name: str, data: dict[str, Any], builds: list[Build]) -> list[Build]:
    """The docs rows with what the release's wheel itself loads where it differs (`corrections` rows that
    cite a `wheel`): tfgpu judges a machine by the wheel it will run; the docs value is kept in docs_*."""
    out = list(builds)
    for row in data.get("corrections") or []:
        if "wheel" not in row:
            continue
        field_name = row.get("field")
        idx = next((i for i, b in enumerate(out) if str(b.tf) == str(row.get("tf")) and b.os == row.get("os")), None)
        if field_name not in ("cuda", "cudnn") or idx is None:
            raise _bad(name, row, "a wheel correction names a cuda/cudnn field of an existing (tf, os) row")
        b = out[idx]
        if str(getattr(b, field_name)) != str(row.get("old")):
            raise _bad(name, row, f"the docs row says {field_name} = {getattr(b, field_name)!r}, not {row.get('old')!r}")
        out[idx] = replace(b, **{field_name: str(row["new"]), f"docs_{field_name}": str(row["old"]),
                                "wheel_source": str(row["source"])})
    return out


def _pythons(tags: str) -> tuple[str, ...]:
    out = []
    for tag in _split(tags):
        m = re.fullmatch(r"cp(\d)(\d+)", tag)
        if m:
            out.append(f"{m.group(1)}.{m.group(2)}")
    return tuple(out)


def _parse_releases(name: str, data: dict[str, Any]) -> tuple[Release, ...]:
    out = []
    for row in _rows(name, data, "releases"):
        try:
            out.append(Release(
                dist=row["dist"], version=version(row["version"]),
                requires_python=str(row.get("requires_python", "")),
                linux_pythons=_pythons(row.get("linux", "")), windows_pythons=_pythons(row.get("windows", "")),
                linux_platform=str(row.get("linux_platform", "")),
                glibc=_opt_version(name, row, "linux_glibc"),
                and_cuda=_split_and_cuda(row.get("and_cuda", "")),
                placeholder=bool(row.get("placeholder", False)), yanked=bool(row.get("yanked", False)),
                uploaded=str(row.get("uploaded", "")), source=row["source"],
            ))
        except (KeyError, InvalidVersion) as exc:
            raise _bad(name, row, f"bad release row: {exc}") from None
    return tuple(out)


def _shares(name: str, row: dict[str, Any], key: str) -> tuple[tuple[str, float], ...]:
    out = []
    for item in _split(row.get(key, "")):
        arch, _, share = item.partition("=")
        try:
            out.append((arch.strip(), float(share)))
        except ValueError:
            raise _bad(name, row, f"{key} item {item!r} is not ARCH=SHARE") from None
    return tuple(out)


def _parse_wheels(name: str, data: dict[str, Any]) -> tuple[WheelFacts, ...]:
    out = []
    for row in _rows(name, data, "wheels", required=False):
        try:
            out.append(WheelFacts(
                dist=str(row["dist"]), version=version(row["version"]), os=str(row["os"]),
                python=str(row.get("python", "")), file=str(row["file"]), sha256=str(row["sha256"]),
                cuda_build=bool(row["cuda_build"]) if "cuda_build" in row else None,
                cuda=str(row.get("cuda", "")), cudnn=str(row.get("cudnn", "")),
                glibc=_opt_version(name, row, "glibc"), glibcxx=str(row.get("glibcxx", "")),
                fatbins=int(row["fatbins"]) if "fatbins" in row else None,
            ))
        except (KeyError, ValueError, InvalidVersion) as exc:
            raise _bad(name, row, f"bad wheel row: {exc}") from None
    return tuple(out)


def _split_and_cuda(text: str) -> tuple[str, ...]:
    """and_cuda pins: requirements joined by ";" (or by "," although specifiers contain commas)."""
    if ";" in str(text):
        return tuple(p.strip() for p in str(text).split(";") if p.strip())
    parts: list[str] = []
    for piece in str(text or "").split(","):
        piece = piece.strip()
        if not piece:
            continue
        if parts and re.match(r"^[<>=!~]", piece):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return tuple(parts)


def _spec(name: str, row: dict[str, Any], key: str = "tf") -> VersionSpec:
    try:
        return VersionSpec(str(row[key]))
    except (KeyError, InvalidSpecifier):
        raise _bad(name, row, f"{key} {row.get(key)!r} is not a version specifier") from None


# --------------------------------------------------------------------------- the knowledge base


@record
class CpuRequirement:
    """A CPU instruction set the official prebuilt binaries of some releases need (compat/tensorflow.toml)."""

    feature: str  # e.g. "avx"
    tf: VersionSpec
    text: str
    source: str


@record
class PlatformBuild:
    """Where a platform without official or conda-forge GPU builds gets TensorFlow (compat/tensorflow.toml
    `platform_builds`), e.g. NVIDIA's own wheels for Jetson."""

    platform: str  # e.g. "jetson"
    text: str  # the install command as the vendor documents it
    source: str

    def fix(self, kb: KnowledgeBase) -> str:
        """The install command followed by where it is documented."""
        url = kb.sources("tensorflow").get(self.source, {}).get("url", "")
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
            "gpu-in-tensorflow-package", "nvidia-wheels-need-library-path", "wheels-64-bit-only")


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


def _parse_rules() -> tuple[Rule, ...]:
    data = load_toml("rules")
    out = []
    for row in _rows("rules", data, "rules"):
        if row.get("subject") not in RULE_SUBJECTS:
            raise _bad("rules", row, f"subject {row.get('subject')!r} is not one of {RULE_SUBJECTS}")  # noqa: EM101
        if not str(row.get("text", "")).strip():
            raise _bad("rules", row, "rule has no text")  # noqa: EM101
        out.append(Rule(id=str(row.get("id", "")), subject=str(row["subject"]), applies=_spec("rules", row, "applies"),
                        os=_split(row.get("os", "")), arch=_split(row.get("arch", "")), text=str(row["text"]),
                        source=str(row["source"]), source2=str(row.get("source2", ""))))
    ids = [r.id for r in out]
    for rid in RULE_IDS:
        if ids.count(rid) != 1:
            msg = f"{compat_dir() / 'rules.toml'}: rule {rid!r} appears {ids.count(rid)} times (tfgpu needs it exactly once)"
            raise DataError(msg)
    return tuple(out)


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
        found = next((r for r in self.cpu_requirements if r.feature == feature), None)
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

    def cpu_requirement(self, feature: str, v: Version) -> CpuRequirement | None:
        """The requirement of CPU ``feature`` (e.g. "avx") that release ``v``'s official binaries have, if any."""
        return next((r for r in self.cpu_requirements if r.feature == feature and v in r.tf), None)

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
            for r in known:
                if r.version == wanted:
                    return r.version
        if len(parts) == 2:
            close = _nearest(wanted, [version(s) for s in self.series(os)])
        else:
            close = _nearest(wanted, [r.version for r in known])
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
        """The `[sources]` table of compat/``file``.toml (kept in the knowledge base and its cache)."""
        return dict(self.source_tables.get(file, {}))


def _nearest(wanted: Version, candidates: Iterable[Version]) -> list[str]:
    def distance(v: Version) -> tuple[int, int, int]:
        return (abs(v.major - wanted.major), abs(v.minor - wanted.minor), abs(v.micro - wanted.micro))

    return [str(v) for v in sorted(candidates, key=distance)[:3]]


#: Words of a GPU's name that say who sells it or what variant of one model it is (memory size, form
#: factor, laptop/Max-Q, workstation/server edition), dropped before names are compared. A laptop or
#: Max-Q part shares its desktop model's chip from Pascal on (NVIDIA's CUDA GPUs page lists one row);
#: Maxwell/Kepler mobile parts carry the M in the model number ("GTX 960M") and stay distinct.
_GPU_NAME_DROP = (
    r"\b(?:nvidia|geforce|tesla|quadro|laptop|mobile|embedded|gpu|generation|workstation|server|edition|"
    r"with|max q|design|nvgpu|pcie|sxm\d?|nvl\d*|hbm\d?e?|\d+(?:\.\d+)?\s?(?:gb|g|mb))\b"
)
#: A MIG slice ("... MIG 1g.5gb") or vGPU profile ("A40-48Q") suffix: the rest names the physical GPU.
_GPU_NAME_SLICE = r"\s(?:mig\b.*|\d+[abcq])$"


@functools.cache
def _gpu_name_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The two patterns above, compiled on first use (~1.5 ms the doctor needs only for a GPU whose compute
    capability no probe reported)."""
    return re.compile(_GPU_NAME_SLICE), re.compile(_GPU_NAME_DROP)


def normalize_gpu_name(name: str) -> str:
    """A GPU name as compared with the tables: "NVIDIA GeForce RTX 3060 Laptop GPU" -> "rtx 3060",
    "NVIDIA A100-SXM4-40GB" -> "a100", "Quadro M1000M" -> "m1000m", "TITAN X (Pascal)" -> "titan x
    pascal". Whole names are compared, never parts: "RTX A3000 Laptop" is not "A30"."""
    text = str(name).lower().replace("_", " ").replace("-", " ").replace("(tm)", " ").replace("(r)", " ")
    text = re.sub(r"[()\[\],]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    gpu_slice, drop = _gpu_name_patterns()
    text = gpu_slice.sub("", text)
    text = drop.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


def _parse_kb() -> KnowledgeBase:
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

    toolkits = []
    for row in _rows("cuda", cuda, "toolkits"):
        try:
            toolkits.append(Toolkit(
                cuda=version(row["cuda"]), linux_min_driver=_opt_version("cuda", row, "linux_min_driver"),
                windows_min_driver=_opt_version("cuda", row, "windows_min_driver"),
                cc_min=str(row.get("cc_min", "")), cc_max=str(row.get("cc_max", "")), source=row["source"], raw=row,
            ))
        except (KeyError, InvalidVersion) as exc:
            raise _bad("cuda", row, f"bad toolkit row: {exc}") from None  # noqa: EM101
    minor = [
        MinorCompat(
            major=int(row["major"]), linux_min_driver=_opt_version("cuda", row, "linux_min_driver"),
            windows_min_driver=_opt_version("cuda", row, "windows_min_driver"),
            not_covered=str(row.get("not_covered", "")), source=row["source"], raw=row,
        )
        for row in _rows("cuda", cuda, "minor_version_compat")
    ]
    archs = []
    for row in _rows("tf_archs", archs_data, "archs", required=False):
        archs.append(ArchTargets(
            tf=_spec("tf_archs", row), os=str(row.get("os", "linux")), sass=_split(row.get("sass", "")),
            ptx=max(_split(row.get("ptx", "")), key=Version, default=None),
            source=row["source"],
            confidence=str(row.get("confidence", "sourced")), note=str(row.get("note", "")),
            ptx_fails=_split(row.get("ptx_fails", "")), source2=str(row.get("source2", "")),
            build=str(row.get("build", "pip")), cuda=_spec("tf_archs", row, "cuda") if "cuda" in row else None,
            # every PTX target: `ptx_all` (rows read from the wheels), or `ptx` listing several
            sass_partial=_shares("tf_archs", row, "sass_partial"),
            ptx_all=_split(row.get("ptx_all", "")) or _split(row.get("ptx", "")),
            ptx_partial=_shares("tf_archs", row, "ptx_partial"), kernels=int(row.get("kernels", 0)),
            wheel=str(row.get("wheel", "")), sha256=str(row.get("sha256", "")),
            wheel_newest=str(row.get("wheel_newest", "")), sha256_newest=str(row.get("sha256_newest", "")),
        ))
        if archs[-1].build not in ARCH_BUILDS:
            file, msg = "tf_archs", f"build {archs[-1].build!r} is not one of {ARCH_BUILDS}"
            raise _bad(file, row, msg)
    recs = []
    for row in _rows("recipes", recipes, "recipes"):
        recs.append(Recipe(
            id=row["id"], backend=row["backend"], os=frozenset(_split(row.get("os", ""))), tf=_spec("recipes", row),
            channels=_split(row.get("channels", "")), packages=str(row.get("packages", "")),
            pins=str(row.get("pins", "")), python=str(row.get("python", "")),
            provides_cuda=bool(row.get("provides_cuda", False)),
            activation=tuple(a.strip() for a in _ACTIVATION_SPLIT.split(str(row.get("activation", ""))) if a.strip()),
            activation_file=str(row.get("activation_file", "")), note=str(row.get("note", "")),
            source=row["source"], gpu=bool(row.get("gpu", True)),
            confidence=str(row.get("confidence", "sourced")), raw=row,
        ))
    packages = []
    for row in _rows("conda", conda, "packages"):
        try:
            packages.append(CondaPackage(
                channel=row["channel"], name=row["name"], version=version(row["version"]), os=row["os"],
                python=_split(row.get("python", "")), cudatoolkit=str(row.get("cudatoolkit", "")),
                cudnn=str(row.get("cudnn", "")), cuda=str(row.get("cuda", "")), build=str(row.get("build", "")),
                source=row["source"], confidence=str(row.get("confidence", "sourced")), raw=row,
            ))
        except (KeyError, InvalidVersion) as exc:
            raise _bad("conda", row, f"bad conda package row: {exc}") from None  # noqa: EM101
    releases = _parse_releases("releases", rel)
    images, series, rules = _parse_container_table()
    return KnowledgeBase(
        data_version=str(meta["data_version"]), date=str(meta.get("date", "")),
        builds=_parse_builds("tensorflow", tf), releases=releases, archs=tuple(archs),
        toolkits=tuple(toolkits), minor_compats=tuple(minor), recipes=tuple(recs), conda=tuple(packages),
        arch_names=tuple((str(r["cc"]), str(r["arch"])) for r in _rows("gpus", gpus, "archs")),
        models=tuple(
            GpuModel(name=str(r["name"]), cc=str(r["cc"]), aliases=_split(r.get("aliases", "")), source=r["source"])
            for r in _rows("gpus", gpus, "models")
        ),
        wheels=_parse_wheels("wheels", wheels_data),
        devices=tuple(_parse_gpu_devices(gpus)),
        cpu_requirements=tuple(
            CpuRequirement(feature=str(r["feature"]), tf=_spec("tensorflow", r), text=str(r["text"]), source=r["source"])
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
    )


def _parse_macos_tags(rel: dict[str, Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    out = {}
    for row in _rows("releases", rel, "releases"):
        tags = [t.strip() for t in str(row.get("macos", "")).split(",") if t.strip()]
        out[(str(row.get("dist")), str(row.get("version")))] = tuple(
            f"{m.group(1)}.{m.group(2)}" for m in (re.fullmatch(r"cp(\d)(\d+)", t) for t in tags) if m
        )
    return out


def _source_tables() -> dict[str, dict[str, dict[str, Any]]]:
    """The `[sources]` of every data file the knowledge base reads (an absent optional file has none)."""
    out = {}
    for name in KB_FILES:
        try:
            out[name] = {str(k): dict(v) for k, v in load_toml(name).get("sources", {}).items()}
        except DataError:
            if name not in OPTIONAL_FILES:
                raise
            out[name] = {}
    return out


def _parse_gpu_devices(gpus: dict[str, Any]) -> list[GpuDevice]:
    out = []
    for row in _rows("gpus", gpus, "devices", required=False):
        dev_id = normalize_pci_device_id(str(row.get("id", "")))
        if dev_id is None or dev_id != row.get("id"):
            raise _bad("gpus", row, f"id {row.get('id')!r} is not 4 lowercase hex digits")  # noqa: EM101
        out.append(GpuDevice(id=dev_id, chip=str(row.get("chip", "")), cc=str(row["cc"]), via=str(row.get("via", "")),
                             pci_name=str(row.get("pci_name", "")), source=row["source"]))
    return out


KB_FILES = ("meta", "tensorflow", "releases", "tf_archs", "cuda", "gpus", "recipes", "conda", "wheels", "pins",
            "verified", "containers", "rules")
#: Data files cached in a section of their own (the explain catalog: the doctor never reads it). These
#: and KB_FILES are every data file whose parsed form is cached; their identity is the cache's key.
SECTION_FILES = ("explain",)
#: Files the knowledge base does without when they are absent.
OPTIONAL_FILES = ("wheels", "tf_archs", "verified")


def _cache_file() -> Path | None:
    """Where the parsed knowledge base is cached between runs, keyed by the data files' identity.

    Parsing ~200 kB of TOML costs ~0.1 s on every `tfgpu doctor`; reading the checked records back
    from plain JSON (tfgpu.kb.cache: data only, never pickle) costs a few ms. The key is tfgpu's version
    plus the size and modification time (ns) of every data file, of the modules whose classes are cached
    and of those that fill its indexes: stat calls, where hashing the contents meant reading them all and
    importing hashlib (~5 ms). TFGPU_CACHE_DIR overrides the directory;
    TFGPU_NO_CACHE=1 disables the cache."""
    import os
    import zlib

    if os.environ.get("TFGPU_NO_CACHE", "") not in ("", "0"):
        return None
    here = Path(__file__).resolve().parent.parent  # the tfgpu package
    parts = [__version__]
    # the modules whose classes are cached, and those whose code fills the cached indexes (their indexers and
    # kb.derived values: tfgpu.judge.verdict, tfgpu.judge.gpu_rules): a change to any of them is a new cache
    modules = ("core/record.py", "kb/cache.py", "judge/verdict.py", "judge/gpu_rules.py")
    for path in (Path(__file__), *(here / m for m in modules),
                 *(compat_dir() / f"{name}.toml" for name in (*KB_FILES, *SECTION_FILES))):
        try:
            st = path.stat()
        except FileNotFoundError:  # an optional table that is absent: its absence is part of the key
            parts.append(f"{path}:absent")
            continue
        except OSError:
            return None
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    key = "|".join(parts).encode()
    digest = f"{zlib.crc32(key):08x}{zlib.crc32(key[::-1]):08x}"
    base = os.environ.get("TFGPU_CACHE_DIR")
    if not base:
        from tfgpu.core.sysio import user_dir  # platformdirs' answer, without its import on the doctor's path

        return user_dir("cache") / f"kb-{digest}.json"
    return Path(base) / f"kb-{digest}.json"


def _cache_classes() -> dict[str, type]:
    """The record classes a cache file may hold (an allow-list: nothing else is ever rebuilt)."""
    return {c.__name__: c for c in (KnowledgeBase, Build, Release, PyRange, Toolkit, MinorCompat, ArchTargets,
                                    Recipe, CondaPackage, GpuModel, WheelFacts, GpuDevice, CpuRequirement, PlatformBuild, Note,
                                    Pin, PythonLimit, InstallAs, Verified, ContainerImage, ContainerSeries, Rule,
                                    ImageFault)}


def _read_cache(cache: Path, classes: dict[str, type]) -> tuple[Any, bool]:
    """What the cache file holds (None when nothing usable) and whether it may be (re)written."""
    from tfgpu.kb import cache as _kbcache

    try:
        return _kbcache.decode(_kbcache.read(cache), classes, version, VersionSpec), True
    except FileNotFoundError:
        pass
    except ValueError:  # valid JSON, not what tfgpu wrote
        _kbcache.note(f"ignored the corrupt cache {cache}; rebuilt it")
    except _kbcache.CacheRefused as exc:
        _kbcache.note(str(exc))
        return None, "not reading" not in str(exc)  # never write where reading is unsafe
    except OSError:
        pass  # unreadable: parse the TOML again
    return None, True


def _write_cache(cache: Path, obj: Any, classes: dict[str, type]) -> None:
    """Write the cache file, then remove the cache files of other data or other tfgpu versions."""
    from tfgpu.kb import cache as _kbcache

    try:
        _kbcache.write(cache, _kbcache.encode(obj, classes))
        keep = cache.name.split(".")[0]
        _kbcache.remove_stale(cache.parent, keep=keep, pattern="kb-*.json")
        # the pickled caches of tfgpu before the data-only format (never read since): ours, and dead weight
        _kbcache.remove_stale(cache.parent, keep=keep, pattern="kb-*.pickle")
    except (OSError, TypeError, _kbcache.CacheRefused):
        pass  # a read-only home is fine: the cache is an optimisation


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
        kb, usable = _read_cache(cache, _cache_classes())
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


def _section_file(cache: Path, name: str) -> Path:
    return cache.with_name(cache.name.replace(".json", f".{name}.json"))


def _cached_section(name: str, kind: type, build: Callable[[], _T], classes: dict[str, type]) -> _T:
    """A section of the cache of its own (kb-<key>.NAME.json, read only by those who need it): its data when
    the file holds a ``kind``, else ``build()``, written there for the next run."""
    from tfgpu.kb import cache as _kbcache

    cache = _cache_file()
    usable = cache is not None
    if cache is not None:
        cache = _section_file(cache, name)
        data, usable = _read_cache(cache, classes)
        if isinstance(data, kind):
            return data  # type: ignore[return-value]
        if data is not None:
            _kbcache.note(f"ignored the corrupt cache {cache}; rebuilt it")
    data = build()
    if cache is not None and usable:
        _write_cache(cache, data, classes)
    return data


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


# --------------------------------------------------------------------------- release notes (additive)


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


def load_notes() -> tuple[Note, ...]:
    """The `notes` of compat/tensorflow.toml, checked like every other row (source, specifier, os)."""
    return load_kb().notes


def _parse_notes() -> tuple[Note, ...]:
    data = load_toml("tensorflow")
    out = []
    for row in _rows("tensorflow", data, "notes", required=False):
        oses = frozenset(_split(row.get("os", "any")))
        if not oses <= {*OSES, "any"}:
            raise _bad("tensorflow", row, f"os {row.get('os')!r} is not a list of {OSES} or 'any'")  # noqa: EM101
        if not str(row.get("text", "")).strip() or not str(row.get("id", "")).strip():
            raise _bad("tensorflow", row, "a note needs an id and a text")  # noqa: EM101
        out.append(Note(id=str(row["id"]), tf=_spec("tensorflow", row), os=oses, text=str(row["text"]),
                        source=row["source"], confidence=str(row.get("confidence", "sourced"))))
    return tuple(out)


# --------------------------------------------------------------------------- pins (additive)


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


def load_pins() -> tuple[Pin, ...]:
    """The rows of compat/pins.toml; a requirement that does not parse is refused with its file and line."""
    return load_kb().pins


def _parse_pins() -> tuple[Pin, ...]:
    from packaging.requirements import InvalidRequirement, Requirement

    data = load_toml("pins")
    out = []
    for row in _rows("pins", data, "pins"):
        try:
            Requirement(str(row["requirement"]))
        except (KeyError, InvalidRequirement) as exc:
            raise _bad("pins", row, f"bad requirement: {exc}") from None  # noqa: EM101
        if not str(row.get("why", "")).strip():
            raise _bad("pins", row, "a pin needs a `why`")  # noqa: EM101
        out.append(Pin(tf=_spec("pins", row), requirement=str(row["requirement"]), why=str(row["why"]),
                       source=str(row["source"]), confidence=str(row.get("confidence", "sourced")),
                       source2=str(row.get("source2", ""))))
    return tuple(out)


def _parse_python_limits() -> tuple[PythonLimit, ...]:
    data = load_toml("pins")
    out = []
    for row in _rows("pins", data, "pythons", required=False):
        pythons = _split(row.get("python", ""))
        if not pythons or not all(re.fullmatch(r"\d+\.\d+", p) for p in pythons):
            raise _bad("pins", row, "python must list X.Y versions")  # noqa: EM101
        out.append(PythonLimit(tf=_spec("pins", row), recipe=str(row["recipe"]), python=pythons,
                               why=str(row.get("why", "")), source=str(row["source"])))
    return tuple(out)


def _parse_installs() -> tuple[InstallAs, ...]:
    data = load_toml("pins")
    out = []
    for row in _rows("pins", data, "installs", required=False):
        try:
            install = str(version(str(row["install"])))
        except (KeyError, InvalidVersion):
            raise _bad("pins", row, "install must be a release version") from None  # noqa: EM101
        if not str(row.get("why", "")).strip():
            raise _bad("pins", row, "an install row needs a `why`")  # noqa: EM101
        out.append(InstallAs(tf=_spec("pins", row), recipe=str(row["recipe"]), install=install,
                             why=str(row["why"]), source=str(row["source"])))
    return tuple(out)


def pin_source_urls(pin: Pin | PythonLimit | InstallAs) -> str:
    """The URLs behind a pin's source keys, `; `-joined (what plans cite)."""
    sources = load_kb().sources("pins")
    keys = (pin.source, pin.source2) if isinstance(pin, Pin) else (pin.source,)
    return "; ".join(str(sources[k]["url"] or sources[k]["title"]) for k in keys if k and k in sources)


# --------------------------------------------------------------------------- verified installs (additive)

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


def verified_from_row(row: dict[str, Any], name: str = "verified") -> Verified:
    unknown = set(row) - set(VERIFIED_KEYS)
    if unknown:
        raise _bad(name, row, f"unknown key(s) {', '.join(sorted(unknown))}")
    if row.get("result") not in VERIFY_RESULTS:
        raise _bad(name, row, f"result {row.get('result')!r} is not one of {VERIFY_RESULTS}")
    if row["result"] != "ok" and not str(row.get("reason", "")).strip():
        raise _bad(name, row, f"a {row['result']} row needs a reason")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(row.get("date", ""))):
        raise _bad(name, row, "date must be YYYY-MM-DD")
    if row["result"] != "skipped" and not re.fullmatch(r"\d+\.\d+", str(row.get("python", ""))):
        raise _bad(name, row, "python must be X.Y")
    try:
        return Verified(
            tf=version(str(row["tf"])), recipe=str(row["recipe"]), python=str(row.get("python", "")),
            date=str(row["date"]), result=str(row["result"]), reason=str(row.get("reason", "")),
            versions=tuple((k, str(row.get(k, ""))) for k in VERIFIED_PACKAGES),
            cuda_libs=str(row.get("cuda_libs", "")), pins=str(row.get("pins", "")), source=str(row["source"]),
        )
    except KeyError as exc:
        raise _bad(name, row, f"missing key {exc}") from None
    except InvalidVersion:
        raise _bad(name, row, f"tf {row.get('tf')!r} is not a version") from None


def load_verified() -> tuple[Verified, ...]:
    """The rows of compat/verified.toml (written by `nox -s recipes`); none when the file is absent."""
    return load_kb().verified


def _parse_verified() -> tuple[Verified, ...]:
    try:
        data = load_toml("verified")
    except DataError:
        return ()
    return tuple(verified_from_row(row) for row in _rows("verified", data, "installs"))


def verified_for(tf: Version | str, recipe: str) -> Verified | None:
    """The install that proved (or failed) ``recipe`` for release ``tf``, else for the newest release of
    its series that was tried; None when none was made."""
    vv = tf if isinstance(tf, Version) else version(str(tf))
    rows = [r for r in load_verified() if r.recipe == recipe and series_of(r.tf) == series_of(vv)]
    exact = [r for r in rows if r.tf == vv]
    if exact:
        return exact[0]
    return max(rows, key=lambda r: r.tf) if rows else None


def verified_status(tf: Version | str, recipe_id: str, backend: str) -> dict[str, Any]:
    """What `tfgpu compat` and `doctor --tf` say about one recipe: install verified DATE, failed, skipped
    (could not run where tfgpu verifies), not verified here, or cannot verify (conda recipes)."""
    if backend in ("conda", "conda+pip", "rattler"):
        return {"status": "cannot verify",
                "text": "not verified here: conda recipes cannot be verified where tfgpu verifies (no conda channels)"}
    if backend != "pip":  # a container image (docker, podman, apptainer): nox -s recipes builds no images
        return {"status": "not verified", "text": f"not verified here ({backend} images are not installed by "
                                                  "`nox -s recipes`)"}
    row = verified_for(tf, recipe_id)
    if row is None:
        return {"status": "not verified", "text": "not verified here"}
    doc: dict[str, Any] = {"tf": str(row.tf), "date": row.date}
    if row.python:
        doc["python"] = row.python
    versions = {k: v for k, v in row.versions if v}
    if versions:
        doc["versions"] = versions
    if row.result == "ok":
        return {"status": "verified", "text": f"install verified {row.date} (TF {row.tf}, Python {row.python})", **doc}
    return {"status": row.result, "reason": row.reason,
            "text": f"install {row.result} {row.date} (TF {row.tf}): {row.reason}", **doc}


def _toml_str(value: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML escapes for every character but DEL)."""
    import json

    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


VERIFIED_HEADER = """\
# compat/verified.toml -- recipes proven by a real install. GENERATED by `nox -s recipes`
# (scripts/verify_recipes.py); do not edit by hand.
#
# One row per (TensorFlow release, recipe): the newest patch of every minor series plus 2.2.0, built
# through tfgpu's own create code path (pip backend) with a Python installed on the verifying machine,
# on Linux x86_64 without an NVIDIA driver. A row is `ok` when TensorFlow imported, the CPU part of the
# smoke test passed (matmul, conv2d) and every CUDA library the recipe brings loaded with ctypes
# (only libcuda, the driver, may be missing). `skipped` rows could not run here; `reason` says why.
# numpy .. typing_extensions are the versions the install resolved ("" = not installed); `pins` are the
# requirements tfgpu added (compat/pins.toml), space-separated; `cuda_libs` says what loaded.

schema = "tfgpu.compat.verified/1"

"""


def dump_verified(rows: Iterable[Verified], sources: dict[str, dict[str, str]]) -> str:
    """compat/verified.toml's text for ``rows`` (sorted by release), one row per line."""
    lines = [VERIFIED_HEADER + "installs = ["]
    for row in sorted(rows, key=lambda r: (r.tf, r.recipe)):
        cells = ", ".join(f"{k} = {_toml_str(v)}" for k, v in row.to_row().items())
        lines.append(f"  {{ {cells} }},")
    lines.append("]\n")
    lines.append("# [sources] comes last: in TOML every key after a [table] header belongs to that table.")
    lines.append("[sources]")
    for key in sorted(sources):
        cells = ", ".join(f"{k} = {_toml_str(str(v))}" for k, v in sources[key].items())
        lines.append(f"{key} = {{ {cells} }}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- container images (additive)

NGC_REPO = "nvcr.io/nvidia/tensorflow"


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


def _yymm(name: str, row: dict[str, Any], key: str) -> str:
    text = str(row.get(key, "") or "")
    if text and not re.fullmatch(r"\d{2}\.\d{2}|\d+\.\d+", text):
        raise _bad(name, row, f"{key} {text!r} is not YY.MM")
    return text


def load_container_table() -> tuple[tuple[ContainerImage, ...], tuple[ContainerSeries, ...], tuple[dict[str, Any], ...]]:
    """The NGC rows, the series and the TensorFlow-image rules of compat/containers.toml, checked."""
    kb = load_kb()
    return kb.container_images, kb.container_series, kb.container_rules


def _parse_container_table() -> tuple[tuple[ContainerImage, ...], tuple[ContainerSeries, ...], tuple[dict[str, Any], ...]]:
    name = "containers"
    data = load_toml(name)
    images = []
    for row in _rows(name, data, "ngc"):
        _yymm(name, row, "release")
        flavor = str(row.get("flavor", ""))
        if flavor not in ("py3", "tf1-py3", "tf2-py3"):
            raise _bad(name, row, f"flavor {flavor!r} is not py3, tf1-py3 or tf2-py3")
        try:
            tf = version(str(row["tf"]))
            driver = version(str(row["driver"]))
            compat = tuple(version(x.strip()) for x in str(row.get("compat_drivers", "")).split(";") if x.strip())
            version(str(row["cuda"]))
            version(str(row["cc_min"]))
        except (KeyError, InvalidVersion) as exc:
            raise _bad(name, row, f"bad or missing version: {exc}") from None
        if (tf.major == 1) != (flavor != "tf2-py3"):
            raise _bad(name, row, f"flavor {flavor} does not carry TensorFlow {tf}")
        images.append(ContainerImage(
            ref=f"{NGC_REPO}:{row['release']}-{flavor}", family="ngc", tf=tf, cuda=str(row["cuda"]),
            cudnn=str(row.get("cudnn", "")), python=str(row.get("python", "")), driver=driver,
            compat_drivers=compat, cc_min=str(row["cc_min"]), published=str(row.get("published", "")),
            source=str(row["source"]), confidence=str(row.get("confidence", "sourced")), note=str(row.get("note", "")),
            source2=str(row.get("source2", "")), driver_text=str(row["driver"]),
        ))
    series = tuple(ContainerSeries(id=str(r["id"]), image=str(r["image"]), first=str(r.get("first", "")),
                                   last=str(r.get("last", "")), source=str(r["source"]), note=str(r.get("note", "")))
                   for r in _rows(name, data, "series"))
    rules = tuple(_rows(name, data, "tf_images"))
    for rule in rules:
        _spec(name, rule)
        if "{tf}" not in str(rule.get("tag", "")):
            raise _bad(name, rule, "a tf_images rule needs a tag with {tf}")
    return tuple(images), series, rules


def _parse_image_faults() -> tuple[ImageFault, ...]:
    """compat/containers.toml ``tf_image_faults``, checked: a specifier, a known verdict, each source cited."""
    name = "containers"
    out = []
    for row in _rows(name, load_toml(name), "tf_image_faults", required=False):
        verdict = str(row.get("verdict", ""))
        if verdict not in FAULT_VERDICTS:
            raise _bad(name, row, f"verdict {verdict!r} is not one of {FAULT_VERDICTS}")
        try:
            for key in ("cudnn", "needs_cudnn", "last_good", "fixed_in"):
                if row.get(key):
                    version(str(row[key]))
            fault = ImageFault(
                repo=str(row["repo"]), tf=_spec(name, row), tags=str(row["tags"]), carries=str(row["carries"]),
                cudnn=str(row["cudnn"]), needs_cudnn=str(row["needs_cudnn"]), last_good=str(row.get("last_good", "")),
                fixed_in=str(row.get("fixed_in", "")), verdict=verdict, quote=str(row["quote"]),
                workaround=str(row.get("workaround", "")), source=str(row["source"]),
                also=tuple(str(row[k]) for k in sorted((k for k in row if re.fullmatch(r"source\d+", k)),
                                                       key=lambda k: int(k[6:]))),
                workaround_source=str(row.get("workaround_source", "")),
                confidence=str(row.get("confidence", "sourced")), note=str(row.get("note", "")))
        except (KeyError, InvalidVersion) as exc:
            raise _bad(name, row, f"bad or missing field: {exc}") from None
        out.append(fault)
    return tuple(out)


def container_images(kb: KnowledgeBase, tf: Version | str) -> list[ContainerImage]:
    """Every GPU image that carries TensorFlow ``tf`` (its series for NGC images, whose patch level NVIDIA
    picks): TensorFlow's own image first (its CUDA is the release's tested build), then NGC's, newest first."""
    v = version(str(tf))
    return list(kb.derived("container_images", version_text(v), lambda: _container_images(kb, v)))


def _container_images(kb: KnowledgeBase, v: Version) -> list[ContainerImage]:
    ngc, rules = kb.container_images, kb.container_rules
    out: list[ContainerImage] = []
    build = kb.build_for(v, "linux")
    for rule in rules:
        if build is None or v not in VersionSpec(str(rule["tf"])):
            continue
        toolkit = kb.toolkit(build.cuda)
        fault = next((f for f in kb.container_faults if f.covers(str(rule["repo"]), v)), None)
        out.append(ContainerImage(
            ref=f"{rule['repo']}:{str(rule['tag']).replace('{tf}', str(v))}", family="tensorflow", tf=v,
            cuda=build.cuda, cudnn=fault.cudnn if fault else build.cudnn, python="", fault=fault, driver=toolkit.linux_min_driver if toolkit else None,
            compat_drivers=(), cc_min="", published="", source=str(rule["source"]),
            driver_text=toolkit.min_driver_text("linux") if toolkit else "",
            jupyter_ref=f"{rule['repo']}:{str(rule.get('jupyter_tag', '')).replace('{tf}', str(v))}"
            if rule.get("jupyter_tag") else "",
        ))
    same = [i for i in ngc if (i.tf.major, i.tf.minor) == (v.major, v.minor)]
    out += sorted(same, key=lambda i: i.ref, reverse=True)
    return out


def ngc_images() -> tuple[ContainerImage, ...]:
    return load_container_table()[0]
