"""compat/sonames.toml as typed records: which CUDA libraries a TensorFlow release opens by name, and each
library's soname (Linux) or DLL name (Windows) for a CUDA version. Read only when an environment has a
TensorFlow (the doctor's start-up without one never parses it)."""

from __future__ import annotations

import functools
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tfgpu.core.errors import DataError
from tfgpu.core.record import record

SCHEMA = "tfgpu.compat.sonames/1"
FAMILIES = ("cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse")


@record
class LoaderRow:
    tf: SpecifierSet
    families: tuple[str, ...]
    caller: str  # the object whose dlopen TensorFlow's loader calls (its RUNPATH is searched)
    source: str


@record
class SonameRow:
    cuda: SpecifierSet
    suffixes: dict[str, str]  # family -> soname version suffix ("" = not part of that CUDA)
    source: str


@record
class Sonames:
    loader: tuple[LoaderRow, ...]
    sonames: tuple[SonameRow, ...]
    sources: dict[str, dict[str, Any]]
    wheel_dirs: dict[str, str]  # family -> the nvidia-* wheel's directory: site-packages/nvidia/<dir>/lib

    def loader_for(self, tf: Version) -> LoaderRow | None:
        """The row for a release, or None before 1.14 (those link CUDA: their DT_NEEDED entries say which)."""
        return next((r for r in self.loader if tf in r.tf), None)

    def names_for(self, tf: Version, cuda: str, cudnn_major: str | None, *, windows: bool = False) -> dict[str, str]:
        """family -> the file name this release opens for a build with CUDA ``cuda``: libcufft.so.10 or
        cufft64_10.dll; cuDNN from ``cudnn_major``. Empty when the release or the CUDA version is unknown."""
        row = self.loader_for(tf)
        try:
            cv = Version(cuda)
        except ValueError:
            return {}
        so = next((s for s in self.sonames if cv in s.cuda), None)
        if row is None or so is None:
            return {}
        out: dict[str, str] = {}
        for fam in row.families:
            if fam == "cudnn":
                if cudnn_major:
                    out[fam] = f"cudnn64_{cudnn_major}.dll" if windows else f"libcudnn.so.{cudnn_major}"
                continue
            suffix = so.suffixes.get(fam, "")
            if suffix:
                out[fam] = f"{fam}64_{suffix.replace('.', '')}.dll" if windows else f"lib{fam}.so.{suffix}"
        return out


@functools.cache
def load_sonames() -> Sonames:
    """Parse and check compat/sonames.toml (a malformed row is refused with its table and contents)."""
    from tfgpu.kb.parse import load_toml

    data = load_toml("sonames")
    sources = data.get("sources") or {}
    loader, sonames = [], []
    for row in data.get("loader") or []:
        try:
            loader.append(LoaderRow(SpecifierSet(row["tf"]), tuple(row["families"].split(",")), row["caller"],
                                    row["source"]))
        except (KeyError, ValueError) as exc:
            msg = f"compat/sonames.toml: bad loader row {row!r}: {exc}"
            raise DataError(msg) from None
    for row in data.get("sonames") or []:
        try:
            sonames.append(SonameRow(SpecifierSet(row["cuda"]), {f: str(row[f]) for f in FAMILIES}, row["source"]))
        except (KeyError, ValueError) as exc:
            msg = f"compat/sonames.toml: bad sonames row {row!r}: {exc}"
            raise DataError(msg) from None
    dirs = {str(k): str(v) for k, v in (data.get("wheel_dirs") or {}).items() if k != "source"}
    return Sonames(tuple(loader), tuple(sonames), sources, dirs)
