"""Issue 17, item 4: the knowledge base owns its tables and its cache. With the cache warm, `tfgpu compat`,
`tfgpu doctor` (including the container route, which reads compat/containers.toml and compat/pins.toml)
and `tfgpu explain` parse no TOML at all; cache files no install has used lately are removed (issue 32)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tfgpu.judge import explain_catalog as excat
from tfgpu.kb import knowledge, parse, queries, store

FACTS = str(TESTS / "data/facts/r740-4x-tesla-m60.json")
RUNS = (
    ("compat", "--tf", "2.2", "--json"),
    ("compat", "--json"),
    ("doctor", "--json", "--facts", FACTS),
    ("doctor", "--json", "--facts", FACTS, "--tf", "2.15", "--backend", "docker"),
    ("plan", "--facts", FACTS, "--tf", "2.9", "--json"),
)


def _clear() -> None:
    for f in (knowledge.load_kb, knowledge.load_explain_data, knowledge.load_gpu_devices, parse.load_toml,
              excat.load_catalog):
        f.cache_clear()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(d))
    _clear()
    yield d
    _clear()


def _no_toml(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every TOML parse fail (and record who tried): tomllib itself and tfgpu's reader."""
    import tomllib

    tried: list[str] = []

    def refuse(*args: Any, **_kw: Any) -> Any:
        tried.append(str(args[0]) if args else "?")
        msg = f"a TOML file was parsed with a warm cache: {args[0] if args else ''}"
        raise AssertionError(msg)

    monkeypatch.setattr(tomllib, "load", refuse)
    monkeypatch.setattr(tomllib, "loads", refuse)
    return tried


def test_compat_doctor_plan_and_explain_read_no_toml_when_the_cache_is_warm(
    cache_dir: Path, cli: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cold = [cli(*argv) for argv in RUNS]
    cold_catalog = excat.load_catalog()
    assert all(rc in (0, 1) for rc, _, _ in cold), [(argv, err) for argv, (_, _, err) in zip(RUNS, cold)]
    assert sorted(p.name.split(".", 1)[1] for p in cache_dir.iterdir()) == ["devices.json", "explain.json", "json"]
    _clear()  # a new process: nothing parsed in memory, only the cache files on disk
    tried = _no_toml(monkeypatch)
    warm = [cli(*argv) for argv in RUNS]
    assert not tried
    assert warm == cold  # same exit codes, same documents, nothing on stderr that was not there before
    assert excat.load_catalog() == cold_catalog
    assert not tried


def test_the_cached_tables_are_the_parsed_tables(cache_dir: Path) -> None:
    parsed = knowledge._parse_kb()
    knowledge.load_kb()  # writes the cache
    _clear()
    cached = knowledge.load_kb()
    assert cached is not parsed
    for name in ("notes", "pins", "python_limits", "verified", "container_images", "container_series",
                 "container_rules", "macos_tags", "source_tables"):
        assert getattr(cached, name) == getattr(parsed, name), name
    assert cached.pins
    assert cached.notes
    assert cached.container_images
    assert cached.sources("pins") == dict(parse.load_toml("pins")["sources"])
    assert queries.pin_source_urls(cached.pins[0]).startswith("http")
    assert cached.gpu_devices() == parsed.gpu_devices() == parsed.devices
    assert len(parsed.devices) > 500


def test_the_doctor_reads_the_gpu_devices_only_for_a_gpu_without_a_compute_capability(cache_dir: Path) -> None:
    """The PCI device table (a fifth of the tables) is a section of the cache of its own: a GPU that reports its
    compute capability is judged without decoding it; one that does not is judged with it, read from there."""
    from tfgpu.facts.machine import gpu_cc_of

    knowledge.load_kb()
    _clear()
    cached = knowledge.load_kb()
    assert cached.devices == ()
    assert cached.devices_elsewhere
    h100 = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "pci_device_id": "2330"}
    assert gpu_cc_of(cached, h100) == "9.0"
    assert knowledge.load_gpu_devices.cache_info().currsize == 0  # not read
    assert gpu_cc_of(cached, {**h100, "compute_capability": None}) == "9.0"  # by its PCI device ID
    assert knowledge.load_gpu_devices.cache_info().currsize == 1
    assert knowledge.load_gpu_devices() == knowledge._parse_kb().devices


def test_the_doctor_decodes_none_of_the_deferred_tables(cache_dir: Path) -> None:
    """A third of the cached tables (GPU models, verified rows, pins, notes, every file's sources, ...) stay text in
    the cache file until first read (tfgpu.kb.cache.defer_fields): the doctor decodes none of them on Linux, with
    or without GPUs; the verdicts and the document are the same as with every table decoded."""
    import json

    from tfgpu.api.doctor import doctor_result, knowledge_of
    from tfgpu.render import report

    parsed = knowledge._parse_kb()
    knowledge.load_kb()
    docs = {}
    for case in ("r740-4x-tesla-m60", "mx150-laptop-ubuntu1804"):
        _clear()
        cached = knowledge.load_kb()
        facts = json.loads((TESTS / "data" / "facts" / f"{case}.json").read_text())
        doc = report.doctor_document(facts, doctor_result(facts, cached), data_version=cached.data_version, overrides=[])
        doc["knowledge"] = knowledge_of(cached, facts)
        assert set(cached.__dict__["__deferred__"].texts) == set(knowledge.DEFERRED), case  # none decoded
        for name in knowledge.DEFERRED:
            assert getattr(cached, name) == getattr(parsed, name), name  # each decoded on first use
        assert "__deferred__" not in cached.__dict__
        docs[case] = doc
        doc_parsed = report.doctor_document(facts, doctor_result(facts, parsed), data_version=parsed.data_version,
                                            overrides=[])
        doc_parsed["knowledge"] = knowledge_of(parsed, facts)
        assert json.dumps(doc, sort_keys=True) == json.dumps(doc_parsed, sort_keys=True), case


def test_a_deferred_table_that_cannot_be_decoded_is_parsed_again(cache_dir: Path) -> None:
    """Only text that tfgpu.kb.cache.encode wrote is decoded (the same allow-list of classes); anything else in a
    deferred table's place makes that table come from compat/ again, when it is first read."""
    import json

    knowledge.load_kb()
    cache = next(p for p in cache_dir.glob("kb-*.json") if p.name.count(".") == 1)
    data = json.loads(cache.read_text())
    names = knowledge.KnowledgeBase.__record_fields__  # type: ignore[attr-defined]
    at = 2 + names.index("pins")
    assert data[at][0] == "z"
    data[at] = ["z", json.dumps(["l", ["r", "Popen", "rm -rf /"]])]  # a class outside the allow-list
    cache.write_text(json.dumps(data))
    _clear()
    cached = knowledge.load_kb()
    assert cached.pins == knowledge._parse_kb().pins


def _age(path: Path, days: float) -> None:
    """Make ``path`` look last used ``days`` ago (a cache's mtime is its last use)."""
    when = time.time() - days * 86400
    os.utime(path, (when, when))


def test_stale_cache_files_are_removed_but_never_a_symlink(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store, "KEEP_RECENT", 1)  # only the cache being written is "recent"
    old = cache_dir / "kb-0123456789abcdef.json"
    old_explain = cache_dir / "kb-0123456789abcdef.explain.json"
    elsewhere = tmp_path / "precious"
    elsewhere.write_text("keep me")
    link = cache_dir / "kb-fedcba9876543210.json"
    link.symlink_to(elsewhere)
    other = cache_dir / "notes.json"  # not a cache file
    for path in (old, old_explain, other):
        path.write_text("[]")
        _age(path, 2)
    knowledge.load_kb()
    knowledge.load_explain_data()
    current = store._cache_file()
    assert current is not None
    assert not old.exists()
    assert not old_explain.exists()
    assert link.is_symlink()
    assert elsewhere.read_text() == "keep me"
    assert other.exists()
    assert current.exists()
    assert current.with_name(current.name.replace(".json", ".explain.json")).exists()


def _fake_caches(cache_dir: Path, ages_days: list[float]) -> list[Path]:
    """Cache files of other installs (a cache and its devices section each), last used ``ages_days`` ago."""
    made = []
    for i, days in enumerate(ages_days):
        main = cache_dir / f"kb-{i:016x}.json"
        section = cache_dir / f"kb-{i:016x}.devices.json"
        for path in (main, section):
            path.write_text("[]")
            _age(path, days)
        made.append(main)
    return made


def test_the_caches_of_other_installs_are_kept_while_recently_used(cache_dir: Path) -> None:
    """Issue 32: a cache is removed only when it is stale for every install: the KEEP_RECENT most recently used
    stay however old, and so do those used within STALE_AFTER (up to MAX_CACHES)."""
    fresh = _fake_caches(cache_dir, [0.01 * i for i in range(store.KEEP_RECENT + 2)])  # all used today
    knowledge.load_kb()  # writes this install's cache: nothing used today is removed
    assert all(p.exists() and p.with_name(p.name.replace(".json", ".devices.json")).exists() for p in fresh)
    for p in fresh:  # now all of them unused for two days: only the most recently used few stay
        _age(p, 2 + fresh.index(p))
        _age(p.with_name(p.name.replace(".json", ".devices.json")), 2 + fresh.index(p))
    current = store._cache_file()
    assert current is not None
    current.unlink()  # a rebuild (only a write prunes)
    knowledge.load_kb.cache_clear()
    knowledge.load_kb()
    kept = sorted(p.name for p in cache_dir.glob("kb-*.json") if p.name.count(".") == 1)
    assert kept == sorted([current.name, *(p.name for p in fresh[: store.KEEP_RECENT - 1])])


def test_at_most_max_caches_are_kept_even_when_all_are_recent(cache_dir: Path) -> None:
    _fake_caches(cache_dir, [0.001 * (i + 1) for i in range(store.MAX_CACHES + 3)])
    knowledge.load_kb()
    groups = {p.name.split(".", 1)[0] for p in cache_dir.glob("kb-*.json")}
    current = store._cache_file()
    assert current is not None
    assert current.name.split(".", 1)[0] in groups
    # the MAX_CACHES most recently used, this one (the newest) among them
    assert len(groups) == store.MAX_CACHES


def test_reading_a_cache_marks_it_used_at_most_once_an_hour(cache_dir: Path) -> None:
    knowledge.load_kb()
    current = store._cache_file()
    assert current is not None
    _age(current, 0.5 / 24)  # used half an hour ago: not marked again (no write on every run)
    before = current.stat()
    knowledge.load_kb.cache_clear()
    knowledge.load_kb()
    assert current.stat().st_mtime == before.st_mtime
    _age(current, 3)
    knowledge.load_kb.cache_clear()
    knowledge.load_kb()
    after = current.stat()
    assert time.time() - after.st_mtime < 60  # marked used now
    assert after.st_ino == before.st_ino  # read, not rewritten


def test_a_corrupt_explain_section_is_ignored_with_one_line(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    knowledge.load_explain_data()
    current = store._cache_file()
    assert current is not None
    section = current.with_name(current.name.replace(".json", ".explain.json"))
    section.write_text('{"not": "ours"')
    os.chmod(section, 0o600)
    _clear()
    assert knowledge.load_explain_data() == parse.load_toml("explain")
    err = capsys.readouterr().err
    assert err == f"tfgpu: note: ignored the corrupt cache {section}; rebuilt it\n"


def test_the_cache_holds_the_verdicts_indexes_and_one_written_without_them_is_indexed_next_time(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The knowledge base imports no verdict code (tests/unit/build/test_pipeline.py walks the imports): tfgpu.judge.verdict
    registers the indexes it wants cached. A cache written by a process that had not imported the verdicts
    lacks them; the next process that has them indexes it and writes it again."""
    import tfgpu.judge.verdict  # registers its indexer

    assert knowledge._INDEXERS
    monkeypatch.setattr(knowledge, "_INDEXERS", [])  # a process that never imported the verdicts
    knowledge.load_kb()
    _clear()
    bare = knowledge.load_kb()
    assert knowledge._INDEXED not in bare._memo
    assert not {kind for kind, _ in bare._memo} & {"recipes_for", "archs_for"}
    monkeypatch.setattr(knowledge, "_INDEXERS", [tfgpu.judge.verdict._index_for_verdicts])
    _clear()
    healed = knowledge.load_kb()
    assert healed._memo[knowledge._INDEXED] is True
    _clear()
    _no_toml(monkeypatch)
    cached = knowledge.load_kb()  # read back, indexes included, no TOML parsed
    assert cached._memo[knowledge._INDEXED] is True
    assert {kind for kind, _ in cached._memo} >= {"series", "recipes_for", "archs_for", "gpu_releases"}


def test_two_versions_in_turn_read_their_own_cache_and_parse_nothing(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32: two tfgpu versions sharing a cache directory (the slow test tests/unit/kb/test_cache_installs.py
    runs two real installs): once each has written its cache, neither parses TOML nor rewrites a file."""
    paths = {}
    for release in ("0.1.0", "0.2.0"):
        monkeypatch.setattr(store, "__version__", release)
        _clear()
        knowledge.load_kb()
        paths[release] = store._cache_file()
    assert paths["0.1.0"] != paths["0.2.0"]
    written = {p.name: p.stat().st_ino for p in cache_dir.iterdir()}
    assert len(written) == 4  # two caches, each with its devices section
    tried = _no_toml(monkeypatch)
    for release in ("0.1.0", "0.2.0", "0.1.0"):
        monkeypatch.setattr(store, "__version__", release)
        _clear()
        assert knowledge.load_kb().data_version
    assert not tried
    assert {p.name: p.stat().st_ino for p in cache_dir.iterdir()} == written
