"""Build small local ``file://`` conda channels for tests, with the standard library only.

A package is a real conda ``.tar.bz2`` archive (the v1 package format: ``info/index.json``,
``info/paths.json``, ``info/files``, optional ``info/has_prefix`` and the payload files), laid out
as conda-build writes it (https://docs.conda.io/projects/conda-build/en/latest/resources/package-spec.html).
``repodata.json`` is written by rattler's own indexer (``rattler.index_fs``), the same code pixi and
rattler-build use to index channels, so what the solver reads is what a real channel serves.

``tf_channel()`` mirrors the real recipes in compat/recipes.toml and compat/conda.toml at miniature
size: Anaconda's ``tensorflow-gpu 2.2.0`` metapackage that pulls a ``tensorflow`` gpu build, which
depends on ``cudatoolkit 10.1.*``, ``cudnn 7.6.*`` and ``python 3.8.*``; a conda-forge style
``tensorflow 2.16.1 cuda120py311`` build that depends on ``__cuda >=12``.
"""

from __future__ import annotations

import asyncio
import bz2
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: conda's build-time prefix placeholder (conda-build writes it into text files that name the prefix).
PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"


@dataclass(frozen=True)
class Pkg:
    """One package to write: metadata plus payload files (path -> text)."""

    name: str
    version: str
    build: str = "0"
    build_number: int = 0
    depends: tuple[str, ...] = ()
    subdir: str = "linux-64"
    files: dict[str, str] = field(default_factory=dict)
    #: payload paths whose text holds PLACEHOLDER and must be rewritten to the install prefix
    prefix_files: tuple[str, ...] = ()
    corrupt: bool = False  # write an archive that cannot be extracted (for failure tests)

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.tar.bz2"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 1_600_000_000  # fixed: the same input gives the same archive bytes (and hashes)
    tar.addfile(info, io.BytesIO(data))


def write_package(pkg: Pkg, subdir_dir: Path) -> Path:
    """Write one ``.tar.bz2`` conda package into ``subdir_dir``; returns its path."""
    subdir_dir.mkdir(parents=True, exist_ok=True)
    files = dict(pkg.files) or {f"share/tfgpu-test/{pkg.name}.txt": f"{pkg.name} {pkg.version} {pkg.build}\n"}
    index = {
        "name": pkg.name,
        "version": pkg.version,
        "build": pkg.build,
        "build_number": pkg.build_number,
        "depends": list(pkg.depends),
        "license": "Apache-2.0",
        "subdir": pkg.subdir,
        "timestamp": 1_600_000_000_000,
    }
    if pkg.subdir == "noarch":
        index["noarch"] = "generic"
    else:
        index["arch"] = "x86_64"
        index["platform"] = pkg.subdir.split("-")[0]
    paths = []
    for rel, text in sorted(files.items()):
        data = text.encode()
        entry: dict[str, object] = {
            "_path": rel,
            "path_type": "hardlink",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size_in_bytes": len(data),
        }
        if rel in pkg.prefix_files:
            entry["prefix_placeholder"] = PLACEHOLDER
            entry["file_mode"] = "text"
        paths.append(entry)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add(tar, "info/index.json", json.dumps(index, indent=2, sort_keys=True).encode())
        _add(tar, "info/paths.json", json.dumps({"paths": paths, "paths_version": 1}, indent=2).encode())
        _add(tar, "info/files", "".join(f"{p}\n" for p in sorted(files)).encode())
        if pkg.prefix_files:
            lines = "".join(f"{PLACEHOLDER} text {p}\n" for p in pkg.prefix_files)
            _add(tar, "info/has_prefix", lines.encode())
        for rel, text in sorted(files.items()):
            _add(tar, rel, text.encode(), 0o755 if rel.startswith("bin/") else 0o644)
    data = bz2.compress(buf.getvalue())
    if pkg.corrupt:
        data = data[: len(data) // 2]  # truncated: the indexer must not see it; see corrupt_package()
    out = subdir_dir / pkg.filename
    out.write_bytes(data)
    return out


def index_channel(root: Path) -> None:
    """Write repodata.json for every subdir with rattler's indexer (noarch always exists)."""
    from rattler.index import index_fs

    (root / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(root, write_zst=False, write_shards=False, force=True))


def build_channel(root: Path, packages: Iterable[Pkg]) -> Path:
    """Write the packages, index them; returns the channel root (use ``root.as_uri()`` as channel)."""
    for pkg in packages:
        write_package(pkg, root / pkg.subdir)
    index_channel(root)
    return root


def corrupt_package(root: Path, subdir: str, filename: str) -> None:
    """Replace an indexed archive by garbage of the same name (its hashes in repodata stay the old ones)."""
    path = root / subdir / filename
    path.write_bytes(b"BZh91AY&SY" + b"\0" * 64)


def tf_packages() -> list[Pkg]:
    """The miniature of the real recipes (see the module docstring)."""
    act = "etc/conda/activate.d/cudatoolkit.sh"
    return [
        Pkg("python", "3.8.10", "h12debd9_8", files={"bin/python3.8": "#!/bin/sh\necho fake python 3.8\n"}),
        Pkg("python", "3.11.9", "h955ad1f_0", files={"bin/python3.11": "#!/bin/sh\necho fake python 3.11\n"}),
        Pkg("cudatoolkit", "10.1.243", "h6bb024c_0",
            files={act: f"export CUDA_HOME={PLACEHOLDER}\n", "lib/libcudart.so.10.1": "fake cudart 10.1\n"},
            prefix_files=(act,)),
        Pkg("cudatoolkit", "11.8.0", "h6a678d5_0"),
        Pkg("cudnn", "7.6.5", "cuda10.1_0", depends=("cudatoolkit 10.1.*",)),
        Pkg("cudnn", "8.9.2.26", "cuda11_0", depends=("cudatoolkit 11.*",)),
        Pkg("tensorflow", "2.2.0", "gpu_py38hb782248_0",
            depends=("cudatoolkit 10.1.*", "cudnn 7.6.*", "python 3.8.*", "_tflow_select 2.1.0 gpu")),
        Pkg("_tflow_select", "2.1.0", "gpu"),
        Pkg("tensorflow-gpu", "2.2.0", "h0d30ee6_0", depends=("tensorflow 2.2.0 gpu_py38hb782248_0",)),
        Pkg("tensorflow", "2.16.1", "cuda120py311h0e7b9a7_0",
            depends=("__cuda >=12", "__glibc >=2.17", "python 3.11.*")),
        Pkg("tzdata", "2024a", "h0c530f3_0", subdir="noarch"),
    ]


def tf_channel(root: Path, extra: Sequence[Pkg] = ()) -> Path:
    return build_channel(root, [*tf_packages(), *extra])
