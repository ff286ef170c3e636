"""`tfgpu lock` and lockfiles: conda-lock's format written by tfgpu, read back by rattler, checked by
conda-lock's own parser and renderer; `lock` then install-from-lock reproduces the environment."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import TESTS
from tests.conftest import LOCK_FACTS, needs_engine
from tfgpu.backends import lockfiles
from tfgpu.backends import rattler as engine
from tfgpu.backends.rattler import virtual
from tfgpu.build import lock as locking
from tfgpu.core.errors import InputError, UsageError
from tfgpu.core.record import replace

DATA = TESTS / "data" / "lock"
RECORDED = DATA / "conda-lock-4912053-install-with-pip-deps.yml"
Cli = Callable[..., tuple[int, str, str]]

pytestmark = needs_engine



@pytest.fixture
def locked(cli: Cli, channel: Path, tmp_path: Path) -> Path:
    out = tmp_path / "conda-lock.yml"
    code, stdout, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "--channel", channel.as_uri(),
                            "--cache-dir", str(tmp_path / "cache"), "-o", str(out))
    assert code == 0, err
    assert f"wrote {out}" in stdout
    return out


def installed(prefix: Path) -> set[tuple[str, str, str, str]]:
    out = set()
    for f in (prefix / "conda-meta").glob("*.json"):
        r = json.loads(f.read_text())
        out.add((r["name"], r["version"], r["build"], r["sha256"]))
    return out


# --------------------------------------------------------------------------- knowledge base -> specs

NO_GPU = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64"}}


def test_conda_lock_target_for_tf22_is_anacondas_metapackage_with_python38() -> None:
    from tfgpu.kb.knowledge import load_kb

    kb = load_kb()
    t = locking.lock_target(kb, NO_GPU, "2.2.0", "linux-64", backend="rattler")
    assert t.recipe == "conda-anaconda-tensorflow-gpu"
    assert t.specs == ("python=3.8", "tensorflow-gpu=2.2.0")
    assert t.channels == ("defaults",)
    assert t.cuda == "10.1"
    with pytest.raises(UsageError, match="supports Python"):
        locking.lock_target(kb, NO_GPU, "2.2.0", "linux-64", backend="rattler", python="3.11")


def test_conda_lock_target_for_216_is_conda_forge_cuda_build() -> None:
    from tfgpu.kb.knowledge import load_kb

    kb = load_kb()
    t = locking.lock_target(kb, NO_GPU, "2.16.1", "linux-64", backend="rattler")
    assert t.channels == ("conda-forge",)
    assert "tensorflow=2.16.1=cuda*" in t.specs
    assert t.cuda is not None
    assert t.cuda.startswith("12")


# --------------------------------------------------------------------------- lock -> create --from-lock

def test_lock_then_install_from_lock_reproduces_the_package_set(locked: Path, channel: Path,
                                                                 tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    solved = engine.create_env(["python=3.8", "tensorflow-gpu=2.2.0"], tmp_path / "solved", [channel.as_uri()],
                               platform="linux-64", virtual_packages=[virtual.VirtualPkg("__cuda", "10.1")],
                               detect=False, cache_dir=cache)
    assert len(solved.records) == 6
    engine.install_lockfile(locked, tmp_path / "from-lock", platform="linux-64", cache_dir=cache)
    assert installed(tmp_path / "from-lock") == installed(tmp_path / "solved")
    lock = lockfiles.read_conda_lock(locked)
    assert {(p.name, p.version, p.build, p.sha256) for p in lock.packages} == installed(tmp_path / "solved")


def test_install_from_lock_offline_after_the_channel_is_gone(cli: Cli, channel: Path, tmp_path: Path) -> None:
    local = tmp_path / "ch"
    shutil.copytree(channel, local)
    cache = tmp_path / "cache"
    out = tmp_path / "lock.yml"
    assert cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "-c", local.as_uri(), "--cache-dir", str(cache), "-o", str(out))[0] == 0
    engine.install_lockfile(out, tmp_path / "first", platform="linux-64", cache_dir=cache)  # warms the cache
    shutil.rmtree(local)
    engine.install_lockfile(out, tmp_path / "again", platform="linux-64", cache_dir=cache, offline=True)
    assert installed(tmp_path / "again") == installed(tmp_path / "first")


def test_lock_never_overwrites_without_force(cli: Cli, locked: Path, channel: Path, tmp_path: Path) -> None:
    before = locked.read_bytes()
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "-c", channel.as_uri(), "-o", str(locked))
    assert code == 2
    assert err.count("\n") == 1
    assert "already exists" in err
    assert "--force" in err
    assert locked.read_bytes() == before
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "-c", channel.as_uri(), "--cache-dir", str(tmp_path / "cache"),
                       "-o", str(locked), "--force")
    assert code == 0, err
    assert locked.read_bytes() == before  # same inputs, same bytes: the lockfile is deterministic


def test_lock_cuda_build_assumes_the_builds_cuda_and_honours_override(cli: Cli, channel: Path,
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "l216.yml"
    # the test channel has Python 3.11 only (2.16.1's conda-forge CUDA builds also cover 3.12, feedstock dd0d4e5)
    code, stdout, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.16.1", "--backend", "rattler", "--python", "3.11", "--force", "-c",
                            channel.as_uri(), "--cache-dir", str(tmp_path / "c"), "-o", str(out))
    assert code == 0, err
    assert "__cuda=12" in stdout
    lock = lockfiles.read_conda_lock(out)
    assert {p.name: p.build for p in lock.packages}["tensorflow"] == "cuda120py311h0e7b9a7_0"
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.16.1", "--backend", "rattler", "--python", "3.11", "--force", "-c",
                       channel.as_uri(), "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "none.yml"))
    assert code == 1
    assert "nothing provides __cuda >=12 needed by tensorflow-2.16.1-cuda120py311h0e7b9a7_0" in err
    assert not (tmp_path / "none.yml").exists()


def test_lockfile_for_another_platform_is_refused(locked: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no packages for win-64"):
        engine.install_lockfile(locked, tmp_path / "env", platform="win-64", cache_dir=tmp_path / "c")
    assert not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- the format

def test_our_lockfile_matches_conda_locks_json_schema(locked: Path) -> None:
    """conda-lock's own JSON schema for version 1, read from the installed conda-lock without importing
    it (the import alone takes ~3 s; the parse-and-render test below is marked slow)."""
    import importlib.util

    spec = importlib.util.find_spec("conda_lock")
    if spec is None or spec.origin is None:
        pytest.skip("conda-lock (tfgpu[lock]) is not installed")
    yaml = pytest.importorskip("yaml")
    import jsonschema

    schema_path = Path(spec.origin).parent / "lockfile" / "v1" / "conda-lock-v1.schema.json"
    schema = json.loads(schema_path.read_text())
    doc = yaml.safe_load(locked.read_text())
    jsonschema.validate(doc, schema)
    jsonschema.validate(yaml.safe_load(RECORDED.read_text()), schema)  # the schema is the real one
    bad = dict(doc, package=[dict(doc["package"][0], manager="npm")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


@pytest.mark.slow
def test_conda_lock_parses_and_renders_our_lockfile(locked: Path) -> None:
    pytest.importorskip("conda_lock")
    from conda_lock.conda_lock import render_lockfile_for_platform
    from conda_lock.lockfile import parse_conda_lock_file

    parsed = parse_conda_lock_file(locked)
    assert parsed.metadata.platforms == ["linux-64"]
    assert {p.name for p in parsed.package} == {
        "python", "cudatoolkit", "cudnn", "tensorflow", "tensorflow-gpu", "_tflow_select"}
    assert all(p.hash.md5 and p.hash.sha256 and p.manager == "conda" for p in parsed.package)
    explicit = render_lockfile_for_platform(lockfile=parsed, include_dev_dependencies=False, extras=None,
                                            kind="explicit", platform="linux-64")
    urls = [line for line in explicit if line.startswith("file://")]
    assert len(urls) == 6
    assert all("#" in u for u in urls)
    env = render_lockfile_for_platform(lockfile=parse_conda_lock_file(locked), include_dev_dependencies=False,
                                       extras=None, kind="env", platform="linux-64")
    assert "  - cudnn=7.6.5=cuda10.1_0" in env


@pytest.mark.parametrize("text", [
    "2.40", "0.1", "3.8.10", "1e5", "0755", "yes", "No", "null", "~", "", "'quoted'", ">=3.8,<3.9.0a0",
    "3.9.* *_cp39", "h12debd9_8", "file:///tmp/x y/linux-64/a-1-0.tar.bz2", "#not-a-comment", "a: b",
    "-dash", "__cuda", "2024a", "@", "tab\there",
])
def test_every_scalar_reads_back_as_the_same_string(text: str) -> None:
    yaml = pytest.importorskip("yaml")
    lock = lockfiles.Lock(platforms=("linux-64",), channels=(text,), packages=(lockfiles.LockedPackage(
        name="pkg", version=text, manager="conda", platform="linux-64", url=f"https://x/{text}", md5="00",
        dependencies=((text or "x", text),)),), custom_metadata={"k": text})
    doc = yaml.safe_load(lockfiles.dumps(lock))
    pkg = doc["package"][0]
    assert pkg["version"] == text
    assert doc["metadata"]["channels"][0]["url"] == text
    assert doc["metadata"]["custom_metadata"]["k"] == text
    assert pkg["dependencies"] == {text or "x": text}
    assert pkg["hash"] == {"md5": "00"}


def test_reads_a_real_conda_lock_file() -> None:
    lock = lockfiles.read_conda_lock(RECORDED)
    assert lock.platforms == ("linux-64", "linux-aarch64")
    assert lock.channels == ("conda-forge",)
    assert (lock.kind, lock.path, lock.custom_metadata) == ("conda", str(RECORDED), {})
    conda64 = lock.for_platform("linux-64", "conda")
    assert len(conda64) == 24
    py = next(p for p in conda64 if p.name == "python")
    assert (py.version, py.build) == ("3.12.0", "hab00c5b_0_cpython")
    assert py.sha256 == "5398ebae6a1ccbfd3f76361eac75f3ac071527a8072627c4bf9008c689034f48"
    pip64 = {p.name: p.sha256 for p in lock.for_platform("linux-64", "pip")}
    assert pip64["requests"] == "58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f"
    recs = lock.conda_records("linux-aarch64")
    assert len(recs) == 23
    assert all(r.url.startswith("https://conda.anaconda.org/conda-forge/") for r in recs)


def test_our_writer_round_trips_a_real_lockfile(tmp_path: Path) -> None:
    lock = replace(lockfiles.read_conda_lock(RECORDED), content_hash={"linux-64": "a" * 64, "linux-aarch64": "b" * 64})
    out = lockfiles.write_lockfile(lock, tmp_path / "copy.yml")
    again = lockfiles.read_conda_lock(out)
    assert sorted(p.key for p in again.packages) == sorted(p.key for p in lock.packages)
    assert {p.key: p.sha256 for p in again.packages} == {p.key: p.sha256 for p in lock.packages}


@pytest.mark.parametrize(("content", "expected"), [
    ("version: 1\n  metadata: [\n", "not a valid conda-lock file"),
    ("version: 99\nmetadata: {}\npackage: []\n", "unknown version 99"),
    ("version: 1\nmetadata:\n  content_hash: 5\npackage: 7\n", "not a valid conda-lock file"),
    ("", "not a valid conda-lock file"),
    ("just text\n", "not a valid conda-lock file"),
])
def test_bad_lockfiles_are_one_line_input_errors(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_text(content)
    with pytest.raises(InputError, match=expected) as info:
        lockfiles.read_conda_lock(path)
    assert "\n" not in info.value.one_line()


def test_wrong_type_in_a_real_lockfile_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(RECORDED.read_text().replace("  manager: conda\n", "  manager: [conda]\n", 1))
    with pytest.raises(InputError, match="not a valid conda-lock file"):
        lockfiles.read_conda_lock(bad)


def test_missing_lockfile_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        lockfiles.read_conda_lock(tmp_path / "nope.yml")


def test_unknown_backend_and_platform_are_usage_errors(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "--backend", "poetry", "-o", str(tmp_path / "x"))
    assert code == 2
    assert "unknown --backend" in err
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "--platform", "osx-arm64", "-c", "file:///nowhere",
                       "-o", str(tmp_path / "y"))
    assert code == 2
    assert "does not lock for platform osx-arm64" in err


def test_pip_lock_requirements_carry_the_create_pins() -> None:
    from tfgpu.kb.knowledge import load_kb

    t = locking.lock_target(load_kb(), NO_GPU, "2.16.1", "linux-64", backend="pip")
    assert t.recipe == "pip-and-cuda"
    assert t.kind == "pip"
    assert t.pip[0] == "tensorflow[and-cuda]==2.16.1"
    assert "keras>=3.0.0,<3.5" in t.pip
    assert t.python == "3.12"  # the newest Python with 2.16.1 wheels; uv needs no interpreter for it


@pytest.mark.e2e
@pytest.mark.real_subprocess
def test_pip_lock_with_uv_has_hashes_for_every_requirement(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "requirements.lock.txt"
    # the facts' machine (driver 440.64) blocks 2.16.1: --force locks it anyway, as `lock` says (issue 29, item 3)
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.16.1", "--backend", "pip", "--python", "3.11", "--force",
                       "-o", str(out))
    assert code == 0, err
    assert "locking it anyway (--force)" in err
    text = out.read_text()
    assert "tensorflow==2.16.1" in text
    pinned = [line for line in text.splitlines() if "==" in line and not line.startswith(("#", " "))]
    assert pinned
    assert text.count("--hash=sha256:") >= len(pinned)
    assert "keras==3." in text


def test_lock_takes_channels_from_the_config_file_unless_given(cli: Cli, channel: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'channels = ["{channel.as_uri()}"]\n')
    monkeypatch.setenv("TFGPU_CONFIG", str(config))
    out = tmp_path / "from-config.yml"
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "--cache-dir", str(tmp_path / "cache"), "-o", str(out))
    assert code == 0, err
    assert f"channels from {config}" in err
    assert channel.as_uri() in out.read_text()
    code, _, err = cli("lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--backend", "rattler", "-c", channel.as_uri(), "--cache-dir", str(tmp_path / "cache"),
                       "-o", str(tmp_path / "given.yml"))
    assert code == 0, err
    assert "channels from" not in err
