"""Red-team attacks through conda package contents: a package whose metadata names paths outside the
prefix, symlinks out of it, or link scripts. Real rattler installer, real archives, offline.

Before the fix, ``../`` paths in info/paths.json were hard-linked beside the prefix (rattler joins
``prefix/PATH`` as written) and an absolute path made rattler panic and abort the whole Python process
(exit 134, no message, a partial directory left behind)."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from tests.channel_builder import index_channel
from tests.conftest import needs_engine
from tfgpu.backends import rattler as engine
from tfgpu.backends.rattler import archives
from tfgpu.core.errors import StepFailed

pytestmark = [pytest.mark.safety, needs_engine]

PAYLOAD = b"pwned\n"


def _member(tar: tarfile.TarFile, name: str, data: bytes = b"", *, symlink_to: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.mtime = 1_600_000_000
    if symlink_to:
        info.type = tarfile.SYMTYPE
        info.linkname = symlink_to
        tar.addfile(info)
    else:
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))


def _entry(path: str, data: bytes = b"", kind: str = "hardlink") -> dict[str, object]:
    out: dict[str, object] = {"_path": path, "path_type": kind}
    if kind == "hardlink":
        out.update(sha256=hashlib.sha256(data).hexdigest(), size_in_bytes=len(data))
    return out


def hostile_package(root: Path, name: str, members: list[tuple[str, bytes, str]],
                    paths: list[dict[str, object]]) -> Path:
    """A .tar.bz2 conda package with exactly these tar members (name, data, symlink target) and this
    info/paths.json: what a hostile channel or lock can serve."""
    index = {"name": name, "version": "1.0", "build": "0", "build_number": 0, "depends": [], "license": "MIT",
             "subdir": "linux-64", "arch": "x86_64", "platform": "linux", "timestamp": 1}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _member(tar, "info/index.json", json.dumps(index).encode())
        _member(tar, "info/paths.json", json.dumps({"paths": paths, "paths_version": 1}).encode())
        _member(tar, "info/files", "".join(f"{p['_path']}\n" for p in paths).encode())
        for mname, data, target in members:
            _member(tar, mname, data, symlink_to=target)
    (root / "linux-64").mkdir(parents=True, exist_ok=True)
    out = root / "linux-64" / f"{name}-1.0-0.tar.bz2"
    out.write_bytes(bz2.compress(buf.getvalue()))
    return out


def _install(tmp_path: Path, specs: list[str]) -> Path:
    index_channel(tmp_path / "chan")
    prefix = tmp_path / "envs" / "e"
    engine.create_env(specs, prefix, [(tmp_path / "chan").as_uri()], platform="linux-64", virtual_packages=(),
                      detect=False, cache_dir=tmp_path / "cache")
    return prefix


def test_attack_package_path_with_dotdot_is_refused_before_linking(tmp_path: Path) -> None:
    # share/payload is extracted into the cache; a second entry climbs out of the prefix to the same
    # relative spot, so rattler's link (cache/PATH -> prefix/PATH) finds a source and writes beside the env
    rel = "share/payload"
    escape = "../../../cache/pkgs/evil-1.0-0/" + rel
    hostile_package(tmp_path / "chan", "evil", [(rel, PAYLOAD, "")], [_entry(rel, PAYLOAD), _entry(escape, PAYLOAD)])
    with pytest.raises(StepFailed, match="outside the environment") as err:
        _install(tmp_path, ["evil"])
    assert "../../../cache" in err.value.message
    assert not (tmp_path.parent / "cache").exists() or not any((tmp_path.parent / "cache").rglob("payload"))
    assert not (tmp_path / "envs" / "e").exists()
    assert engine.partial_dirs(tmp_path / "envs" / "e") == []


def test_attack_absolute_path_in_a_package_is_refused_not_a_process_abort(tmp_path: Path) -> None:
    target = tmp_path / "outside" / "abs"
    hostile_package(tmp_path / "chan", "evil", [(str(target).lstrip("/"), PAYLOAD, "")], [_entry(str(target), PAYLOAD)])
    with pytest.raises(StepFailed, match="outside the environment"):
        _install(tmp_path, ["evil"])
    assert not target.exists()
    assert not (tmp_path / "envs").exists()  # the parent tfgpu would have made is not left behind


def test_attack_old_package_without_paths_json_is_checked_through_info_files(tmp_path: Path) -> None:
    buf = io.BytesIO()
    index = {"name": "old", "version": "1.0", "build": "0", "build_number": 0, "depends": [], "subdir": "linux-64"}
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _member(tar, "info/index.json", json.dumps(index).encode())
        _member(tar, "info/files", b"share/ok\n../../escape\n")
        _member(tar, "share/ok", PAYLOAD)
    archive = tmp_path / "old-1.0-0.tar.bz2"
    archive.write_bytes(bz2.compress(buf.getvalue()))
    assert engine.unsafe_package_paths(archive) == ["../../escape"]


@pytest.mark.parametrize("path", ["a/../../b", "..", "/etc/passwd", "\\\\server\\share", "x/\0/y"])
def test_attack_path_shapes_that_leave_the_prefix(tmp_path: Path, path: str) -> None:
    archive = hostile_package(tmp_path, "p", [("share/x", PAYLOAD, "")], [_entry("share/x", PAYLOAD), _entry(path)])
    assert engine.unsafe_package_paths(archive) == [path]


def test_attack_ordinary_package_paths_pass(tmp_path: Path) -> None:
    ok = ["bin/python3.11", "lib/python3.11/site-packages/a..b/x.py", "share/..hidden", "etc/conda/activate.d/x.sh"]
    archive = hostile_package(tmp_path, "p", [(p, PAYLOAD, "") for p in ok], [_entry(p, PAYLOAD) for p in ok])
    assert engine.unsafe_package_paths(archive) == []


def test_attack_symlink_dir_from_one_package_does_not_redirect_anothers_files(tmp_path: Path) -> None:
    # held before: rattler moves the second package's file aside (__clobbers__) instead of writing through
    outside = tmp_path / "outside"
    outside.mkdir()
    hostile_package(tmp_path / "chan", "evil", [("lib", b"", str(outside))], [_entry("lib", kind="softlink")])
    hostile_package(tmp_path / "chan", "evil2", [("lib/through", PAYLOAD, "")], [_entry("lib/through", PAYLOAD)])
    try:
        _install(tmp_path, ["evil", "evil2"])
    except StepFailed:
        pass
    assert list(outside.iterdir()) == []


def test_attack_post_link_script_is_never_run(tmp_path: Path) -> None:
    # held before: tfgpu links with execute_link_scripts=False
    mark = tmp_path / "ran"
    script = f"#!/bin/sh\ntouch {mark}\n".encode()
    hostile_package(tmp_path / "chan", "evil", [("bin/.evil-post-link.sh", script, "")],
                    [_entry("bin/.evil-post-link.sh", script)])
    _install(tmp_path, ["evil"])
    assert not mark.exists()


# --------------------------------------------------------------------------- lock URLs that are not archives

def _rec(url: str) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(url=url, file_name="p-1.0-0.tar.bz2", sha256=bytes(range(32)), md5=None)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_attack_lock_url_naming_a_fifo_or_device_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    # before: a FIFO hung `create --from-lock` (past 40 s, no bound) and file:///dev/zero would have filled
    # the disk before the hash was ever checked
    import time

    if kind == "fifo":
        src = tmp_path / "fifo"
        os.mkfifo(src)
    elif kind == "dev_zero":
        src = Path("/dev/zero")
    else:
        src = tmp_path
    start = time.monotonic()
    with pytest.raises(StepFailed, match=r"not a regular file|Is a directory|cannot fetch"):
        archives.verify_archives([_rec(src.as_uri())], tmp_path / "store")
    assert time.monotonic() - start < 5
    assert list((tmp_path / "store").iterdir()) == []  # no partial download left behind


# --------------------------------------------------------------------------- the verified store itself

@pytest.mark.parametrize("plant", ["world_writable", "symlink", "parent_world_writable"])
def test_attack_verified_store_others_can_write_is_refused(tmp_path: Path, plant: str) -> None:
    # before: the store was used whatever its owner and mode: whoever can write it can swap an archive
    # between tfgpu's hash check and rattler's extraction (a shared RATTLER_CACHE_DIR)
    archive = tmp_path / "p-1.0-0.tar.bz2"
    archive.write_bytes(b"package bytes")
    rec = _rec(archive.as_uri())
    rec.sha256 = hashlib.sha256(b"package bytes").digest()  # type: ignore[attr-defined]
    cache = tmp_path / "cache"
    store = cache / "tfgpu-verified"
    if plant == "world_writable":
        store.mkdir(parents=True)
        store.chmod(0o777)
    elif plant == "symlink":
        cache.mkdir()
        (tmp_path / "elsewhere").mkdir()
        store.symlink_to(tmp_path / "elsewhere")
    else:
        cache.mkdir()
        cache.chmod(0o777)
    with pytest.raises(StepFailed, match=r"others can write|not a directory of yours|symlink"):
        archives.verify_archives([rec], store)


def test_a_private_store_is_used(tmp_path: Path) -> None:
    archive = tmp_path / "p-1.0-0.tar.bz2"
    archive.write_bytes(b"package bytes")
    rec = _rec(archive.as_uri())
    rec.sha256 = hashlib.sha256(b"package bytes").digest()  # type: ignore[attr-defined]
    (out,) = archives.verify_archives([rec], tmp_path / "cache" / "tfgpu-verified")
    assert out.url.startswith((tmp_path / "cache" / "tfgpu-verified").as_uri())


def test_attack_md5_only_lock_entry_is_refused(tmp_path: Path) -> None:
    # before: an entry whose sha256 was removed was checked against its md5 only (collisions are practical)
    archive = tmp_path / "p-1.0-0.tar.bz2"
    archive.write_bytes(b"package bytes")
    rec = _rec(archive.as_uri())
    rec.sha256 = None  # type: ignore[attr-defined]
    rec.md5 = hashlib.md5(b"package bytes").digest()  # type: ignore[attr-defined]
    with pytest.raises(StepFailed, match="sha256"):
        archives.verify_archives([rec], tmp_path / "cache" / "tfgpu-verified")
