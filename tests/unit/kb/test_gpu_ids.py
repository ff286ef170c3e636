"""GPU identification that cannot mismatch (issue 14, section 3).

A GPU's compute capability comes from what the machine reports, else its PCI device ID, else its WHOLE
model name after normalisation; never from part of a name. Pure tests of the lookup (with property
tests), the probes' PCI device IDs against recorded real outputs, the device-ID table's generator on a
recorded pci.ids excerpt, and guards on compat/gpus.toml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from tests.unit.kb.test_tables import COMPAT, _load_script, needs_tomllib
from tfgpu.core.pci import normalize_pci_device_id
from tfgpu.facts.machine import gpu_cc_of
from tfgpu.facts.probe import parsers as P
from tfgpu.facts.probe.driver import resolve_driver
from tfgpu.kb.gpunames import normalize_gpu_name
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import load_toml

KB = load_kb()
SMI = DATA / "probe" / "nvidia-smi"
EXCERPT = DATA / "pciids" / "pci.ids-2026.08.22-nvidia-excerpt.txt"


# --------------------------------------------------------------------------- the bugs, reproduced first


@pytest.mark.parametrize(("name", "cc"), [
    # substring matching took the A30 (8.0) for the RTX A3000 laptop GPU (GA104, 8.6)
    ("NVIDIA RTX A3000 Laptop GPU", "8.6"),
    ("RTX A3000 Laptop", "8.6"),
    ("NVIDIA RTX A3000 12GB Laptop GPU", "8.6"),
    # mobile Maxwell got the desktop chip's 5.2: the 960M/950M are GM107 (5.0), the GTX 960 is GM206
    ("NVIDIA GeForce GTX 960M", "5.0"),
    ("GeForce GTX 950M", "5.0"),
    ("Quadro M1000M", "5.0"),
    ("Quadro M2000M", "5.0"),
    # ... while the GM204 mobile parts are 5.2
    ("GeForce GTX 980M", "5.2"),
    ("Quadro M5000M", "5.2"),
])
def test_names_that_substring_matching_got_wrong(name: str, cc: str) -> None:
    assert KB.gpu_cc(name) == cc


@pytest.mark.parametrize(("name", "cc"), [
    # spellings nvidia-smi / NVML / TF logs print (tests/data/probe, SOURCES.md there) and vendors' names
    ("NVIDIA GeForce RTX 2080 SUPER", "7.5"),
    ("NVIDIA TITAN V", "7.0"),
    ("NVIDIA RTX 5880 Ada Generation", "8.9"),  # pci.ids: AD102GL; the recorded nvidia-smi says 8.9 too
    ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("NVIDIA A100 80GB PCIe", "8.0"),
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "8.0"),
    ("Tesla V100-SXM2-16GB", "7.0"),
    ("Tesla P100-PCIE-16GB", "6.0"),
    ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"),
    ("GeForce GTX 1050 Ti with Max-Q Design", "6.1"),
    ("NVIDIA GeForce RTX 2070 with Max-Q Design", "7.5"),
    ("NVIDIA A40-48Q", "8.6"),  # a vGPU profile of an A40
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0"),
    ("NVIDIA RTX PRO 4000 Blackwell Generation Laptop GPU", "12.0"),
    ("NVIDIA RTX A500 Laptop GPU", "8.6"),
    ("NVIDIA RTX A5500 Laptop GPU", "8.6"),
    ("NVIDIA Jetson T5000", "11.0"),
    ("Jetson AGX Thor", "11.0"),
    ("Orin (nvgpu)", "8.7"),
    ("geforce  gtx_1080", "6.1"),
    ("Tesla M60", "5.2"),
    ("GeForce GT 730", None),  # two chips (GK208 3.5, GF108 2.1): only its device ID can tell
    ("GeForce GTX 860M", None),  # GK104M (3.0) or GM107M (5.0)
    ("GeForce GT 635M", "2.1"),  # Fermi GF108M: identified, so the verdict can say no build runs on it
    ("NVIDIA GeForce RTX 3080 Ti Lap...", None),  # truncated by the nvidia-smi table: never guessed
    ("A3", None),
    ("", None),
])
def test_whole_names(name: str, cc: str | None) -> None:
    assert KB.gpu_cc(name) == cc


def test_normalisation() -> None:
    assert normalize_gpu_name("NVIDIA GeForce RTX 3060 Laptop GPU") == "rtx 3060"
    assert normalize_gpu_name("NVIDIA A100-SXM4-40GB") == "a100"
    assert normalize_gpu_name("TITAN X (Pascal)") == "titan x pascal"
    assert normalize_gpu_name("Quadro M1000M") == "m1000m"
    assert normalize_gpu_name("NVIDIA GH200 480GB") == "gh200"


# --------------------------------------------------------------------------- device IDs


@pytest.mark.parametrize(("raw", "want"), [
    ("0x1e81", "1e81"), ("1E81", "1e81"), ("0x1E8110DE", "1e81"), ("1E8110DE", "1e81"),
    ("0x1E811002", None), ("10de", "10de"), ("", None), (None, None), ("xyz", None), ("0x1e8", None),
])
def test_pci_device_id_forms(raw: str | None, want: str | None) -> None:
    assert normalize_pci_device_id(raw) == want


def test_device_id_wins_over_the_name_and_a_reported_cc_over_both() -> None:
    # 139b is GM107M [GeForce GTX 960M] (5.0); a name that says GTX 960 (GM206, 5.2) does not override it
    assert KB.gpu_cc("GeForce GTX 960", "139b") == "5.0"
    assert KB.gpu_cc("GeForce GTX 960", "0x139B10DE") == "5.0"
    assert KB.gpu_cc("GeForce GTX 960", None) == "5.2"
    assert KB.gpu_cc("some new GPU", "ffff") is None
    # the three chips pci.ids sells as "GeForce GT 730": GF108 (0f02), GK107 (0fc9), GK208B (1287)
    assert KB.gpu_cc("GeForce GT 730", "0f02") == "2.1"
    assert KB.gpu_cc("GeForce GT 730", "0fc9") == "3.0"
    assert KB.gpu_cc("GeForce GT 730", "1287") == "3.5"  # GK208B: GK208's Quadro K610M/K510M are 3.5 (issue 27)
    assert gpu_cc_of(KB, {"name": "GeForce GTX 960", "pci_device_id": "139b", "compute_capability": "5.2"}) == "5.2"
    assert gpu_cc_of(KB, {"name": "GeForce GTX 960", "pci_device_id": "139b"}) == "5.0"


def test_unknown_gpu_keeps_the_reported_capability() -> None:
    assert gpu_cc_of(KB, {"name": "NVIDIA Rubin VR200 prototype", "compute_capability": "10.7"}) == "10.7"
    assert gpu_cc_of(KB, {"name": "NVIDIA Rubin VR200 prototype"}) == ""
    assert KB.arch_name("10.7") == "Rubin"


def test_smi_csv_reads_the_pci_device_id() -> None:
    (gpu,) = P.parse_smi_csv((SMI / "csv-query-gpu-allfields-1gpu-rtx2080super-595.71.05.csv").read_text())
    assert gpu["pci_device_id"] == "1e81"  # 0x1E8110DE
    assert KB.gpu_cc("", gpu["pci_device_id"]) == "7.5"


@pytest.mark.parametrize(("fixture", "device", "cc"), [
    ("xml-1gpu-quadro-p400-418.43.xml", "1cb3", "6.1"),
    ("xml-1gpu-rtx3080-windows-wddm-536.40.xml", "2216", "8.6"),
    ("xml-1gpu-tesla-t4-515.105.01.xml", "1eb8", "7.5"),
    ("xml-a100-sxm4-80gb-mig-535.54.03-attached4-first-gpu-only.xml", "20b2", "8.0"),
])
def test_smi_xml_reads_the_pci_device_id(fixture: str, device: str, cc: str) -> None:
    gpu = P.parse_smi_xml((SMI / fixture).read_text())["gpus"][0]
    assert gpu["pci_device_id"] == device
    assert KB.gpu_cc("", device) == cc
    assert KB.gpu_cc(gpu["name"]) in (cc, None)  # the name, when known, agrees


def test_resolve_driver_takes_device_ids_from_the_pci_bus() -> None:
    """nvidia-smi's table gives no device ID; the lspci -nn devices at the same bus address do."""
    lspci = P.parse_lspci((DATA / "probe" / "lspci" / "lspci-nn-azure-8x-a100-sxm4-80gb.txt").read_text())
    smi = {"driver_version": "535.54.03", "cuda": "12.2", "format": "table",
           "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "pci_bus_id": "00000001:00:00.0"},
                    {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "pci_bus_id": "00000009:00:00.0"}]}
    _drv, gpus, _ = resolve_driver(None, None, smi, {"devices": lspci, "source": "lspci -nn"}, os_name="linux", wsl=None)
    assert gpus[0]["pci_device_id"] == "20b2"
    assert "pci_device_id" not in gpus[1]  # no NVIDIA display device at 0009:00:00.0 in that listing


# --------------------------------------------------------------------------- properties of the tables


def test_no_model_shadows_another() -> None:
    """Every name of `models` (and alias) finds its own row's capability: no entry matches another's."""
    for m in KB.models:
        for name in (m.name, *m.aliases):
            assert KB.gpu_cc(name) == m.cc, name


_NAMES = sorted({n for m in KB.models for n in (m.name, *m.aliases)})
_BY_KEY: dict[str, set[str]] = {}
for _m in KB.models:
    for _n in (_m.name, *_m.aliases):
        _BY_KEY.setdefault(normalize_gpu_name(_n), set()).add(_m.cc)
_SUFFIX = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,6}", fullmatch=True)


@settings(max_examples=120, deadline=None)
@given(name=st.sampled_from(_NAMES), suffix=_SUFFIX)
def test_a_suffix_never_yields_another_entry(name: str, suffix: str) -> None:
    """"<known name> <anything>" is that entry (the suffix was a variant word), the entry whose whole
    name it is, or unknown; never a third entry reached by a substring."""
    got = KB.gpu_cc(f"{name} {suffix}")
    key = normalize_gpu_name(f"{name} {suffix}")
    same = _BY_KEY.get(key, set())
    by_pci = KB._gpu_name_index()[1].get(key)
    allowed = same | ({by_pci} if by_pci else set()) | {None}
    if key == normalize_gpu_name(name):
        allowed.add(KB.gpu_cc(name))
    assert got in allowed


@settings(max_examples=80, deadline=None)
@given(prefix=st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True), name=st.sampled_from(_NAMES))
def test_a_prefix_never_yields_another_entry(prefix: str, name: str) -> None:
    got = KB.gpu_cc(f"{prefix} {name}")
    key = normalize_gpu_name(f"{prefix} {name}")
    same = _BY_KEY.get(key, set())
    by_pci = KB._gpu_name_index()[1].get(key)
    assert got in same | ({by_pci} if by_pci else set()) | {None}


def test_device_rows_are_canonical_and_consistent() -> None:
    rows = load_toml("gpus")["devices"]
    ids = [r["id"] for r in rows]
    assert ids == sorted(set(ids))  # sorted, no duplicates
    archs = {cc for cc, _ in KB.arch_names}
    models = {normalize_gpu_name(n): m.cc for m in KB.models for n in (m.name, *m.aliases)}
    for r in rows:
        assert r["cc"] in archs or (r["cc"], r["via"]) == ("", "unresolved"), r
        assert r["via"] in ("name", "unresolved") or r["via"].startswith("chip "), r
        if r["via"] == "name":  # one of its pci.ids names is a model with that capability
            names = re.search(r"\[([^\]]+)\]\s*$", r["pci_name"]).group(1).split(" / ")
            assert r["cc"] in {models.get(normalize_gpu_name(n)) for n in names}, r


@needs_tomllib
def test_devices_block_is_what_the_generator_writes() -> None:
    script = _load_script("update_gpu_ids")
    text = (COMPAT / "gpus.toml").read_text(encoding="utf-8")
    version = re.search(r"# GENERATED by scripts/update_gpu_ids\.py from pci\.ids version (\S+):", text).group(1)
    block = script.render_block(load_toml("gpus")["devices"], version)
    assert block in text


# --------------------------------------------------------------------------- the generator on recorded pci.ids


@needs_tomllib
def test_generator_joins_names_then_chips() -> None:
    script = _load_script("update_gpu_ids")
    version, devices = script.parse_pci_ids(EXCERPT.read_text())
    assert version == "2026.08.22"
    assert len(devices) == 24  # the vendor's device lines only, not the next vendor's
    models = script.table_models((COMPAT / "gpus.toml").read_text(encoding="utf-8"))
    rows = {r["id"]: r for r in script.build_rows(devices, models)}
    assert (rows["1380"]["cc"], rows["1380"]["via"]) == ("5.0", "name")  # GeForce GTX 750 Ti
    assert (rows["139b"]["cc"], rows["139b"]["via"]) == ("5.0", "chip GM107")  # GTX 960M: GM107, not GM206
    assert (rows["13b1"]["cc"], rows["13b1"]["via"]) == ("5.0", "chip GM107")  # Quadro M1000M
    assert (rows["1401"]["cc"], rows["1401"]["via"]) == ("5.2", "name")  # GeForce GTX 960 (GM206)
    assert rows["13d8"]["cc"] == "5.2"  # "GeForce GTX 960 OEM / 970M" on GM204
    assert rows["24bb"]["cc"] == "8.6"  # RTX A3000 Laptop GPU
    assert rows["2bb3"]["cc"] == "12.0"
    assert "0fbc" not in rows  # the HD audio function of a GM107 board
    assert "22a3" not in rows  # an NVSwitch is not a GPU


@needs_tomllib
def test_generator_refuses_a_chip_whose_names_disagree() -> None:
    script = _load_script("update_gpu_ids")
    devices = [("0001", "GX100", "GX100 [Alpha]"), ("0002", "GX100", "GX100 [Beta]"), ("0003", "GX100", "GX100")]
    assert [r["id"] for r in script.build_rows(devices, {"alpha": "8.0", "beta": "8.6"})] == ["0001", "0002"]
    # a majority of a chip's named devices decides; the odd one out gets nothing (pci.ids 0fc5 "GK107 [GeForce
    # GT 1030]": the GT 1030 is GP108)
    devices = [("0001", "GK107", "GK107 [Alpha]"), ("0002", "GK107", "GK107 [Beta]"), ("0003", "GK107", "GK107 [Odd]"),
               ("0004", "GK107M", "GK107M")]
    rows = script.build_rows(devices, {"alpha": "3.0", "beta": "3.0", "odd": "6.1"})
    assert [(r["id"], r["cc"], r["via"]) for r in rows] == [
        ("0001", "3.0", "name"), ("0002", "3.0", "name"), ("0004", "3.0", "chip GK107")]
    # listed with no capability when its name is also a resolved device's (so the name stays ambiguous)
    rows = script.build_rows([*devices, ("0005", "GP108", "GP108 [Odd]"), ("0006", "GP108", "GP108 [Odd]")],
                             {"alpha": "3.0", "beta": "3.0", "odd": "6.1"})
    assert ("0003", "", "unresolved") in [(r["id"], r["cc"], r["via"]) for r in rows]
    devices = [("0001", "GM107", "GM107 [Alpha]"), ("0002", "GM107", "GM107 [Beta]"), ("0003", "GM107M", "GM107M")]
    rows = script.build_rows(devices, {"alpha": "5.0", "beta": "5.2"})
    assert [(r["id"], r["cc"]) for r in rows] == [("0001", "5.0"), ("0002", "5.2")]  # the unnamed one: no guess
    rows = script.build_rows(devices, {"alpha": "5.0"})
    assert [(r["id"], r["via"]) for r in rows] == [("0001", "name"), ("0002", "chip GM107"), ("0003", "chip GM107")]


@needs_tomllib
def test_generator_diff_then_force(tmp_path: Path) -> None:
    script = _load_script("update_gpu_ids")
    table = tmp_path / "gpus.toml"
    table.write_text((COMPAT / "gpus.toml").read_text(encoding="utf-8"), encoding="utf-8")
    # the excerpt (2026.08.22) is older than the pci.ids the table was made from: --allow-older
    older = ["--pci-ids", str(EXCERPT), "--file", str(table), "--allow-older"]
    assert script.main(older) == 1  # 24 lines != the full table
    assert script.main([*older, "--force"]) == 0
    assert script.main(older) == 0
    assert table.read_text().count('source = "pci-ids" },') == 22


@needs_tomllib
def test_generator_refuses_an_older_pci_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Debian 12's hwdata ships pci.ids 2023.04.10: regenerating from it would drop Blackwell's IDs."""
    script = _load_script("update_gpu_ids")
    old_ids = tmp_path / "pci.ids"
    old_ids.write_text(EXCERPT.read_text().replace("2026.08.22", "2023.04.10"))
    table = tmp_path / "gpus.toml"
    before = (COMPAT / "gpus.toml").read_text(encoding="utf-8")
    table.write_text(before, encoding="utf-8")
    assert script.main(["--pci-ids", str(old_ids), "--file", str(table), "--force"]) == 0
    made_from = re.search(r"from pci\.ids version (\S+):", before).group(1)  # 2026.10.24 since issue 27
    assert f"older than the {made_from}" in capsys.readouterr().out
    assert table.read_text(encoding="utf-8") == before


@pytest.mark.real_subprocess
def test_machine_without_compute_cap_gets_its_device_id_from_sysfs(tmp_path: Path) -> None:
    """A driver whose nvidia-smi rejects compute_cap (recorded) and prints the table (TITAN Xp, bus
    00000000:17:00.0); sysfs lists the device at 0000:17:00.0 as 0x1b02 (GP102 [TITAN Xp] in pci.ids)."""
    from tests.probe_helpers import Profile
    from tfgpu.facts.document import validate_facts
    from tfgpu.facts.probe import detect_facts

    p = Profile(tmp_path)
    p.program("nvidia-smi", {"--query-gpu=*compute_cap*": (SMI / "fail-compute-cap-not-valid-field.txt", 6),
                             "--query-gpu=*": (None, 0)},
              default=(SMI / "table-1gpu-titanxp-450.57-no-processes.txt", 0))
    slot = "/sys/bus/pci/devices/0000:17:00.0"
    p.file(f"{slot}/vendor", "0x10de\n")
    p.file(f"{slot}/class", "0x030000\n")
    p.file(f"{slot}/device", "0x1b02\n")
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    (gpu,) = facts["gpus"]
    assert (gpu["name"], gpu.get("compute_capability"), gpu["pci_device_id"]) == ("TITAN Xp", None, "1b02")
    assert gpu_cc_of(KB, gpu) == "6.1"
    assert validate_facts(facts) == []


def test_the_doctor_says_where_a_looked_up_capability_came_from() -> None:
    from tfgpu.facts.machine import Machine
    from tfgpu.judge.checks import machine_checks

    facts = {"schema": "tfgpu.facts/1", "platform": {"os": "linux"}, "driver": {"version": "450.57", "cuda": "11.0"},
             "gpus": [{"index": 0, "name": "TITAN Xp", "compute_capability": None, "pci_device_id": "1b02"},
                      {"index": 1, "name": "GeForce GTX 960M", "compute_capability": None},
                      {"index": 2, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"}]}
    checks = {c.id: c.summary for c in machine_checks(Machine.from_facts(facts), KB)}
    assert checks["gpu.0"].endswith("compute capability 6.1 (Pascal) (from PCI device ID 1b02, compat/gpus.toml)")
    assert checks["gpu.1"].endswith("compute capability 5.0 (Maxwell) (from its model name, compat/gpus.toml)")
    assert checks["gpu.2"].endswith("compute capability 8.9 (Ada Lovelace)")
