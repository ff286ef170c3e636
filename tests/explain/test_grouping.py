"""`tfgpu explain` says each thing once (issue 29, item 7): the seed log with six missing libcu*.so.10.0 printed about
220 lines repeating one cause and fix per library, with fixes that said `tfgpu create --tf VERSION` although the log
says CUDA 10.0. Findings that say the same thing are grouped, the version the log implies is filled in, and the notes
keep what the user must act on (the whole cause, each line and the sources behind --verbose and in the JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tfgpu.judge import explain as ex
from tfgpu.judge import explain_group as exg
from tfgpu.judge import explain_refine as exref
from tfgpu.tools import explain as exread

LOGS = DATA / "logs"
M60 = LOGS / "tesla_m60_tf114_cuda100_missing.log"


def test_six_missing_cuda_10_libraries_are_one_problem_with_the_version_filled_in() -> None:
    report = exread.explain_file(M60)
    groups = [g for g in exg.group_findings(report.findings) if g.head.problem]
    dlopen = groups[0]
    assert [f.id for f in dlopen.members] == ["dlopen.cudart", "dlopen.cublas", "dlopen.cufft", "dlopen.curand",
                                              "dlopen.cusolver", "dlopen.cusparse"]
    assert dlopen.lines_text() == "23-28"
    for lib in ("libcublas.so.10.0", "libcusparse.so.10.0"):
        assert lib in dlopen.meaning
    fix = dlopen.head.fix
    assert "VERSION" not in fix
    assert "tfgpu compat --cuda 10.0" in fix
    assert "tfgpu create --tf 2.0" in fix
    assert "TensorFlow 1.13-2.0" in fix  # the releases built with CUDA 10.0 (tfgpu compat --cuda 10.0 lists them)
    assert groups[1].head.id == "gpu.cannot_dlopen_skipping"  # another fix: a group of its own


def test_the_seed_log_fits_on_a_screen(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = cli("explain", str(M60), "--no-probe")
    assert code == 0
    assert len(out.splitlines()) <= 60, out  # 208 lines before (220 at 100 columns in issue 29)
    assert out.count("fix:") == 2  # the dlopen group and the GPU-skipping consequence
    assert "source:" not in out
    assert "--verbose" in out
    code, verbose, _ = cli("explain", str(M60), "--no-probe", "--verbose")
    assert code == 0
    assert "source: " in verbose
    assert "line 28: " in verbose  # every line of the group
    assert len(verbose.splitlines()) > len(out.splitlines())


def test_json_keeps_every_finding_and_says_the_groups(cli) -> None:  # type: ignore[no-untyped-def]
    import jsonschema

    from tests import REPO

    code, out, _ = cli("explain", str(M60), "--json", "--no-probe")
    assert code == 0
    doc = json.loads(out)
    jsonschema.validate(doc, json.loads((REPO / "src/tfgpu/core/schemas/explain.schema.json").read_text()))
    ids = [f["id"] for f in doc["findings"]]
    assert ids.count("dlopen.cudart") == 1
    assert "dlopen.cusparse" in ids
    first = doc["groups"][0]
    assert first["ids"][:2] == ["dlopen.cudart", "dlopen.cublas"]
    assert first["lines"] == [23, 24, 25, 26, 27, 28]
    assert {f["group"] for f in doc["findings"] if f["id"].startswith("dlopen.")} == {1}
    assert all(1 <= f["group"] <= len(doc["groups"]) for f in doc["findings"])


def test_info_lines_of_one_id_are_one_group() -> None:
    findings = ex.explain_lines(M60.read_text(encoding="utf-8").splitlines())
    groups = {g.head.id: g for g in exg.group_findings(findings)}
    assert groups["info.xla_streamexecutor_device"].count == 4
    assert groups["info.xla_streamexecutor_device"].lines_text() == "4-7"


@pytest.mark.parametrize(
    ("lib", "label", "first", "last"),
    [("libcudart.so.10.0", "CUDA 10.0", "1.13", "2.0"), ("libcudart.so.11.0", "CUDA 11.x", "2.4", "2.14"),
     ("libcudnn.so.8", "cuDNN 8", "2.4", "2.17"), ("cudart64_101.dll", "CUDA 10.1", "2.1", "2.3"),
     ("cudart64_100.dll", "CUDA 10.0", "1.13", "2.0")],
)
def test_library_names_imply_the_releases_built_with_them(lib: str, label: str, first: str, last: str) -> None:
    implied = exref.implied_tensorflow(lib)
    assert implied is not None
    assert implied[0] == label
    assert (implied[1][0], implied[1][-1]) == (first, last)


def test_a_name_without_a_version_fills_nothing() -> None:
    text = "Install it: tfgpu compat --tf VERSION"
    assert exref.fill_versions(text, "libcuda.so.1") == text
    assert exref.fill_versions(text, "libcusolver.so.10") == text  # from CUDA 10.1 only cudart names the version
    assert exref.fill_versions("nothing to fill", "libcudart.so.10.0") == "nothing to fill"


def test_ranges_and_first_sentences() -> None:
    assert exg._ranges([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
    assert exg.first_sentence("One thing (a.b). Two things.") == "One thing (a.b)."
    assert exg.first_sentence("No full stop") == "No full stop"


def test_smoke_style_rendering_without_a_path(capsys: pytest.CaptureFixture[str]) -> None:
    """render_findings is shared with `tfgpu smoke`, which has no log path to name."""
    from tfgpu.cli.commands.explain import render_findings

    render_findings(exread.explain_file(M60).findings, title="What TensorFlow's log says:")
    out = capsys.readouterr().out
    assert "tfgpu explain" not in out
    assert "--verbose" in out


def test_redacted_output_does_not_repeat_the_path(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "secret-user" / "run.log"
    log.parent.mkdir()
    log.write_bytes(M60.read_bytes())
    code, out, _ = cli("explain", str(log), "--no-probe", "--redact")
    assert code == 0
    assert "--verbose" in out


@pytest.mark.parametrize(("platform", "says"), [({"os": "linux", "wsl": 2}, "This machine runs WSL2"),
                                                ({"os": "linux", "wsl": None}, "This machine is not WSL2"), ({}, None)])
def test_cuinit_no_device_outside_tensorflow_names_wsl2_from_the_facts(platform: dict[str, object], says: str | None) -> None:
    line = "CudaSupportError: Error at driver init: [100] Call to cuInit results in CUDA_ERROR_NO_DEVICE:"
    (f,) = ex.explain_lines([line], facts={"platform": platform, "driver": {"version": "566.03"}})
    assert f.id == "cuda.no_device_at_init"
    assert "/usr/lib/wsl/lib" in f.fix
    if says is None:
        assert f.cause.startswith("On WSL2")
    else:
        assert f.cause.startswith(says)
