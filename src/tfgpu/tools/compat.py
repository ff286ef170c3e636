"""Pure queries over the knowledge base for `tfgpu compat`: filters -> a versioned JSON document, and its rendering.

Nothing here touches the machine. ``compat_document()`` answers a ``Query`` with one row per TensorFlow GPU build
row (a minor series on one OS, from the tested build configurations) joined with the other tables: PyPI releases,
the CUDA driver floors, the GPU code the wheels carry, install recipes and notes, each with its source URL.
Bad filter values raise UsageError naming the closest known values (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from packaging.version import InvalidVersion, Version

from tfgpu.core.errors import UsageError
from tfgpu.core.record import record
from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.kb.parse import OSES
from tfgpu.kb.queries import load_notes, verified_status
from tfgpu.kb.records import ArchTargets, Build, Recipe, Release
from tfgpu.kb.versions import normalize_cuda, series_of, version

SCHEMA = "tfgpu.compat/1"
OS_ORDER = ("linux", "windows", "macos")
OS_NAMES = {"linux": "Linux", "windows": "native Windows", "macos": "macOS"}
PASS, WARN, FAIL, UNKNOWN = "pass", "warn", "fail", "unknown"


@record
class Query:
    """The filters of `tfgpu compat`, as the user typed them (None = no filter)."""

    os: str | None = None
    tf: str | None = None
    cuda: str | None = None
    driver: str | None = None
    python: str | None = None


@record
class TfSelection:
    """What ``--tf`` selects: minor series per OS, and an exact release when one was named."""

    text: str
    series: frozenset[tuple[str, str]]  # (os, "X.Y")
    exact: Version | None


# --------------------------------------------------------------------------- validating filters


def _closest(wanted: Version, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` known values next to ``wanted`` in version order (99 -> the newest three)."""
    known = sorted(set(candidates), key=version)
    pos = sum(1 for k in known if version(k) < wanted)
    ranked = sorted(range(len(known)), key=lambda i: (abs(i + 0.5 - pos), -i))
    return [known[i] for i in sorted(ranked[:n], reverse=True)]


def resolve_os(text: str | None) -> str | None:
    if text is None:
        return None
    key = text.strip().lower()
    key = {"wsl2": "linux", "wsl": "linux", "darwin": "macos", "mac": "macos", "win": "windows"}.get(key, key)
    if key not in OSES:
        msg = f"--os {text!r} is not one of {', '.join(OSES)}"
        raise UsageError(msg, hint="WSL2 installs the Linux wheels: use --os linux")
    return key


def resolve_tf_filter(kb: KnowledgeBase, text: str, os: str | None) -> TfSelection:
    """``--tf``: a major ("2"), a series ("2.2", every release of it) or a release ("2.2.0").

    Reuses KnowledgeBase.resolve_tf, whose UsageError names the closest known values."""
    raw = text.strip()
    oses = [os] if os else list(OS_ORDER)
    try:
        wanted = version(raw)
    except InvalidVersion:
        kb.resolve_tf(raw, oses[0])  # raises UsageError with examples
        raise  # pragma: no cover - resolve_tf always raises for a non-version
    parts = raw.split(".")
    if len(parts) == 1 and raw.isdigit():
        series = frozenset((o, s) for o in oses for s in kb.series(o) if s.split(".")[0] == raw)
        if not series:
            majors = sorted({s.split(".")[0] for o in oses for s in kb.series(o)}, key=int)
            msg = f"--tf {raw}: tfgpu knows no TensorFlow {raw}.x GPU release"
            raise UsageError(msg, hint=f"closest known: {', '.join(majors)}; see `tfgpu compat`")
        return TfSelection(raw, series, None)
    found: set[tuple[str, str]] = set()
    exact: Version | None = None
    first_error: UsageError | None = None
    for o in oses:
        try:
            resolved = kb.resolve_tf(raw, o)
        except UsageError as exc:
            first_error = first_error or exc
            continue
        found.add((o, series_of(resolved)))
        if len(parts) > 2:
            exact = resolved
    if not found:
        assert first_error is not None
        raise _explain_missing_tf(kb, wanted, os, first_error)
    return TfSelection(raw, frozenset(found), exact)


def _explain_missing_tf(kb: KnowledgeBase, wanted: Version, os: str | None, exc: UsageError) -> UsageError:
    """Add the known reason when a release exists, just not with GPU support on the requested OS."""
    if os in ("windows", "macos"):
        try:
            kb.resolve_tf(str(wanted), "linux")
        except UsageError:
            return exc
        why = ("native-Windows GPU builds end at 2.10 (use WSL2 with --os linux)" if os == "windows"
               else "macOS has had no CUDA GPU build since 1.1")
        return UsageError(f"{exc.message}: {why}", hint=exc.hint)
    return exc


def _known_cudas(kb: KnowledgeBase) -> list[str]:
    return sorted({normalize_cuda(b.cuda) for b in kb.builds}, key=version)


def resolve_cuda_filter(kb: KnowledgeBase, text: str) -> str:
    known = _known_cudas(kb)
    try:
        wanted = version(normalize_cuda(text))
    except InvalidVersion:
        msg = f"--cuda {text!r} is not a CUDA version"
        raise UsageError(msg, hint=f"use MAJOR.MINOR, e.g. --cuda {known[-1]}; known: {', '.join(known)}") from None
    key = f"{wanted.major}.{wanted.minor}"
    if key not in known:
        msg = f"no TensorFlow GPU release in tfgpu's knowledge base was built with CUDA {text.strip()}"
        raise UsageError(msg, hint=f"closest known: {', '.join(_closest(wanted, known))}; see `tfgpu compat`")
    return key


def _known_pythons(kb: KnowledgeBase) -> list[str]:
    out: set[str] = set()
    for b in kb.builds:
        out.update(b.python.versions())
    for r in kb.releases:
        out.update(r.linux_pythons)
        out.update(r.windows_pythons)
    return sorted(out, key=version)


def resolve_python_filter(kb: KnowledgeBase, text: str) -> str:
    known = _known_pythons(kb)
    raw = text.strip()
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", raw):
        msg = f"--python {text!r} is not a Python version"
        raise UsageError(msg, hint=f"use MAJOR.MINOR, e.g. --python {known[-1]}; known: {', '.join(known)}")
    v = version(raw)
    key = f"{v.major}.{v.minor}"
    if key not in known:
        msg = f"no TensorFlow GPU release in tfgpu's knowledge base supports Python {key}"
        raise UsageError(msg, hint=f"closest known: {', '.join(_closest(v, known))}; see `tfgpu compat`")
    return key


def resolve_driver_filter(kb: KnowledgeBase, text: str) -> str:
    raw = text.strip()
    if not re.fullmatch(r"\d+(\.\d+){0,3}", raw):
        floors = sorted({t.min_driver_text("linux") for t in kb.toolkits if t.min_driver_text("linux")}, key=version)
        msg = f"--driver {text!r} is not an NVIDIA driver version"
        raise UsageError(msg, hint=f"write it as nvidia-smi shows it, e.g. --driver 470.82.01; known floors "
                         f"closest to today's drivers: {', '.join(floors[-3:])}")
    return raw


# --------------------------------------------------------------------------- rows


def _source_url(kb: KnowledgeBase, file: str, key: str) -> str:
    entry = kb.sources(file).get(key) or {}
    return str(entry.get("url") or entry.get("title") or key)  # a URL, or a named publication (a blog post)


_CF_FEEDSTOCK = "https://github.com/conda-forge/tensorflow-feedstock"


def _conda_forge_builds(kb: KnowledgeBase, versions: Iterable[Version]) -> list[dict[str, Any]]:
    """conda-forge's own CUDA builds of these releases, newest first, with the GPU code each carries
    (it differs from the official wheels': compat/tf_archs.toml, build = "conda-forge")."""
    wanted = set(versions)
    out = []
    for p in (p for p in kb.conda_forge_tf_builds() if p.version in wanted):
        archs = kb.archs_for(p.version, "linux", "conda-forge", p.cuda)
        own = archs is not None and archs.build == "conda-forge"
        commit, dropped = p.raw.get("commit"), p.raw.get("dropped")
        out.append({"tf": str(p.version), "cuda": normalize_cuda(p.cuda), "build": p.build,
                    "sass": list(archs.sass) if own and archs else None, "ptx": archs.ptx if own and archs else None,
                    "source": _source_url(kb, "tf_archs", archs.source) if own and archs else None,
                    "python": list(p.python),
                    "feedstock_commit": f"{_CF_FEEDSTOCK}/commit/{commit}" if commit else None,
                    "dropped_at": f"{_CF_FEEDSTOCK}/commit/{dropped}" if dropped else None})
    return out


def _release_pythons(release: Release, os: str, macos_tags: Mapping[tuple[str, str], tuple[str, ...]]) -> list[str]:
    if os == "macos":
        return list(macos_tags.get((release.dist, str(release.version)), ()))
    return list(release.pythons(os))


def series_releases(kb: KnowledgeBase, build: Build, macos_tags: Mapping[tuple[str, str], tuple[str, ...]]) -> list[Release]:
    """Every final release on PyPI of the build row's series with wheels for its OS, newest first."""
    dist_of = kb.gpu_dist
    out = [
        r for r in kb.releases
        if series_of(r.version) == build.series and r.dist == dist_of(r.version) and not r.placeholder
        and _release_pythons(r, build.os, macos_tags)
    ]
    return sorted(out, key=lambda r: r.version, reverse=True)


def _release_json(r: Release, os: str, pythons: list[str], kb: KnowledgeBase) -> dict[str, Any]:
    return {
        "version": str(r.version), "dist": r.dist, "requires_python": r.requires_python or None,
        "pythons": pythons, "platform": r.linux_platform if os == "linux" else None,
        "glibc": str(r.glibc) if os == "linux" and r.glibc else None, "yanked": r.yanked,
        "and_cuda": list(r.and_cuda), "uploaded": r.uploaded, "source": _source_url(kb, "releases", r.source),
        **_wheel_read_json(kb, r.dist, r.version, os),
    }


def _wheel_read_json(kb: KnowledgeBase, dist: str, v: Version, os: str) -> dict[str, Any]:
    """What the wheels themselves say (compat/wheels.toml): CUDA build, glibc symbol floor per Python."""
    read = kb.wheel_facts(dist, v, "windows" if os == "windows" else "linux")
    floors = {f"{w.python[2]}.{w.python[3:]}": str(w.glibc) for w in read if w.glibc is not None and os == "linux"}
    lowest = kb.glibc_floor(dist, v) if os == "linux" else None
    return {
        "cuda_build": kb.cuda_build(dist, v, "windows" if os == "windows" else "linux"),
        "glibc_symbols": str(lowest.glibc) if lowest is not None and lowest.glibc is not None else None,
        "glibc_symbols_by_python": dict(sorted(floors.items(), key=lambda kv: version(kv[0]))),
        "wheels_read": [{"file": w.file, "sha256": w.sha256} for w in read],
    }


def _arch_json(kb: KnowledgeBase, archs: ArchTargets) -> dict[str, Any]:
    return {
        "sass": list(archs.sass), "ptx": archs.ptx, "confidence": archs.confidence,
        "source": _source_url(kb, "tf_archs", archs.source), "note": archs.note or None,
        "ptx_fails": list(archs.ptx_fails),
        "ptx_fails_source": _source_url(kb, "tf_archs", archs.source2) if archs.source2 else None,
        "sass_partial": [{"cc": cc, "share": share} for cc, share in archs.sass_partial],
        "ptx_all": list(archs.ptx_all),
        "ptx_partial": [{"cc": cc, "share": share} for cc, share in archs.ptx_partial],
        "kernels": archs.kernels or None,
        "wheel": {"file": archs.wheel, "sha256": archs.sha256} if archs.wheel else None,
        "wheel_newest": {"file": archs.wheel_newest, "sha256": archs.sha256_newest} if archs.wheel_newest else None,
    }


def _cuda_builds_json(kb: KnowledgeBase, series: str, os: str) -> list[dict[str, Any]]:
    """Every read wheel release of the series (both distributions) and whether it is a CUDA build."""
    os_key = "windows" if os == "windows" else "linux"
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for w in kb.wheels:
        if w.os != os_key or series_of(w.version) != series or w.cuda_build is None:
            continue
        item = seen.setdefault((w.dist, str(w.version)), {
            "dist": w.dist, "version": str(w.version), "cuda_build": w.cuda_build, "cuda": w.cuda or None,
            "cudnn": w.cudnn or None, "wheel": {"file": w.file, "sha256": w.sha256}})
        item["cuda_build"] = item["cuda_build"] or w.cuda_build
    return sorted(seen.values(), key=lambda d: (version(d["version"]), d["dist"]), reverse=True)


def _mvc_text(kb: KnowledgeBase, major: int, os: str) -> dict[str, Any] | None:
    for row in (mc.raw for mc in kb.minor_compats):
        if str(row.get("major")) == str(major):
            floor = str(row.get("windows_min_driver" if os == "windows" else "linux_min_driver") or "")
            return {"major": major, "min_driver": floor or None, "not_covered": str(row.get("not_covered", ""))}
    return None


def _render_packages(recipe: Recipe, v: Version, python: str | None) -> str:
    text = recipe.packages.replace("{tf}", str(v))
    return text.replace("{python}", python) if python else text


def _recipe_python(kb: KnowledgeBase, recipe: Recipe, v: Version, os: str) -> str | None:
    pythons = kb.pythons_for(v, os)
    if recipe.backend == "conda":
        conda = [p for row in kb.conda_packages(v=v, os=os) for p in row.python
                 if row.name in ("tensorflow-gpu", "tensorflow")]
        both = [p for p in pythons if p in conda]
        pythons = both or sorted(set(conda), key=version) or pythons
    return pythons[-1] if pythons else None


def _install(kb: KnowledgeBase, build: Build, versions: list[Version]) -> list[dict[str, Any]]:
    from tfgpu.judge.system import recipe_available

    if build.os == "macos" or not versions:
        return []
    out = []
    seen: set[str] = set()
    for v in versions:
        for recipe in kb.recipes_for(v, build.os):
            if not recipe.gpu or recipe.id in seen:
                continue
            seen.add(recipe.id)
            candidates = [w for w in versions if recipe.applies(w, build.os)]
            usable = [w for w in candidates if recipe_available(kb, recipe, w, build.os)]
            chosen = usable[0] if usable else candidates[0]
            sources = [_source_url(kb, "recipes", recipe.source)]
            if recipe.raw.get("source2"):
                sources.append(_source_url(kb, "recipes", str(recipe.raw["source2"])))
            out.append({
                "id": recipe.id, "backend": recipe.backend, "tf": str(chosen), "available": bool(usable),
                "channels": list(recipe.channels),
                "packages": _render_packages(recipe, chosen, _recipe_python(kb, recipe, chosen, build.os)),
                "pins": recipe.pins or None, "provides_cuda": recipe.provides_cuda,
                "activation": activation_for_os(recipe.activation, build.os), "confidence": recipe.confidence,
                "note": recipe.note or None, "source": sources[0], "sources": sources,
                "verified": verified_status(chosen, recipe.id, recipe.backend),
            })
    return out


def activation_for_os(lines: Iterable[str], os_name: str) -> list[str]:
    """A recipe's activation lines as that OS's own: the recipes' lines are POSIX (LD_LIBRARY_PATH, $CONDA_PREFIX);
    on native Windows `conda activate` puts the environment's Library\\bin on PATH, which is where the CUDA and
    cuDNN DLLs are, so nothing is added there (the planner writes no activation script for Windows either)."""
    return [] if os_name == "windows" else list(lines)


def _notes(kb: KnowledgeBase, build: Build, versions: list[Version], all_releases: list[Release],
           macos_tags: Mapping[tuple[str, str], tuple[str, ...]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if build.note:
        out.append({"id": "table-note", "text": build.note, "source": _source_url(kb, "tensorflow", build.source),
                    "confidence": "sourced"})
    if build.wheel_source:  # the wheel disagrees with the docs table: say both, and which one the verdict uses
        differ = [f"the docs table says {what} {docs}, the wheel was built against {what} {got}"
                  for what, docs, got in (("CUDA", build.docs_cuda, build.cuda), ("cuDNN", build.docs_cudnn, build.cudnn))
                  if docs]
        out.append({"id": "wheel-build-info", "text": "; ".join(differ) + " (tfgpu follows the wheel)",
                    "source": _source_url(kb, "tensorflow", build.wheel_source), "confidence": "sourced"})
    for note in load_notes():
        if any(note.applies(v, build.os) for v in versions):
            out.append({"id": note.id, "text": note.text, "source": _source_url(kb, "tensorflow", note.source),
                        "confidence": note.confidence})
    wheels = {p for r in all_releases for p in _release_pythons(r, build.os, macos_tags)}
    nominal = [p for p in build.python.versions() if wheels and p not in wheels]
    if nominal and not any(n["id"].startswith("nominal-python") for n in out):
        src = all_releases[0].source if all_releases else "pypi-tensorflow"
        out.append({
            "id": "nominal-python",
            "text": f"Python {', '.join(nominal)} is in the tested range ({build.python.text}) but PyPI has no "
                    f"{OS_NAMES[build.os]} wheel for it in the {build.series} series",
            "source": _source_url(kb, "releases", src), "confidence": "sourced",
        })
    for r in all_releases:
        if r.yanked:
            out.append({"id": f"yanked-{r.version}", "text": f"{r.dist} {r.version} is yanked on PyPI",
                        "source": _source_url(kb, "releases", r.source), "confidence": "sourced"})
    return out


def driver_verdict(kb: KnowledgeBase, driver: str, cuda: str, os: str) -> dict[str, Any]:
    """Can ``driver`` run a CUDA ``cuda`` build on ``os``? Reuses verdict's driver findings (toolkit floors,
    then minor-version compatibility)."""
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.system import driver_findings

    if os == "macos":
        return {"driver": driver, "status": UNKNOWN,
                "reason": "tfgpu has no macOS CUDA driver floors (macOS GPU builds ended with 1.1)"}
    m = Machine.from_facts({"platform": {"os": os}, "driver": {"version": driver}})
    toolkit = kb.toolkit(cuda)
    floor = toolkit.min_driver_text(os) if toolkit else ""
    if m.driver_cuda_version(kb) is None:
        # older than every toolkit's floor: verdict's driver findings have no CUDA to compare and say nothing
        oldest = min((t for t in kb.toolkits if t.min_driver(os)), key=lambda t: t.cuda)
        return {"driver": driver, "status": FAIL,
                "reason": f"needs CUDA {normalize_cuda(cuda)}, which needs driver >= {floor or '?'}; driver {driver} is "
                          f"older than the oldest floor tfgpu knows (CUDA {oldest.cuda}: {oldest.min_driver_text(os)})",
                "fix": f"upgrade the NVIDIA driver to >= {floor}" if floor else "upgrade the NVIDIA driver"}
    blockers, caveats = driver_findings(m, kb, cuda, False)
    if blockers:
        return {"driver": driver, "status": FAIL, "reason": blockers[0].summary, "fix": blockers[0].fix}
    if caveats:
        return {"driver": driver, "status": WARN, "reason": caveats[0].summary, "fix": caveats[0].fix}
    reason = f"driver {driver} >= {floor}, the CUDA {normalize_cuda(cuda)} minimum on {OS_NAMES[os]}" if floor else (
        f"driver {driver} supports CUDA {normalize_cuda(cuda)}")
    return {"driver": driver, "status": PASS, "reason": reason}


def build_row(kb: KnowledgeBase, build: Build, *, exact: Version | None = None, python: str | None = None,
              driver: str | None = None, macos_tags: Mapping[tuple[str, str], tuple[str, ...]] | None = None,
              ) -> dict[str, Any] | None:
    """One JSON row for a build row, or None when the filters leave nothing of it."""
    tags = macos_tags if macos_tags is not None else kb.macos_tags
    all_releases = series_releases(kb, build, tags)
    releases = [r for r in all_releases if exact is None or r.version == exact]
    if exact is not None and not releases:
        return None
    if python is not None:
        with_wheel = [r for r in releases if python in _release_pythons(r, build.os, tags)]
        if not with_wheel and not build.python.contains(python):
            return None
        releases = with_wheel
    versions = [r.version for r in releases] or ([exact] if exact else [])
    rep = versions[0] if versions else build.tf
    cuda = normalize_cuda(build.cuda)
    toolkit = kb.toolkit(cuda)
    os_key = "windows" if build.os == "windows" else "linux"
    archs = kb.archs_for(rep, build.os) if build.os != "macos" else None
    pythons_json = sorted({p for r in releases for p in _release_pythons(r, build.os, tags)}, key=version)
    row: dict[str, Any] = {
        "tf_version": str(build.tf), "series": build.series, "os": build.os,
        "dist": kb.gpu_dist(rep), "table_dist": build.dist,
        "python": build.python.text, "python_min": str(build.python.min), "python_max": str(build.python.max),
        "python_wheels": pythons_json,
        "cuda": cuda, "cudnn": build.cudnn,
        "min_driver": (toolkit.min_driver_text(os_key) or None) if toolkit and build.os != "macos" else None,
        "minor_version_compat": _mvc_text(kb, version(cuda).major, os_key) if version(cuda).major >= 11 else None,
        "cuda_cc": {"min": toolkit.cc_min, "max": toolkit.cc_max} if toolkit else None,
        "compute_capabilities": None if archs is None else _arch_json(kb, archs),
        "wheel_builds": _cuda_builds_json(kb, build.series, build.os) if build.os != "macos" else [],
        "conda_forge_builds": _conda_forge_builds(kb, versions or [rep]) if build.os == "linux" else [],
        "compiler": build.compiler, "bazel": build.bazel or None,
        "releases": [_release_json(r, build.os, _release_pythons(r, build.os, tags), kb) for r in releases],
        "install": _install(kb, build, versions),
        "notes": _notes(kb, build, versions or [build.tf], all_releases, tags),
    }
    if driver is not None:
        row["driver"] = driver_verdict(kb, driver, cuda, build.os)
    sources = [_source_url(kb, "tensorflow", build.source)]
    if toolkit:
        sources.append(_source_url(kb, "cuda", toolkit.source))
    if row["compute_capabilities"]:
        sources.append(row["compute_capabilities"]["source"])
    sources += [r["source"] for r in row["releases"]]
    sources += [s for i in row["install"] for s in i["sources"]]
    sources += [n["source"] for n in row["notes"]]
    row["sources"] = list(dict.fromkeys(sources))
    return row


def _sort_key(build: Build) -> tuple[Version, int]:
    return (build.tf, -OS_ORDER.index(build.os))


def compat_document(kb: KnowledgeBase, query: Query) -> dict[str, Any]:
    """The answer to ``tfgpu compat`` with filters, as the versioned JSON document (tfgpu.compat/1)."""
    os = resolve_os(query.os)
    selection = resolve_tf_filter(kb, query.tf, os) if query.tf else None
    cuda = resolve_cuda_filter(kb, query.cuda) if query.cuda else None
    python = resolve_python_filter(kb, query.python) if query.python else None
    driver = resolve_driver_filter(kb, query.driver) if query.driver else None
    tags = kb.macos_tags
    rows = []
    for build in sorted(kb.builds, key=_sort_key, reverse=True):
        if os is not None and build.os != os:
            continue
        if selection is not None and (build.os, build.series) not in selection.series:
            continue
        if cuda is not None and normalize_cuda(build.cuda) != cuda:
            continue
        row = build_row(kb, build, exact=selection.exact if selection else None, python=python, driver=driver,
                        macos_tags=tags)
        if row is not None:
            rows.append(row)
    doc: dict[str, Any] = {
        "schema": SCHEMA, "data_version": kb.data_version, "date": kb.date,
        "query": {"os": os, "tf": query.tf, "cuda": cuda, "driver": driver, "python": python},
        "rows": rows,
    }
    if driver is not None:
        doc["driver"] = {
            "driver": driver,
            "runs": [f"{r['tf_version']} ({r['os']})" for r in rows if r["driver"]["status"] == PASS],
            "runs_with_caveats": [f"{r['tf_version']} ({r['os']})" for r in rows if r["driver"]["status"] == WARN],
            "does_not_run": [f"{r['tf_version']} ({r['os']})" for r in rows if r["driver"]["status"] == FAIL],
        }
    return doc


def exit_code(doc: Mapping[str, Any]) -> int:
    """0 when something answers the query; 1 when nothing matches, or a driver runs none of the rows."""
    rows = doc.get("rows") or []
    if not rows:
        return 1
    if doc.get("driver") is not None and not any(r["driver"]["status"] in (PASS, WARN) for r in rows):
        return 1
    return 0


# --------------------------------------------------------------------------- rendering


MARKS = {PASS: "✓", WARN: "!", FAIL: "✗", UNKNOWN: "?"}
STYLES = {PASS: "green", WARN: "yellow", FAIL: "red", UNKNOWN: "dim"}


def python_range(row: Mapping[str, Any]) -> str:
    """"3.5-3.8" as "3.5–3.8"; a list such as "2.7,3.3-3.7" as "2.7, 3.3–3.7"."""
    return ", ".join(p.replace("-", "–") for p in str(row["python"]).split(","))


def _describe_release(rel: Mapping[str, Any]) -> str:
    text = str(rel["version"])
    if rel["dist"] != "tensorflow":
        text = f"{rel['dist']} {text}"
    bits = []
    if rel["pythons"]:
        bits.append("Python " + ", ".join(rel["pythons"]))
    floor = max((v for v in (rel.get("glibc"), rel.get("glibc_symbols")) if v), key=lambda v: tuple(
        int(p) for p in str(v).split(".")), default=None)
    if floor:
        higher = {py: g for py, g in (rel.get("glibc_symbols_by_python") or {}).items() if g != floor}
        bits.append(f"glibc >= {floor}" + (" (" + ", ".join(f"Python {py}: {g}" for py, g in higher.items()) + ")"
                                           if higher else ""))
    if rel.get("cuda_build") is False:
        bits.append("CPU-only build")
    if rel.get("yanked"):
        bits.append("yanked")
    return text + (f" ({'; '.join(bits)})" if bits else "")


def _detail(console: Any, row: Mapping[str, Any]) -> None:
    from rich.text import Text

    def line(label: str, value: str, style: str = "") -> None:
        t = Text(f"  {label:<11} ", style="bold")
        t.append(value, style=style)
        console.print(t, soft_wrap=True)

    console.print(Text(f"\nTensorFlow {row['tf_version']} · {OS_NAMES[row['os']]} (series {row['series']}, "
                       f"pip package {row['dist']})", style="bold"), soft_wrap=True)
    wheels = f"; wheels for {', '.join(row['python_wheels'])}" if row["python_wheels"] else ""
    line("Python", f"{python_range(row)} (tested){wheels}")
    driver = f"minimum driver {row['min_driver']}" if row["min_driver"] else "minimum driver: not recorded"
    if row["min_driver"]:
        driver += f" ({'Windows' if row['os'] == 'windows' else 'Linux'})"
    mvc = row.get("minor_version_compat")
    if mvc and mvc.get("min_driver"):
        driver += f"; >= {mvc['min_driver']} through CUDA {mvc['major']}.x minor-version compatibility"
    line("CUDA", f"{row['cuda']}   cuDNN {row['cudnn']}   {driver}")
    cc = row.get("compute_capabilities")
    if cc:
        partial = "".join(f", {p['cc']} in {p['share']:.0%} of kernels" for p in cc.get("sass_partial") or [])
        ptx = ", ".join(cc.get("ptx_all") or []) or cc["ptx"] or "none"
        line("GPU code", f"SASS {', '.join(cc['sass'])}{partial}; PTX {ptx}"
             + (f" (does not load on {', '.join(cc['ptx_fails'])})" if cc.get("ptx_fails") else "")
             + (" (inferred)" if cc["confidence"] != "sourced" else "")
             + (f"; read from {cc['wheel']['file']}" if cc.get("wheel") else ""))
    forge = [b for b in row.get("conda_forge_builds") or [] if b.get("sass")]
    if forge:
        newest = next((b for b in forge if not b.get("dropped_at")), forge[0])  # not a variant reverted since
        line("conda-forge", f"TF {newest['tf']} CUDA {newest['cuda']} builds: SASS {', '.join(newest['sass'])}; "
             f"PTX {newest['ptx'] or 'none'}" + (f" (+{len(forge) - 1} more builds: --json)" if len(forge) > 1 else ""))
    line("Built with", row["compiler"] + (f", Bazel {row['bazel']}" if row.get("bazel") else ""))
    if row["releases"]:
        line("Releases", "; ".join(_describe_release(r) for r in row["releases"]))
    else:
        line("Releases", "none on PyPI for this filter", "yellow")
    if row.get("driver"):
        d = row["driver"]
        line("Driver", f"{MARKS[d['status']]} {d['reason']}", STYLES[d["status"]])
    if row["install"]:
        console.print(Text("  Install", style="bold"))
        for rec in row["install"]:
            head = Text(f"    {rec['backend']:<10} ", style="bold")
            head.append(rec["id"])
            if not rec["available"]:
                head.append(f" (the channel has no build of {rec['tf']})", style="yellow")
            console.print(head, soft_wrap=True)
            channels = f"  [channels: {', '.join(rec['channels'])}]" if rec["channels"] else ""
            console.print(Text(f"               {rec['packages']}{channels}"), soft_wrap=True)
            for act in rec["activation"]:
                console.print(Text(f"               activate: {act}", style="dim"), soft_wrap=True)
            ver = rec.get("verified") or {}
            if ver:
                console.print(Text(f"               {ver['text']}", style={"verified": "green", "failed": "red"}.get(
                    ver["status"], "dim")), soft_wrap=True)
            console.print(Text(f"               source: {' ; '.join(rec['sources'])}", style="dim"), soft_wrap=True)
    if row["notes"]:
        console.print(Text("  Notes", style="bold"))
        for note in row["notes"]:
            console.print(Text(f"    ! {note['text']}", style="yellow"), soft_wrap=True)
            console.print(Text(f"      source: {note['source']}", style="dim"), soft_wrap=True)
    console.print(Text("  Sources", style="bold"))
    for url in row["sources"]:
        console.print(Text(f"    {url}", style="dim"), soft_wrap=True)


def render_human(doc: Mapping[str, Any], out: TextIO, *, color: bool | None = None, detail: bool | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    from tfgpu.render import output

    styled = output.use_style(out) if color is None else color
    console = output.fitted_console(file=out, style=styled)  # a pipe: nothing wraps, no cell is cut
    console.print(Text(f"tfgpu knowledge base {doc['data_version']} ({doc['date']})", style="bold"))
    query = {k: v for k, v in doc["query"].items() if v}
    if query:
        console.print(Text("filters: " + " ".join(f"--{k} {v}" for k, v in query.items()), style="dim"))
    rows = doc["rows"]
    if not rows:
        console.print(Text("no TensorFlow GPU build matches these filters; run `tfgpu compat` for the full table",
                           style="yellow"))
        return
    if detail is None:
        detail = bool(doc["query"].get("tf")) or len(rows) <= 2
    if detail:
        for row in rows:
            _detail(console, row)
    else:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        columns = ["TF", "OS", "Python", "CUDA", "cuDNN", "min driver", "releases", "install"]
        if doc.get("driver"):
            columns.append(f"driver {doc['driver']['driver']}")
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in rows:
            rels = [r["version"] for r in row["releases"]]
            cells: list[Any] = [
                row["tf_version"], row["os"], python_range(row), row["cuda"], row["cudnn"], row["min_driver"] or "-",
                (rels[-1] if len(rels) == 1 else f"{rels[-1]}…{rels[0]}") if rels else "-",
                ", ".join(sorted({i["backend"] for i in row["install"]})) or "-",
            ]
            if row.get("driver"):
                d = row["driver"]
                cells.append(Text(MARKS[d["status"]] + " " + d["status"], style=STYLES[d["status"]]))
            table.add_row(*cells)
        output.print_table(console, table)
        console.print(Text("details, recipes and sources: tfgpu compat --tf SERIES (e.g. --tf 2.2); --json for all",
                           style="dim"))
    if doc.get("driver"):
        d = doc["driver"]
        console.print(Text(f"\nDriver {d['driver']}", style="bold"))
        for key, label, style in (("runs", "runs", "green"), ("runs_with_caveats", "runs with caveats", "yellow"),
                                  ("does_not_run", "cannot run", "red")):
            if d[key]:
                console.print(Text(f"  {label}: {', '.join(d[key])}", style=style), soft_wrap=True)
        if not detail:
            reasons = {r["driver"]["reason"].split(";")[0] for r in rows if r["driver"]["status"] == FAIL}
            for reason in sorted(reasons)[:6]:
                console.print(Text(f"    why: {reason}", style="dim"), soft_wrap=True)
