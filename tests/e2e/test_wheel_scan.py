"""Facts read from TensorFlow's wheels: compat/wheel_scan.json (the scan record), the tables rendered from it
(compat/tf_archs.toml's official rows, compat/wheels.toml) and the verdict rules that use them."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import pytest
import tomllib
from packaging.version import Version

from tests import REPO
from tests.conftest import load_file_module
from tests.unit.judge.test_verdict import base_facts
from tfgpu.core.record import replace
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.records import ArchTargets
from tfgpu.kb.specifiers import VersionSpec

COMPAT = REPO / "compat"
KB = load_kb()
RECORD = json.loads((COMPAT / "wheel_scan.json").read_text(encoding="utf-8"))
BY_FILE = {w["file"]: w for w in RECORD["wheels"]}
ARCHS = tomllib.loads((COMPAT / "tf_archs.toml").read_text(encoding="utf-8"))
WHEELS = tomllib.loads((COMPAT / "wheels.toml").read_text(encoding="utf-8"))
SCANNED_ROWS = [r for r in ARCHS["archs"] if "wheel" in r]
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _script() -> types.ModuleType:
    return load_file_module(REPO / "scripts" / "scan_wheel_archs.py", "tfgpu_script_scan_wheel_archs")


# --------------------------------------------------------------------------- the record and the tables


def test_the_tables_are_what_the_record_renders() -> None:
    """`scan_wheel_archs.py --check` offline: regenerating from the committed record changes nothing."""
    script = _script()
    rendered = script.render_all(RECORD, COMPAT)
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is not what the record renders"


def test_check_mode_reports_up_to_date_without_the_network(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    monkeypatch.setattr(script, "http_get", lambda *a, **k: pytest.fail("network used"))
    assert script.main(["--check"]) == 0
    assert "tf_archs.toml: up to date" in capsys.readouterr().out


@pytest.mark.parametrize("row", SCANNED_ROWS, ids=lambda r: f"{r['tf']}-{r['os']}")
def test_every_scanned_row_cites_a_wheel_and_its_sha256_from_the_record(row: dict[str, Any]) -> None:
    assert SHA256.match(row["sha256"])
    assert BY_FILE[row["wheel"]]["sha256"] == row["sha256"]
    url = ARCHS["sources"][row["source"]]["url"]
    assert url.startswith("https://files.pythonhosted.org/packages/")
    assert url.endswith("/" + row["wheel"])
    if "wheel_newest" in row:
        assert BY_FILE[row["wheel_newest"]]["sha256"] == row["sha256_newest"]
    assert "confidence" not in row  # read from the binary, not inferred


def test_no_inferred_official_row_remains_where_the_scan_covers_the_series() -> None:
    for row in ARCHS["archs"]:
        if row.get("build", "pip") != "pip" or "wheel" in row:
            continue
        spec = VersionSpec(row["tf"])
        covered = [r for r in SCANNED_ROWS if r["os"] == row.get("os", "linux")
                   and any(Version(f"{a}.{b}.0") in spec and Version(f"{a}.{b}.0") in VersionSpec(r["tf"])
                           for a in (1, 2) for b in range(40))]
        uncovered = [f"{a}.{b}" for a in (1, 2) for b in range(40) if Version(f"{a}.{b}.0") in spec
                     and not any(Version(f"{a}.{b}.0") in VersionSpec(r["tf"]) for r in covered)]
        assert uncovered, f"hand-curated row {row['tf']} {row.get('os')} is fully covered by scanned rows"


def test_conda_forge_rows_are_kept() -> None:
    forge = [r for r in ARCHS["archs"] if r.get("build") == "conda-forge"]
    assert len(forge) >= 6
    assert all("wheel" not in r for r in forge)


def test_every_wheels_row_cites_a_wheel_the_record_read() -> None:
    assert WHEELS["schema"] == "tfgpu.compat.wheels/1"
    for row in WHEELS["wheels"]:
        assert BY_FILE[row["file"]]["sha256"] == row["sha256"]
        assert row["source"] in WHEELS["sources"]


def test_record_is_canonical() -> None:
    script = _script()
    assert script.dump_record(RECORD) == (COMPAT / "wheel_scan.json").read_text(encoding="utf-8")


def test_arch_facts_left_out_bundled_nvidia_libraries_and_count_shares() -> None:
    script = _script()
    wheel = {"objects": {
        "tensorflow/python/_pywrap_tensorflow_internal.so": {"containers": 10, "sass": {"35": [10, 10], "80": [2, 2]},
                                                            "ptx": {"80": [10, 10]}},
        "tensorflow/python/libnvinfer.so.4": {"containers": 90, "sass": {"30": [90, 90]}, "ptx": {}},
    }}
    facts = script.arch_facts(wheel)
    assert facts["kernels"] == 10
    assert facts["sass"] == ["3.5"]
    assert facts["sass_partial"] == "8.0=0.200"
    assert facts["ptx"] == ["8.0"]


# --------------------------------------------------------------------------- facts the binaries settled


def _row(v: str, os: str) -> ArchTargets:
    archs = KB.archs_for(v, os)
    assert archs is not None
    assert archs.wheel, f"{v} {os} is not read from a wheel yet"
    return archs


def test_windows_1_11_and_1_12_carry_only_sm37_and_compute37() -> None:
    for v in ("1.11.0", "1.12.0"):
        archs = _row(v, "windows")
        assert archs.sass == ("3.7",)
        assert archs.ptx == "3.7"


def test_1x_carries_far_more_than_the_documented_3_5() -> None:
    assert _row("1.0.0", "linux").sass == ("3.0", "3.5", "5.2")
    assert {"3.7", "6.0", "6.1", "7.0"} <= set(_row("1.10.0", "linux").sass)


def test_2_4_carries_sm80_sass() -> None:
    assert "8.0" in _row("2.4.0", "linux").sass


def test_the_windows_1_12_machine_with_a_pascal_gpu_jit_compiles_from_compute_37() -> None:
    facts = base_facts(platform={"os": "windows", "arch": "x86_64", "distro": "windows 10", "glibc": None,
                                 "wsl": None, "container": False},
                       gpus=[{"index": 0, "name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1",
                              "memory_mib": 8192, "uuid": "GPU-1"}],
                       python={"current": "3.6.8", "interpreters": [{"version": "3.6.8", "path": "C:/Python36/python.exe"}]})
    tv = judge_release(facts, KB, Version("1.12.0"), backend="pip")
    jit = _found(tv, "gpu.ptx_jit")
    assert jit, tv
    assert "compute_37" in jit[0].summary


# --------------------------------------------------------------------------- the verdict rule for shares


def _found(tv: Any, check: str) -> list[Any]:
    """Findings ``check`` of a target verdict, its own and its backends' (a blocked target keeps them there)."""
    every = [*tv.blockers, *tv.caveats, *(f for b in tv.backends for f in (*b.blockers, *b.caveats))]
    return [f for f in every if f.check == check]


def _kb_with(row: ArchTargets) -> Any:
    return replace(KB, archs=(row, *KB.archs))


def _gpu_facts(cc: str) -> dict[str, Any]:
    return base_facts(gpus=[{"index": 0, "name": "Some GPU", "compute_capability": cc, "memory_mib": 24576,
                             "uuid": "GPU-1"}])


def _partial_row(ptx: str | None) -> ArchTargets:
    base = KB.archs_for("2.10.0", "linux")
    assert base is not None
    return replace(base, tf=VersionSpec("==2.10.0"), sass=("3.5", "5.0", "6.0", "7.0", "7.5"),
                   sass_partial=(("8.0", 0.25),), ptx=ptx, ptx_all=(ptx,) if ptx else (), ptx_fails=())


def test_a_gpu_only_some_kernels_carry_sass_for_jit_compiles_the_rest_from_ptx() -> None:
    kb = _kb_with(_partial_row("8.0"))
    tv = judge_release(_gpu_facts("8.6"), kb, Version("2.10.0"), backend="pip")
    jit = _found(tv, "gpu.ptx_jit")
    assert jit
    assert "25%" in jit[0].summary
    assert not _found(tv, "gpu.arch")


def test_a_gpu_only_some_kernels_carry_sass_for_without_ptx_is_blocked() -> None:
    kb = _kb_with(_partial_row(None))
    tv = judge_release(_gpu_facts("8.6"), kb, Version("2.10.0"), backend="pip")
    arch = _found(tv, "gpu.arch")
    assert arch
    assert "25%" in arch[0].summary


def test_partial_share_needs_the_same_major_and_a_lower_minor() -> None:
    row = _partial_row("8.0")
    assert row.partial_share(Version("8.6")) == 0.25
    assert row.partial_share(Version("8.0")) == 0.25
    assert row.partial_share(Version("9.0")) == 0.0
    assert row.partial_share(Version("7.5")) == 0.0


@pytest.mark.parametrize("row", [r for r in SCANNED_ROWS if r.get("sass_partial")],
                         ids=lambda r: f"{r['tf']}-{r['os']}")
def test_generated_cases_for_every_partial_architecture(row: dict[str, Any]) -> None:
    """From the rows: a GPU of each partial architecture is JIT-compiled (a PTX <= it) or blocked."""
    v = Version(BY_FILE[row["wheel"]]["version"])
    ptx = Version(row["ptx"]) if row.get("ptx") else None
    for item in row["sass_partial"].split(","):
        arch = item.split("=")[0]
        if any(Version(s).major == Version(arch).major and Version(s) <= Version(arch)
               for s in row["sass"].split(",") if s):
            continue
        tv = judge_release(_gpu_facts(arch), KB, v, backend="pip")
        if ptx is not None and ptx <= Version(arch):
            assert _found(tv, "gpu.ptx_jit"), (row, arch)
        else:
            assert _found(tv, "gpu.arch"), (row, arch)


# --------------------------------------------------------------------------- glibc from the symbol versions


def _glibc_gap() -> Any:
    """A read Linux wheel whose .so files need a newer glibc than its manylinux tag promises."""
    for w in KB.wheels:
        rel = KB.release(w.dist, w.version)
        if w.os == "linux" and w.glibc and rel is not None and rel.glibc and w.glibc > rel.glibc:
            return w, rel
    pytest.skip("no read wheel needs more than its tag")


def test_the_glibc_floor_comes_from_the_symbol_versions() -> None:
    wheel, rel = _glibc_gap()
    py = f"{wheel.python[2]}.{wheel.python[3:]}"
    interp = {"current": f"{py}.1", "interpreters": [{"version": f"{py}.1", "path": "/usr/bin/python"}]}
    between = base_facts(python=interp, platform__glibc=str(rel.glibc))
    tv = judge_release(between, KB, wheel.version, backend="pip")
    pip = next(b for b in tv.backends if b.backend == "pip")
    found = [b for b in pip.blockers if b.check == "glibc.symbols"]
    assert found, pip
    assert f"GLIBC_{wheel.glibc}" in found[0].summary
    enough = base_facts(python=interp, platform__glibc=str(wheel.glibc))
    tv = judge_release(enough, KB, wheel.version, backend="pip")
    pip = next(b for b in tv.backends if b.backend == "pip")
    assert not [b for b in pip.blockers if b.check.startswith("glibc.")]


def test_the_tag_still_decides_whether_pip_installs() -> None:
    wheel, _rel = _glibc_gap()
    below = base_facts(platform__glibc="2.4")
    tv = judge_release(below, KB, wheel.version, backend="pip")
    pip = next(b for b in tv.backends if b.backend == "pip")
    assert [b for b in pip.blockers if b.check == "glibc.manylinux"]


def test_tensorflow_1_15_0_is_a_cuda_build_and_1_15_2_is_not() -> None:
    if not KB.wheel_facts("tensorflow", "1.15.2"):
        pytest.skip("1.15.2 not read yet")
    assert KB.cuda_build("tensorflow", "1.15.0") is True
    assert KB.cuda_build("tensorflow", "1.15.2") is False


def test_tensorflow_gpu_1_5_is_a_cuda_build_read_from_its_wheel() -> None:
    assert KB.cuda_build("tensorflow-gpu", "1.5.0") is True


# --------------------------------------------------------------------------- networked


@pytest.mark.network
def test_scanning_a_real_wheel_from_pypi_matches_the_record() -> None:
    """Reads tensorflow_gpu-1.0.0-cp35-cp35m-win_amd64.whl (41 MB) from PyPI again."""
    script = _script()
    w = next(w for w in RECORD["wheels"] if w["file"] == "tensorflow_gpu-1.0.0-cp35-cp35m-win_amd64.whl")
    fresh = script.scan_wheel(w["url"], full=True)
    assert fresh["sass"] == w["sass"]
    assert fresh["ptx"] == w["ptx"]
    assert fresh["containers"] == w["containers"]


def test_record_path_is_in_the_repository() -> None:
    assert Path(COMPAT / "wheel_scan.json").stat().st_size > 1000


# --------------------------------------------------------------------------- tfgpu compat --json


def _compat_json(cli: Any, *args: str) -> dict[str, Any]:
    code, out, err = cli("compat", *args, "--json")
    assert err == ""
    assert code == 0
    doc: dict[str, Any] = json.loads(out)
    return doc


@pytest.fixture(scope="module")
def compat_validator() -> Any:
    import jsonschema

    schema = json.loads((REPO / "src" / "tfgpu" / "core" / "schemas" / "compat.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def test_compat_json_shows_the_scanned_gpu_code_and_the_wheel_it_came_from(cli: Any, compat_validator: Any) -> None:
    doc = _compat_json(cli, "--tf", "1.12", "--os", "windows")
    compat_validator.validate(doc)
    (row,) = doc["rows"]
    cc = row["compute_capabilities"]
    assert cc["sass"] == ["3.7"]
    assert cc["ptx_all"] == ["3.7"]
    assert cc["wheel"]["file"].startswith("tensorflow_gpu-1.12.0-")
    assert SHA256.match(cc["wheel"]["sha256"])
    assert cc["kernels"] > 100


def test_compat_json_shows_glibc_floors_and_cuda_builds(cli: Any, compat_validator: Any) -> None:
    doc = _compat_json(cli, "--tf", "1.15", "--os", "linux")
    compat_validator.validate(doc)
    (row,) = doc["rows"]
    builds = {(b["dist"], b["version"]): b for b in row["wheel_builds"]}
    assert builds[("tensorflow", "1.15.0")]["cuda_build"] is True
    if ("tensorflow", "1.15.2") in builds:
        assert builds[("tensorflow", "1.15.2")]["cuda_build"] is False
    read = [r for r in row["releases"] if r["glibc_symbols"]]
    assert read
    for rel in read:
        assert rel["glibc_symbols_by_python"]
        assert rel["glibc_symbols"] == min(rel["glibc_symbols_by_python"].values(), key=Version)
        assert all(SHA256.match(w["sha256"]) for w in rel["wheels_read"])


# --------------------------------------------------------------------------- the record against cuobjdump

CROSS_CHECKS = [
    ("tensorflow-2.4.0-cp38-cp38-manylinux2010_x86_64.whl", "tensorflow/python/_pywrap_tensorflow_internal.so",
     "tensorflow-2.4.0-cp38-linux_pywrap_tensorflow_internal"),
    ("tensorflow-2.10.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     "tensorflow/python/_pywrap_tensorflow_internal.so", "tensorflow-2.10.0-cp310-linux_pywrap_tensorflow_internal"),
]


@pytest.mark.parametrize(("wheel", "member", "stem"), CROSS_CHECKS)
def test_record_entry_counts_match_cuobjdump_on_the_real_member(wheel: str, member: str, stem: str) -> None:
    """cuobjdump 11.8's listing of the member (tests/data/binscan/SOURCES.md) against the record's counts."""
    from collections import Counter

    data = REPO / "tests" / "data" / "binscan"
    for kind, flag in (("sass", "elf"), ("ptx", "ptx")):
        text = (data / f"{stem}.cuobjdump-list-{flag}.txt").read_text(encoding="utf-8")
        listed = Counter(re.findall(r"\.sm_(\d+)\.(?:cubin|ptx)$", text, flags=re.MULTILINE))
        counted = {a: n_ent for a, (_n_cont, n_ent) in BY_FILE[wheel]["objects"][member][kind].items()}
        assert counted == dict(listed), kind


def test_no_symbol_floor_is_claimed_while_a_usable_wheel_is_unread() -> None:
    """A machine whose Pythons include a tag nobody read: that wheel may need less, so only the tag counts."""
    wheel, rel = _glibc_gap()
    others = [p for p in rel.linux_pythons if f"cp{p.replace('.', '')}" != wheel.python]
    if not others:
        pytest.skip("the release has one Linux tag")
    kb = replace(KB, wheels=(wheel,))
    py = f"{wheel.python[2]}.{wheel.python[3:]}"
    interp = {"current": f"{py}.1", "interpreters": [{"version": f"{v}.1", "path": f"/usr/bin/python{v}"}
                                                     for v in (py, others[0])]}
    facts = base_facts(python=interp, platform__glibc=str(rel.glibc))
    tv = judge_release(facts, kb, wheel.version, backend="pip")
    assert not _found(tv, "glibc.symbols")
    only = base_facts(python={"current": f"{py}.1", "interpreters": [{"version": f"{py}.1", "path": "/usr/bin/python"}]},
                      platform__glibc=str(rel.glibc))
    assert _found(judge_release(only, kb, wheel.version, backend="pip"), "glibc.symbols")


def test_every_python_tag_and_both_distributions_carry_the_same_gpu_code() -> None:
    """One wheel per release stands for all: every other wheel read of it (other Python tags; tensorflow-gpu
    next to tensorflow in 2.1-2.11) has the same SASS/PTX facts."""
    script = _script()
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for w in RECORD["wheels"]:
        if w.get("full") and w.get("containers"):
            groups.setdefault((w["version"], w["os"]), []).append(w)
    compared = 0
    for (version, os_name), wheels in groups.items():
        first = script.arch_facts(wheels[0])
        for other in wheels[1:]:
            facts = script.arch_facts(other)
            assert (facts["sass"], facts["ptx"]) == (first["sass"], first["ptx"]), (version, os_name, other["file"])
            compared += 1
    assert compared >= 20


@pytest.mark.parametrize(("dist", "ver", "cpu"), [("tensorflow", "1.15.3", True), ("tensorflow", "1.15.0", False),
                                                   ("tensorflow", "2.0.0", True), ("tensorflow-gpu", "2.0.0", False)])
def test_an_installed_cpu_only_build_is_named(dist: str, ver: str, cpu: bool) -> None:
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.checks import machine_checks

    facts = base_facts(tensorflow=[{"distribution": dist, "version": ver, "path": "/env/lib/python3.7/site-packages"}])
    checks = {c.id: c for c in machine_checks(Machine.from_facts(facts), KB)}
    assert ("tf.cpu_build" in checks) is cpu
    if cpu:
        assert checks["tf.cpu_build"].status == "warn"
