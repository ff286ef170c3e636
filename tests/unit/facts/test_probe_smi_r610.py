"""NVIDIA R610+ drivers renamed `Driver Version` / `CUDA Version` to `KMD Version` / `CUDA UMD Version` in the
`nvidia-smi` table (sgl-project/sglang#27487, EricLBuehler/mistral.rs#2287; fixtures in tests/data/probe/nvidia-smi,
provenance in tests/data/probe/SOURCES.md). Both spellings are read, by the parser and by the whole probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.probe_helpers import PROBE, Profile
from tfgpu.facts.probe import detect_facts
from tfgpu.facts.probe import parsers as P

SMI = PROBE / "nvidia-smi"
B200 = SMI / "table-2gpu-b200-610.43.02-kmd-umd-TRUNCATED.txt"
RTX5070 = SMI / "table-1gpu-rtx5070-laptop-610.43.02-kmd-umd-TRUNCATED.txt"


@pytest.mark.parametrize(("fixture", "names", "mem0", "bus0"), [
    (B200, ["NVIDIA B200", "NVIDIA B200"], 183359, "00000000:63:00.0"),
    (RTX5070, ["NVIDIA GeForce RTX 5070 ..."], 12227, "00000000:02:00.0"),
])
def test_the_r610_table_header_is_read(fixture: Path, names: list[str], mem0: int, bus0: str) -> None:
    text = fixture.read_text()
    assert "KMD Version:" in text  # the fixture is what the test says it is
    assert "Driver Version:" not in text
    out = P.parse_smi_table(text)
    assert (out["smi_version"], out["driver_version"], out["cuda"]) == ("610.43.02", "610.43.02", "13.3")
    assert [g["name"] for g in out["gpus"]] == names
    assert (out["gpus"][0]["memory_mib"], out["gpus"][0]["pci_bus_id"]) == (mem0, bus0)


def test_the_old_spelling_is_still_read() -> None:
    out = P.parse_smi_table((SMI / "table-8gpu-h100-550.90.07.txt").read_text())
    assert (out["driver_version"], out["cuda"]) == ("550.90.07", "12.4")


@pytest.mark.real_subprocess  # the fake nvidia-smi of the machine profile is a script that runs
def test_an_r610_machine_gets_its_driver_and_cuda_from_the_table(tmp_path: Path) -> None:
    """The csv query gives no driver version here, so the table's header is the only source: before R610 support
    the probe found neither the driver nor its CUDA version (and fell through to `-q -x`)."""
    p = Profile(tmp_path)
    p.program("nvidia-smi", {"--query-gpu=*": (None, 0), "-q -x": (None, 9)}, default=(B200, 0))
    facts = detect_facts(root=tmp_path, env=p.env, timeout=2.0)
    assert facts["driver"]["version"] == "610.43.02"
    assert facts["driver"]["cuda"] == "13.3"
    assert [g["name"] for g in facts["gpus"]] == ["NVIDIA B200", "NVIDIA B200"]
