"""Guards on the knowledge base in compat/: canonical form, cross-references, and the regeneration scripts."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests import REPO
from tests.conftest import DATA, load_file_module
from tfgpu.kb import knowledge, parse, records, specifiers, store
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import load_toml
from tfgpu.kb.queries import load_notes
from tfgpu.kb.specifiers import PyRange
from tfgpu.kb.versions import normalize_cuda, series_of

COMPAT = REPO / "compat"
SCRIPTS = REPO / "scripts"
needs_tomllib = pytest.mark.skipif(sys.version_info < (3, 11), reason="the scripts use tomllib (Python >= 3.11)")




def _load_script(name: str) -> types.ModuleType:
    return load_file_module(SCRIPTS / f"{name}.py", f"tfgpu_script_{name}")


def _arrays(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {k: v for k, v in data.items() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)}


# --------------------------------------------------------------------------- canonical form


@needs_tomllib
def test_tensorflow_builds_block_is_what_the_generator_writes():
    """Re-rendering the loaded rows with the script's own formatter reproduces the block byte for byte."""
    script = _load_script("update_tensorflow")
    text = (COMPAT / "tensorflow.toml").read_text(encoding="utf-8")
    block = script._BUILDS_BLOCK_RE.search(text).group(0)
    builds = []
    for row in load_toml("tensorflow")["builds"]:
        tools = f"Bazel {row['bazel']}" if row["bazel"] else re.match(r"built with (.*), not Bazel", row["note"]).group(1)
        builds.append(script.Build(tf=row["tf"], os=row["os"], python=row["python"], compiler=row["compiler"],
                                   bazel=row["bazel"], cudnn=row["cudnn"], cuda=row["cuda"], dist=row["dist"],
                                   build_tools=tools))
    assert script.render_builds(builds, script.existing_notes(text)) == block


@needs_tomllib
def test_releases_file_is_what_the_generator_writes():
    script = _load_script("update_releases")
    text = (COMPAT / "releases.toml").read_text(encoding="utf-8")
    data = load_toml("releases")
    retrieved = {k: v["retrieved"] for k, v in data["sources"].items()}
    assert script.render(data["releases"], retrieved) == text


@pytest.mark.parametrize("path", sorted(COMPAT.glob("*.toml")), ids=lambda p: p.name)
def test_every_row_is_one_line(path: Path):
    """Each row of every array is a single line that parses on its own (rows diff well)."""
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")
    data = load_toml(path.stem)
    rows = [r for rows in _arrays(data).values() for r in rows]
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.lstrip().startswith("{")]
    assert len(lines) == len(rows), f"{path.name}: {len(rows)} rows but {len(lines)} row lines"
    for line, row in zip(lines, rows):
        assert line.endswith("},"), line[:80]
        assert tomllib.loads("row = " + line[:-1])["row"] == row
    assert data["schema"] == parse.SCHEMAS[path.stem]


def test_sources_table_comes_last_so_no_array_hides_inside_it():
    for path in COMPAT.glob("*.toml"):
        data = load_toml(path.stem)
        for key, value in data.get("sources", {}).items():
            assert isinstance(value, dict), f"{path.name}: [sources] {key} is not a source"
            assert "url" in value, f"{path.name}: [sources] {key} has no url"


# --------------------------------------------------------------------------- cross-references


def test_every_row_names_a_source_that_exists():
    for path in COMPAT.glob("*.toml"):
        data = load_toml(path.stem)
        sources = data.get("sources", {})
        for key, rows in _arrays(data).items():
            for row in rows:
                assert row.get("source") in sources, f"{path.name} {key}: {row}"
                extras = {k for k in row if re.fullmatch(r"source\d+", k)} | {"arch_source", "compat_source"}
                for extra in sorted(extras):
                    if extra in row:
                        assert row[extra] in sources, f"{path.name} {key}: {extra} {row[extra]}"
        for key, src in sources.items():
            # a URL a user can open, or a named publication (a blog post: title and date, issue 18)
            assert re.match(r"^https://", src["url"]) or (src["url"] == "" and src["title"].startswith("Blog post ")
                                                          and "published" in src), f"{path.name}: {key} has no URL"
            assert not re.search(r"file:|seed:|/work/|/home/|/tmp/", str(src)), f"{path.name}: {key}: a machine path"
            assert src.get("title"), f"{path.name}: {key} has no title"


def test_every_cuda_a_tensorflow_row_names_is_in_the_cuda_table():
    kb = load_kb()
    for b in kb.builds:
        toolkit = kb.toolkit(b.cuda)
        assert toolkit is not None, f"TF {b.tf} {b.os} names CUDA {b.cuda}, missing from compat/cuda.toml"
        if b.os in ("linux", "windows"):
            assert toolkit.min_driver(b.os) is not None, f"CUDA {b.cuda} has no {b.os} driver floor"


def test_toolkit_rows_are_well_formed():
    kb = load_kb()
    known_cc = {cc for cc, _ in kb.arch_names}
    for t in kb.toolkits:
        lo, hi = Version(t.cc_min), Version(t.cc_max)
        assert lo <= hi, f"CUDA {t.cuda}: cc_min {t.cc_min} > cc_max {t.cc_max}"
        assert {t.cc_min, t.cc_max} <= known_cc, f"CUDA {t.cuda}: cc range names an unknown compute capability"
    # floors rise with the toolkit on each OS (NVIDIA's table 3 is ordered)
    for os in ("linux", "windows"):
        floors = [(t.cuda, t.min_driver(os)) for t in sorted(kb.toolkits, key=lambda t: t.cuda) if t.min_driver(os)]
        majors: dict[int, list[Version]] = {}
        for cuda, floor in floors:
            majors.setdefault(cuda.major, []).append(floor)
        for major, values in majors.items():
            assert values == sorted(values), f"{os} floors of CUDA {major}.x are not increasing: {values}"
    for mc in kb.minor_compats:
        first = min((t for t in kb.toolkits if t.cuda.major == mc.major), key=lambda t: t.cuda)
        assert mc.linux_min_driver is not None
        assert first.linux_min_driver is not None
        assert mc.source


def test_python_ranges_are_well_formed():
    kb = load_kb()
    for b in kb.builds:
        r = PyRange.parse(b.python.text)
        assert all(lo <= hi and lo.major == hi.major for lo, hi in r.parts), b
        versions = r.versions()
        assert versions, b
        assert len(versions) == len(set(versions)), b
        assert r.min <= r.max
    for row in load_toml("recipes")["recipes"]:
        text = str(row.get("python", ""))
        m = re.match(r"^(\d+\.\d+)-(\d+\.\d+)", text)
        if m:
            assert Version(m.group(1)) <= Version(m.group(2)), row["id"]


def test_every_specifier_parses_and_selects_a_known_release():
    kb = load_kb()
    known = [r.version for r in kb.releases]
    for file, key in (("recipes", "recipes"), ("tf_archs", "archs"), ("tensorflow", "notes")):
        for row in load_toml(file)[key]:
            spec = SpecifierSet(row["tf"])
            assert any(v in spec for v in known), f"{file}.toml {row}: `tf` selects no release"


def test_every_release_series_has_a_build_row():
    """A GPU release (the distribution that carried GPU support then) belongs to a tested-build row.
    tensorflow-gpu 0.12.x predates the tables, which start at 1.0."""
    kb = load_kb()
    all_series = {series_of(b.tf) for b in kb.builds}
    for r in kb.releases:
        if r.placeholder or r.dist != kb.gpu_dist(r.version) or r.version < Version("1.0"):
            continue
        assert series_of(r.version) in all_series, f"{r.dist} {r.version} has no row in compat/tensorflow.toml"


def test_every_build_row_has_releases_and_gpu_code():
    kb = load_kb()
    from tfgpu.tools.compat import series_releases

    tags = kb.macos_tags
    for b in kb.builds:
        assert series_releases(kb, b, tags), f"TF {b.tf} {b.os}: no PyPI release with wheels for {b.os}"
        if b.os != "macos":
            assert kb.archs_for(b.tf, b.os) is not None, f"TF {b.tf} {b.os}: no row in compat/tf_archs.toml"


def test_issue_facts_are_recorded_as_data():
    kb = load_kb()
    notes = {n.id: n for n in load_notes()}
    urls = {k: v["url"] for k, v in kb.sources("tensorflow").items()}
    n1611 = [n for n in notes.values() if n.applies("2.16.1", "linux") and "63362" in urls[n.source]]
    assert n1611, "2.16.1 pip library note (tensorflow/tensorflow#63362) missing"
    assert not any(n.applies("2.16.2", "linux") for n in n1611)
    assert any(n.applies("2.16.2", "linux") for n in notes.values())
    placeholders = [r for r in kb.releases if r.placeholder]
    assert placeholders
    assert min(r.version for r in placeholders) == Version("2.12.0")
    assert all(r.dist == "tensorflow-gpu" for r in placeholders)
    assert any(n.applies("2.12.0", "linux") and "placeholder" in n.text for n in notes.values())
    assert max(b.tf for b in kb.builds if b.os == "windows") == Version("2.10.0")
    assert max(b.tf for b in kb.builds if b.os == "macos") == Version("1.1.0")
    assert any(n.applies("2.10.0", "windows") for n in notes.values())
    assert any(n.applies("1.1.0", "macos") for n in notes.values())


# --------------------------------------------------------------------------- cases generated from the rows


def just_below(text: str) -> str:
    """The driver version one step below ``text`` as NVIDIA writes it: 418.39 -> 418.38, 580.65.06 -> 580.65.05."""
    parts = text.split(".")
    for i in range(len(parts) - 1, -1, -1):
        if int(parts[i]) > 0:
            parts[i] = str(int(parts[i]) - 1).zfill(len(parts[i]))
            return ".".join(parts[: i + 1] + ["99"] * (len(parts) - i - 1))
    raise ValueError(text)


def test_just_below():
    assert just_below("418.39") == "418.38"
    assert just_below("580.65.06") == "580.65.05"
    assert just_below("410.0") == "409.99"
    assert Version(just_below("520.06")) < Version("520.06")


def _driver_cases() -> list[tuple[str, str, str, str]]:
    kb = load_kb()
    seen = set()
    out = []
    for b in kb.builds:
        if b.os == "macos":
            continue
        key = (normalize_cuda(b.cuda), b.os)
        if key in seen:
            continue
        seen.add(key)
        out.append((str(b.tf), b.os, normalize_cuda(b.cuda), kb.toolkit(b.cuda).min_driver_text(b.os)))
    return out


def _expected_below(cuda: str, os: str, driver: str) -> str:
    """At a driver just below a toolkit's floor: a CUDA >= 11 build still runs (warn) when the driver is past
    the major's minor-version floor and supports an older toolkit of the same major; otherwise it fails."""
    kb = load_kb()
    want = Version(cuda)
    mc = kb.minor_compat(want.major)
    d = Version(driver)
    same_major = [t for t in kb.toolkits if t.cuda.major == want.major and t.min_driver(os) and t.min_driver(os) <= d]
    if want.major >= 11 and mc and mc.min_driver(os) and mc.min_driver(os) <= d and same_major:
        return "warn"
    return "fail"


@pytest.mark.parametrize(("tf", "os", "cuda", "floor"), _driver_cases())
def test_driver_at_the_minimum_passes_and_just_below_does_not(tf, os, cuda, floor):
    from tfgpu.tools.compat import driver_verdict

    kb = load_kb()
    assert driver_verdict(kb, floor, cuda, os)["status"] == "pass"
    below = just_below(floor)
    got = driver_verdict(kb, below, cuda, os)
    assert got["status"] == _expected_below(cuda, os, below), got
    mc = kb.minor_compat(Version(cuda).major)
    if mc and mc.min_driver(os):
        raw = next(r for r in load_toml("cuda")["minor_version_compat"] if int(r["major"]) == mc.major)
        text = str(raw[f"{os}_min_driver"])
        under = just_below(text if "." in text else text + ".0")
        if Version(under) < Version(floor):  # below both the toolkit's own floor and the minor-version floor
            assert driver_verdict(kb, under, cuda, os)["status"] == "fail"


@pytest.mark.parametrize(("tf", "os", "cuda", "floor"), _driver_cases())
def test_cli_driver_at_the_minimum_runs_the_row(cli, tf, os, cuda, floor):
    import json

    code, out, err = cli("compat", "--tf", series_of(Version(tf)), "--os", os, "--driver", floor, "--json")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["driver"]["status"] == "pass"
    assert row["min_driver"] == floor
    code, out, err = cli("compat", "--tf", series_of(Version(tf)), "--os", os, "--driver", just_below(floor), "--json")
    (row,) = json.loads(out)["rows"]
    assert row["driver"]["status"] != "pass"
    assert code == (1 if row["driver"]["status"] == "fail" else 0)


# --------------------------------------------------------------------------- the regeneration scripts


@needs_tomllib
@pytest.mark.parametrize("name", ["update_tensorflow", "update_releases"])
def test_script_help_works_offline(name, capsys, monkeypatch):
    script = _load_script(name)
    if hasattr(script, "http_get"):
        monkeypatch.setattr(script, "http_get", lambda *a, **k: pytest.fail("network used by --help"))
    with pytest.raises(SystemExit) as exc:
        script.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--check" in out
    assert "--force" in out


@needs_tomllib
def test_update_tensorflow_check_on_the_recorded_docs_says_up_to_date(capsys, monkeypatch):
    """tests/data/tfdocs holds source.md and source_windows.md of the docs commit compat/ cites (SOURCE.txt)."""
    script = _load_script("update_tensorflow")

    def no_git(*args: object, **kwargs: object) -> None:
        raise OSError("no git in unit tests")

    monkeypatch.setattr(script.subprocess, "run", no_git)
    code = script.main(["--docs", str(DATA / "tfdocs"), "--check"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "up to date (67 GPU rows" in out or "up to date (" in out


@needs_tomllib
def test_update_tensorflow_check_shows_a_diff_when_a_value_drifts(tmp_path, capsys, monkeypatch):
    script = _load_script("update_tensorflow")
    monkeypatch.setattr(script.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError()))
    drifted = tmp_path / "tensorflow.toml"
    text = (COMPAT / "tensorflow.toml").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if '{ tf = "2.2.0", os = "linux"' in ln)
    drifted.write_text(text.replace(line, line.replace('cuda = "10.1"', 'cuda = "10.2"')), encoding="utf-8")
    code = script.main(["--docs", str(DATA / "tfdocs"), "--check", "--compat", str(drifted)])
    out = capsys.readouterr().out
    assert code == 1
    assert '-  { tf = "2.2.0", os = "linux"' in out
    assert 'cuda = "10.1"' in out
    assert drifted.read_text(encoding="utf-8") != text  # --check never writes


@needs_tomllib
def test_update_tensorflow_without_docs_skips_cleanly(capsys, monkeypatch):
    script = _load_script("update_tensorflow")
    monkeypatch.delenv("TFGPU_TF_DOCS", raising=False)
    assert script.main(["--check"]) == 0
    assert "skipped" in capsys.readouterr().err


def test_noxfile_runs_every_update_script():
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    assert "def update_compat" in text
    assert 'glob("update_*.py")' in text
    assert {p.name for p in SCRIPTS.glob("update_*.py")} >= {"update_tensorflow.py", "update_releases.py"}


def test_parsed_knowledge_base_cache_is_keyed_by_content(tmp_path, monkeypatch, capsys):
    from tfgpu.kb import cache as _kbcache

    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path))
    knowledge.load_kb.cache_clear()
    try:
        first = knowledge.load_kb()
        (cache,) = (p for p in tmp_path.glob("kb-*.json") if p.name.count(".") == 1)  # not its sections
        again = knowledge.load_kb.__wrapped__()  # read back from the file
        assert again == first
        assert again is not first
        knowledge.load_kb.cache_clear()
        cache.write_bytes(b"not json")
        again = knowledge.load_kb()  # a broken cache is ignored and rewritten, with a note naming it
        assert again == first
        assert f"ignored the corrupt cache {cache}" in capsys.readouterr().err
        assert _kbcache.read(cache)[0] == "r"
        monkeypatch.setenv("TFGPU_NO_CACHE", "1")
        assert store._cache_file() is None
    finally:
        knowledge.load_kb.cache_clear()


def test_the_cache_key_changes_when_a_data_file_or_a_cached_module_changes(tmp_path, monkeypatch):
    import os

    from tfgpu.core import record as _record
    from tfgpu.judge import gpu_rules, verdict
    from tfgpu.kb import cache as _kbcache

    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path))
    before = store._cache_file()
    assert before == store._cache_file()  # stable while nothing changes
    # the indexes in the cache are filled by tfgpu.judge.verdict's indexer and tfgpu.judge.gpu_rules' derived values:
    # a cache built by older code of theirs is stale too
    for path in (parse.compat_dir() / "cuda.toml", Path(knowledge.__file__), Path(parse.__file__), Path(records.__file__),
                 Path(specifiers.__file__), Path(store.__file__), Path(_record.__file__),
                 Path(_kbcache.__file__), Path(verdict.__file__), Path(gpu_rules.__file__)):
        st = path.stat()
        try:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            assert store._cache_file() != before, path.name
        finally:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert store._cache_file() == before


# --------------------------------------------------------------------------- VersionSpec == packaging's SpecifierSet

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ops = st.sampled_from(["==", "!=", ">=", "<=", ">", "<", "~="])
_rel = st.lists(st.integers(0, 25), min_size=1, max_size=3).map(lambda xs: ".".join(map(str, xs)))


@st.composite
def _specs(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(_ops)
        ver = draw(_rel)
        if op == "~=" and "." not in ver:
            ver += ".0"
        if op in ("==", "!=") and draw(st.booleans()):
            ver += ".*"
        parts.append(op + ver)
    return ",".join(parts)


@given(spec=_specs(), version=_rel)
def test_version_spec_agrees_with_packaging(spec: str, version: str) -> None:
    from packaging.version import Version

    from tfgpu.kb.specifiers import VersionSpec

    assert (Version(version) in VersionSpec(spec)) == (Version(version) in SpecifierSet(spec))


def test_version_spec_refuses_what_packaging_refuses() -> None:
    from tfgpu.kb.specifiers import InvalidSpecifier, VersionSpec

    for bad in ("banana", ">=", "=>2.1", "~=2", ">=2.*"):
        with pytest.raises(InvalidSpecifier):
            VersionSpec(bad)


@pytest.mark.parametrize("facts_name", ["mx150-laptop-ubuntu1804.json", "r740-4x-tesla-m60.json",
                                        "windows-gtx1080.json"])
def test_a_cached_knowledge_base_with_prebuilt_indexes_judges_exactly_as_a_fresh_one(tmp_path, monkeypatch,
                                                                                    facts_name):
    import json

    from tests.conftest import DATA
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.render import report

    facts = json.loads((DATA / "facts" / facts_name).read_text())
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path))
    knowledge.load_kb.cache_clear()
    try:
        knowledge.load_kb()  # parses and writes the cache, indexes built
        (_cache,) = (p for p in tmp_path.glob("kb-*.json") if p.name.count(".") == 1)  # not its sections
        cached = knowledge.load_kb.__wrapped__()  # read back from the cache file
        assert len(cached._memo) > 100  # the indexes travel with the tables
        fresh = knowledge._parse_kb()
        assert not fresh.__dict__.get("_memo")
        for tf in (None, "2.2", "1.15.0", "latest"):
            docs = [report.doctor_document(facts, diagnose(facts, kb, tf=tf), data_version=kb.data_version)
                    for kb in (cached, fresh)]
            assert docs[0] == docs[1], tf
    finally:
        knowledge.load_kb.cache_clear()


def test_a_failing_index_warm_up_still_gives_a_knowledge_base(tmp_path, monkeypatch):
    import tfgpu.judge.verdict

    def broken(kb, os="linux"):
        msg = "verdict bug"
        raise RuntimeError(msg)

    monkeypatch.setattr(tfgpu.judge.verdict, "warm_up", broken)
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path))
    knowledge.load_kb.cache_clear()
    try:
        kb = knowledge.load_kb()
        assert kb.builds  # the tables...
        assert "_memo" not in kb.__dict__  # ...without half-built indexes
    finally:
        knowledge.load_kb.cache_clear()
