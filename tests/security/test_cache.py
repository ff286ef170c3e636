"""Issue 16, High 6: the knowledge-base cache is data only (never pickle), is read only from a regular
file owned by this user in a directory nobody else can write, is written under unpredictable names with
O_EXCL | O_NOFOLLOW, and a corrupt one is ignored and rebuilt with a one-line note naming it."""

from __future__ import annotations

import json
import os
import pickle
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tfgpu.kb import cache as _kbcache
from tfgpu.kb import knowledge, specifiers, store, versions

pytestmark = pytest.mark.safety


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(d))
    knowledge.load_kb.cache_clear()
    yield d
    knowledge.load_kb.cache_clear()


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (Path("/nonexistent-never").touch, ())  # what a planted pickle would run (harmlessly failing)


def _planted(flag: Path) -> bytes:
    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (flag.touch, ())

    return pickle.dumps(Exploit())


def test_a_planted_pickle_never_runs(cache_dir: Path, tmp_path: Path, cli: Any) -> None:
    flag = tmp_path / "pwned"
    target = store._cache_file()
    assert target is not None
    for name in (target.name, target.with_suffix(".pickle").name):
        (cache_dir / name).write_bytes(_planted(flag))
    rc, _, err = cli("doctor", "--json", "--facts", str(TESTS / "data/facts/r740-4x-tesla-m60.json"))
    assert rc in (0, 1), err
    assert not flag.exists()
    assert f"ignored the corrupt cache {target}" in err
    assert err.count("\n") <= 2


def test_the_cache_round_trips_the_knowledge_base_with_shared_records(cache_dir: Path) -> None:
    kb = knowledge.load_kb()
    again = knowledge.load_kb.__wrapped__()
    assert again == kb
    assert again.series("linux") == kb.series("linux")
    # identity shared as it was: one Release object reached from two places stays one object
    assert again.__dict__.get("_memo") is not None


def test_decode_refuses_classes_outside_the_allow_list() -> None:
    classes = knowledge._cache_classes()
    with pytest.raises(ValueError, match="KeyError"):
        _kbcache.decode(["r", "Popen", "args", ["l", "sh"]], classes, versions.Version, specifiers.VersionSpec)
    with pytest.raises(ValueError, match="not cache data"):
        _kbcache.decode(["x", 1], classes, versions.Version, specifiers.VersionSpec)
    # a record holds its fields by position: fewer values than the class has fields, or a dangling extra
    # name without its value, is not something encode wrote
    kb = knowledge.load_kb()
    toolkit = _kbcache.encode(kb.toolkits[0], classes)
    for broken in (toolkit[:-1], [*toolkit, "_memo"]):
        with pytest.raises(ValueError, match="not cache data"):
            _kbcache.decode(broken, classes, versions.Version, specifiers.VersionSpec)


def test_records_are_cached_by_position_and_keep_what_else_they_hold(cache_dir: Path) -> None:
    # the field names are not repeated in every record (a fifth of the file was names); state beyond the
    # fields (the knowledge base's indexes) follows as name, value pairs
    classes = knowledge._cache_classes()
    kb = knowledge.load_kb()
    toolkit = kb.toolkits[0]
    encoded = _kbcache.encode(toolkit, classes)
    assert encoded[:2] == ["r", "Toolkit"]
    assert len(encoded) == 2 + len(type(toolkit).__record_fields__)
    assert _kbcache.decode(encoded, classes, versions.version, specifiers.VersionSpec) == toolkit
    whole = _kbcache.encode(kb, classes)
    assert whole[2 + len(knowledge.KnowledgeBase.__record_fields__)] == "_memo"
    again = _kbcache.decode(whole, classes, versions.version, specifiers.VersionSpec)
    assert again == kb
    assert again._memo.keys() == kb._memo.keys()
    with pytest.raises(TypeError):
        _kbcache.encode(_Boom(), classes)


def test_deferred_fields_are_text_until_read_and_hold_only_what_encode_wrote() -> None:
    """tfgpu.kb.cache.defer_fields: a deferred field is its own encoded form as text, with records of its own (a
    reference never crosses into or out of it); it is decoded with the same allow-list when first read, and a
    planted state name or a deferred value elsewhere is refused like anything else encode did not write."""
    from tfgpu.core.record import record

    @record
    class Holder:
        name: str
        rows: tuple[Any, ...] = ()
        more: tuple[Any, ...] = ()

    _kbcache.defer_fields(Holder, ("rows",))
    assert Holder.rows == ()  # the class still answers with the default
    kb = knowledge.load_kb()
    classes = {**knowledge._cache_classes(), "Holder": Holder}
    shared = kb.toolkits[0]
    holder = Holder("x", rows=(shared, shared), more=(shared,))
    encoded = json.loads(json.dumps(_kbcache.encode(holder, classes)))
    assert encoded[3][0] == "z"
    assert isinstance(encoded[3][1], str)
    assert json.loads(encoded[3][1])[2][0] == "@"  # the second row refers to the first, inside the text
    again = _kbcache.decode(encoded, classes, versions.version, specifiers.VersionSpec)
    assert "rows" not in again.__dict__  # not decoded yet
    assert again.more == (shared,)
    assert again.rows == (shared, shared)
    assert again.rows[0] is again.rows[1]
    assert again == holder
    assert _kbcache.encode(again, classes) == encoded  # written back the same
    for planted in ([*encoded, "__deferred__", ["l"]],  # a state name that is the pending texts' own
                    [*encoded[:3], ["z", 1], *encoded[4:]],  # deferred text that is not text
                    [*encoded[:4], ["z", encoded[3][1]]]):  # a deferred value where none is deferred
        with pytest.raises(ValueError, match="not cache data"):
            _kbcache.decode(planted, classes, versions.version, specifiers.VersionSpec)
    outside = [*encoded[:3], ["z", json.dumps(["t", ["r", "Popen", "rm"]])], *encoded[4:]]
    lazy = _kbcache.decode(outside, classes, versions.version, specifiers.VersionSpec)
    with pytest.raises(ValueError, match="rows"):
        _ = lazy.rows  # refused when read, as the whole file would have been
    lazy = _kbcache.decode(outside, classes, versions.version, specifiers.VersionSpec, fallback=lambda name: ("ok",))
    assert lazy.rows == ("ok",)
    with pytest.raises(TypeError):
        _kbcache.defer_fields(Holder, ("nothing",))


def _refused(path: Path) -> str:
    with pytest.raises(_kbcache.CacheRefused) as info:
        _kbcache.read(path)
    return str(info.value)


def test_a_symlinked_cache_file_is_not_read(cache_dir: Path, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.json"
    real.write_text('["t"]')
    link = cache_dir / "kb.json"
    link.symlink_to(real)
    assert "it is a symlink" in _refused(link)


def test_a_cache_in_a_directory_others_can_write_is_not_read(cache_dir: Path) -> None:
    f = cache_dir / "kb.json"
    f.write_text('["t"]')
    cache_dir.chmod(0o777)
    try:
        assert "writable by other users" in _refused(f)
        cache_dir.chmod(0o1777)  # sticky, like /tmp: others cannot replace our file
        assert _kbcache.read(f) == ["t"]
    finally:
        cache_dir.chmod(0o700)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user owns needs root")
def test_a_cache_file_owned_by_another_user_is_not_read_nor_replaced(cache_dir: Path, cli: Any) -> None:
    target = store._cache_file()
    assert target is not None
    target.write_text("[]")
    os.chown(target, 65534, 65534)
    assert "belongs to another user" in _refused(target)
    knowledge.load_kb.cache_clear()
    knowledge.load_kb()
    assert target.stat().st_uid == 65534  # not rewritten either


def test_writes_use_unpredictable_names_and_never_follow_a_planted_link(cache_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = cache_dir / "kb.json"
    # the old predictable temporary name, planted as a link to a file the victim owns
    (cache_dir / f"kb.{os.getpid()}.tmp").symlink_to(victim)
    target.symlink_to(victim)  # and the final name too: the rename replaces the link itself
    _kbcache.write(target, ["t", 1])
    assert victim.read_text() == "keep"
    assert not target.is_symlink()
    assert _kbcache.read(target) == ["t", 1]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_truncated_cache_is_rebuilt_with_a_note(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = knowledge.load_kb()
    target = store._cache_file()
    assert target is not None
    target.write_bytes(target.read_bytes()[:1000])
    knowledge.load_kb.cache_clear()
    assert knowledge.load_kb() == kb
    err = capsys.readouterr().err
    assert err == f"tfgpu: note: ignored the corrupt cache {target}; rebuilt it\n"
    knowledge.load_kb.cache_clear()
    knowledge.load_kb()
    assert capsys.readouterr().err == ""  # rebuilt: read cleanly next time


def test_a_cache_holding_a_json_object_is_rebuilt_with_a_note(
    cache_dir: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """encode writes lists only; decode takes every other value as it is (no call per number or string), so a
    file with a JSON object anywhere (a dict where a record's field should be) is not a cache at all."""
    kb = knowledge.load_kb()
    target = store._cache_file()
    assert target is not None
    planted = re.sub(r",-?\d+(?=[,\]])", ',{"__class__": "Popen"}', target.read_text(), count=1)
    assert isinstance(json.loads(planted), list)  # valid JSON: only the object makes it foreign
    target.write_text(planted)
    with pytest.raises(_kbcache.CacheRefused, match="corrupt"):
        _kbcache.read(target)
    knowledge.load_kb.cache_clear()
    assert knowledge.load_kb() == kb
    assert capsys.readouterr().err == f"tfgpu: note: ignored the corrupt cache {target}; rebuilt it\n"


def test_an_absent_optional_table_keeps_the_cache_on(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = store._cache_file()
    monkeypatch.setattr(store, "KB_FILES", (*store.KB_FILES, "no-such-table"))
    after = store._cache_file()
    assert after is not None  # it returned None: every doctor ran without a cache
    assert after != before


def test_writing_the_cache_removes_the_old_pickled_caches(cache_dir: Path, tmp_path: Path) -> None:
    # tfgpu before the data-only cache wrote kb-<key>.pickle files; nothing reads them now, so the next cache
    # written removes them (ours only: a symlink or a file that is not a regular file stays)
    old = cache_dir / "kb-0123456789abcdef.pickle"
    old.write_bytes(b"\x80\x04N.")
    elsewhere = tmp_path / "not-ours.pickle"
    elsewhere.write_bytes(b"x")
    (cache_dir / "kb-fedcba9876543210.pickle").symlink_to(elsewhere)
    knowledge.load_kb()
    assert not old.exists()
    assert (cache_dir / "kb-fedcba9876543210.pickle").is_symlink()
    assert elsewhere.read_bytes() == b"x"
    assert [p.name for p in cache_dir.glob("kb-*.json") if p.name.count(".") == 1]
