"""scripts/freshness.py and scripts/update_nvidia_wheels.py against recorded PyPI JSON (tests/data/pypi/SOURCES.md).

The freshness check lists what PyPI has and compat/ lacks (exit 1), says nothing is missing when compat/ is
current (exit 0), never counts a pre-release (TensorFlow 2.22.0rc0) as a release, and fails loudly (exit 2)
when PyPI cannot be read.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from tests import REPO
from tests.conftest import DATA, load_file_module

needs_tomllib = pytest.mark.skipif(sys.version_info < (3, 11), reason="the scripts use tomllib (Python >= 3.11)")
pytestmark = needs_tomllib

SCRIPTS = REPO / "scripts"
PYPI = DATA / "pypi"


def _script(name: str) -> Any:
    return load_file_module(SCRIPTS / f"{name}.py", f"tfgpu_script_{name}")


def _recorded(name: str) -> dict[str, Any]:
    return json.loads((PYPI / f"{name}.json").read_text(encoding="utf-8"))


def _fetch_recorded(name: str) -> dict[str, Any]:
    return _recorded(name)


@pytest.fixture
def fresh() -> Any:
    return _script("freshness")


@pytest.fixture
def docs(fresh: Any) -> dict[str, dict[str, Any]]:
    return {name: _recorded(name) for name in fresh.PROJECTS}


# --------------------------------------------------------------------------- _pypi


def test_finals_skip_pre_releases_dev_builds_and_yanked_releases() -> None:
    pypi = _script("_pypi")
    tf = [str(v) for v, _ in pypi.finals(_recorded("tensorflow"))]
    assert tf == ["2.20.0", "2.21.0"]
    assert [str(v) for v, _ in pypi.prereleases(_recorded("tensorflow"))][-1] == "2.22.0rc0"
    cu11 = {str(v) for v, _ in pypi.finals(_recorded("nvidia-cudnn-cu11"))}
    assert "8.9.4.19" not in cu11  # every file of it is yanked
    assert "8.9.6.50" in cu11
    cu12 = pypi.newest_per_minor(_recorded("nvidia-cudnn-cu12"))
    assert str(cu12[(9, 28)][0]) == "9.28.0.42"  # not 9.28.0.42.dev76646929
    assert cu12[(9, 28)][1] == "2026-11-04"


# --------------------------------------------------------------------------- freshness


def test_the_knowledge_base_has_pypis_newest(fresh: Any, docs: dict[str, dict[str, Any]]) -> None:
    report = fresh.check(docs, fresh.load_known())
    assert report.missing == []
    assert any("tensorflow 2.22.0rc0" in n and "pre-release" in n for n in report.notes)
    assert any("nvidia-cuda-runtime-cu13" in n and "placeholder 0.0.1" in n for n in report.notes)


def test_what_the_knowledge_base_lacked_before_this_update_is_listed(fresh: Any, docs: dict[str, dict[str, Any]]) -> None:
    """compat/ as it was before CUDA 13.5 and cuDNN 9.28 were added, and without TF 2.21.0."""
    known = fresh.load_known()
    older = dataclasses.replace(
        known,
        tensorflow=frozenset(v for v in known.tensorflow if v < Version("2.21")),
        toolkits=known.toolkits - {"13.5"},
        runtime_wheels={k: v for k, v in known.runtime_wheels.items() if k[1] != "13.5"},
        cudnn_wheels={k: v for k, v in known.cudnn_wheels.items() if k[1] != "9.28"},
    )
    missing = fresh.check(docs, older).missing
    assert any(m.startswith("tensorflow 2.21.0 (on PyPI since 2026-03-06) is not in compat/releases.toml") for m in missing)
    assert any(m.startswith("CUDA 13.5 (nvidia-cuda-runtime 13.5.37, on PyPI since 2026-11-04) has no row") for m in missing)
    assert any(m.startswith("nvidia-cudnn-cu12 9.28.0.42") for m in missing)
    assert any(m.startswith("nvidia-cudnn-cu13 9.28.1.4") for m in missing)
    assert not any("2.22" in m for m in missing)  # a pre-release is never missing
    assert len(missing) == 5  # + nvidia-cuda-runtime 13.5.37's wheel row


def test_a_pre_release_listed_as_a_release_is_an_error(fresh: Any, docs: dict[str, dict[str, Any]]) -> None:
    known = fresh.load_known()
    wrong = dataclasses.replace(known, tensorflow=known.tensorflow | {Version("2.22.0rc0")})
    missing = fresh.check(docs, wrong).missing
    assert missing == ["compat/releases.toml lists tensorflow 2.22.0rc0, a pre-release, as a release: remove it "
                       "(python3 scripts/update_releases.py --force)"]


def test_the_releases_table_lists_no_pre_release() -> None:
    fresh = _script("freshness")
    assert not any(v.is_prerelease or v.is_devrelease for v in fresh.load_known().tensorflow)


def test_main_exit_codes(fresh: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pypi = sys.modules["_pypi"]
    monkeypatch.setattr(fresh, "fetch_all", lambda names: pypi.fetch_all(names, _fetch_recorded))
    assert fresh.main([]) == 0
    assert "the knowledge base has PyPI's newest" in capsys.readouterr().out
    assert fresh.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing"] == []

    older = dataclasses.replace(fresh.load_known(), toolkits=frozenset({"12.9"}))
    monkeypatch.setattr(fresh, "load_known", lambda: older)
    assert fresh.main([]) == 1
    assert "missing: CUDA 13.5" in capsys.readouterr().out


def test_an_unreadable_source_fails_loudly(fresh: Any, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    pypi = sys.modules["_pypi"]

    def down(name: str) -> dict[str, Any]:
        msg = f"https://pypi.org/pypi/{name}/json: <urlopen error [Errno -3] Temporary failure in name resolution>"
        raise pypi.SourceError(msg)

    monkeypatch.setattr(fresh, "fetch_all", lambda names: pypi.fetch_all(names, down))
    assert fresh.main([]) == 2
    err = capsys.readouterr().err
    assert "freshness: cannot read PyPI" in err
    assert "tensorflow/json" in err
    assert "nvidia-cudnn-cu13/json" in err  # every failure named, not only the first


def test_fetch_json_turns_network_errors_into_source_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.error

    pypi = _script("_pypi")

    def refuse(*_a: object, **_k: object) -> None:
        raise urllib.error.URLError("[Errno 111] Connection refused")

    monkeypatch.setattr(pypi.urllib.request, "urlopen", refuse)
    monkeypatch.setattr(pypi.time, "sleep", lambda _s: None)
    with pytest.raises(pypi.SourceError, match="Connection refused"):
        pypi.fetch_json("tensorflow")


# --------------------------------------------------------------------------- update_nvidia_wheels


def test_the_wheel_blocks_are_what_the_generator_writes_from_pypi() -> None:
    script = _script("update_nvidia_wheels")
    recorded = {name: _recorded(name) for name in script.DISTS}
    text = (REPO / "compat" / "cuda.toml").read_text(encoding="utf-8")
    blocks = script.wheel_rows(recorded)
    assert script.regenerate(text, script.render_blocks(blocks)) == text
    assert not any(r["dist"] == "nvidia-cuda-runtime-cu13" for r in blocks["cuda_runtime_wheels"])  # 0.0.1 placeholder
    newest = {(r["dist"], r["cudnn"]): r["version"] for r in blocks["cudnn_wheels"]}
    assert newest[("nvidia-cudnn-cu12", "9.28")] == "9.28.0.42"
    assert newest[("nvidia-cudnn-cu13", "9.28")] == "9.28.1.4"


def test_update_nvidia_wheels_check_shows_a_diff_and_fails_loudly_without_pypi(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script("update_nvidia_wheels")
    pypi = sys.modules["_pypi"]
    stale = tmp_path / "cuda.toml"
    text = (REPO / "compat" / "cuda.toml").read_text(encoding="utf-8")
    stale.write_text(text.replace('cudnn = "9.28", version = "9.28.1.4"', 'cudnn = "9.28", version = "9.28.0.1"'),
                     encoding="utf-8")
    monkeypatch.setattr(script, "fetch_all", lambda names: pypi.fetch_all(names, _fetch_recorded))
    assert script.main(["--file", str(stale)]) == 1
    assert '+  { dist = "nvidia-cudnn-cu13", cudnn = "9.28", version = "9.28.1.4"' in capsys.readouterr().out
    assert script.main(["--file", str(stale), "--force"]) == 0
    assert stale.read_text(encoding="utf-8") == text

    def down(name: str) -> dict[str, Any]:
        raise pypi.SourceError(f"https://pypi.org/pypi/{name}/json: HTTP 503")

    monkeypatch.setattr(script, "fetch_all", lambda names: pypi.fetch_all(names, down))
    assert script.main(["--file", str(stale)]) == 2
    assert "cannot read PyPI" in capsys.readouterr().err
