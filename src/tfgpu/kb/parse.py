"""compat/*.toml -> checked rows: where the data lives, the TOML reader, and one parser per table. A malformed
row is refused with its file and line (DataError); nothing here builds the KnowledgeBase itself."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from tfgpu.core.errors import DataError
from tfgpu.core.pci import normalize_pci_device_id
from tfgpu.core.record import replace
from tfgpu.kb.records import (
    FAULT_VERDICTS,
    RULE_IDS,
    RULE_SUBJECTS,
    VERIFIED_KEYS,
    VERIFIED_PACKAGES,
    VERIFY_RESULTS,
    ArchTargets,
    Build,
    CondaPackage,
    ContainerImage,
    ContainerSeries,
    GpuDevice,
    ImageFault,
    InstallAs,
    MinorCompat,
    Note,
    Pin,
    PythonLimit,
    Recipe,
    Release,
    Rule,
    Toolkit,
    Verified,
    WheelFacts,
)
from tfgpu.kb.specifiers import InvalidSpecifier, PyRange, VersionSpec, _split
from tfgpu.kb.versions import version

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
    "sonames": "tfgpu.compat.sonames/1",
}


OSES = ("linux", "windows", "macos")


#: Whose binaries a compat/tf_archs.toml row describes.
ARCH_BUILDS = ("pip", "conda-forge", "anaconda")


@functools.lru_cache(maxsize=1)
def compat_dir() -> Path:
    """The data in use: the bundled data, or newer data that `tfgpu kb update` fetched (tfgpu.kb.bundles)."""
    from tfgpu.kb.bundles import newer_than

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


def _parse_verified() -> tuple[Verified, ...]:
    try:
        data = load_toml("verified")
    except DataError:
        return ()
    return tuple(verified_from_row(row) for row in _rows("verified", data, "installs"))


def _yymm(name: str, row: dict[str, Any], key: str) -> str:
    text = str(row.get(key, "") or "")
    if text and not re.fullmatch(r"\d{2}\.\d{2}|\d+\.\d+", text):
        raise _bad(name, row, f"{key} {text!r} is not YY.MM")
    return text


def _parse_container_table() -> tuple[tuple[ContainerImage, ...], tuple[ContainerSeries, ...], tuple[dict[str, Any], ...]]:
    name = "containers"
    data = load_toml(name)
    repo = _checked_names(name, data)
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
            ref=f"{repo}:{row['release']}-{flavor}", family="ngc", tf=tf, cuda=str(row["cuda"]),
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


KB_FILES = ("meta", "tensorflow", "releases", "tf_archs", "cuda", "gpus", "recipes", "conda", "wheels", "pins",
            "verified", "containers", "rules")
#: Data files cached in a section of their own (the explain catalog: the doctor never reads it). These
#: and KB_FILES are every data file whose parsed form is cached; their identity is the cache's key.
SECTION_FILES = ("explain",)
#: Files the knowledge base does without when they are absent.
OPTIONAL_FILES = ("wheels", "tf_archs", "verified")


def _checked_names(name: str, data: dict[str, Any]) -> str:
    """compat/containers.toml's ngc_repo and datacenter_gpu, checked (a regex that does not compile is refused
    here, not at the first GPU judged); returns the NGC repository."""
    import re

    repo, dc = data.get("ngc_repo"), data.get("datacenter_gpu")
    if not isinstance(repo, dict) or not str(repo.get("repo", "")).strip() or not repo.get("source"):
        msg = f"compat/{name}.toml: ngc_repo = {{ repo = ..., source = ... }} is required"
        raise DataError(msg)
    if not isinstance(dc, dict) or not dc.get("source"):
        msg = f"compat/{name}.toml: datacenter_gpu = {{ match, exclude, source }} is required"
        raise DataError(msg)
    for key in ("match", "exclude"):
        try:
            re.compile(str(dc.get(key, "")))
        except re.error as exc:
            msg = f"compat/{name}.toml: datacenter_gpu {key} is not a regex: {exc}"
            raise DataError(msg) from None
    return str(repo["repo"])


def _parse_conda_names(data: dict[str, Any]) -> tuple[tuple[str, ...], str, tuple[tuple[str, str, str, str], ...]]:
    """compat/conda.toml's anaconda_channels (names, URL regex) and virtual_packages, checked."""
    import re

    tos = data.get("anaconda_channels")
    if not isinstance(tos, dict) or not isinstance(tos.get("names"), list) or not tos.get("source"):
        msg = "compat/conda.toml: anaconda_channels = { names = [...], url = ..., source = ... } is required"
        raise DataError(msg)
    try:
        re.compile(str(tos.get("url", "")))
    except re.error as exc:
        msg = f"compat/conda.toml: anaconda_channels url is not a regex: {exc}"
        raise DataError(msg) from None
    vps = []
    for row in _rows("conda", data, "virtual_packages"):
        for spec in str(row.get("packages", "")).split(";"):
            parts = spec.strip().split("=")
            if len(parts) != 3 or not parts[0].startswith("__"):
                raise _bad("conda", row, f"virtual package {spec.strip()!r} is not __name=version=build")  # noqa: EM101
            vps.append((str(row["platform"]), parts[0], parts[1], parts[2]))
    return tuple(str(n) for n in tos["names"]), str(tos.get("url", "")), tuple(vps)


def _parse_toolkits(cuda: dict[str, Any]) -> tuple[Toolkit, ...]:
    """compat/cuda.toml `toolkits`: each CUDA release's minimum drivers and compute capabilities."""
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
    return tuple(toolkits)


def _parse_minor_compats(cuda: dict[str, Any]) -> tuple[MinorCompat, ...]:
    """compat/cuda.toml `minor_version_compat`: each CUDA major's minor-version compatibility floor."""
    return tuple(
        MinorCompat(
            major=int(row["major"]), linux_min_driver=_opt_version("cuda", row, "linux_min_driver"),
            windows_min_driver=_opt_version("cuda", row, "windows_min_driver"),
            not_covered=str(row.get("not_covered", "")), source=row["source"], raw=row,
        )
        for row in _rows("cuda", cuda, "minor_version_compat")
    )


def _parse_archs(archs_data: dict[str, Any]) -> tuple[ArchTargets, ...]:
    """compat/tf_archs.toml `archs`: the GPU architectures each TensorFlow build ships code for."""
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
    return tuple(archs)


def _parse_recipes(recipes: dict[str, Any]) -> tuple[Recipe, ...]:
    """compat/recipes.toml `recipes`: how each backend installs a TensorFlow release."""
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
    return tuple(recs)


def _parse_conda_packages(conda: dict[str, Any]) -> tuple[CondaPackage, ...]:
    """compat/conda.toml `packages`: the conda TensorFlow builds and what each depends on."""
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
    return tuple(packages)
