"""`nox -s update_compat` brings its upstreams itself (scripts/fetch_upstreams.py) and fails loudly, never exit 0,
when one cannot be read; under TFGPU_REQUIRE_UPSTREAMS a regeneration script without its source fails too."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests import REPO
from tests.conftest import load_file_module

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="the scripts use tomllib (Python >= 3.11)")
SCRIPTS = REPO / "scripts"


def _script(name: str) -> Any:
    return load_file_module(SCRIPTS / f"{name}.py", f"tfgpu_script_{name}")


@pytest.fixture
def up() -> Any:
    return _script("fetch_upstreams")


def test_every_missing_upstream_is_brought(up: Any, tmp_path: Path) -> None:
    ran: list[list[str]] = []
    got: list[str] = []

    def run(argv: Sequence[str]) -> None:
        ran.append(list(argv))

    def fetch(url: str, path: Path) -> None:
        got.append(url)
        path.write_text("# Version: 2026.10.24\n", encoding="utf-8")

    env = up.ensure_upstreams(tmp_path, {}, run=run, fetch=fetch)
    assert env == {"TFGPU_TF_DOCS": str(tmp_path / "tensorflow-docs"),
                   "TFGPU_CF_FEEDSTOCK": str(tmp_path / "tensorflow-feedstock.git"),
                   "TFGPU_ANACONDA_FEEDSTOCK": str(tmp_path / "anaconda-tensorflow-feedstock.git"),
                   "TFGPU_PCI_IDS": str(tmp_path / "pci.ids")}
    assert ["git", "clone", "--quiet", "--depth", "1", "https://github.com/tensorflow/docs",
            str(tmp_path / "tensorflow-docs")] in ran
    assert ["git", "clone", "--quiet", "--bare", "https://github.com/conda-forge/tensorflow-feedstock",
            str(tmp_path / "tensorflow-feedstock.git")] in ran  # the whole history: the script reads main's commits
    assert got == ["https://pci-ids.ucw.cz/v2.2/pci.ids"]


def test_a_local_copy_in_the_environment_is_used_as_it_is(up: Any, tmp_path: Path) -> None:
    given = {"TFGPU_TF_DOCS": "/src/docs", "TFGPU_CF_FEEDSTOCK": "/src/cf.git",
             "TFGPU_ANACONDA_FEEDSTOCK": "/src/ana.git", "TFGPU_PCI_IDS": "/src/pci.ids"}

    def nothing(*_a: object) -> None:
        pytest.fail("a given upstream was fetched again")

    assert up.ensure_upstreams(tmp_path, given, run=nothing, fetch=nothing) == given


def test_a_second_run_updates_what_it_brought(up: Any, tmp_path: Path) -> None:
    (tmp_path / "tensorflow-docs").mkdir()
    (tmp_path / "tensorflow-feedstock.git").mkdir()
    (tmp_path / "anaconda-tensorflow-feedstock.git").mkdir()
    ran: list[list[str]] = []
    up.ensure_upstreams(tmp_path, {}, run=lambda argv: ran.append(list(argv)),
                        fetch=lambda _u, p: p.write_text("x", encoding="utf-8"))
    assert ["git", "-C", str(tmp_path / "tensorflow-docs"), "reset", "--quiet", "--hard", "FETCH_HEAD"] in ran
    assert ["git", "--git-dir", str(tmp_path / "tensorflow-feedstock.git"), "fetch", "--quiet", "--prune", "origin",
            "+refs/heads/*:refs/heads/*"] in ran
    assert not any(argv[1] == "clone" for argv in ran)


def test_every_upstream_that_cannot_be_read_is_named_and_main_exits_2(
        up: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def no_github(argv: Sequence[str]) -> None:
        raise up.UpstreamError(f"{' '.join(argv)}: fatal: unable to access 'https://github.com/...': "
                               "Could not resolve host: github.com")

    def no_pciids(url: str, _path: Path) -> None:
        raise up.UpstreamError(f"{url}: <urlopen error [Errno -2] Name or service not known>")

    with pytest.raises(up.UpstreamError) as exc:
        up.ensure_upstreams(tmp_path, {"TFGPU_TF_DOCS": "/src/docs"}, run=no_github, fetch=no_pciids)
    text = str(exc.value)
    for name in ("TFGPU_CF_FEEDSTOCK", "TFGPU_ANACONDA_FEEDSTOCK", "TFGPU_PCI_IDS"):
        assert name in text
    assert "TFGPU_TF_DOCS" not in text  # given locally: not fetched, not failed

    def fail(*_a: object, **_k: object) -> dict[str, str]:
        raise up.UpstreamError("cannot read TFGPU_PCI_IDS: https://pci-ids.ucw.cz/v2.2/pci.ids: HTTP 503")

    monkeypatch.setattr(up, "ensure_upstreams", fail)
    assert up.main(["--dest", str(tmp_path)]) == 2
    assert "fetch_upstreams: cannot read TFGPU_PCI_IDS" in capsys.readouterr().err


def test_download_fails_on_an_unreachable_host_and_writes_nothing(up: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.error

    def refuse(*_a: object, **_k: object) -> None:
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(up.urllib.request, "urlopen", refuse)
    with pytest.raises(up.UpstreamError, match="Name or service not known"):
        up.download(up.PCI_IDS_URL, tmp_path / "pci.ids")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("name", "argv"), [
    ("update_tensorflow", ["--check"]),
    ("update_conda_forge", ["--check"]),
    ("update_gpu_ids", ["--check", "--pci-ids", ""]),
])
def test_a_script_without_its_source_fails_under_require_upstreams(
        name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("TFGPU_TF_DOCS", "TFGPU_CF_FEEDSTOCK", "TFGPU_ANACONDA_FEEDSTOCK", "TFGPU_PCI_IDS"):
        monkeypatch.delenv(var, raising=False)
    script = _script(name)
    if name == "update_gpu_ids":  # no hwdata copy either
        monkeypatch.setattr(script, "DEFAULT_PATHS", ())
    monkeypatch.delenv("TFGPU_REQUIRE_UPSTREAMS", raising=False)
    assert script.main(argv) == 0  # by hand: skipped
    assert "skipped" in "".join(capsys.readouterr())
    monkeypatch.setenv("TFGPU_REQUIRE_UPSTREAMS", "1")
    assert script.main(argv) == 2  # under nox -s update_compat: an error
    assert "TFGPU_REQUIRE_UPSTREAMS is set" in capsys.readouterr().err


def test_a_named_source_that_does_not_exist_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_PCI_IDS", str(tmp_path / "missing.ids"))
    assert _script("update_gpu_ids").main(["--check"]) == 2
    monkeypatch.setenv("TFGPU_TF_DOCS", str(tmp_path / "no-docs"))
    assert _script("update_tensorflow").main(["--check"]) == 2


def test_the_update_compat_session_brings_upstreams_and_requires_them() -> None:
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    body = text[text.index("def update_compat"):text.index("def freshness")]
    assert "ensure_upstreams(" in body
    assert '"TFGPU_REQUIRE_UPSTREAMS": "1"' in body
    assert "session.error(" in body
    assert 'def freshness(session' in text
