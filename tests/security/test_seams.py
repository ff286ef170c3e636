"""Security: one subprocess seam and never a shell; a controlled environment for installers and the smoke
test; `--redact` removes user names, the host name and token-like strings from the reports."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import REPO
from tests.conftest import DATA
from tfgpu.backends.steps import Step
from tfgpu.build import execute
from tfgpu.plan.model import Plan
from tfgpu.render import report

SRC = REPO / "src" / "tfgpu"
RUNNER = SRC / "core" / "process.py"
Cli = Callable[..., "tuple[int, str, str]"]

#: Calls that start a program. Only tfgpu/core/process.py may make them (STYLE.md point 3: one runner).
SPAWNERS = {
    ("os", "system"), ("os", "popen"), ("os", "execv"), ("os", "execve"), ("os", "execvp"), ("os", "execvpe"),
    ("os", "execl"), ("os", "execlp"), ("os", "spawnv"), ("os", "spawnve"), ("os", "spawnl"), ("os", "posix_spawn"),
    ("os", "posix_spawnp"), ("os", "startfile"), ("subprocess", "run"), ("subprocess", "call"),
    ("subprocess", "check_call"), ("subprocess", "check_output"), ("subprocess", "Popen"),
    ("subprocess", "getoutput"), ("subprocess", "getstatusoutput"), ("pty", "spawn"),
    ("asyncio", "create_subprocess_shell"), ("asyncio", "create_subprocess_exec"),
}

#: Calls that fork a worker running tfgpu's own code (never a program). Only tfgpu/facts/probe/_child.py
#: may make them: the doctor's probes run there in parallel with the knowledge base (CONTRIBUTING.md).
FORKERS = {("os", "fork"), ("os", "forkpty"), ("pty", "fork"), ("multiprocessing", "Process")}
WORKER = SRC / "facts" / "probe" / "_child.py"


def _sources() -> list[Path]:
    files = sorted(SRC.rglob("*.py"))
    assert RUNNER in files
    assert len(files) > 20
    return files


def _dotted(node: ast.AST) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def _findings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(SRC.parent)
    aliases: dict[str, tuple[str, str]] = {}  # `from subprocess import run as r` -> r: (subprocess, run)
    modules: dict[str, str] = {}  # `import subprocess as sp` -> sp: subprocess
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                modules[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = (node.module, a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    out.append(f"{rel}:{node.lineno}: shell={ast.unparse(kw.value)}")
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = _dotted(node)
            if len(name) == 2:
                target = (modules.get(name[0], name[0]), name[1])
            elif len(name) == 1 and name[0] in aliases:
                target = aliases[name[0]]
            else:
                continue
            if target in SPAWNERS and path != RUNNER:
                out.append(f"{rel}:{node.lineno}: {'.'.join(target)} outside tfgpu/core/process.py")
            if target in FORKERS and path != WORKER:
                out.append(f"{rel}:{node.lineno}: {'.'.join(target)} outside tfgpu/facts/probe/_child.py")
    return out


def test_no_shell_and_one_subprocess_seam_in_the_source() -> None:
    problems = [p for f in _sources() for p in _findings(f)]
    assert problems == []


def test_the_checker_catches_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os, subprocess as sp\nfrom subprocess import check_output as co\n"
                   "sp.run('ls', shell=True)\nos.system('ls')\nco(['ls'])\nx = sp.Popen\nos.fork()\n")
    global SRC
    saved = SRC
    SRC = tmp_path
    try:
        found = _findings(bad)
    finally:
        SRC = saved
    assert len(found) == 6, found
    assert any("os.fork outside" in f for f in found)
    assert any("shell=True" in f for f in found)


def test_only_the_runner_imports_subprocess_popen() -> None:
    users = []
    for f in _sources():
        text = f.read_text(encoding="utf-8")
        if "Popen" in text and f != RUNNER:
            users.append(str(f.relative_to(SRC)))
    assert users == []
    assert "_spawn: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen" in RUNNER.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- controlled environments


def _plan(prefix: Path, *steps: Step) -> Plan:
    return Plan(tf="2.20.0", backend="pip", backend_reason="test", prefix=str(prefix), name=None, python="3",
                steps=steps, tool="venv", env_python=str(prefix / "bin" / "python"))


@pytest.mark.real_subprocess
def test_installer_steps_do_not_see_pythonpath_or_pythonhome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else/site-packages")
    monkeypatch.setenv("PYTHONHOME", "/opt/other-python")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")  # what an installer needs still passes
    prefix = tmp_path / "env"
    show = ("import json, os, pathlib, sys; p = pathlib.Path(sys.argv[1]); p.mkdir(); "
            "(p / 'pyvenv.cfg').write_text('x'); print('ENV ' + json.dumps({k: os.environ.get(k) for k in "
            "('PYTHONPATH', 'PYTHONHOME', 'HTTPS_PROXY', 'PIP_NO_INPUT')}))")
    # PYTHONHOME would break this very interpreter: run it with -I, as the leak check is what matters
    result = execute.run_plan(_plan(prefix, Step((sys.executable, "-I", "-c", show, str(prefix)), "show",
                                                env=(("PIP_NO_INPUT", "1"),))))
    line = next(x for x in result.log_path.read_text().splitlines() if x.startswith("ENV "))
    seen = json.loads(line[4:])
    assert seen == {"PYTHONPATH": None, "PYTHONHOME": None, "HTTPS_PROXY": "http://proxy.example:3128",
                    "PIP_NO_INPUT": "1"}


def test_smoke_of_a_new_environment_does_not_see_pythonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/home/u/src/tensorflow-build")
    monkeypatch.setenv("PYTHONHOME", "/opt/other-python")
    plan = _plan(Path("/envs/tf"))
    env = execute.activation_env(plan)
    from tfgpu.verify.runner import child_env

    child = child_env(env)  # what run_smoke gives the new environment's interpreter
    # unset, not empty: Python 3.6 and 2.7 take PYTHONHOME="" as a home and die before main (`nox -s recipes`)
    assert "PYTHONPATH" not in child
    assert "PYTHONHOME" not in child
    assert child["PYTHONNOUSERSITE"] == "1"  # ~/.local/lib/pythonX.Y/site-packages is not the environment


@pytest.mark.real_subprocess
def test_smoke_child_really_ignores_the_callers_pythonpath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfgpu.core.process import capture
    from tfgpu.verify.runner import child_env

    shadow = tmp_path / "shadow"
    (shadow / "tensorflow").mkdir(parents=True)
    (shadow / "tensorflow" / "__init__.py").write_text("raise SystemExit('the wrong tensorflow')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    env = child_env(execute.activation_env(_plan(tmp_path / "env")))
    res = capture([sys.executable, "-c", "import sys; print(any('shadow' in p for p in sys.path))"],
                  timeout=30, env=env)
    assert res.ok, res.describe()
    assert res.stdout.strip() == "False"


# --------------------------------------------------------------------------- --redact

SECRETS = {
    "github": "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zA7bC",
    "github_pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "gitlab": "glpat-xY7zA1bC3dE5fG7hI9jK",
    "huggingface": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "aws_key_id": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "password": "hunter2-correct-horse",
    "url_password": "s3cr3tP4ss",
    "bearer": "abcDEF123456ghiJKL789mno",
    "slack": "xoxb-1234567890-abcdefghij",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
USER, HOST = "alice", "gpu-box-17"


def _facts_with_secrets(tmp_path: Path) -> Path:
    doc = json.loads((DATA / "facts" / "r740-4x-tesla-m60.json").read_text(encoding="utf-8"))
    doc.setdefault("env", {})
    doc["env"].update({
        "LD_LIBRARY_PATH": f"/home/{USER}/.local/cuda/lib64:/usr/local/cuda/lib64",
        "CONDA_PREFIX": f"/home/{USER}/miniconda3/envs/tf",
        "XLA_FLAGS": f"--xla_dump_to=/home/{USER}/dumps HF_TOKEN={SECRETS['huggingface']}",
        "VIRTUAL_ENV": f"/Users/{USER}/venvs/tf",
    })
    doc.setdefault("notes", []).extend([
        f"probed on {HOST} by {USER}",
        f"GITHUB_TOKEN={SECRETS['github']} GH_PAT {SECRETS['github_pat']} CI_JOB_TOKEN {SECRETS['gitlab']}",
        f"AWS_ACCESS_KEY_ID={SECRETS['aws_key_id']} AWS_SECRET_ACCESS_KEY={SECRETS['aws_secret']}",
        f"pip.conf password = {SECRETS['password']}; index https://{USER}:{SECRETS['url_password']}@pypi.{HOST}.lan/simple",
        f"Authorization: Bearer {SECRETS['bearer']}",
        f"slack {SECRETS['slack']} session {SECRETS['jwt']}",
    ])
    for t in doc.get("cuda_toolkits") or []:
        t["path"] = f"/home/{USER}/cuda-10.1"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def as_alice(monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass
    import socket

    monkeypatch.setattr(getpass, "getuser", lambda: USER)
    monkeypatch.setattr(socket, "gethostname", lambda: HOST)
    monkeypatch.setenv("HOME", f"/home/{USER}")


def _leaks(text: str) -> list[str]:
    found = [name for name, value in SECRETS.items() if value in text]
    found += [w for w in (USER, HOST) if w in text]
    return found


@pytest.mark.usefixtures("as_alice")
def test_redact_json_removes_users_hosts_and_tokens(tmp_path: Path, cli: Cli) -> None:
    facts = _facts_with_secrets(tmp_path)
    code, plain, err = cli("doctor", "--facts", str(facts), "--json")
    assert code in (0, 1), err
    assert sorted(_leaks(plain)) == sorted([*SECRETS, USER, HOST])  # the test has teeth: all are there
    code, out, err = cli("doctor", "--facts", str(facts), "--json", "--redact")
    assert code in (0, 1), err
    assert _leaks(out) == []
    doc = json.loads(out)
    assert doc["schema"] == "tfgpu.doctor/1"
    assert "/usr/local/cuda/lib64" in doc["facts"]["env"]["LD_LIBRARY_PATH"]  # what is not private stays
    assert "<redacted>" in out
    assert "<user>" in out


@pytest.mark.usefixtures("as_alice")
def test_redact_human_report(tmp_path: Path, cli: Cli) -> None:
    facts = _facts_with_secrets(tmp_path)
    code, plain, _ = cli("doctor", "--facts", str(facts))
    assert code in (0, 1)
    present = _leaks(plain)
    assert USER in present, "the human report shows a path under the home directory"
    code, out, err = cli("doctor", "--facts", str(facts), "--redact")
    assert code in (0, 1), err
    assert _leaks(out) == []
    assert "Recommendation" in out
    code, out, err = cli("doctor", "--facts", str(facts), "--ci", "--redact")
    assert _leaks(out + err) == []


@pytest.mark.parametrize(("text", "kept"), [
    ("/home/bob/.conda/envs/tf/lib", "/home/<user>/.conda/envs/tf/lib"),
    ("C:\\Users\\bob\\miniconda3\\envs\\tf", "C:\\Users\\<user>\\miniconda3\\envs\\tf"),
    ("/usr/local/cuda-12.4/lib64", "/usr/local/cuda-12.4/lib64"),
    ("tensorflow 2.15.1 cuDNN 8.9.7 driver 550.54.15", "tensorflow 2.15.1 cuDNN 8.9.7 driver 550.54.15"),
    ("token-free text about tokens", "token-free text about tokens"),
])
def test_redactor_keeps_what_is_not_private(text: str, kept: str) -> None:
    clean = report.redactor(user="nobody-here", host="nohost-here", home="/nonexistent-home")
    assert clean(text) == kept


def test_redact_handles_every_json_shape() -> None:
    clean = report.redactor(user=USER, host=HOST, home=f"/home/{USER}")
    doc: dict[str, Any] = {f"/home/{USER}/x": [1, None, True, 2.5, {"k": f"{HOST}:{SECRETS['github']}"}]}
    out = report.redact(doc, clean)
    # values only: keys are the document's structure (issue 16)
    assert out == {f"/home/{USER}/x": [1, None, True, 2.5, {"k": "<host>:<redacted>"}]}


def test_explain_redact_removes_the_user_from_quoted_paths(cli, tmp_path, monkeypatch):
    import getpass
    import json as _json

    log = tmp_path / "train.log"
    log.write_text(
        "2020-09-11 08:30:55.744692: I tensorflow/stream_executor/platform/default/dso_loader.cc:53] Could not "
        "dlopen library 'libcudart.so.10.0'; dlerror: libcudart.so.10.0: cannot open shared object file: No such "
        "file or directory; LD_LIBRARY_PATH: /home/dell2/.mujoco/mjpro150/bin:/usr/local/cuda-10.1/lib64:\n"
    )
    monkeypatch.setattr(getpass, "getuser", lambda: "dell2")
    code, out, _ = cli("explain", "--no-probe", "--json", "--redact", str(log))
    assert code == 0
    doc = _json.loads(out)
    assert doc["findings"]
    assert "dell2" not in out
    assert "libcudart.so.10.0" in out
