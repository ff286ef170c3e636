"""`tfgpu kb update` / `tfgpu kb status` (issue 31, part 4) against a real HTTP server on loopback: a newer bundle is
verified, read by the loader and used from then on; a tampered bundle, a wrong hash, a truncated download, a
downgrade, no network, data the loader refuses, a hostile tar and a bad index are refused, and the knowledge in use
stays as it was. Bundles are made from compat/ by scripts/build_kb_bundle.py, as the project publishes them."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import socket
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import REPO
from tests.conftest import load_file_module
from tfgpu.kb import bundles as store
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import bundled_compat_dir, compat_dir
from tfgpu.tools import kbupdate
from tfgpu.tools.kbupdate import UpdateRefused

KB_SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/kb.schema.json").read_text(encoding="utf-8"))
BUNDLED = bundled_compat_dir()
BUNDLED_VERSION, BUNDLED_DATE = store.read_meta(BUNDLED)
NEWER = "2099.01.02"


@pytest.fixture(scope="module")
def script():  # type: ignore[no-untyped-def]
    return load_file_module(REPO / "scripts" / "build_kb_bundle.py", "tfgpu_script_build_kb_bundle")


def _compat_files(version: str = NEWER, **changes: bytes) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted(BUNDLED.glob("*.toml"))}
    files["meta.toml"] = files["meta.toml"].replace(f'"{BUNDLED_VERSION}"'.encode(), f'"{version}"'.encode())
    files.update(changes)
    return files


class Site:
    """A web server on 127.0.0.1 serving ``files`` (path -> bytes); ``cut`` paths send half their body and hang up."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut: set[str] = set()
        self.redirect: dict[str, str] = {}
        self.requests: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append(self.path)
                if self.path in site.redirect:
                    self.send_response(302)
                    self.send_header("Location", site.redirect[self.path])
                    self.end_headers()
                    return
                body = site.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if self.path in site.cut else body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def publish(self, script, files: dict[str, bytes], *, version: str = NEWER,  # type: ignore[no-untyped-def]
                entry: dict[str, object] | None = None, blob: bytes | None = None) -> dict[str, object]:
        """Put a bundle of ``files`` and an index naming it on the site (``entry``: fields to change in the index,
        ``blob``: other bytes served in the bundle's place)."""
        made = script.make_tar(files)
        name = f"tfgpu-kb-{version}.tar.gz"
        index_entry = {"data_version": version, "date": "2099-01-02", "url": name, "size": len(made),
                       "sha256": hashlib.sha256(made).hexdigest(), **(entry or {})}
        self.files[f"/{name}"] = made if blob is None else blob
        self.files["/index.json"] = json.dumps({"schema": kbupdate.INDEX_SCHEMA, "bundles": [index_entry]}).encode()
        return index_entry

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tfgpu's home is the test's; fetched knowledge counts (conftest pins TFGPU_KB_DATA=bundled for the rest)."""
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TFGPU_KB_DATA", raising=False)
    monkeypatch.delenv("TFGPU_KB_URL", raising=False)
    kbupdate._clear_caches()
    yield tmp_path / "home"
    kbupdate._clear_caches()  # the next test reads its own knowledge again


def _refused(run: Callable[[], object], match: str) -> None:
    before = sorted(p.name for _, p in store.fetched_versions())
    with pytest.raises(UpdateRefused, match=match):
        run()
    assert sorted(p.name for _, p in store.fetched_versions()) == before  # nothing new is in use
    assert list(store.store_dir().glob(".staging-*")) == []  # nor half-written
    kbupdate._clear_caches()
    assert load_kb().data_version == (before[-1] if before else BUNDLED_VERSION)


def test_a_newer_bundle_is_fetched_verified_and_used(script, site: Site, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    entry = site.publish(script, _compat_files())
    result = kbupdate.update(f"{site.base}/index.json")
    assert result["updated"] is True
    assert result["data_version"] == NEWER
    assert result["sha256"] == entry["sha256"]
    assert result["previous"] == {"source": "bundled", "data_version": BUNDLED_VERSION}
    kbupdate._clear_caches()
    assert compat_dir() == home / "kb" / NEWER
    assert load_kb().data_version == NEWER
    # the doctor now judges with it, and says so
    code, out, _ = cli("doctor", "--json", "--facts", str(REPO / "tests/data/facts/mx150-laptop-ubuntu1804.json"))
    doc = json.loads(out)
    assert code == 0
    assert doc["data_version"] == NEWER
    assert doc["knowledge"]["source"] == "fetched"
    code, out, _ = cli("kb", "status", "--json")
    status = json.loads(out)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(status, KB_SCHEMA)
    jsonschema.validate(result, KB_SCHEMA)
    jsonschema.validate(json.loads(site.files["/index.json"]), KB_SCHEMA)
    assert status["in_use"]["source"] == "fetched"
    assert status["in_use"]["data_version"] == NEWER
    assert status["bundled"]["data_version"] == BUNDLED_VERSION
    assert status["fetched"][0]["sha256"] == entry["sha256"]
    # the same index again: nothing to do
    assert kbupdate.update(f"{site.base}/index.json")["updated"] is False
    code, out, _ = cli("kb", "update", "--from", f"{site.base}/index.json")
    assert code == 0
    assert "already up to date" in out


def test_the_bundle_is_the_same_bytes_the_script_publishes(script, tmp_path: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    """scripts/build_kb_bundle.py's output directory is an update source as it is (a local mirror), and building it
    twice gives the same sha256."""
    compat = tmp_path / "compat"
    compat.mkdir()
    for name, content in _compat_files().items():
        (compat / name).write_bytes(content)
    first = script.build(compat, tmp_path / "out")
    assert script.build(compat, tmp_path / "out") == first
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads((tmp_path / "out" / "index.json").read_text(encoding="utf-8")), KB_SCHEMA)
    assert kbupdate.update(str(tmp_path / "out"))["updated"] is True
    assert store.fetched_versions()[-1][1].name == NEWER


def test_a_tampered_bundle_is_refused(script, site: Site, home: Path) -> None:  # type: ignore[no-untyped-def]
    good = script.make_tar(_compat_files())
    evil = script.make_tar(_compat_files(**{"cuda.toml": (BUNDLED / "cuda.toml").read_bytes().replace(b"525", b"999")}))
    site.publish(script, _compat_files(), blob=evil)
    assert len(evil) != len(good) or evil != good
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "does not match the index|longer than|truncated")
    # the same size, one byte changed
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0x01
    site.publish(script, _compat_files(), blob=bytes(flipped))
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "does not match the index: sha256")


def test_a_wrong_hash_in_the_index_is_refused(script, site: Site, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    site.publish(script, _compat_files(), entry={"sha256": "0" * 64})
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "does not match the index")
    code, _, err = cli("kb", "update", "--from", f"{site.base}/index.json")
    assert code == 2
    assert "does not match the index" in err
    assert "Traceback" not in err


def test_a_truncated_download_is_refused(script, site: Site, home: Path) -> None:  # type: ignore[no-untyped-def]
    entry = site.publish(script, _compat_files())
    site.cut.add(f"/{entry['url']}")  # the server hangs up half-way through the body
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "truncated")
    site.cut.clear()
    made = script.make_tar(_compat_files())
    site.publish(script, _compat_files(), blob=made[:-100])  # a mirror holding a cut copy
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "truncated")


def test_a_downgrade_is_refused(script, site: Site, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    site.publish(script, _compat_files())
    assert kbupdate.update(f"{site.base}/index.json")["updated"] is True
    kbupdate._clear_caches()
    older = "2098.06.01"  # newer than the bundled data, older than the data now in use
    site.publish(script, _compat_files(older), version=older)
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "refusing to downgrade")
    site.publish(script, _compat_files("2001.01.01"), version="2001.01.01")  # older than the bundled data too
    code, _, err = cli("kb", "update", "--from", f"{site.base}/index.json")
    assert code == 2
    assert "older than the knowledge in use" in err


def test_offline_is_a_clean_failure(home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = cli("kb", "update", "--from", f"http://127.0.0.1:{port}/index.json")
    assert code == 1
    assert "cannot fetch" in err
    assert "Traceback" not in err
    assert store.fetched_versions() == []


def test_data_the_loader_refuses_is_refused(script, site: Site, home: Path) -> None:  # type: ignore[no-untyped-def]
    cuda = (BUNDLED / "cuda.toml").read_text(encoding="utf-8")
    bad_schema = cuda.replace('schema = "tfgpu.compat.cuda/1"', 'schema = "tfgpu.compat.cuda/2"').encode()
    assert bad_schema != cuda.encode()
    site.publish(script, _compat_files(**{"cuda.toml": bad_schema}))
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "does not load: DataError: .*schema")
    site.publish(script, _compat_files(**{"rules.toml": b'schema = "tfgpu.compat.rules/1"\nrules = [\n'}))
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "does not load")
    # the index and the bundle disagree on the version
    site.publish(script, _compat_files("2099.05.05"))
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "data is version 2099.05.05, the index says")


def test_a_bundle_lacking_a_table_is_refused(script, site: Site, home: Path) -> None:  # type: ignore[no-untyped-def]
    files = _compat_files()
    del files["verified.toml"]  # optional for the loader, but the bundled data has it: an update never drops one
    site.publish(script, files)
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "lacks verified.toml")


def _tar_with(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    import gzip
    import io

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if info.isreg() else None)
    return gzip.compress(raw.getvalue())


@pytest.mark.parametrize("hostile", ["traversal", "absolute", "symlink", "subdir", "code", "duplicate", "huge"])
def test_a_hostile_tar_is_refused_without_writing_anything(hostile: str, site: Site, home: Path,
                                                           tmp_path: Path) -> None:
    files = _compat_files()
    members = [(_info(name, len(content)), content) for name, content in files.items()]
    if hostile == "traversal":
        members.append((_info("../../escaped.toml", 3), b"x=1"))
    elif hostile == "absolute":
        members.append((_info(str(tmp_path / "abs.toml"), 3), b"x=1"))
    elif hostile == "symlink":
        link = tarfile.TarInfo("cuda.toml")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        members = [m for m in members if m[0].name != "cuda.toml"] + [(link, b"")]
    elif hostile == "subdir":
        members.append((_info("compat/cuda.toml", 3), b"x=1"))
    elif hostile == "code":
        members.append((_info("__init__.py", 16), b"import os  # no!"))
    elif hostile == "duplicate":
        members.append((_info("cuda.toml", 3), b"x=1"))
    elif hostile == "huge":
        big = b"#" * (kbupdate.MAX_FILE_BYTES + 1)
        members = [m for m in members if m[0].name != "explain.toml"] + [(_info("explain.toml", len(big)), big)]
    blob = _tar_with(members)
    site.files["/b.tar.gz"] = blob
    site.files["/index.json"] = json.dumps({"schema": kbupdate.INDEX_SCHEMA, "bundles": [
        {"data_version": NEWER, "url": "b.tar.gz", "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}]}).encode()
    _refused(lambda: kbupdate.update(f"{site.base}/index.json"), "not one of the knowledge base's files|too large")
    assert not (tmp_path / "abs.toml").exists()
    assert not list(tmp_path.rglob("escaped.toml"))


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    return info


@pytest.mark.parametrize(("index", "match"), [
    (b"<html>not json</html>", "not JSON"),
    (json.dumps({"schema": "other/1", "bundles": []}).encode(), "not a knowledge index"),
    (json.dumps({"schema": kbupdate.INDEX_SCHEMA, "bundles": []}).encode(), "lists no bundle"),
    (json.dumps({"schema": kbupdate.INDEX_SCHEMA, "bundles": [{"data_version": "latest", "url": "x", "size": 1,
                                                                "sha256": "0" * 64}]}).encode(), "malformed"),
    (json.dumps({"schema": kbupdate.INDEX_SCHEMA, "bundles": [{"data_version": NEWER, "url": "http://example.com/b",
                                                                "size": 1, "sha256": "0" * 64}]}).encode(), "refusing"),
])
def test_a_bad_index_is_refused(index: bytes, match: str, site: Site, home: Path) -> None:
    site.files["/index.json"] = index
    with pytest.raises((UpdateRefused, kbupdate.UsageError), match=match):
        kbupdate.update(f"{site.base}/index.json")
    assert store.fetched_versions() == []


def test_the_index_can_be_pinned_by_its_hash(script, site: Site, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    site.publish(script, _compat_files())
    pin = hashlib.sha256(site.files["/index.json"]).hexdigest()
    code, _, err = cli("kb", "update", "--from", f"{site.base}/index.json", "--sha256", "a" * 64)
    assert code == 2
    assert "pinned sha256" in err
    code, _, err = cli("kb", "update", "--from", f"{site.base}/index.json", "--sha256", "not-a-hash")
    assert code == 2
    assert "is not a sha256" in err
    code, out, err = cli("kb", "update", "--from", f"{site.base}/index.json", "--sha256", pin.upper())
    assert code == 0, err
    assert "updated" in out


def test_only_https_or_this_machine(site: Site, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("kb", "update", "--from", "http://example.com/index.json")
    assert code == 2
    assert "only https" in err
    site.redirect["/index.json"] = "http://example.com/index.json"  # a loopback mirror sending us elsewhere
    code, _, err = cli("kb", "update", "--from", f"{site.base}/index.json")
    assert code == 2
    assert "refusing to fetch knowledge from 'http://example.com/index.json'" in err
    assert kbupdate.check_url("https://example.com/i.json") == "https://example.com/i.json"
    assert kbupdate.check_url("http://[::1]:8000/i.json") == "http://[::1]:8000/i.json"
    with pytest.raises(kbupdate.UsageError):
        kbupdate.check_url("ftp://example.com/i.json")


def test_the_newer_of_bundled_and_fetched_is_used(home: Path) -> None:
    """A fetched version older than the bundled data (tfgpu itself was upgraded since) is not used."""
    old = home / "kb" / "2001.01.01"
    old.mkdir(parents=True, mode=0o700)
    os.chmod(home / "kb", 0o700)
    for name, content in _compat_files("2001.01.01").items():
        (old / name).write_bytes(content)
    (old / store.RECORD).write_text("{}", encoding="utf-8")
    assert store.fetched_versions()[-1][1] == old
    assert store.newer_than(BUNDLED) is None
    new = home / "kb" / NEWER
    new.mkdir(mode=0o700)
    for name, content in _compat_files().items():
        (new / name).write_bytes(content)
    assert store.newer_than(BUNDLED) is None  # no bundle.json yet: half-written, never used
    (new / store.RECORD).write_text("{}", encoding="utf-8")
    assert store.newer_than(BUNDLED) == new
    assert store.newer_than(BUNDLED, {"TFGPU_KB_DATA": "bundled"}) is None
    os.chmod(home / "kb", 0o777)  # a store others can write is not trusted
    assert store.newer_than(BUNDLED) is None
    os.chmod(home / "kb", 0o700)
    (new / "meta.toml").write_bytes(_compat_files("2099.09.09")["meta.toml"])  # the name and the data disagree
    assert store.newer_than(BUNDLED) is None
