"""`tfgpu plan|create --backend docker|podman|apptainer` against a fake `docker` CLI on PATH.

The fake replays recorded output (tests/data/containers/SOURCES.md): `docker pull` prints the recorded
status line; `docker run` either runs tfgpu's real smoke script against tests/fake_tf (a run that succeeds)
or prints the recorded "could not select device driver" error and exits 125 (a run that fails).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import REPO, TESTS
from tests.conftest import DATA
from tests.unit.judge.test_container_verdict import DOCKER_OK, THIS_MACHINE, with_containers
from tests.unit.judge.test_verdict import base_facts, gpu_facts
from tfgpu.core.errors import UsageError
from tfgpu.judge.containers import (
    gpu_run_argv,
    pick_runtime,
    render_apptainer,
    render_dockerfile,
    run_in_container,
)
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.planner import plan_container

CT = DATA / "containers"
FAKE_TF = TESTS / "fake_tf"
KB = load_kb()

FAKE_DOCKER = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
log = os.environ["FAKE_DOCKER_LOG"]
with open(log, "a") as fh:
    fh.write(" ".join(args) + "\\n")
if args[:1] == ["pull"]:
    sys.stdout.write(open({pull!r}).read())
    sys.exit(0)
if args[:1] == ["run"]:
    if os.environ.get("FAKE_DOCKER_MODE") == "no-gpu-driver":
        sys.stderr.write(open({nogpu!r}).read())
        sys.exit(125)
    vol = args[args.index("--volume") + 1]
    host = vol.split(":")[0]
    env = dict(os.environ, PYTHONPATH={fake_tf!r}, FAKE_TF_GPUS="1", FAKE_TF_VERSION="2.15.1")
    sys.exit(subprocess.call([sys.executable, host], env=env))
sys.exit(2)
"""


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "docker"
    script.write_text(FAKE_DOCKER.format(python=sys.executable, pull=str(CT / "docker_pull_status.stdout"),
                                         nogpu=str(CT / "docker_run_no_gpu_driver.stderr"), fake_tf=str(FAKE_TF)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(tmp_path / "docker.log"))
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    return tmp_path


def ready_facts(tmp_path: Path) -> Path:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(with_containers(base_facts(), DOCKER_OK)))
    return path


# --------------------------------------------------------------------------- plans as data


def test_docker_plan_is_pull_then_the_smoke_script_with_gpus_all():
    facts = with_containers(base_facts(), DOCKER_OK)
    plan = plan_container(KB, facts, "2.15", backend="docker", image_ref=None, smoke_script="/s/script.py",
                          cache_dir="/c")
    assert plan.recipe_id == "tensorflow/tensorflow:2.15.1-gpu"
    assert [s.argv for s in plan.steps] == [
        ("docker", "pull", "tensorflow/tensorflow:2.15.1-gpu"),
        ("docker", "run", "--rm", "--gpus", "all", "--volume", "/s/script.py:/tfgpu-smoke.py:ro", "--env",
         "TF_FORCE_GPU_ALLOW_GROWTH=true", "tensorflow/tensorflow:2.15.1-gpu", "python3", "/tfgpu-smoke.py")]
    assert plan.to_json()["backend"] == "docker"
    assert "blocked" not in plan.backend_reason


def test_podman_uses_cdi_and_apptainer_exec_nv_on_a_sif():
    section = {**DOCKER_OK, "runtimes": [{"name": "podman", "version": "4.3.1", "daemon": {"reachable": None}},
                                         {"name": "apptainer", "version": "1.3.4", "daemon": {"reachable": None}}]}
    facts = with_containers(base_facts(), section)
    podman = plan_container(KB, facts, "2.15", backend="podman", image_ref=None, smoke_script="/s", cache_dir="/c")
    assert podman.steps[1].argv[:6] == ("podman", "run", "--rm", "--device", "nvidia.com/gpu=all",
                                        "--security-opt=label=disable")
    app = plan_container(KB, facts, "2.15", backend="apptainer", image_ref=None, smoke_script="/s", cache_dir="/c")
    assert app.steps[0].argv == ("apptainer", "pull", "/c/tensorflow_tensorflow_2.15.1-gpu.sif",
                                 "docker://tensorflow/tensorflow:2.15.1-gpu")
    assert app.steps[1].argv[:3] == ("apptainer", "exec", "--nv")


def test_a_blocked_route_is_said_in_the_plan():
    facts = with_containers(base_facts(), THIS_MACHINE)
    plan = plan_container(KB, facts, "2.15", backend="docker", image_ref=None, smoke_script="/s", cache_dir="/c")
    assert "blocked" in plan.backend_reason
    assert any("nvidia-ctk runtime configure" in n for n in plan.notes)


def test_run_mounts_the_current_directory():
    argv = run_in_container("docker", "img:1", ["python3", "train.py"], "/home/u/proj")
    assert argv == ("docker", "run", "--rm", "--gpus", "all", "--volume", "/home/u/proj:/workspace",
                    "--workdir", "/workspace", "--env", "TF_FORCE_GPU_ALLOW_GROWTH=true", "img:1", "python3", "train.py")
    assert gpu_run_argv("apptainer", "x.sif", ["nvidia-smi"], workdir="/w")[:5] == ("apptainer", "exec", "--nv",
                                                                                     "--pwd", "/w")
    # an interactive run: docker and podman take -it; apptainer inherits the terminal
    assert gpu_run_argv("podman", "img:1", ["bash"], mounts=(("/h", "/c", True),), tty=True) == (
        "podman", "run", "--rm", "-it", "--device", "nvidia.com/gpu=all", "--security-opt=label=disable",
        "--volume", "/h:/c:ro", "img:1", "bash")
    assert gpu_run_argv("apptainer", "x.sif", ["bash"], mounts=(("/h", "/c", True),), env=(("A", "1"),),
                        tty=True) == ("apptainer", "exec", "--nv", "--bind", "/h:/c:ro", "--env", "A=1", "x.sif", "bash")


@pytest.mark.parametrize(("runtime", "cwd"), [("apptainer", "/home/u/a,b"), ("apptainer", "/home/u/x:y"),
                                               ("docker", "/home/u/x:y"), ("podman", "/data/run:2")])
def test_a_directory_the_mount_flag_would_split_is_refused(runtime: str, cwd: str):
    # apptainer's --bind is a comma-separated list and every --volume/--bind splits at ':': /home/u/a,b would
    # bind /home/u/a and a second path "b" (a found bug): refused with the way out, exit 2
    with pytest.raises(UsageError) as info:
        run_in_container(runtime, "img:1", ["python3", "train.py"], cwd)
    assert "separator" in info.value.message
    assert "directory whose path has no" in (info.value.hint or "")
    # a comma is only apptainer's separator: docker and podman mount it as it is
    if runtime != "apptainer" and "," not in cwd:
        argv = run_in_container(runtime, "img:1", ["true"], "/home/u/a,b")
        assert argv[argv.index("--volume") + 1] == "/home/u/a,b:/workspace"


@pytest.mark.parametrize("bad", ["evil;rm -rf /", "a b", "UPPER/case:1", "img:tag\nRUN x", "-v:1"])
def test_image_references_are_checked_before_any_use(bad: str):
    with pytest.raises(UsageError):
        render_dockerfile(bad, tf="2.15.1")
    facts = with_containers(base_facts(), DOCKER_OK)
    with pytest.raises(UsageError):
        plan_container(KB, facts, "2.15", backend="docker", image_ref=bad, smoke_script="/s", cache_dir="/c")


def test_dockerfile_and_definition_file_escape_the_requirements_path():
    text = render_dockerfile("nvcr.io/nvidia/tensorflow:25.02-tf2-py3", tf="2.17.0", requirements="req/requirements.txt")
    assert 'COPY ["req/requirements.txt", "/tmp/requirements.txt"]' in text
    assert text.splitlines()[2] == "FROM nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
    assert "%files\n    req/requirements.txt /opt/requirements.txt" in render_apptainer(
        "nvcr.io/nvidia/tensorflow:25.02-tf2-py3", tf="2.17.0", requirements="req/requirements.txt")
    for bad in ("a b.txt", "x\nRUN curl", '"q"', "$(x)"):
        with pytest.raises(UsageError):
            render_dockerfile("img:1", tf="2.15.1", requirements=bad)


def test_plan_cli_formats(cli, tmp_path: Path):
    facts = ready_facts(tmp_path)
    code, out, _ = cli("plan", "--tf", "2.15", "--backend", "docker", "--format", "sh", "--facts", str(facts))
    assert code == 0
    # a script for another host: the image's own TensorFlow checks the GPU, nothing of this installation mounted
    assert "docker run --rm --gpus all --env TF_FORCE_GPU_ALLOW_GROWTH=true tensorflow/tensorflow:2.15.1-gpu " \
           "python3 -c " in out
    code, out, _ = cli("plan", "--tf", "2.15", "--backend", "docker", "--format", "dockerfile", "--facts", str(facts),
                       "--requirements", "requirements.txt")
    assert code == 0
    assert "FROM tensorflow/tensorflow:2.15.1-gpu" in out
    # no Apptainer on the machine the facts describe: the route is blocked, exit 1 as with --format sh (the file
    # is written all the same); --force says "write it anyway"
    code, out, err = cli("plan", "--tf", "2.15", "--backend", "apptainer", "--format", "apptainer", "--facts", str(facts))
    assert code == 1
    assert "apptainer is not installed" in err
    assert "Bootstrap: docker\nFrom: tensorflow/tensorflow:2.15.1-gpu" in out
    assert cli("plan", "--tf", "2.15", "--backend", "apptainer", "--format", "apptainer", "--force", "--facts",
               str(facts))[0] == 0
    assert cli("plan", "--tf", "2.15", "--format", "dockerfile", "--facts", str(facts))[0] == 2
    assert cli("plan", "--tf", "2.15", "--backend", "docker", "--image", "bad image", "--facts", str(facts))[0] == 2


def test_plan_of_a_blocked_container_route_exits_1_as_create_would_refuse_it(cli, tmp_path: Path):
    # the container plan carries the doctor's verdict now (it was empty, so `plan` exited 0 where `create`
    # refuses): exit 1 unless --force, as for pip and conda plans; the commands are printed either way
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(with_containers(base_facts(), THIS_MACHINE)))
    code, out, err = cli("plan", "--tf", "2.15", "--backend", "docker", "--format", "sh", "--facts", str(path))
    assert code == 1, err
    assert "docker run --rm --gpus all --env " in out
    assert "create` would refuse it" in err
    assert cli("plan", "--tf", "2.15", "--backend", "docker", "--format", "sh", "--force", "--facts", str(path))[0] == 0
    code, out, _ = cli("plan", "--tf", "2.15", "--backend", "docker", "--json", "--force", "--facts", str(path))
    plan = json.loads(out)
    import jsonschema

    # the container plan is a tfgpu.plan/1 document (its Python was "", which the schema refused)
    jsonschema.validate(plan, json.loads((REPO / "src/tfgpu/core/schemas/plan.schema.json")
                                         .read_text(encoding="utf-8")))
    code, out, _ = cli("doctor", "--tf", "2.15", "--backend", "docker", "--json", "--facts", str(path))
    row = json.loads(out)["targets"][0]
    assert (plan["verdict"], plan["recipe_id"], plan["tf"]) == (row["verdict"], row["recipe_id"], row["tf"]) == (
        "blocked", "tensorflow/tensorflow:2.15.1-gpu", "2.15.1")
    assert {b["check"] for b in plan["blockers"]} >= {"container.daemon", "container.toolkit"}


# --------------------------------------------------------------------------- create against the fake CLI


@pytest.mark.real_subprocess
def test_create_pulls_smokes_and_records(cli, fake_docker: Path, monkeypatch: pytest.MonkeyPatch):
    facts = ready_facts(fake_docker)
    code, out, err = cli("create", "--tf", "2.15", "--backend", "docker", "--yes", "--facts", str(facts),
                         "--name", "tf215")
    assert code == 0, out + err
    assert "smoke test: GPU OK: TensorFlow 2.15.1" in out
    calls = (fake_docker / "docker.log").read_text().splitlines()
    assert calls[0] == "pull tensorflow/tensorflow:2.15.1-gpu"
    assert calls[1].startswith("run --rm --gpus all --volume ")
    assert "Status: Downloaded newer image" in err  # the pull's progress is shown
    code, out, _ = cli("envs", "--json")
    entry = next(e for e in json.loads(out)["envs"] if e["name"] == "tf215")
    assert entry["prefix"] == "tensorflow/tensorflow:2.15.1-gpu"
    assert entry["backend"] == "docker"
    assert entry["smoke"]["passed"] is True
    monkeypatch.chdir(fake_docker)
    (fake_docker / "tensorflow" / "tensorflow:2.15.1-gpu").mkdir(parents=True)  # named like the image: untouched
    code, out, err = cli("remove", "tf215", "--yes")
    assert code == 0, out + err
    assert (fake_docker / "tensorflow" / "tensorflow:2.15.1-gpu").is_dir()
    code, out, _ = cli("envs", "--json")
    assert not [e for e in json.loads(out)["envs"] if e["name"] == "tf215"]


@pytest.mark.real_subprocess
def test_smoke_name_runs_the_smoke_test_inside_a_recorded_image(cli, fake_docker: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    facts = ready_facts(fake_docker)
    code, out, err = cli("create", "--tf", "2.15", "--backend", "docker", "--yes", "--facts", str(facts),
                         "--name", "tf215", "--no-smoke")
    assert code == 0, out + err
    code, out, _ = cli("envs", "--json")
    assert next(e for e in json.loads(out)["envs"] if e["name"] == "tf215")["smoke"] is None
    code, out, err = cli("smoke", "--name", "tf215", "--facts", str(facts))
    assert code == 0, out + err
    assert "GPU OK: TensorFlow 2.15.1" in out
    calls = (fake_docker / "docker.log").read_text().splitlines()
    assert calls[-1].startswith("run --rm --gpus all --volume ")  # the same runner as create's smoke step
    assert ":/tfgpu-smoke.py:ro " in calls[-1]
    assert calls[-1].endswith("tensorflow/tensorflow:2.15.1-gpu python3 /tfgpu-smoke.py")
    code, out, _ = cli("envs", "--json")
    entry = next(e for e in json.loads(out)["envs"] if e["name"] == "tf215")
    assert entry["smoke"]["passed"] is True
    assert "GPU OK" in entry["smoke"]["summary"]
    # the image loses its GPU (the recorded "could not select device driver" run): the registry says so
    monkeypatch.setenv("FAKE_DOCKER_MODE", "no-gpu-driver")
    code, out, err = cli("smoke", "--name", "tf215", "--json", "--facts", str(facts))
    assert code == 1, out + err
    doc = json.loads(out)
    assert doc["python"]["executable"] == "python3 in tensorflow/tensorflow:2.15.1-gpu"
    assert "could not select device driver" in json.dumps(doc)
    code, out, _ = cli("envs", "--json")
    assert next(e for e in json.loads(out)["envs"] if e["name"] == "tf215")["smoke"]["passed"] is False
    code, out, _ = cli("envs")
    assert "✗" in next(line for line in out.splitlines() if "tf215" in line)


def test_smoke_name_uses_the_runner_that_made_the_image():
    from tfgpu.backends.runners import CONTAINER_RUNNERS

    for runtime in ("docker", "podman", "apptainer"):
        facts = with_containers(base_facts(), DOCKER_OK)
        plan = plan_container(KB, facts, "2.15", backend=runtime, image_ref=None, smoke_script="/s", cache_dir="/c")
        # what `tfgpu smoke --name NAME` runs for the entry create recorded == create's own smoke step
        assert CONTAINER_RUNNERS[plan.backend].smoke_argv(plan.prefix, "/s") == plan.steps[1].argv
    assert CONTAINER_RUNNERS["apptainer"].smoke_argv("/c/x.sif", "/s", "--benchmark")[:3] == ("apptainer", "exec", "--nv")
    assert CONTAINER_RUNNERS["apptainer"].smoke_argv("/c/x.sif", "/s", "--benchmark")[-4:] == (
        "/c/x.sif", "python3", "/tfgpu-smoke.py", "--benchmark")


def test_smoke_name_of_a_conda_or_venv_name_is_not_taken_for_an_image(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    from tfgpu.build import registry
    from tfgpu.cli.commands.smoke import _container_entry

    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    registry.record(name="venv1", prefix=str(tmp_path / "v"), backend="pip", tool="uv", tf="2.15.1", python="3.11",
                    recipe="pip-and-cuda", env_python=str(tmp_path / "v/bin/python"))
    registry.record(name="img", prefix="tensorflow/tensorflow:2.15.1-gpu", backend="podman", tool="podman",
                    tf="2.15.1", python="", recipe="tensorflow/tensorflow:2.15.1-gpu", env_python="python3")
    assert _container_entry("venv1") is None
    assert _container_entry("nothing") is None
    assert _container_entry("tensorflow/tensorflow:2.15.1-gpu") is None  # a name, not an image reference
    entry = _container_entry("img")
    assert entry is not None
    assert entry["backend"] == "podman"


@pytest.mark.real_subprocess
def test_run_name_runs_the_command_in_the_recorded_image_with_the_current_directory(
        cli, fake_docker: Path, monkeypatch: pytest.MonkeyPatch):
    facts = ready_facts(fake_docker)
    code, out, err = cli("create", "--tf", "2.15", "--backend", "docker", "--yes", "--facts", str(facts),
                         "--name", "tf215", "--no-smoke")
    assert code == 0, out + err
    project = fake_docker / "project"
    project.mkdir()
    # the fake runs what is mounted with its Python: a directory with a __main__.py stands in for the image's
    # command, and its exit code comes back through `tfgpu run`
    (project / "__main__.py").write_text("import sys; sys.exit(3)\n")
    monkeypatch.chdir(project)
    code, out, err = cli("run", "tf215", "--", "python3", "train.py")
    assert code == 3, out + err
    last = (fake_docker / "docker.log").read_text().splitlines()[-1]
    assert last == (f"run --rm --gpus all --volume {project}:/workspace --workdir /workspace "
                    "--env TF_FORCE_GPU_ALLOW_GROWTH=true tensorflow/tensorflow:2.15.1-gpu python3 train.py")


@pytest.mark.real_subprocess
def test_create_reports_the_missing_toolkit_from_the_run(cli, fake_docker: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_DOCKER_MODE", "no-gpu-driver")
    facts = ready_facts(fake_docker)
    code, out, err = cli("create", "--tf", "2.15", "--backend", "docker", "--yes", "--facts", str(facts),
                         "--name", "broken")
    assert code == 1, out + err
    assert "could not select device driver" in out + err or "toolkit" in (out + err).lower()
    code, out, _ = cli("envs", "--json")
    entry = next(e for e in json.loads(out)["envs"] if e["name"] == "broken")
    assert entry["smoke"]["passed"] is False


def test_create_refuses_a_blocked_route(cli, tmp_path: Path):
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(with_containers(base_facts(), THIS_MACHINE)))
    code, _out, err = cli("create", "--tf", "2.15", "--backend", "docker", "--yes", "--facts", str(path))
    assert code == 1, err  # NotReady, never an internal error
    assert "blocked" in err


REAL_RUNTIMES = ("docker", "podman", "apptainer")


def real_runtime_skip_reason(runtime: str, facts: dict[str, Any]) -> str | None:
    """Why the real-runtime e2e test cannot run ``runtime`` here (None: it can), from the probed facts:
    the runtime is not installed, it cannot run a GPU container (no daemon, no toolkit, no CDI spec), or
    the machine has no NVIDIA GPU."""
    section = facts.get("containers") or {}
    names = {e.get("name") for e in section.get("runtimes") or [] if isinstance(e, dict)}
    programs = ("apptainer", "singularity") if runtime == "apptainer" else (runtime,)
    if not names & set(programs):
        return f"no {' or '.join(programs)} on this machine (not on PATH)"
    rt = pick_runtime(facts, runtime)
    if rt is not None and rt.blockers:
        return f"{rt.name} cannot run a GPU container here: " + "; ".join(b[1] for b in rt.blockers)
    if not facts.get("gpus"):
        why = (facts.get("driver") or {}).get("error") or "the driver reports none"
        return f"no NVIDIA GPU on this machine ({why}): a GPU container cannot be smoke-tested"
    return None


def test_the_real_runtime_e2e_says_why_it_skips_here():
    # this machine as probed: a Docker CLI without a daemon, no toolkit, no GPU, no podman, no apptainer
    here = with_containers(base_facts(), THIS_MACHINE)
    here["gpus"] = []
    here["driver"] = {"version": None, "error": "nvidia-smi: not found"}
    assert "Docker daemon is not running" in str(real_runtime_skip_reason("docker", here))
    assert "NVIDIA Container Toolkit" in str(real_runtime_skip_reason("docker", here))
    assert real_runtime_skip_reason("podman", here) == "no podman on this machine (not on PATH)"
    assert real_runtime_skip_reason("apptainer", here) == "no apptainer or singularity on this machine (not on PATH)"
    ready = with_containers(base_facts(), DOCKER_OK)
    assert real_runtime_skip_reason("docker", ready) is None
    no_gpu = copy.deepcopy(ready)
    no_gpu["gpus"] = []
    no_gpu["driver"] = {"version": None, "error": "nvidia-smi: not found"}
    assert real_runtime_skip_reason("docker", no_gpu) == ("no NVIDIA GPU on this machine (nvidia-smi: not found): "
                                                          "a GPU container cannot be smoke-tested")
    podman = with_containers(base_facts(), {**THIS_MACHINE, "runtimes": [{"name": "podman", "version": "4.9.3"}]})
    assert "CDI" in str(real_runtime_skip_reason("podman", podman))
    singularity = with_containers(base_facts(), {**THIS_MACHINE, "runtimes": [{"name": "singularity",
                                                                               "version": "3.8.7"}]})
    assert real_runtime_skip_reason("apptainer", singularity) is None


@pytest.mark.e2e
@pytest.mark.real_subprocess
@pytest.mark.parametrize("runtime", REAL_RUNTIMES)
def test_real_runtime_pulls_and_runs_the_smoke_test_on_the_gpu(runtime: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    from tfgpu.facts.probe import detect_facts

    facts = detect_facts(timeout=20.0)
    reason = real_runtime_skip_reason(runtime, facts)
    if reason is not None:
        pytest.skip(reason)
    import subprocess

    env = dict(os.environ, TFGPU_HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-m", "tfgpu", "create", "--tf", "2.15", "--backend", runtime, "--yes",
                           "--name", f"e2e-{runtime}"], capture_output=True, text=True, timeout=3600, check=False,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke test: GPU OK" in proc.stdout


def test_rtx_50_facts_plan_the_ngc_image():
    facts = with_containers(gpu_facts("NVIDIA GeForce RTX 5090", "12.0", driver="570.124.04"), DOCKER_OK)
    plan = plan_container(KB, facts, "2.17", backend="container", image_ref=None, smoke_script="/s", cache_dir="/c")
    assert plan.recipe_id == "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
    assert plan.tf == "2.17.0"
