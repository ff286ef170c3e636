"""pyproject.toml as a package to publish (issue 31, part 5): the version is written in one place, the [test] extra
is what the test suite imports (`pip install -e ".[test]" && pytest` works; noxfile.py installs the same), and the
metadata names what a package index shows. The built distributions are checked in tests/e2e/test_package.py."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys

import tomllib
from packaging.requirements import Requirement

import tfgpu
from tests import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
#: Distribution -> the module it installs, where the names differ.
MODULES = {"pyyaml": "yaml", "nvidia-ml-py": "pynvml", "py-rattler": "rattler", "pytest-cov": "pytest_cov",
           "kubernetes-validate": "kubernetes_validate", "conda-lock": "conda_lock"}


def _modules(requirements: list[str]) -> set[str]:
    names = {Requirement(r).name.lower() for r in requirements}
    return {MODULES.get(n, n.replace("-", "_")) for n in names}


def test_the_version_is_written_once() -> None:
    assert "version" not in PROJECT
    assert "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "src/tfgpu/__init__.py"
    written = [p for p in (REPO / "src").rglob("*.py") if re.search(r"^__version__\s*=", p.read_text(encoding="utf-8"),
                                                                     re.MULTILINE)]
    assert written == [REPO / "src" / "tfgpu" / "__init__.py"]
    assert importlib.metadata.version("tfgpu") == tfgpu.__version__


def test_the_test_extra_covers_every_import_of_the_tests() -> None:
    """Every third-party module a test module imports at its top is a dependency or in [test]; the rest of the
    tests import theirs through pytest.importorskip (and their nox session installs them)."""
    provided = _modules(PROJECT["dependencies"]) | _modules(PROJECT["optional-dependencies"]["test"])
    missing = {}
    for path in (REPO / "tests").rglob("*.py"):
        if "fake_tf" in path.parts or "fake_programs" in path.parts:
            continue  # modules that run inside other environments
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("tfgpu", "tests") and top not in provided:
                    missing.setdefault(top, str(path.relative_to(REPO)))
    assert missing == {}


def test_nox_installs_the_test_extra() -> None:
    noxfile = (REPO / "noxfile.py").read_text(encoding="utf-8")
    assert 'session.install("-e", ".[test]"' in noxfile
    assert "TEST_DEPS" not in noxfile  # the list lives in pyproject.toml only


def test_the_metadata_a_package_index_shows() -> None:
    assert PROJECT["requires-python"] == ">=3.9"
    assert PROJECT["license"] == "Apache-2.0"
    urls = PROJECT["urls"]
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)
    assert all(u.startswith("https://github.com/tfgpu/tfgpu") for u in urls.values())
    classifiers = PROJECT["classifiers"]
    assert any(c.startswith("Development Status ::") for c in classifiers)
    floor = int(PROJECT["requires-python"].removeprefix(">=3."))
    versions = sorted(int(c.rsplit(".", 1)[1]) for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert versions[0] == floor  # the classifiers start where requires-python does
    assert not any(c.startswith("License ::") for c in classifiers)  # PEP 639: the license expression says it
    assert set(PROJECT["optional-dependencies"]) == {"lock", "test"}
    assert PROJECT["scripts"] == {"tfgpu": "tfgpu.cli.entry:main"}
