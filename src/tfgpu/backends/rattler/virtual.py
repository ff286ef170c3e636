"""Conda's virtual packages (__cuda, __glibc, __linux, ...) as the embedded engine solves with them: detected
here, overridden by CONDA_OVERRIDE_*, or told by the planner (the driver's CUDA from the facts)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tfgpu.backends.rattler.requirement import (
    available as available,  # re-exported: engine.available() is the API
)
from tfgpu.core.errors import UsageError
from tfgpu.core.record import record

if TYPE_CHECKING:
    pass




@record
class VirtualPkg:
    """A virtual package the solver treats as installed (``__cuda=12.4=0``)."""

    name: str
    version: str
    build: str = "0"

    def __str__(self) -> str:
        return f"{self.name}={self.version}={self.build}"


def parse_virtual_package(text: str) -> VirtualPkg:
    """``__cuda=12.4`` or ``__cuda=12.4=0`` (conda's NAME=VERSION[=BUILD]) -> VirtualPkg."""
    parts = text.strip().split("=")
    if (len(parts) not in (2, 3) or not _VP_NAME.fullmatch(parts[0]) or not _VP_VERSION.fullmatch(parts[1])
            or (len(parts) == 3 and parts[2] and not _VP_VERSION.fullmatch(parts[2]))):
        msg = f"bad virtual package {text!r}"
        raise UsageError(msg, hint="write NAME=VERSION[=BUILD], e.g. __cuda=12.4")
    return VirtualPkg(parts[0], parts[1], parts[2] if len(parts) == 3 and parts[2] else "0")


#: A virtual package's name and version as conda writes them (ASCII, bounded): garbage is rc 2 here,
#: not a solver error or a crash later.
_VP_NAME = re.compile(r"__[a-z0-9_-]{1,32}")


_VP_VERSION = re.compile(r"[0-9A-Za-z_][0-9A-Za-z_.+]{0,31}")


def resolve_virtual_packages(
    detected: Sequence[VirtualPkg],
    *,
    driver_cuda: str | None,
    env: Mapping[str, str],
    explicit: Sequence[VirtualPkg] = (),
) -> tuple[list[VirtualPkg], list[str]]:
    """Pure: the virtual packages to solve with, and notes saying where overrides came from.

    ``detected`` are the machine's (rattler's detection); ``driver_cuda`` the CUDA version the driver
    supports (tfgpu's probe), which replaces a detected ``__cuda``. ``CONDA_OVERRIDE_CUDA`` and
    ``CONDA_OVERRIDE_GLIBC`` act as in conda: a value replaces the detected one, an empty value
    removes the package (https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-virtual.html).
    ``explicit`` (``--virtual-package``) wins over everything.
    """
    notes: list[str] = []
    by_name: dict[str, VirtualPkg] = {v.name: v for v in detected}
    if driver_cuda:
        by_name["__cuda"] = VirtualPkg("__cuda", driver_cuda)
    for var, name in (("CONDA_OVERRIDE_CUDA", "__cuda"), ("CONDA_OVERRIDE_GLIBC", "__glibc")):
        if var not in env:
            continue
        value = env[var].strip()
        if value and not re.fullmatch(r"[0-9]{1,4}(\.[0-9]{1,4}){0,3}", value):
            msg = f"{var}={env[var]!r} is not a version"
            raise UsageError(msg, hint=f"set {var} to a version like 12.4, or to an empty value for none")
        if value:
            by_name[name] = VirtualPkg(name, value)
            notes.append(f"{name}={value} from {var}")
        else:
            by_name.pop(name, None)
            notes.append(f"no {name}: {var} is set and empty")
    for v in explicit:
        by_name[v.name] = v
        notes.append(f"{v} from --virtual-package")
    return sorted(by_name.values(), key=lambda v: v.name), notes


def default_virtual_packages(platform: str) -> list[VirtualPkg]:
    """Machine-independent virtual packages for solving ``platform`` anywhere (no ``__cuda``)."""
    from tfgpu.kb.knowledge import load_kb

    return [VirtualPkg(name, ver, build) for plat, name, ver, build in load_kb().virtual_packages if plat == platform]


def _probe_driver_cuda() -> tuple[bool, str | None]:
    """(probe available, CUDA version the driver supports) from tfgpu's probe (used when the caller did not
    say what the facts know: create's plans do, with --driver-cuda)."""
    from tfgpu.facts.probe import detect_facts

    try:
        facts = detect_facts()
        driver = facts["driver"] if isinstance(facts, Mapping) else getattr(facts, "driver", None)
        cuda = driver.get("cuda") if isinstance(driver, Mapping) else getattr(driver, "cuda", None)
    except Exception:  # a probe must never break a solve: fall back to rattler's own detection
        return False, None
    return True, (str(cuda) if cuda else None)


def detect_virtual_packages(
    platform: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    explicit: Sequence[VirtualPkg] = (),
    detect: bool = True,
    driver_cuda_known: tuple[str | None] | None = None,
) -> tuple[list[VirtualPkg], list[str]]:
    """The virtual packages of this machine (or the defaults of another platform), with overrides.
    ``driver_cuda_known``: the CUDA the driver supports as the caller's facts say ((None,) = no driver);
    then tfgpu's probe is not run again (a plan's facts are the authority)."""
    env = os.environ if env is None else env
    platform = platform or current_platform()
    detected: list[VirtualPkg] = []
    driver_cuda: str | None = None
    if not detect:
        pass
    elif platform != current_platform():
        detected = default_virtual_packages(platform)
    else:
        from rattler import VirtualPackage, VirtualPackageOverrides

        if driver_cuda_known is not None:
            have_probe, driver_cuda = True, driver_cuda_known[0]
        else:
            have_probe, driver_cuda = _probe_driver_cuda()
        for vp in VirtualPackage.detect(VirtualPackageOverrides()):
            g = vp.into_generic()
            name = g.name.normalized
            if name == "__cuda" and have_probe:
                continue  # tfgpu's probe is the authority on the driver
            detected.append(VirtualPkg(name, str(g.version), str(g.build_string)))
    return resolve_virtual_packages(detected, driver_cuda=driver_cuda, env=env, explicit=explicit)


def current_platform() -> str:
    from rattler import Subdir

    return str(Subdir.current())
