"""compat/pins.toml against the releases' own wheel METADATA (recorded in tests/data/pins/)."""

from __future__ import annotations

import json

import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests import REPO

ROOT = REPO
DATA = json.loads((ROOT / "tests" / "data" / "pins" / "requires_dist.json").read_text(encoding="utf-8"))
PINS = tomllib.loads((ROOT / "compat" / "pins.toml").read_text(encoding="utf-8"))["pins"]


def _own_spec(wheel: dict[str, object], name: str) -> SpecifierSet:
    env = {**default_environment(), "python_version": str(wheel["python"]), "extra": "",
           "sys_platform": "linux", "platform_system": "Linux"}
    spec = SpecifierSet("")
    for line in wheel["requires_dist"]:  # type: ignore[attr-defined]
        req = Requirement(str(line))
        if req.name.lower() == name and (req.marker is None or req.marker.evaluate(env)):
            spec &= req.specifier
    return spec


def test_recording_covers_every_series() -> None:
    versions = {Version(str(w["version"])) for w in DATA["wheels"]}
    assert {(v.major, v.minor) for v in versions} >= {(1, m) for m in range(16)} | {(2, m) for m in range(22)}
    assert all(len(str(w["sha256"])) == 64 for w in DATA["wheels"])


@pytest.mark.parametrize("pin", PINS, ids=lambda p: f"{p['tf']} {p['requirement']}")
def test_pin_leaves_a_release_installable(pin: dict[str, str]) -> None:
    req = Requirement(pin["requirement"])
    tf = SpecifierSet(pin["tf"])
    allowed = [v for v in (Version(s) for s in DATA["released"][req.name.lower()]) if v in req.specifier]
    covered = [w for w in DATA["wheels"] if Version(str(w["version"])) in tf]
    assert covered, f"no recorded wheel in {pin['tf']}"
    bad = set()
    for w in covered:
        own = _own_spec(w, req.name.lower())
        if not any(own.contains(v) for v in allowed):
            bad.add(f"{w['dist']} {w['version']} ({w['file']}: {own})")
    assert not bad, f"{pin['requirement']} contradicts the release's own Requires-Dist: {sorted(bad)[:5]}"


def test_an_impossible_pin_is_caught() -> None:
    """The check itself bites: TF 2.4 declares numpy~=1.19.2, so numpy<1.19 leaves nothing."""
    wheel = next(w for w in DATA["wheels"] if w["version"] == "2.4.0" and w["python"] == "3.8")
    own = _own_spec(wheel, "numpy")
    assert str(own) == "~=1.19.2"
    released = [Version(v) for v in DATA["released"]["numpy"]]
    assert not any(v in SpecifierSet("<1.19") and v in own for v in released)
    assert any(v in SpecifierSet("<2") and v in own for v in released)


def test_every_and_cuda_requirement_resolves_on_pypi_or_the_plan_installs_another_release() -> None:
    """A release whose `and-cuda` extra names a version PyPI does not have (tensorflow 2.15.0:
    tensorrt-libs==8.6.1) must be installed as another release (compat/pins.toml `installs`)."""
    from tfgpu.kb.knowledge import load_kb

    kb = load_kb()
    released = DATA["and_cuda_released"]
    unresolvable = []
    for rel in kb.releases:
        for line in rel.and_cuda:
            req = Requirement(line)
            if not any(req.specifier.contains(v, prereleases=True) for v in released[req.name]):
                unresolvable.append((str(rel.version), line))
    assert ("2.15.0", "tensorrt-libs==8.6.1") in unresolvable
    for version, _line in unresolvable:
        sub = kb.install_as_for(Version(version), "pip-and-cuda")
        assert sub is not None, version
        post = next(r for r in kb.releases if r.dist == "tensorflow" and str(r.version) == sub.install)
        assert all(any(Requirement(x).specifier.contains(v, prereleases=True) for v in released[Requirement(x).name])
                   for x in post.and_cuda)
