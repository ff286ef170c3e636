"""The CUDA / cuDNN TensorFlow's GPU wheels load, read from the wheels (compat/build_info_scan.json, written by
scripts/scan_build_info.py), the `corrections` rows of compat/tensorflow.toml rendered from it, and the verdict
that follows the wheel where it disagrees with the docs table."""

from __future__ import annotations

import json
import re
import types
from typing import Any

import pytest
import tomllib
from hypothesis import given
from hypothesis import strategies as st

from tests import REPO
from tests.casebook.test_verdict_casebook_bugs import checks, linux_facts
from tests.conftest import load_file_module
from tfgpu.core.errors import DataError
from tfgpu.judge.target import judge_target
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import _parse_builds

COMPAT = REPO / "compat"
KB = load_kb()
RECORD = json.loads((COMPAT / "build_info_scan.json").read_text(encoding="utf-8"))
BY_FILE = {w["file"]: w for w in RECORD["wheels"]}
TEXT = (COMPAT / "tensorflow.toml").read_text(encoding="utf-8")
TABLE = tomllib.loads(TEXT)
WHEEL_ROWS = [r for r in TABLE["corrections"] if "wheel" in r]
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _script() -> types.ModuleType:
    return load_file_module(REPO / "scripts" / "scan_build_info.py", "tfgpu_script_scan_build_info")


# --------------------------------------------------------------------------- the record and the table


def test_the_wheel_rows_are_what_the_record_renders() -> None:
    """`scan_build_info.py --check` offline: rendering the committed record changes nothing."""
    assert _script().render(RECORD, TEXT) == TEXT, "compat/tensorflow.toml's wheel rows drifted from the record"


def test_check_mode_reports_up_to_date_without_the_network(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    monkeypatch.setattr(script.swa, "http_get", lambda *a, **k: pytest.fail("network used"))
    monkeypatch.setattr(script.swa, "http_stream", lambda *a, **k: pytest.fail("network used"))
    assert script.main(["--check"]) == 0
    assert "tensorflow.toml: up to date" in capsys.readouterr().out


def test_the_record_covers_every_gpu_series_on_both_oses() -> None:
    series = {(w["os"], tuple(int(p) for p in w["version"].split(".")[:2])) for w in RECORD["wheels"]}
    for minor in range(16):
        assert ("linux", (1, minor)) in series
    for minor in range(12):
        assert ("linux", (2, minor)) in series
    for minor in range(11):
        assert ("windows", (2, minor)) in series


@pytest.mark.parametrize("row", WHEEL_ROWS, ids=lambda r: f"{r['tf']}-{r['os']}-{r['field']}")
def test_every_wheel_row_cites_a_wheel_of_the_record_and_keeps_the_docs_value(row: dict[str, Any]) -> None:
    wheel = BY_FILE[row["wheel"]]
    assert SHA256.match(row["sha256"])
    assert wheel["sha256"] == row["sha256"]
    assert TABLE["sources"][row["source"]]["url"].startswith("https://files.pythonhosted.org/packages/")
    docs = next(b for b in TABLE["builds"] if b["tf"] == row["tf"] and b["os"] == row["os"])
    assert str(docs[row["field"]]) == row["old"]  # the docs table itself is left as the docs publish it
    assert _script().wheel_facts(wheel)[row["field"]] == row["new"]


@pytest.mark.parametrize("row", WHEEL_ROWS, ids=lambda r: f"{r['tf']}-{r['os']}-{r['field']}")
def test_the_knowledge_base_follows_the_wheel_and_keeps_the_docs_value(row: dict[str, Any]) -> None:
    build = KB.build_for(row["tf"], row["os"])
    assert build is not None
    assert getattr(build, row["field"]) == row["new"]
    assert getattr(build, f"docs_{row['field']}") == row["old"]
    assert build.wheel_source == row["source"]


def test_rows_the_wheels_agree_with_keep_the_docs_values_only() -> None:
    corrected = {(r["tf"], r["os"]) for r in WHEEL_ROWS}
    for b in KB.builds:
        if (str(b.tf), b.os) not in corrected:
            assert (b.docs_cuda, b.docs_cudnn, b.wheel_source) == ("", "", "")


def test_a_wheel_row_that_does_not_match_the_docs_row_is_refused() -> None:
    data = {**TABLE, "corrections": [{"tf": "1.15.0", "os": "linux", "field": "cudnn", "old": "7.2", "new": "7.6",
                                      "wheel": "x.whl", "source": "tf-docs-linux"}]}
    with pytest.raises(DataError, match=r"not '7\.2'"):
        _parse_builds("tensorflow", data)


# --------------------------------------------------------------------------- the verdict follows the wheel


@pytest.mark.parametrize("row", [r for r in WHEEL_ROWS if r["field"] == "cudnn" and r["os"] == "linux"],
                         ids=lambda r: f"{r['tf']}-{r['os']}")
def test_a_system_cudnn_at_the_docs_minor_is_blocked_at_the_wheels_minor_passes(row: dict[str, Any]) -> None:
    cuda = KB.build_for(row["tf"], "linux").cuda  # type: ignore[union-attr]
    cuda = cuda if "." in cuda else f"{cuda}.0"
    old = judge_target(linux_facts(cuda=[cuda], cudnn=[f"{row['old']}.1"], python="3.6"), KB, row["tf"], backend="pip")
    new = judge_target(linux_facts(cuda=[cuda], cudnn=[f"{row['new']}.5"], python="3.6"), KB, row["tf"], backend="pip")
    assert "cudnn.system" in checks(old)
    assert "cudnn.system" not in checks(new)


# --------------------------------------------------------------------------- pure parts of the script


def test_build_info_spellings_are_read_as_dotted_versions() -> None:
    dotted = _script()._dotted
    assert [dotted(s) for s in ("10", "10.0", "64_101", "64_110", "64_8", "8")] == ["10", "10.0", "10.1", "11.0",
                                                                                     "8", "8"]


def _wheel(**kw: Any) -> dict[str, Any]:
    return {"version": "1.15.0", "os": "linux", "build_info": {}, "objects": {}, **kw}


def test_the_stub_marker_raises_the_minor_only_for_its_own_major() -> None:
    facts = _script().wheel_facts
    obj = {"lib_strings": [], "cudnn_markers": ["cudnnFusedOpsExecute"], "cudnn_names": 231}
    seven = facts(_wheel(build_info={"cudnn_version_number": "7", "cuda_version_number": "10.0"}, objects={"a": obj}))
    assert (seven["cudnn"], seven["cuda"]) == ("7.6", "10.0")
    assert "cudnn stub" in seven["cudnn_from"]
    eight = facts(_wheel(build_info={"cudnn_version": "8"}, objects={"a": obj}))
    assert eight["cudnn"] == "8"  # a 7.6 name says nothing about a cuDNN 8 build's minor
    plain = facts(_wheel(build_info={"cudnn_version_number": "7"}))
    assert plain["cudnn"] == "7"


def test_sonames_and_dll_names_are_read_where_build_info_is_silent() -> None:
    facts = _script().wheel_facts
    linux = facts(_wheel(needed=["libcudart.so.9.0", "libcudnn.so.7"]))
    assert (linux["cuda"], linux["cudnn"]) == ("9.0", "7")
    win = facts(_wheel(os="windows", objects={"p": {"lib_strings": ["cudart64_80.dll", "cudnn64_5.dll"],
                                                    "cudnn_markers": [], "cudnn_names": 0}}))
    assert (win["cuda"], win["cudnn"]) == ("8.0", "5")


NAME = "cudnnCreateFusedOpsConstParamPack"


@given(st.integers(min_value=0, max_value=len(NAME) + 2), st.binary(max_size=50), st.binary(max_size=50))
def test_the_string_scan_finds_a_name_split_across_chunks(cut: int, before: bytes, after: bytes) -> None:
    data = before + b"\x00" + NAME.encode() + b"\x00libcudart.so.10.1\x00" + after
    at = len(before) + cut
    scan = _script().StringScan()
    scan.feed(data[:at])
    scan.feed(data[at:])
    assert NAME in scan.cudnn
    assert "libcudart.so.10.1" in scan.libs


def test_compat_names_both_values_where_the_wheel_disagrees() -> None:
    from tfgpu.tools.compat import _notes

    for row in WHEEL_ROWS:
        build = KB.build_for(row["tf"], row["os"])
        assert build is not None
        notes = [n for n in _notes(KB, build, [build.tf], [], {}) if n["id"] == "wheel-build-info"]
        assert len(notes) == 1
        assert f" {row['old']}," in notes[0]["text"]
        assert notes[0]["text"].endswith(f" {row['new']} (tfgpu follows the wheel)")
        assert notes[0]["source"].startswith("https://files.pythonhosted.org/")


def test_a_row_counts_the_patches_that_agree_and_names_those_that_differ() -> None:
    script = _script()
    marker = {"a": {"lib_strings": [], "cudnn_markers": ["cudnnFusedOpsExecute"], "cudnn_names": 231}}

    def wheel(v: str, objects: dict[str, Any]) -> dict[str, Any]:
        return _wheel(version=v, dist="tensorflow-gpu", file=f"tf-{v}.whl", sha256=v * 3, url="u", scanned="d",
                      build_info={"cudnn_version_number": "7"}, objects=objects)

    record = {"wheels": [wheel("1.15.0", marker), wheel("1.15.3", {}), wheel("1.15.5", marker)]}
    (row,) = script.disagreements(record, TABLE)
    assert (row["tf"], row["field"], row["old"], row["new"]) == ("1.15.0", "cudnn", "7.4", "7.6")
    assert (row["patches"], row["wheel"], row["wheel_newest"]) == (2, "tf-1.15.0.whl", "tf-1.15.5.whl")
    assert "differs" not in row  # 1.15.3 read only the major (7): no claim either way
    record["wheels"][1]["build_info"] = {"cudnn_version_number": "8"}
    (row,) = script.disagreements(record, TABLE)
    assert row["differs"] == "1.15.3"
