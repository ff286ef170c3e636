"""Helpers for the probe tests: a fake NVML *C library* (so pynvml's real bindings run) and machine
profiles (tmp_path trees + scripts on PATH that print recorded real outputs)."""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

DATA = Path(__file__).resolve().parent / "data"
PROBE = DATA / "probe"
PROBE2 = DATA / "probe2"


@dataclass
class FakeGpu:
    name: str
    uuid: str
    memory_mib: int
    cc: tuple[int, int]
    #: nvmlPciInfo_t.pciDeviceId (device << 16 | 0x10DE) and busId; 0 = the call answers NOT_SUPPORTED
    pci_device_id: int = 0
    bus_id: str = ""


@dataclass
class FakeNvmlLib:
    """Stands in for the ctypes CDLL of libnvidia-ml: each function fills the ctypes out-parameters
    pynvml passes and returns an NVML return code, exactly like the C library does."""

    driver: str = "550.54.15"
    cuda: int = 12040
    gpus: list[FakeGpu] = field(default_factory=list)
    init_rc: int = pynvml.NVML_SUCCESS
    #: what nvmlSystemGetCudaDriverVersion_v2 returns: NVML_ERROR_LIBRARY_NOT_FOUND when libcuda.so.1 is missing
    cuda_v2_rc: int = pynvml.NVML_SUCCESS
    calls: list[str] = field(default_factory=list)

    def _fn(self, name: str, impl: Any) -> Any:
        def call(*args: Any) -> int:
            self.calls.append(name)
            return int(impl(*args))
        return call

    def __getattr__(self, name: str) -> Any:
        impls = {
            "nvmlInitWithFlags": lambda flags: self.init_rc,
            "nvmlInit_v2": lambda: self.init_rc,
            "nvmlShutdown": lambda: 0,
            "nvmlSystemGetDriverVersion": lambda buf, size: self._str(buf, self.driver),
            "nvmlSystemGetNVMLVersion": lambda buf, size: self._str(buf, f"12.{self.driver}"),
            "nvmlSystemGetCudaDriverVersion_v2": lambda ref: self.cuda_v2_rc or self._int(ref, self.cuda),
            "nvmlSystemGetCudaDriverVersion": lambda ref: self._int(ref, self.cuda),
            "nvmlDeviceGetCount_v2": lambda ref: self._int(ref, len(self.gpus)),
            "nvmlDeviceGetHandleByIndex_v2": self._handle,
            "nvmlDeviceGetName": lambda h, buf, size: self._str(buf, self._gpu(h).name),
            "nvmlDeviceGetUUID": lambda h, buf, size: self._str(buf, self._gpu(h).uuid),
            "nvmlDeviceGetMemoryInfo": self._memory,
            "nvmlDeviceGetCudaComputeCapability": self._cc,
            "nvmlDeviceGetPciInfo_v3": self._pci,
            "nvmlErrorString": lambda rc: b"fake error string",
        }
        if name not in impls:
            raise AttributeError(name)
        return self._fn(name, impls[name])

    @staticmethod
    def _str(buf: Any, value: str) -> int:
        buf.value = value.encode()
        return 0

    @staticmethod
    def _int(ref: Any, value: int) -> int:
        ref._obj.value = value
        return 0

    def _handle(self, index: Any, ref: Any) -> int:
        if index.value >= len(self.gpus):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        # c_nvmlDevice_t is a pointer type; store index+1 so it is not NULL
        ctypes.cast(ctypes.byref(ref._obj), ctypes.POINTER(ctypes.c_size_t))[0] = index.value + 1
        return 0

    def _gpu(self, handle: Any) -> FakeGpu:
        addr = ctypes.cast(handle, ctypes.c_void_p).value or 0
        return self.gpus[addr - 1]

    def _memory(self, handle: Any, ref: Any) -> int:
        ref._obj.total = self._gpu(handle).memory_mib * 1024 * 1024
        ref._obj.free = ref._obj.total
        ref._obj.used = 0
        return 0

    def _pci(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu(handle)
        if not gpu.pci_device_id:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        ref._obj.pciDeviceId = gpu.pci_device_id
        ref._obj.busId = gpu.bus_id.encode()
        return 0

    def _cc(self, handle: Any, major: Any, minor: Any) -> int:
        major._obj.value, minor._obj.value = self._gpu(handle).cc
        return 0


@contextmanager
def fake_nvml(lib: Any | None, *, load_error: bool = False) -> Iterator[Any]:
    """Install ``lib`` as pynvml.nvmlLib (or make CDLL fail: LibraryNotFound) and restore afterwards."""
    saved = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache), pynvml.CDLL)
    pynvml._nvmlGetFunctionPointer_cache.clear()
    try:
        if load_error:
            pynvml.nvmlLib = None

            def no_lib(*_a: Any, **_k: Any) -> Any:
                raise OSError("libnvidia-ml.so.1: cannot open shared object file: No such file or directory")

            pynvml.CDLL = no_lib
        else:
            pynvml.nvmlLib = lib
        yield lib
    finally:
        pynvml.nvmlLib, cache, pynvml.CDLL = saved
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlGetFunctionPointer_cache.update(cache)


class Profile:
    """A machine profile: files under ``root`` plus programs in ``root/_bin`` (the only PATH entry)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "_bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {"PATH": str(self.bin), "HOME": "/home/user", "TFGPU_PROBE_NVML": "0"}

    def file(self, machine_path: str, text: str | bytes = "", *, fixture: Path | None = None) -> Path:
        p = self.root / machine_path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if fixture is not None:
            shutil.copyfile(fixture, p)
        elif isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    def program(self, name: str, cases: dict[str, tuple[Path | None, int]] | None = None, *,
                default: tuple[Path | None, int] = (None, 0), stderr: bool = False, script: str | None = None,
                where: Path | None = None) -> Path:
        """A script printing recorded output: ``cases`` maps a shell `case` pattern on "$*" to
        (fixture, exit code)."""
        target = (where or self.bin) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if script is None:
            redirect = " 1>&2" if stderr else ""
            lines = ["#!/bin/sh", 'case "$*" in']
            for pattern, (fx, rc) in [*(cases or {}).items(), ("*", default)]:
                body = f"/bin/cat '{fx}'{redirect}; " if fx else ""
                lines.append(f"  {pattern.replace(' ', chr(92) + ' ')}) {body}exit {rc};;")
            lines.append("esac")
            script = "\n".join(lines) + "\n"
        target.write_text(script)
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return target

    def dist(self, site: str, name: str, version: str) -> None:
        folder = f"{name.replace('-', '_')}-{version}.dist-info"
        self.file(f"{site}/{folder}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def all_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "SOURCES.md")


def env_without_path() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PATH"}


R740_CUDA = "/usr/local/cuda-10.1"


def r740_profile(root: Path) -> Profile:
    """Seed 001's lab server as a profile (tests/data/probe/machines/r740-4x-tesla-m60-tf114.toml): the
    seed's real lspci lines and LD_LIBRARY_PATH; nvcc 10.1.243 and the cuDNN 7 header are the stand-ins
    that machine file names. The driver source is the caller's (the seed only has a screenshot)."""
    p = Profile(root)
    p.file("/etc/os-release", fixture=PROBE / "os" / "os-release-ubuntu-22.04.5.txt")
    p.program("lspci", default=(PROBE / "lspci" / "lspci-grep-vga-dell-r740-4x-tesla-m60-seed001.txt", 0))
    cuda = R740_CUDA
    p.program("nvcc", default=(PROBE / "cuda" / "nvcc-version-10.1.243.txt", 0), where=root / cuda[1:] / "bin")
    p.file(f"{cuda}/lib64/libcudart.so.10.1")
    p.file(f"{cuda}/include/cudnn.h", fixture=PROBE / "cudnn" / "cudnn-7.2.1-cudnn.h-first80lines.h")
    p.file(f"{cuda}/lib64/libcudnn.so.7")
    p.env.update({"PATH": f"{p.bin}:{root}{cuda}/bin", "HOME": "/home/dell2",
                  "LD_LIBRARY_PATH": f"/home/dell2/.mujoco/mjpro150/bin:{cuda}/lib64:"})
    return p
