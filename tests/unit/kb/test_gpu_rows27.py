"""Issue 27: GPU rows that were missing from compat/gpus.toml, joined by scripts/update_gpu_ids.py from pci.ids
2026.10.24 (tests/data/pciids/SOURCES.md) and NVIDIA's CUDA GPUs page, and looked up by device id and name."""

from __future__ import annotations

import pytest

from tests.conftest import DATA
from tests.unit.kb.test_tables import COMPAT, _load_script, needs_tomllib
from tfgpu.kb.knowledge import load_kb

KB = load_kb()
EXCERPT = DATA / "pciids" / "pci.ids-2026.10.24-nvidia-gk208-tu117b-excerpt.txt"


def test_a_b_after_a_three_digit_chip_is_the_same_die() -> None:
    script = _load_script("update_gpu_ids")
    assert script.chip_family("GK208BM") == "GK208"
    assert script.chip_family("GK208B") == "GK208"
    assert script.chip_family("TU117BM") == "TU117"
    assert script.chip_family("GK110BGL") == "GK110"
    assert script.chip_family("GB10B") == "GB10B"  # Tegra: a two-digit chip with B is its own family
    assert script.chip_family("GB20B") == "GB20B"
    assert script.chip_family("GB102") == "GB102"


@needs_tomllib
def test_the_generator_resolves_gk208_and_the_gtx_1650_mobile_refresh() -> None:
    script = _load_script("update_gpu_ids")
    version, devices = script.parse_pci_ids(EXCERPT.read_text(encoding="utf-8"))
    assert version == "2026.10.24"
    models = script.table_models((COMPAT / "gpus.toml").read_text(encoding="utf-8"))
    rows = {r["id"]: r for r in script.build_rows(devices, models)}
    # GK208's capability comes from its Quadro K610M / K510M (3.5 on NVIDIA's page) by the chip join
    assert (rows["12b9"]["cc"], rows["12b9"]["via"]) == ("3.5", "name")
    for dev in ("1281", "1286", "1287", "1288", "1289", "128b", "1290", "1292", "1293", "1294"):  # GT 710/720/730, 730M/740M
        assert (rows[dev]["cc"], rows[dev]["via"]) == ("3.5", "chip GK208"), dev
    for dev in ("1fd9", "1fdd"):  # TU117BM [GeForce GTX 1650 Mobile Refresh]: TU117, like the GTX 1650
        assert (rows[dev]["cc"], rows[dev]["via"]) == ("7.5", "chip TU117"), dev
    # GB102 [B100]: no source read gives it a capability (NVIDIA's page lists no B100); listed, unresolved
    assert (rows["29bc"]["cc"], rows["29bc"]["via"]) == ("", "unresolved")
    assert rows["2920"]["cc"] == "10.0"  # GB100 [TS4 / B100]: GB100 is the B200's chip


@pytest.mark.parametrize(("device_id", "cc"), [
    ("1287", "3.5"), ("128b", "3.5"), ("1288", "3.5"),  # GeForce GT 730 / 710 / 720 on GK208B
    ("1281", "3.5"), ("1286", "3.5"),                  # GT 710 / 720 on GK208
    ("1292", "3.5"), ("1293", "3.5"),                  # GT 740M / 730M on GK208M
    ("0f02", "2.1"), ("104d", "2.1"), ("0fc9", "3.0"),  # the same names on GF108 / GF119 / GK107 keep theirs
    ("1fd9", "7.5"), ("1fdd", "7.5"),                  # GeForce GTX 1650 Mobile Refresh
])
def test_the_knowledge_base_knows_the_device(device_id: str, cc: str) -> None:
    assert KB.gpu_cc_by_id(device_id) == cc


def test_an_ambiguous_name_alone_still_gives_no_capability() -> None:
    """GeForce GT 730 is GF108 (2.1), GK107 (3.0) or GK208 (3.5): only the device id tells."""
    assert KB.gpu_cc("NVIDIA GeForce GT 730") is None
    assert KB.gpu_cc("NVIDIA GeForce GT 730", "1287") == "3.5"
    assert KB.gpu_cc("NVIDIA GeForce GTX 1650 Mobile Refresh", "1fd9") == "7.5"
    assert KB.gpu_cc("Quadro K610M") == "3.5"
