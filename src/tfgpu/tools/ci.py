"""`tfgpu ci init`: a CI job that installs tfgpu and runs `tfgpu doctor --ci`, for GitHub Actions or GitLab CI.

Two kinds of job. On a GPU runner (no facts file) the job gates on this runner: `--require-gpu`, and with a
TensorFlow target that target must be ready. On any runner with ``facts`` (a `tfgpu doctor --json` report or facts
document of the production machine, committed to the repository) the job plans for that machine: the target must be
ready there. Pure: values in, YAML text out (tfgpu.cli.commands.ci writes the file, never over an existing one
unless forced).

Every value is checked against the characters it may hold (exit 2 otherwise: no ``$``, ``{``, quotes, spaces or
newlines, so nothing can become a GitHub expression, a GitLab variable or a shell word) and then reaches the job
only as a YAML-quoted environment variable; the scripts themselves are constants that quote those variables.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tfgpu import __version__
from tfgpu.core.errors import UsageError
from tfgpu.tools.fleet.engines import DEFAULT_PIP_SPEC, check, check_tf
from tfgpu.tools.fleet.engines import yaml_scalar as _y

#: Where each kind of file goes by default (-o elsewhere).
DEFAULT_PATHS = {"github": ".github/workflows/tfgpu.yml", "gitlab": ".gitlab-ci.yml"}
DEFAULT_PYTHON = "3.12"
REPORT = "tfgpu-doctor.json"
#: A facts file in the repository: a relative path of plain characters, no "..", never starting with "-".
_FACTS_PATH = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.\-/]{0,511}")
_PYTHON = re.compile(r"3\.[0-9]{1,2}")


def check_facts_path(path: str) -> str:
    """``path`` when it can be a facts file's path in the repository the job checks out."""
    parts = PurePosixPath(path).parts
    if not _FACTS_PATH.fullmatch(path) or ".." in parts or path.startswith("/"):
        msg = f"--facts {path!r}: give the facts file's path relative to the repository root (plain characters, no ..)"
        raise UsageError(msg, hint="commit the production machine's `tfgpu doctor --json` report, e.g. "
                                   "ci/gpu-node.json, and pass --facts ci/gpu-node.json")
    return path


def _values(tf: str | None, facts: str | None, pip_spec: str, python: str) -> dict[str, str]:
    """The job's environment: every user value, checked."""
    if not _PYTHON.fullmatch(python):
        msg = f"--python {python!r} is not a Python 3 version such as 3.12"
        raise UsageError(msg)
    env = {"TFGPU_CI_PIP_SPEC": check("pip_spec", pip_spec, "--pip-spec")}
    tf = check_tf(tf)
    if tf:
        env["TFGPU_CI_TF"] = tf
    if facts:
        env["TFGPU_CI_FACTS"] = check_facts_path(facts)
    return env


def doctor_command(tf: str | None, facts: str | None) -> str:
    """The job's doctor line: constant words and quoted variables only."""
    words = ["tfgpu doctor --ci"]
    if facts:
        words.append('--facts "$TFGPU_CI_FACTS"')
    else:
        words.append("--require-gpu")
    if tf:
        words.append('--tf "$TFGPU_CI_TF"')
    return " ".join(words) + f" > {REPORT}"


def _header(kind: str, tf: str | None, facts: str | None, comment: str) -> list[str]:
    target = f"TensorFlow {tf} is ready there" if tf else ""
    if facts:
        what = f"Plans for the machine {facts} describes: fails unless {target}." if tf else \
            f"Plans for the machine {facts} describes (a report; --tf X also gates on a release)."
    else:
        what = "On a GPU runner: fails unless its GPU is usable" + (f" and {target}." if tf else ".")
    lines = [f"tfgpu preflight ({kind}), written by `tfgpu ci init` (tfgpu {__version__}).", what,
             f"`tfgpu doctor --ci` exits 1 then; its JSON report is kept as the artifact {REPORT}."]
    if not facts:
        lines.append("On a runner without a GPU: `tfgpu ci init --facts REPORT.json` with the production machine's "
                     "report.")
    return [f"{comment} {line}" for line in lines]


def _env_yaml(env: dict[str, str], indent: str) -> list[str]:
    return [f"{indent}{key}: {_y(value)}" for key, value in env.items()]


def github_workflow(*, tf: str | None = None, facts: str | None = None, pip_spec: str = DEFAULT_PIP_SPEC,
                    python: str = DEFAULT_PYTHON) -> str:
    """A GitHub Actions workflow (.github/workflows/tfgpu.yml)."""
    env = _values(tf, facts, pip_spec, python)
    runs_on = "ubuntu-latest" if facts else "[self-hosted, linux, gpu]"
    checkout = ["      - uses: actions/checkout@v4"] if facts else []
    label = [] if facts else ["# actionlint: declare the runner label in .github/actionlint.yaml "
                              "(self-hosted-runner: {labels: [gpu]})."]
    lines = [
        *_header("GitHub Actions", tf, facts, "#"), *label,
        "name: tfgpu preflight",
        '"on":',  # quoted: YAML 1.1 parsers (PyYAML) read a bare on as true
        "  push:",
        "  pull_request:",
        "  workflow_dispatch:",
        "permissions:",
        "  contents: read",
        "jobs:",
        "  tfgpu-doctor:",
        f"    runs-on: {runs_on}",
        "    env:",
        *_env_yaml(env, "      "),
        "    steps:",
        *checkout,
        "      - uses: actions/setup-python@v5",
        "        with:",
        f"          python-version: {_y(python)}",
        "      - name: Install tfgpu",
        '        run: python -m pip install "$TFGPU_CI_PIP_SPEC"',
        "      - name: tfgpu doctor",
        f"        run: {_y(doctor_command(tf, facts))}",
        "      - name: Keep the report",
        "        if: always()",
        "        uses: actions/upload-artifact@v4",
        "        with:",
        "          name: tfgpu-doctor",
        f"          path: {REPORT}",
    ]
    return "\n".join(lines) + "\n"


def gitlab_ci(*, tf: str | None = None, facts: str | None = None, pip_spec: str = DEFAULT_PIP_SPEC,
              python: str = DEFAULT_PYTHON) -> str:
    """A GitLab CI configuration (.gitlab-ci.yml, or a file to `include:` from it)."""
    env = _values(tf, facts, pip_spec, python)
    lines = [*_header("GitLab CI", tf, facts, "#")]
    if not facts:
        lines.append("# The runner must give the job its GPU (Docker executor: gpus = \"all\" in its config.toml).")
    lines += [
        "tfgpu-doctor:",
        f"  image: {_y(f'python:{python}')}",
        *(["  tags: [gpu]"] if not facts else []),
        "  variables:",
        *_env_yaml(env, "    "),
        "  script:",
        '    - python -m pip install "$TFGPU_CI_PIP_SPEC"',
        f"    - {_y(doctor_command(tf, facts))}",
        "  artifacts:",
        "    when: always",
        f"    paths: [{REPORT}]",
    ]
    return "\n".join(lines) + "\n"


WRITERS = {"github": github_workflow, "gitlab": gitlab_ci}
