#!/usr/bin/env python3
"""Check tfgpu's built distributions before they are published (`nox -s release`, after `twine check`).

The wheel: its METADATA is complete (name, the version of src/tfgpu/__init__.py, summary, requires-python, license
expression, classifiers, project URLs, the lock and test extras, the dependencies, the README as description), the console
script is there, and it carries the whole knowledge base (compat/*.toml byte-for-byte as tfgpu/compat) and every
JSON schema. The sdist: what the tests and the sessions need to run from it. Prints one line per problem and
exits 1 on any; standard library only.

Usage:
  python3 scripts/check_dist.py dist/tfgpu-X-py3-none-any.whl dist/tfgpu-X.tar.gz
"""

from __future__ import annotations

import email.parser
import re
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("lock", "test")
SDIST_NEEDS = ("pyproject.toml", "README.md", "CONTRIBUTING.md", "noxfile.py", "action.yml", "src/tfgpu/__init__.py",
               "compat/meta.toml", "tests/conftest.py", "scripts/build_kb_bundle.py", "examples/notebook.ipynb")


def source_version() -> str:
    """__version__ in src/tfgpu/__init__.py: the one place the version is written."""
    text = (ROOT / "src" / "tfgpu" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    return found.group(1) if found else ""


def check_wheel(path: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(path) as whl:
        names = set(whl.namelist())
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            return [f"{path.name}: no METADATA"]
        meta = email.parser.Parser().parsestr(whl.read(meta_name).decode("utf-8"))
        entry_points = next((whl.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")), "")
        packaged = {n.removeprefix("tfgpu/compat/"): whl.read(n) for n in names if n.startswith("tfgpu/compat/")}
        schemas = {n for n in names if n.startswith("tfgpu/core/schemas/") and n.endswith(".json")}
    expected = {
        "Name": "tfgpu", "Version": source_version(), "License-Expression": "Apache-2.0",
        "Description-Content-Type": "text/markdown",
    }
    problems += [f"METADATA {key}: {meta.get(key)!r}, expected {want!r}" for key, want in expected.items()
                 if meta.get(key) != want]
    for key in ("Summary", "Requires-Python"):
        if not meta.get(key):
            problems.append(f"METADATA has no {key}")
    classifiers = meta.get_all("Classifier") or []
    for needed in ("Development Status ::", "Programming Language :: Python :: 3.", "Operating System ::"):
        if not any(c.startswith(needed) for c in classifiers):
            problems.append(f"no classifier {needed}...")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    problems += [f"no project URL {key}" for key in ("Homepage", "Source", "Issues") if key not in urls]
    extras = set(meta.get_all("Provides-Extra") or [])
    problems += [f"no extra [{extra}]" for extra in EXTRAS if extra not in extras]
    requires = meta.get_all("Requires-Dist") or []
    if not any(r.startswith("typer") for r in requires):
        problems.append("no Requires-Dist: the dependencies are missing")
    if not (meta.get_payload() or "").lstrip().startswith("# tfgpu"):
        problems.append("the long description is not README.md")
    if "tfgpu = tfgpu.cli.entry:main" not in entry_points:
        problems.append("no console script tfgpu = tfgpu.cli.entry:main")
    compat = {p.name: p.read_bytes() for p in (ROOT / "compat").iterdir() if p.is_file()}
    problems += [f"tfgpu/compat/{name} differs from compat/ or is missing" for name, data in compat.items()
                 if packaged.get(name) != data]
    shipped = {f"tfgpu/core/schemas/{p.name}" for p in (ROOT / "src" / "tfgpu" / "core" / "schemas").glob("*.json")}
    problems += [f"{name} is missing" for name in sorted(shipped - schemas)]
    if "tfgpu/api/notebook.py" not in names:
        problems.append("tfgpu/api/notebook.py is missing")
    return [f"{path.name}: {p}" for p in problems]


def check_sdist(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    return [f"{path.name}: {need} is missing" for need in SDIST_NEEDS if need not in names]


def main(argv: list[str]) -> int:
    problems = []
    paths = [Path(a) for a in argv]
    if not any(p.suffix == ".whl" for p in paths) or not any(p.name.endswith(".tar.gz") for p in paths):
        problems.append("give the wheel and the sdist")
    for path in paths:
        problems += check_wheel(path) if path.suffix == ".whl" else check_sdist(path)
        if source_version() not in path.name:
            problems.append(f"{path.name}: not version {source_version()}")
    for p in problems:
        print(p)
    print(f"{len(paths)} distribution(s): " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
