"""Red-team attacks through the pip part of a conda lock (conda-lock's ``manager: pip`` entries): before
the fix a pip package without a sha256 was installed with only a note ("pip cannot verify them"), a URL
that already held a ``#`` fragment got no hash at all, and a URL's own ``#sha256=`` fragment was trusted
over the lock's hash."""

from __future__ import annotations

import pytest

from tests.unit.plan.test_from_lock_plan import FACTS, HOME, KB
from tfgpu.backends.lockfiles import Lock, LockedPackage
from tfgpu.core.errors import InputError
from tfgpu.plan.fromlock import plan_from_lock
from tfgpu.plan.request import BuildRequest

pytestmark = pytest.mark.safety

GOOD = "a" * 64
OTHER = "b" * 64
WHL = "https://files.pythonhosted.org/packages/x/requests-2.31.0-py3-none-any.whl"


def _info(*pip: LockedPackage) -> Lock:
    conda = (LockedPackage("python", "3.11.9", "conda", "linux-64", build="h955ad1f_0", sha256="1" * 64,
                           url="https://conda.anaconda.org/conda-forge/linux-64/python-3.11.9-h955ad1f_0.conda"),)
    return Lock(path="/l.yml", kind="conda", platforms=("linux-64",), packages=conda + pip,
                    channels=("https://conda.anaconda.org/conda-forge",))


def _pip_args(info: Lock) -> list[str]:
    plan = plan_from_lock(KB, FACTS, info, BuildRequest(platform="linux-64"), home=HOME)
    step = next(s for s in plan.steps if "pip" in s.argv and "install" in s.argv)
    return [a for a in step.argv if " @ " in a or "==" in a]


def _pip(url: str, sha: str = GOOD, name: str = "requests") -> LockedPackage:
    return LockedPackage(name, "2.31.0", "pip", "linux-64", url=url, sha256=sha)


def test_attack_pip_package_without_a_hash_is_refused() -> None:
    with pytest.raises(InputError, match="sha256"):
        _pip_args(_info(_pip(WHL, sha="")))


def test_attack_pip_package_without_a_url_is_refused() -> None:
    # `requests==2.31.0` alone would come from whatever index pip is configured with, unverified
    with pytest.raises(InputError, match="URL"):
        _pip_args(_info(_pip("", sha=GOOD)))


def test_attack_url_with_a_fragment_still_gets_the_locks_hash() -> None:
    (req,) = _pip_args(_info(_pip(WHL + "#egg=requests")))
    assert req.endswith(f"#sha256={GOOD}")


def test_attack_url_with_its_own_hash_fragment_cannot_override_the_lock() -> None:
    (req,) = _pip_args(_info(_pip(WHL + f"#sha256={OTHER}")))
    assert OTHER not in req
    assert req == f"requests @ {WHL}#sha256={GOOD}"


@pytest.mark.parametrize("url", ["git+https://example.invalid/evil.git", "ftp://example.invalid/x.whl",
                                 "https://example.invalid/x.whl --index-url http://evil", "https://x/a b.whl"])
def test_attack_pip_urls_that_are_not_plain_archives_are_refused(url: str) -> None:
    with pytest.raises(InputError):
        _pip_args(_info(_pip(url)))


def test_a_hashed_https_pip_package_plans_as_before() -> None:
    (req,) = _pip_args(_info(_pip(WHL)))
    assert req == f"requests @ {WHL}#sha256={GOOD}"
