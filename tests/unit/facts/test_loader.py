"""The loader's search, simulated (tfgpu.facts.loader): glibc's order, $ORIGIN, the ld.so.cache parser against
this machine's real `ldconfig -p`, and the ELF links reader against the real `readelf -d`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.elf_builder import elf_bytes
from tfgpu.facts import loader
from tfgpu.facts.binscan import FormatError, read_links
from tfgpu.facts.probe.parsers import parse_ldconfig


def test_rpath_is_searched_first_only_without_runpath() -> None:
    with_rpath = loader.linux_search(caller="/e/tf/libtensorflow_framework.so.1", rpath="$ORIGIN/", runpath=None,
                                     ld_library_path="/opt/a")
    assert [(d.path, d.via) for d in with_rpath] == [("/e/tf", "RPATH"), ("/opt/a", "LD_LIBRARY_PATH")]
    both = loader.linux_search(caller="/e/tf/x.so", rpath="/r", runpath="$ORIGIN/../nvidia/cudnn/lib",
                               ld_library_path="/opt/a:")
    # RUNPATH present: RPATH ignored; LD_LIBRARY_PATH before RUNPATH (ld.so(8))
    assert [(d.path, d.via) for d in both] == [("/opt/a", "LD_LIBRARY_PATH"), ("/e/nvidia/cudnn/lib", "RUNPATH")]


def test_the_executables_rpath_follows_the_callers_own_only_without_runpath() -> None:
    """glibc's dl-load.c: without a DT_RUNPATH in the caller, the RPATHs of the caller (and its loaders), then the
    executable's DT_RPATH, $ORIGIN there being the executable's directory (conda's python: $ORIGIN/../lib). TF 2.6.0's
    framework has DT_RPATH $ORIGIN/, 2.7.0's DT_RUNPATH $ORIGIN/ (read from the wheels): tensorflow#52988's pair."""
    fw, exe = "/c/sp/tensorflow/libtensorflow_framework.so.2", "/c/bin/python3.8"
    old = loader.linux_search(caller=fw, rpath="$ORIGIN/", runpath=None, ld_library_path=None,
                              exe_rpath="$ORIGIN/../lib", exe=exe)
    assert [(d.path, d.via) for d in old] == [("/c/sp/tensorflow", "RPATH"), ("/c/lib", "RPATH of the executable")]
    new = loader.linux_search(caller=fw, rpath=None, runpath="$ORIGIN/", ld_library_path=None,
                              exe_rpath="$ORIGIN/../lib", exe=exe)
    assert [(d.path, d.via) for d in new] == [("/c/sp/tensorflow", "RUNPATH")]


def test_origin_forms_expand_and_normalise() -> None:
    assert loader.expand_origin("${ORIGIN}/../../nvidia/cublas/lib::$ORIGIN", "/sp/tensorflow") == [
        "/nvidia/cublas/lib", "/sp/tensorflow"]


def test_ld_library_path_beats_runpath_and_cache_beats_defaults() -> None:
    search = loader.linux_search(caller="/sp/tensorflow/libtensorflow_framework.so.2", rpath=None,
                                 runpath="$ORIGIN/../nvidia/cudnn/lib", ld_library_path="/usr/local/cuda/lib64")
    listing = {"/usr/local/cuda/lib64": ["libcudnn.so.9"], "/sp/nvidia/cudnn/lib": ["libcudnn.so.9"]}
    res = loader.resolve("libcudnn.so.9", search, listing)
    assert (res.path, res.via) == ("/usr/local/cuda/lib64/libcudnn.so.9", "LD_LIBRARY_PATH")
    assert res.others == (("/sp/nvidia/cudnn/lib/libcudnn.so.9", "RUNPATH"),)
    cached = loader.resolve("libcuda.so.1", [], {"/usr/lib/x86_64-linux-gnu": ["libcuda.so.1"]},
                            cache=[("libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")])
    assert (cached.path, cached.via) == ("/usr/lib/wsl/lib/libcuda.so.1", "ld.so.cache")
    assert cached.others == (("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "default directory"),)
    assert loader.resolve("libcuda.so.1", [], {}).path is None


def test_windows_order_is_case_insensitive() -> None:
    search = loader.windows_search(dll_directories=[r"C:\env\Library\bin"], app_dir=r"C:\env",
                                   system_root=r"C:\Windows", path=r"C:\CUDA\v11.2\bin;C:\x")
    assert [d.via for d in search][:3] == ["add_dll_directory", "application directory", "System32"]
    res = loader.resolve("cudart64_110.dll", search, {r"C:\CUDA\v11.2\bin": ["CUDART64_110.DLL"]}, windows=True)
    assert res.path == r"C:\CUDA\v11.2\bin\cudart64_110.dll"
    assert res.via == "PATH"


@given(st.lists(st.sampled_from(["/a", "/b", "/c", "/d"]), max_size=6), st.sets(st.sampled_from(["/a", "/b", "/c", "/d"])))
def test_the_first_directory_that_holds_the_name_wins(order: list[str], holders: set[str]) -> None:
    search = [loader.SearchDir(d, "LD_LIBRARY_PATH") for d in order]
    res = loader.resolve("libx.so.1", search, {d: ["libx.so.1"] for d in holders}, defaults=())
    first = next((d for d in order if d in holders), None)
    assert res.path == (f"{first}/libx.so.1" if first else None)
    assert len(res.others) == len({d for d in order if d in holders}) - (1 if first else 0)


@pytest.mark.real_subprocess
def test_ld_so_cache_parser_agrees_with_ldconfig_here() -> None:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    cache = Path("/etc/ld.so.cache")
    if not cache.is_file() or not Path(ldconfig).exists():
        pytest.skip("no ld.so.cache / ldconfig on this machine")
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    assert loader.parse_ld_so_cache(cache.read_bytes()) == parse_ldconfig(out)


def test_ld_so_cache_parser_bounds_bad_bytes() -> None:
    assert loader.parse_ld_so_cache(b"") == []
    assert loader.parse_ld_so_cache(b"glibc-ld.so.cache1.1" + b"\xff" * 40) == []
    head = b"glibc-ld.so.cache1.1" + (10**6).to_bytes(4, "little") + bytes(24)
    assert loader.parse_ld_so_cache(head) == []  # a count larger than the file: bounded, nothing invented


def test_read_links_of_a_built_object(tmp_path: Path) -> None:
    data = elf_bytes(["libtensorflow_framework.so.2", "libc.so.6"], runpath="$ORIGIN/../nvidia/cudnn/lib",
                     soname="_pywrap.so")
    path = tmp_path / "x.so"
    path.write_bytes(data)
    with path.open("rb") as fh:
        links = read_links(fh)
    assert links.needed == ("libtensorflow_framework.so.2", "libc.so.6")
    assert (links.runpath, links.rpath, links.soname) == ("$ORIGIN/../nvidia/cudnn/lib", None, "_pywrap.so")
    path.write_bytes(data[:200])
    with path.open("rb") as fh, pytest.raises(FormatError):
        read_links(fh)


@pytest.mark.real_subprocess
def test_read_links_agrees_with_readelf_on_real_objects() -> None:
    readelf = shutil.which("readelf")
    objs = [p for p in (Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"), *Path("/usr/lib/x86_64-linux-gnu").glob(
        "libpython3*.so.1.0")) if p.exists()]
    if readelf is None or not objs:
        pytest.skip("needs readelf (binutils) and a system shared object")
    for obj in objs:
        text = subprocess.run([readelf, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
        with obj.open("rb") as fh:
            links = read_links(fh)
        assert list(links.needed) == re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)
        soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", text)
        assert links.soname == (soname.group(1) if soname else None)
