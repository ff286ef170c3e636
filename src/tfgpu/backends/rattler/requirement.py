"""Whether tfgpu's embedded conda engine can run here (a module of its own: the lockfile reader needs the
answer without importing the engine, which imports the reader)."""

from __future__ import annotations

from tfgpu.core.errors import NotReady


def available() -> bool:
    """The embedded engine needs py-rattler >= 0.26, whose wheels need Python >= 3.10 (the last
    py-rattler for Python 3.9, 0.25, has an older API: no Subdir, BuildString or PackageCache)."""
    import importlib.util
    import sys

    return sys.version_info >= (3, 10) and importlib.util.find_spec("rattler") is not None


def require() -> None:
    if not available():
        msg = "tfgpu's embedded conda engine needs Python >= 3.10 (py-rattler >= 0.26)"
        raise NotReady(msg, hint="install mamba, micromamba or conda (tfgpu uses them), or run tfgpu with "
                                 "Python >= 3.10")
