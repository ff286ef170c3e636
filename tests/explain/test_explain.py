"""tfgpu explain: the catalog's own samples, whole real logs (tests/data/logs), facts, bounds, CLI."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests import REPO
from tests.conftest import DATA
from tfgpu.core.errors import DataError, InputError
from tfgpu.judge import explain as ex
from tfgpu.judge import explain_catalog as excat
from tfgpu.judge import explain_refine as exref
from tfgpu.kb.parse import load_toml
from tfgpu.tools import explain as exread

LOGS = DATA / "logs"
CATALOG = load_toml("explain")
ENTRIES = CATALOG["entries"]
SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/explain.schema.json").read_text())


def _sources_rows() -> list[tuple[str, list[str]]]:
    """(file, expected ordered ids) from tests/data/logs/SOURCES.md, so new logs are covered."""
    rows = []
    for line in (LOGS / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0].strip("`"), re.findall(r"`([^`]+)`", cells[-1])))
    return rows


LOG_ROWS = _sources_rows()
M60 = LOGS / "tesla_m60_tf114_cuda100_missing.log"


def test_catalog_is_big_enough_and_well_formed() -> None:
    cat = excat.load_catalog()
    assert len(cat.entries) >= 250  # issue 15: the catalog was mined from real threads, keep it that big
    assert len({e.id for e in cat.entries}) == len(cat.entries)
    assert {e.severity for e in cat.entries} <= set(excat.SEVERITIES)
    assert any(e.severity == "harmless" for e in cat.entries)
    for e in cat.entries:
        assert e.source_url or e.source_title.startswith("Blog post "), f"{e.id}: source {e.source!r} is not in [sources]"


@pytest.mark.parametrize("row", ENTRIES, ids=[r["id"] for r in ENTRIES])
def test_every_entry_explains_its_own_real_sample(row: dict[str, str]) -> None:
    findings = ex.explain_lines([row["sample"]])
    assert [f.id for f in findings] == [row["id"]]
    f = findings[0]
    assert f.line == 1
    assert f.severity == row["severity"]
    for text in (f.meaning, f.cause, f.fix):
        assert text
        # every {group} the pattern captured is substituted
        for name, value in f.groups:
            assert "{" + name + "}" not in text or not value
    assert f.source.startswith(("https://", "Blog post "))  # a URL or a named publication, never a machine path


@pytest.mark.parametrize("row", ENTRIES, ids=[r["id"] for r in ENTRIES])
def test_every_placeholder_is_a_group_of_its_pattern(row: dict[str, str]) -> None:
    groups = set(re.compile(row["pattern"]).groupindex)
    for key in ("meaning", "cause", "fix"):
        used = set(re.findall(r"\{(\w+)\}", row[key]))
        assert used <= groups, f"{row['id']}.{key} names {sorted(used - groups)}, not groups of its pattern"


def _also_rows() -> list[tuple[str, str, str]]:
    """(entry id, line, source key) for every extra real line an entry lists under `also`."""
    rows = []
    for row in ENTRIES:
        for item in row.get("also", []):
            line, source = (item, row["source"]) if isinstance(item, str) else (item[0], item[1])
            rows.append((row["id"], line, source))
    return rows


ALSO_ROWS = _also_rows()


@pytest.mark.parametrize(("entry", "line", "source"), ALSO_ROWS,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(ALSO_ROWS)])
def test_every_extra_real_line_names_only_its_entry(entry: str, line: str, source: str) -> None:
    assert [f.id for f in ex.explain_lines([line])] == [entry]
    assert source in CATALOG["sources"], f"{entry}: also-line source {source!r} is not in [sources]"


@pytest.mark.parametrize(("name", "expected"), LOG_ROWS, ids=[r[0] for r in LOG_ROWS])
def test_whole_real_logs_give_their_diagnosis_in_order(name: str, expected: list[str]) -> None:
    report = exread.explain_file(LOGS / name)
    # SOURCES.md lists the catalog's entries (the generic unrecognised.* findings are not catalog entries)
    ids = [f.id for f in report.findings if not f.unrecognised]
    unique = list(dict.fromkeys(ids))
    rank = {f.id: f.rank for f in report.findings}
    # SOURCES.md breaks rank ties by id; explain_lines breaks them by line (first seen first).
    assert sorted(unique, key=lambda i: (rank[i], i)) == expected
    # known problems by rank, then unrecognised error lines, then info, then harmless (issue 15)
    keys = [ex.order_key(f) for f in report.findings]
    assert keys == sorted(keys)
    assert report.lines > 0
    assert not report.notes


def test_sources_table_lists_every_log() -> None:
    listed = {name for name, _ in LOG_ROWS}
    assert {p.name for p in LOGS.glob("*.log")} == listed


def test_harmless_only_log_has_no_problem() -> None:
    report = exread.explain_file(LOGS / "harmless_only_tf215.log")
    assert report.findings
    assert all(f.harmless for f in report.findings)
    summary = ex.summarize_harmless(report.findings)
    assert summary is not None
    assert "nothing to fix" in summary


def test_tesla_m60_seed_with_facts_names_cuda_10_0_vs_10_1() -> None:
    facts = {"schema": "tfgpu.facts/1",
             "cuda_toolkits": [{"version": "10.1", "path": "/usr/local/cuda-10.1", "source": "nvcc"}],
             "cudnn": [{"version": "7.6.5", "path": "/usr/local/cuda-10.1/include/cudnn.h"}]}
    report = exread.explain_file(M60, facts=facts)
    top = report.findings[0]
    assert top.id == "dlopen.cudart"
    assert top.cause.startswith(
        "TensorFlow wants CUDA 10.0's libraries (libcudart.so.10.0); installed here: CUDA 10.1 (/usr/local/cuda-10.1)."
    )
    dlopens = [f for f in report.findings if f.id.startswith("dlopen.")]
    assert len(dlopens) == 6
    assert all("wants CUDA 10.0" in f.cause and "CUDA 10.1" in f.cause for f in dlopens)
    # without facts the generic cause stays
    plain = exread.explain_file(M60)
    assert "installed here" not in plain.findings[0].cause


def _dlopen(lib: str) -> str:
    # The real dso_loader line from the M60 seed, with another library name in it.
    line = M60.read_text(encoding="utf-8").splitlines()
    sample = next(x for x in line if "libcudart.so.10.0" in x and "Could not dlopen" in x)
    return sample.replace("libcudart.so.10.0", lib)


@pytest.mark.parametrize(
    ("lib", "facts", "expect"),
    [
        ("libcudart.so.10.0", {"cuda_toolkits": [{"version": "10.0.130", "path": "/usr/local/cuda-10.0"}]},
         "CUDA 10.0.130 is installed at /usr/local/cuda-10.0 but the loader does not find it"),
        ("libcudart.so.11.0", {"cuda_toolkits": [{"version": "11.8", "path": "/opt/cuda"}]},
         "CUDA 11.8 is installed at /opt/cuda"),
        ("libcudart.so.11.0", {"cuda_toolkits": []}, "no CUDA toolkit was found on this machine"),
        ("libcudnn.so.7", {"cudnn": [{"version": "8.9.7", "path": "/usr/include/cudnn_version.h"}]},
         "TensorFlow wants cuDNN 7 (libcudnn.so.7); installed here: cuDNN 8.9.7"),
        ("libcudnn.so.8", {"cudnn": [{"version": "8.1.0", "path": "/x"}]}, "cuDNN 8.1.0 is installed at /x"),
        ("libcuda.so.1", {"driver": {"version": None, "error": "NVML: driver not loaded"}},
         "No NVIDIA driver was found on this machine (NVML: driver not loaded)"),
        ("libcuda.so.1", {"driver": {"version": "535.54.03"}}, "An NVIDIA driver 535.54.03 is installed"),
    ],
)
def test_facts_refine_dlopen_causes(lib: str, facts: dict[str, object], expect: str) -> None:
    findings = ex.explain_lines([_dlopen(lib)], facts=facts)
    assert len(findings) == 1
    assert expect in findings[0].cause


def test_windows_dll_names_map_to_cuda_versions() -> None:
    assert exref._cuda_of_soname("cudart64_100.dll") == "10.0"
    assert exref._cuda_of_soname("cudart64_101.dll") == "10.1"
    assert exref._cuda_of_soname("cudart64_110.dll") == "11.x"
    assert exref._cuda_of_soname("cudart64_12.dll") == "12.x"
    assert exref._cuda_of_soname("libcudart.so.12") == "12.x"
    assert exref._cuda_of_soname("libcublas.so.10.0") == "10.0"
    assert exref._cuda_of_soname("libcublas.so.10") is None  # CUDA 10.1+ cuBLAS: its own version
    assert exref._cudnn_of_soname("cudnn64_7.dll") == "7"
    assert exref._cudnn_of_soname("libcudnn.so.8") == "8"


def test_windows_log_with_facts() -> None:
    facts = {"cuda_toolkits": [{"version": "11.0", "path": r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v11.0"}]}
    report = exread.explain_file(LOGS / "windows_tf22_cudart64_101_missing.log", facts=facts)
    cudart = next(f for f in report.findings if f.id == "dlopen.cudart")
    assert "TensorFlow wants CUDA 10.1's libraries (cudart64_101.dll); installed here: CUDA 11.0" in cudart.cause


def test_driver_insufficient_names_the_driver() -> None:
    facts = {"driver": {"version": "384.81", "cuda": "9.0"}}
    report = exread.explain_file(LOGS / "driver_too_old_p100_tf111.log", facts=facts)
    f = next(f for f in report.findings if f.id == "cuda.driver_insufficient")
    assert f.cause.startswith("The driver here is 384.81, which supports CUDA up to 9.0")


def test_duplicates_are_counted_not_repeated() -> None:
    line = _dlopen("libcudart.so.10.0")
    other = _dlopen("libcudart.so.11.0")
    findings = ex.explain_lines(["noise", line, line, other, line])
    assert [(f.id, f.line, f.count) for f in findings] == [("dlopen.cudart", 2, 3), ("dlopen.cudart", 4, 1)]
    assert "libcudart.so.11.0" in findings[1].meaning


def test_long_line_text_is_cut() -> None:
    line = _dlopen("libcudart.so.10.0") + "x" * 5000
    (f,) = ex.explain_lines([line])
    assert len(f.text) == ex.TEXT_CHARS


def test_binary_input_is_safe() -> None:
    import random

    rnd = random.Random(6)
    # no \n and no \r (a lone \r ends a segment since issue 15): one 300 kB line, cut
    blob = bytes(rnd.getrandbits(8) for _ in range(300_000)).replace(b"\n", b"").replace(b"\r", b"") + b"\x00" * 100
    report = exread.explain_stream(io.BytesIO(blob + b"\n" + _dlopen("libcudart.so.10.0").encode() + b"\n"))
    assert [f.id for f in report.findings] == ["dlopen.cudart"]
    assert any("cut" in n for n in report.notes)
    assert any("binary" in n for n in report.notes)


def test_utf16_log_from_powershell_is_decoded() -> None:
    text = (LOGS / "windows_tf22_cudart64_101_missing.log").read_text(encoding="utf-8")
    data = text.replace("\n", "\r\n").encode("utf-16")  # with BOM, as `>` in Windows PowerShell 5 writes
    report = exread.explain_stream(io.BytesIO(data))
    assert [f.id for f in report.findings] == [f.id for f in exread.explain_file(LOGS / "windows_tf22_cudart64_101_missing.log").findings]


def test_invalid_utf8_is_replaced() -> None:
    line = _dlopen("libcudart.so.10.0").encode() + b"\xff\xfe\xfa"
    report = exread.explain_stream(io.BytesIO(b"\xc3\x28 bad\n" + line))
    assert [f.id for f in report.findings] == ["dlopen.cudart"]


def test_empty_input() -> None:
    report = exread.explain_stream(io.BytesIO(b""))
    assert report.findings == ()
    assert report.lines == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"schema": "nope"}, "schema"),
        ({"schema": excat.CATALOG_SCHEMA, "entries": [{"id": "a.b"}]}, "missing"),
        ({"schema": excat.CATALOG_SCHEMA, "entries": [
            {"id": "a.b", "severity": "bad", "rank": 1, "pattern": "x", "meaning": "m", "cause": "c",
             "fix": "f", "source": "s"}]}, "severity"),
        ({"schema": excat.CATALOG_SCHEMA, "entries": [
            {"id": "a.b", "severity": "error", "rank": 1, "pattern": "(", "meaning": "m", "cause": "c",
             "fix": "f", "source": "s"}]}, "bad pattern"),
    ],
)
def test_malformed_catalog_is_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(DataError, match=message):
        excat.build_catalog(data)


def test_missing_and_directory_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        exread.explain_file(tmp_path / "nope.log")
    with pytest.raises(InputError, match="directory"):
        exread.explain_file(tmp_path)


# ------------------------------------------------------------------------------------------- CLI


def test_cli_json_validates(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jsonschema = pytest.importorskip("jsonschema")
    code, out, err = cli("explain", str(M60), "--json", "--no-probe")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["findings"][0]["id"] == "dlopen.cudart"
    assert doc["findings"][0]["line"] == next(i for i, t in enumerate(M60.read_text().splitlines(), 1)
                                              if "libcudart.so.10.0" in t)


def test_cli_facts_option(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    facts = tmp_path / "doctor.json"
    facts.write_text(json.dumps({"schema": "tfgpu.doctor/1", "facts": {
        "cuda_toolkits": [{"version": "10.1", "path": "/usr/local/cuda-10.1"}]}}))
    code, out, _ = cli("explain", str(M60), "--json", "--facts", str(facts))
    assert code == 0
    assert "installed here: CUDA 10.1" in json.loads(out)["findings"][0]["cause"]
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code, _, err = cli("explain", str(M60), "--facts", str(bad))
    assert code == 2
    assert err.count("\n") == 1
    code, out, _ = cli("explain", str(M60), "--facts", str(facts))
    assert "machine-specific causes use the facts in" in out


def test_cli_probes_this_machine_by_default(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import tfgpu.facts.probe

    facts = {"schema": "tfgpu.facts/1", "cuda_toolkits": [{"version": "13.0", "path": "/usr/local/cuda-13.0"}]}
    monkeypatch.setattr(tfgpu.facts.probe, "detect_facts", lambda **kw: facts)
    code, out, _ = cli("explain", str(M60), "--json")
    assert code == 0
    doc = json.loads(out)
    assert "installed here: CUDA 13.0 (/usr/local/cuda-13.0)" in doc["findings"][0]["cause"]
    assert any("THIS machine" in n for n in doc["notes"])

    def broken(**kw: object) -> dict[str, object]:
        raise RuntimeError("probe bug")

    monkeypatch.setattr(tfgpu.facts.probe, "detect_facts", broken)
    code, out, _ = cli("explain", str(M60), "--json")
    assert code == 0
    assert any("could not be probed" in n for n in json.loads(out)["notes"])


def test_cli_human_output(cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = cli("explain", str(M60), "--no-probe")
    assert code == 0
    assert out.index("dlopen.cudart") < out.index("gpu.cannot_dlopen_skipping")
    assert "harmless line(s)" in out
    code, out, _ = cli("explain", str(LOGS / "harmless_only_tf215.log"), "--no-probe")
    assert "No problem: only harmless lines." in out


def test_cli_stdin(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    raw = io.BytesIO(M60.read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw))
    code, out, _ = cli("explain", "-", "--json", "--no-probe")
    assert code == 0
    assert json.loads(out)["input"]["name"] == "-"
    assert json.loads(out)["findings"][0]["id"] == "dlopen.cudart"


@pytest.mark.parametrize("kind", ["missing", "directory", "unreadable"])
def test_cli_bad_input_exits_2_with_one_line(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    if kind == "missing":
        target = tmp_path / "none.log"
    elif kind == "directory":
        target = tmp_path
    else:
        target = tmp_path / "locked.log"
        target.write_text("x")
        target.chmod(0)
        if os.access(target, os.R_OK):  # root reads every file: make open() fail as it would
            real_open = Path.open

            def deny(self: Path, *a: object, **k: object) -> object:
                if self == target:
                    raise PermissionError(13, "Permission denied")
                return real_open(self, *a, **k)  # type: ignore[arg-type]

            monkeypatch.setattr(Path, "open", deny)
    code, out, err = cli("explain", str(target), "--no-probe")
    assert code == 2
    assert out == ""
    assert err.startswith("tfgpu: error: ")
    assert err.count("\n") == 1
