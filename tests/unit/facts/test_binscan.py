"""The fatbin / ELF / PE parsers (tfgpu.facts.binscan) against real binaries: nvcc's output and bytes from
TensorFlow wheels, checked against cuobjdump's and readelf's listings of the same files
(tests/data/binscan/SOURCES.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import TESTS
from tfgpu.facts import binscan

DATA = TESTS / "data" / "binscan"
NVCC_SAMPLES = ["nvcc_sm75_sm80_ptx80_ptx90_sm86", "nvcc_compressed_sm75_ptx75_sm100_sm120"]


def cuobjdump_listing(text: str) -> list[tuple[str, int]]:
    """(kind, arch) per line of `cuobjdump --list-elf --list-ptx`, in file order."""
    out = []
    for line in text.splitlines():
        m = re.match(r"(ELF|PTX) file\s+\d+: .*\.sm_(\d+)\.(cubin|ptx)$", line.strip())
        if m:
            out.append(("sass" if m.group(1) == "ELF" else "ptx", int(m.group(2))))
    return out


def readelf_versions(text: str) -> dict[str, str]:
    pairs = [("", m) for m in re.findall(r"Name: ((?:GLIBC|GLIBCXX|CXXABI)_[\d.]+)", text)]
    return binscan.max_versions(pairs)


def entries(scan: binscan.ObjectScan) -> list[tuple[str, int]]:
    return [(e.kind, e.arch) for c in scan.containers for e in c.entries]


@pytest.mark.parametrize("stem", NVCC_SAMPLES)
def test_fatbin_entries_of_nvcc_output_match_cuobjdump(stem: str) -> None:
    scan = binscan.scan_bytes((DATA / f"{stem}.so").read_bytes())
    want = cuobjdump_listing((DATA / f"{stem}.cuobjdump.txt").read_text())
    assert scan.kind == "elf"
    assert sorted(entries(scan)) == sorted(want)
    assert scan.stray == 0
    assert [s.name for s in scan.fatbin_sections] == [".nv_fatbin"]


def test_compressed_entries_are_flagged() -> None:
    scan = binscan.scan_bytes((DATA / "nvcc_compressed_sm75_ptx75_sm100_sm120.so").read_bytes())
    assert all(e.compressed for c in scan.containers for e in c.entries)
    plain = binscan.scan_bytes((DATA / "nvcc_sm75_sm80_ptx80_ptx90_sm86.so").read_bytes())
    assert not any(e.compressed for c in plain.containers for e in c.entries if e.kind == "sass")


@settings(max_examples=25, deadline=None)
@given(chunk=st.integers(min_value=61, max_value=30_000), stem=st.sampled_from(NVCC_SAMPLES))
def test_streaming_in_any_chunk_size_finds_the_same(chunk: int, stem: str) -> None:
    data = (DATA / f"{stem}.so").read_bytes()
    whole = binscan.scan_bytes(data, chunk=len(data))
    pieces = binscan.scan_bytes(data, chunk=chunk)
    assert entries(pieces) == entries(whole)
    assert pieces.versions == whole.versions
    assert [c.offset for c in pieces.containers] == [c.offset for c in whole.containers]


@pytest.mark.parametrize("stem", ["nvcc_sm75_sm80_ptx80_ptx90_sm86", "tf_gpu_1.0.0_cp27_api_implementation"])
def test_symbol_versions_match_readelf(stem: str) -> None:
    scan = binscan.scan_bytes((DATA / f"{stem}.so").read_bytes())
    assert scan.versions == readelf_versions((DATA / f"{stem}.readelf-V.txt").read_text())
    assert scan.versions["GLIBC"] == "2.2.5"


def test_needed_libraries_match_readelf() -> None:
    scan = binscan.scan_bytes((DATA / "tf_gpu_1.0.0_cp27_api_implementation.so").read_bytes())
    want = re.findall(r"\[(.+?)\]", (DATA / "tf_gpu_1.0.0_cp27_api_implementation.readelf-d.txt").read_text())
    assert scan.needed == want


def test_a_second_pass_supplies_what_the_first_did_not_keep() -> None:
    """The streaming scanner keeps only the file's first 4 kB and the last megabytes before the section
    header table; sections elsewhere come from a second pass (scan_bytes does both)."""
    data = (DATA / "tf_gpu_1.0.0_cp27_api_implementation.so").read_bytes()
    scanner = binscan.ObjectScanner()
    for i in range(0, len(data), 1000):
        scanner.feed(data[i : i + 1000])
    first = scanner.finish()
    assert first.versions  # everything of this small file is in the kept ranges already
    assert first.need == []


def test_pe_section_table_of_a_real_pyd() -> None:
    head = (DATA / "tf_gpu_1.0.0_win_pywrap_head.bin").read_bytes()
    sections = binscan.pe_sections(head)
    assert sections is not None
    names = [s.name for s in sections]
    assert names[:2] == [".text", ".rdata"]
    fatb = next(s for s in sections if s.name == ".nv_fatb")  # the image keeps 8 bytes of ".nv_fatbin"
    assert (fatb.offset, fatb.size) == (41157632, 106336256)
    assert binscan.pe_sections(head[:300]) is None  # the table is not complete yet: more bytes needed


def test_a_real_fatbin_container_from_a_windows_wheel() -> None:
    blob = (DATA / "tf_gpu_1.0.0_win_pywrap_fatbin_84369888.bin").read_bytes()
    (container,) = binscan.parse_fatbins(blob, 84369888)
    assert container.offset == 84369888
    assert container.size == len(blob)
    assert [(e.kind, e.arch) for e in container.entries] == [
        ("sass", 30), ("ptx", 30), ("sass", 35), ("ptx", 35), ("sass", 52), ("ptx", 52)]
    assert [e.compressed for e in container.entries] == [False, True] * 3


def test_summarize_counts_containers_and_entries() -> None:
    blob = (DATA / "tf_gpu_1.0.0_win_pywrap_fatbin_84369888.bin").read_bytes()
    containers = binscan.parse_fatbins(blob + b"\0" * 8 + blob)
    summ = binscan.summarize(containers)
    assert summ["sass"] == {30: (2, 2), 35: (2, 2), 52: (2, 2)}
    assert summ["ptx"][52] == (2, 2)


def test_bytes_that_only_look_like_a_container_are_skipped() -> None:
    blob = (DATA / "tf_gpu_1.0.0_win_pywrap_fatbin_84369888.bin").read_bytes()
    fake = binscan.FATBIN_MAGIC + b"\x07\x00\x10\x00" + b"\x40" + b"\0" * 7  # version 7: not a container
    (container,) = binscan.parse_fatbins(fake + blob[:16] + b"\xff" * 64 + blob)[-1:]
    assert len(container.entries) == 6


@pytest.mark.parametrize("data", [b"", b"\x7fEL", b"MZ" + b"\0" * 10, b"\x7fELF\x01\x01" + b"\0" * 58])
def test_malformed_headers_raise_format_error(data: bytes) -> None:
    parse = binscan.pe_sections if data.startswith(b"MZ") else binscan.elf_header
    with pytest.raises(binscan.FormatError):
        parse(data)


def test_max_versions_compares_numerically() -> None:
    pairs = [("libc.so.6", "GLIBC_2.9"), ("libc.so.6", "GLIBC_2.23"), ("libc.so.6", "GLIBC_2.2.5"),
             ("libstdc++.so.6", "GLIBCXX_3.4.9"), ("libstdc++.so.6", "GLIBCXX_3.4.21"), ("x", "GCC_3.0")]
    assert binscan.max_versions(pairs) == {"GLIBC": "2.23", "GLIBCXX": "3.4.21"}


def _cuobjdump() -> str | None:
    """TFGPU_CUOBJDUMP, PATH, the toolkit, or the nvidia-cuda-cuobjdump wheel (`nox -s slow` installs it)."""
    import sysconfig

    wheel = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "cuobjdump"
    for cand in (os.environ.get("TFGPU_CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump",
                 str(wheel)):
        if cand and Path(cand).exists():
            return cand
    return None


@pytest.mark.slow
@pytest.mark.real_subprocess
@pytest.mark.parametrize("gencode", [
    ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_89,code=[sm_89,compute_89]"],
    ["-gencode", "arch=compute_80,code=compute_80"],
    ["-Xfatbin=-compress-all", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
     "-gencode", "arch=compute_120,code=sm_120"],
])
def test_fresh_nvcc_output_matches_cuobjdump(tmp_path: Path, gencode: list[str]) -> None:
    """Compile with the real nvcc here and compare with cuobjdump (TFGPU_CUOBJDUMP, PATH or the toolkit;
    `pip install nvidia-cuda-cuobjdump` provides one)."""
    nvcc, cuobjdump = "/usr/local/cuda/bin/nvcc", _cuobjdump()
    if not Path(nvcc).exists() or cuobjdump is None:
        pytest.skip("needs nvcc and cuobjdump")
    out = tmp_path / "k.so"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(DATA / "kernels.cu"), *gencode],
                   check=True, capture_output=True, timeout=300)
    listing = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(out)], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    scan = binscan.scan_bytes(out.read_bytes(), chunk=4096)
    assert sorted(entries(scan)) == sorted(cuobjdump_listing(listing))
    assert scan.stray == 0
