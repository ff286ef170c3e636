"""Issue 16, High 4 and 5: every package of `create --from-lock` is checked against the lock's sha256,
whatever its URL scheme (file:// included), before it is linked; and a tampered package already in
rattler's shared cache is never linked for a lock whose hashes say otherwise. Real py-rattler, a local
file:// channel (tests/channel_builder.py)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.channel_builder import Pkg, tf_channel, write_package
from tests.conftest import LOCK_FACTS, needs_engine
from tfgpu.backends import rattler as engine
from tfgpu.backends.rattler import archives

pytestmark = [pytest.mark.safety, pytest.mark.faults, pytest.mark.real_subprocess, needs_engine]
Cli = Callable[..., tuple[int, str, str]]
EVIL = Pkg("_tflow_select", "2.1.0", "gpu", files={"bin/evil": "#!/bin/sh\necho pwned\n"})


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "rattler-cache"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    (tmp_path / "no-config.toml").write_text("")
    facts = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "wsl": None}, "gpus": [],
             "driver": {"version": None, "cuda": None}}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    return tmp_path


def _lock(cli: Cli, channel: Path, out: Path) -> Path:
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--channel", channel.as_uri(), "-o", str(out))
    assert code == 0, err
    return out


def _create(cli: Cli, lock: Path, prefix: Path, tmp_path: Path) -> tuple[int, str, str]:
    return cli("create", "--from-lock", str(lock), "--prefix", str(prefix), "--yes", "--no-smoke", "--allow-cpu",
               "--facts", str(tmp_path / "facts.json"))


def test_a_tampered_file_url_package_is_refused(cli: Cli, tmp_path: Path) -> None:
    channel = tf_channel(tmp_path / "ch")
    lock = _lock(cli, channel, tmp_path / "conda-lock.yml")
    write_package(EVIL, channel / "linux-64")  # same name and URL, other bytes; the lock is untouched
    prefix = tmp_path / "env"
    code, out, err = _create(cli, lock, prefix, tmp_path)
    assert code == 1, (out, err)
    assert "_tflow_select-2.1.0-gpu.tar.bz2" in err
    assert "refusing to install a package that is not the one locked" in err
    assert not prefix.exists()


def test_zeroed_hashes_in_the_lock_are_refused(cli: Cli, tmp_path: Path) -> None:
    channel = tf_channel(tmp_path / "ch")
    lock = _lock(cli, channel, tmp_path / "conda-lock.yml")
    text = lock.read_text()
    text = re.sub(r"sha256: '?[0-9a-f]{64}'?", "sha256: '" + "0" * 64 + "'", text)
    text = re.sub(r"md5: '?[0-9a-f]{32}'?", "md5: '" + "0" * 32 + "'", text)
    lock.write_text(text)
    write_package(EVIL, channel / "linux-64")
    prefix = tmp_path / "env"
    code, out, err = _create(cli, lock, prefix, tmp_path)
    assert code == 1, (out, err)
    assert "the lock says 0000" in err
    assert not prefix.exists()


def test_a_tampered_package_in_rattlers_cache_is_not_linked(cli: Cli, tmp_path: Path) -> None:
    genuine = tf_channel(tmp_path / "genuine")
    lock = _lock(cli, genuine, tmp_path / "conda-lock.yml")
    # another user of the shared cache (pixi, a shared RATTLER_CACHE_DIR) installed these packages once;
    # then the extracted copy in the cache was changed: same name, version, build and recorded hash
    cache = Path(os.environ["RATTLER_CACHE_DIR"])
    engine.create_env(["cudatoolkit=10.1"], tmp_path / "throwaway", [genuine.as_uri()], platform="linux-64",
                      detect=False, cache_dir=cache)
    (cached,) = cache.glob("pkgs/cudatoolkit-10.1.243-h6bb024c_0/lib/libcudart.so.10.1")
    cached.write_text("tampered cudart\n")
    prefix = tmp_path / "env"
    code, out, err = _create(cli, lock, prefix, tmp_path)
    assert code == 0, (out, err)
    assert (prefix / "lib" / "libcudart.so.10.1").read_text() == "fake cudart 10.1\n"


def test_verified_archives_are_hashed_again_before_each_use(tmp_path: Path) -> None:
    from tfgpu.backends.lockfiles import read_conda_lock

    channel = tf_channel(tmp_path / "ch")
    from tfgpu.cli.app import main

    assert main(["lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--channel", channel.as_uri(), "-o", str(tmp_path / "l.yml")]) == 0
    records = read_conda_lock(tmp_path / "l.yml").conda_records("linux-64")
    store = tmp_path / "store"
    first = archives.verify_archives(records, store)
    kept = Path(first[0].url.removeprefix("file://"))
    kept.write_bytes(b"tampered in the store")
    again = archives.verify_archives(read_conda_lock(tmp_path / "l.yml").conda_records("linux-64"), store)
    assert Path(again[0].url.removeprefix("file://")).read_bytes() != b"tampered in the store"
