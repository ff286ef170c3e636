"""TensorFlow's own GPU images that do not carry what their release needs (compat/containers.toml
``tf_image_faults``: 2.18+ ship cuDNN 8.9), and Docker reaching the GPUs through CDI: one judgment
(tfgpu.judge.containers) for the doctor, the plan and `tfgpu lint`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import REPO
from tests.conftest import DATA
from tests.unit.build.test_container_create import fake_docker  # noqa: F401  (the fake `docker` CLI fixture)
from tests.unit.judge.test_container_verdict import DOCKER_OK, container_of, with_containers
from tests.unit.judge.test_verdict import base_facts
from tfgpu.core.errors import DataError
from tfgpu.core.record import replace
from tfgpu.facts.machine import Machine
from tfgpu.facts.probe.containers import parse_docker_info
from tfgpu.judge.containers import (
    choose_image,
    docker_cdi_gpu_args,
    judge_container,
    judge_runtime,
    newest_unaffected,
)
from tfgpu.judge.findings import BLOCKED, FAIL, READY, WARN
from tfgpu.judge.verdict import judge_release
from tfgpu.kb import parse
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.queries import container_images
from tfgpu.kb.specifiers import VersionSpec
from tfgpu.kb.versions import version
from tfgpu.plan.planner import plan_container
from tfgpu.tools.lint import lint_text

KB = load_kb()
CT = DATA / "containers"
FACTS = with_containers(base_facts(), DOCKER_OK)  # an RTX 3090, driver 550.x, Docker with the nvidia runtime


# --------------------------------------------------------------------------- the data


def test_the_fault_row_covers_2_18_and_later_and_cites_both_threads():
    (fault,) = KB.container_faults
    assert fault.repo == "tensorflow/tensorflow"
    assert version("2.17.1") not in fault.tf
    assert version("2.18.0") in fault.tf
    assert version("2.19.0") in fault.tf
    assert fault.verdict == "blocked"
    assert fault.fixed_in == ""
    assert (fault.cudnn, fault.needs_cudnn, fault.last_good) == ("8.9.6.50", "9.3", "2.17")
    urls = {str(KB.sources("containers")[k]["url"]) for k in (fault.source, *fault.also)}
    assert "https://github.com/tensorflow/tensorflow/issues/81344" in urls  # 2.18.0-gpu: 'the same result of no GPU'
    assert fault.also[0] == "tf-build-221"
    assert "https://github.com/tensorflow/tensorflow/issues/62412" in urls
    assert "https://github.com/tensorflow/build/issues/221" in urls
    assert "2.17.0-gpu" in fault.quote
    assert "libcudnn8 8.9.6.50" in fault.quote
    # the release needs what the TensorFlow table says its tested build uses
    for v in ("2.18.0", "2.19.0"):
        assert KB.build_for(version(v), "linux").cudnn == fault.needs_cudnn  # type: ignore[union-attr]


def test_the_images_of_affected_releases_carry_the_faults_cudnn():
    assert container_images(KB, "2.17.1")[0].fault is None
    for v in ("2.18.0", "2.19.0"):
        own = container_images(KB, v)[0]
        assert own.ref == f"tensorflow/tensorflow:{v}-gpu"
        assert own.fault is not None
        assert own.cudnn == "8.9.6.50"


def _with(name: str, table: str, change: dict[str, Any], monkeypatch: pytest.MonkeyPatch, index: int = 0) -> None:
    real = parse.load_toml

    def patched(n: str) -> dict[str, Any]:
        data = real(n)
        if n == name:
            data = copy.deepcopy(data)
            data[table][index].update(change)
        return data

    monkeypatch.setattr(parse, "load_toml", patched)


@pytest.mark.parametrize(("table", "change", "message"), [
    ("ngc", {"tf_source": "no-such-source"}, "tf_source 'no-such-source' is not in \\[sources\\]"),
    ("tf_image_faults", {"workaround_source": "nope"}, "workaround_source 'nope' is not in \\[sources\\]"),
    ("tf_image_faults", {"source3": "nope"}, "source3 'nope' is not in \\[sources\\]"),
    ("tf_image_faults", {"verdict": "maybe"}, "verdict 'maybe'"),
    ("tf_image_faults", {"tf": "2.18+"}, "not a version specifier"),
    ("tf_image_faults", {"cudnn": "eight"}, "bad or missing field"),
])
def test_a_bad_row_is_a_data_error(table: str, change: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch):
    _with("containers", table, change, monkeypatch, index=1 if table == "ngc" else 0)
    with pytest.raises(DataError, match=message):
        parse._parse_container_table() if table == "ngc" else parse._parse_image_faults()


# --------------------------------------------------------------------------- the verdict (doctor and plan)


@pytest.mark.parametrize("tf", ["2.18.0", "2.19.0"])
def test_an_affected_image_is_blocked_with_the_exact_fix_on_a_gpu_machine(tf: str):
    tv = judge_release(FACTS, KB, version(tf), backend="docker")
    assert tv.verdict == BLOCKED
    assert tv.recipe == f"tensorflow/tensorflow:{tf}-gpu"
    (cudnn,) = [f for f in tv.blockers if f.check == "container.image_cudnn"]
    assert "cuDNN 8.9.6.50" in cudnn.summary
    assert "needs cuDNN 9.3" in cudnn.summary
    assert "tensorflow/tensorflow#62412" in cudnn.summary
    assert "tensorflow/build#221" in cudnn.summary
    assert "tensorflow/tensorflow:2.17.1-gpu" in cudnn.fix  # the newest unaffected tag
    assert "apt-get install -y cudnn9-cuda-12" in cudnn.fix  # the threads' workaround, on top of the tag
    # and NVIDIA's image that runs on this GPU and driver: a suggestion (a caveat), not a blocker of its own
    cv = next(b for b in tv.backends if b.backend == "container")
    assert any("nvcr.io/nvidia/tensorflow:25.02-tf2-py3" in f.summary for f in cv.caveats
               if f.check == "container.alternative")
    # nothing else blocks: the driver and the GPU are fine for these images
    assert {f.check for f in tv.blockers} == {"container.image_cudnn"}


def test_the_last_unaffected_release_is_still_ready():
    tv = judge_release(FACTS, KB, version("2.17.1"), backend="docker")
    assert tv.verdict == READY, tv.blockers
    assert container_of(tv).recipe == "tensorflow/tensorflow:2.17.1-gpu"


def test_the_alternative_is_the_newest_unaffected_release_of_tensorflows_own_images():
    (fault,) = KB.container_faults
    good = newest_unaffected(KB, fault)
    assert good is not None
    assert good.ref == "tensorflow/tensorflow:2.17.1-gpu"
    assert good.fault is None
    # no fault row of the last good series: the newest release below it
    assert newest_unaffected(KB, replace(fault, last_good="2.16")).ref == "tensorflow/tensorflow:2.16.2-gpu"  # type: ignore[union-attr]


def test_a_working_image_of_the_same_series_is_chosen_instead():
    # were 2.17's own image affected too, NVIDIA's 25.02 image (TensorFlow 2.17.0) is the series' working image
    (fault,) = KB.container_faults
    kb = replace(KB, container_faults=(replace(fault, tf=VersionSpec(">=2.17"), last_good="2.16"),))
    m = Machine.from_facts(FACTS, kb)
    verdict = judge_container(FACTS, kb, version("2.17.1"), m, wanted="docker")
    assert verdict.viable, verdict.blockers
    assert verdict.recipe == "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
    assert choose_image(kb, FACTS, version("2.17.1"), backend="docker").recipe.id == verdict.recipe


def test_a_caveats_row_leaves_the_image_usable_and_says_why():
    (fault,) = KB.container_faults
    kb = replace(KB, container_faults=(replace(fault, verdict="caveats"),))
    m = Machine.from_facts(FACTS, kb)
    verdict = judge_container(FACTS, kb, version("2.18.0"), m, wanted="docker")
    assert verdict.viable
    assert any(c.check == "container.image_cudnn" for c in verdict.caveats)


def test_plan_backend_docker_for_2_18_is_blocked_with_the_fix_in_its_notes():
    plan = plan_container(KB, FACTS, "2.18.0", backend="docker", image_ref=None, smoke_script="/s.py", cache_dir="/c")
    assert plan.recipe_id == "tensorflow/tensorflow:2.18.0-gpu"
    assert any("cuDNN 8.9.6.50" in n and "tensorflow/tensorflow:2.17.1-gpu" in n for n in plan.notes)
    choice = choose_image(KB, FACTS, version("2.18.0"), backend="docker")
    assert "cuDNN 8.9.6.50" in choice.blocked


# --------------------------------------------------------------------------- lint


def _lint(text: str) -> dict[str, list[Any]]:
    kind, checks = lint_text(text, KB, Machine.from_facts(FACTS, KB))
    assert kind == "dockerfile"
    out: dict[str, list[Any]] = {}
    for c in checks:
        out.setdefault(c.id, []).append(c)
    return out


def test_lint_fails_a_from_line_of_an_affected_tag_with_the_verdicts_finding():
    got = _lint("FROM tensorflow/tensorflow:2.18.0-gpu\nWORKDIR /app\nCOPY . .\nCMD [\"python3\", \"train.py\"]\n")
    (check,) = got["image.cudnn"]
    assert check.status == FAIL
    m = Machine.from_facts(FACTS, KB)
    (image,) = [i for i in container_images(KB, "2.18.0") if i.family == "tensorflow"]
    (finding,) = [f for f in judge_container(FACTS, KB, version("2.18.0"), m, wanted="docker").blockers
                  if f.check == "container.image_cudnn"]
    assert check.summary == f"line 1: {finding.summary}"
    assert check.fix == finding.fix
    assert check.source == "https://github.com/tensorflow/tensorflow/issues/62412"
    assert image.ref in check.summary
    assert got["image.driver"][0].status == "pass"  # the host's 550 driver meets CUDA 12.5's floor


@pytest.mark.parametrize("run", ["apt-get update && apt-get install -y cudnn9-cuda-12",
                                 "pip install nvidia-cudnn-cu12==9.3.0.75"])
def test_lint_sees_the_workaround_in_the_same_stage(run: str):
    got = _lint(f"FROM tensorflow/tensorflow:2.19.0-gpu\nRUN {run}\n")
    (check,) = got["image.cudnn"]
    assert check.status == WARN
    assert "line 2 installs cuDNN 9" in check.summary


def test_lint_says_nothing_about_cudnn_for_an_unaffected_tag_or_a_build_stage():
    assert "image.cudnn" not in _lint("FROM tensorflow/tensorflow:2.17.1-gpu\n")
    assert "image.cudnn" not in _lint("FROM tensorflow/tensorflow:2.18.0-gpu AS build\nFROM python:3.12-slim\n")


# --------------------------------------------------------------------------- Docker through CDI


def _docker_entry(info: dict[str, Any]) -> dict[str, Any]:
    return {"name": "docker", "version": "28.2.2", "daemon": {"reachable": info["reachable"],
            "server_version": info["server_version"], "error": info["error"]}, "rootless": info["rootless"],
            "runtimes": info["runtimes"], "default_runtime": info["default_runtime"],
            "cdi_spec_dirs": info["cdi_spec_dirs"], "cdi_devices": info["cdi_devices"]}


NO_TOOLKIT: dict[str, Any] = {"present": False, "runtime": False, "daemon_json": {"nvidia": False}, "cdi_specs": [],
                              "cdi_gpu_devices": []}
GROUP = {"exists": True, "members": ["alice"], "member": True, "user": "alice", "root": False}


def test_docker_cdi_devices_from_docker_clis_golden_make_docker_gpu_ready():
    info = parse_docker_info((CT / "docker_info_with_devices.json.golden").read_text())
    section = {"runtimes": [_docker_entry(info)], "docker_group": GROUP, "toolkit": NO_TOOLKIT}
    state = judge_runtime(section, section["runtimes"][0])
    assert state.gpu_ready, state.blockers
    assert state.route == "cdi"
    assert state.gpu_args == ("--device", "nvidia.com/gpu=gpu0")  # what the daemon discovered, not com.example


def test_docker_with_the_nvidia_runtime_keeps_gpus_all():
    info = parse_docker_info((CT / "docker_api_info_nvidia_runtime.json").read_text())
    section = {"runtimes": [_docker_entry(info)], "docker_group": GROUP, "toolkit": NO_TOOLKIT}
    state = judge_runtime(section, section["runtimes"][0])
    assert state.gpu_ready
    assert state.route == ""
    assert state.gpu_args == ()
    plan = plan_container(KB, with_containers(base_facts(), section), "2.15.1", backend="docker", image_ref=None,
                          smoke_script="/s.py", cache_dir="/c")
    assert plan.steps[1].argv[3:5] == ("--gpus", "all")


def test_without_cdi_devices_or_runtime_docker_is_blocked_and_the_fix_names_cdi_when_the_spec_exists():
    info = parse_docker_info((CT / "docker_info_with_devices.json.golden").read_text())
    entry = {**_docker_entry(info), "cdi_devices": ["com.example.device1"]}
    state = judge_runtime({"runtimes": [entry], "docker_group": GROUP, "toolkit": NO_TOOLKIT}, entry)
    assert not state.gpu_ready
    assert "--cdi.enabled" not in state.blockers[0][2]
    with_spec = {**NO_TOOLKIT, "cdi_gpu_devices": ["nvidia.com/gpu=0", "nvidia.com/gpu=all"]}
    state = judge_runtime({"runtimes": [entry], "docker_group": GROUP, "toolkit": with_spec}, entry)
    assert not state.gpu_ready
    assert "--cdi.enabled" in state.blockers[0][2]
    assert "--device nvidia.com/gpu=all" in state.blockers[0][2]


def test_an_unreachable_daemon_never_counts_its_cdi_devices():
    info = parse_docker_info((CT / "docker_info_with_devices.json.golden").read_text())
    entry = _docker_entry(info)
    entry["daemon"] = {"reachable": False, "server_version": None, "error": "Cannot connect to the Docker daemon"}
    state = judge_runtime({"runtimes": [entry], "docker_group": GROUP, "toolkit": NO_TOOLKIT}, entry)
    assert not state.gpu_ready
    assert state.route == ""


def test_the_plan_runs_docker_with_gpu_all_through_cdi_when_the_daemon_lists_it():
    info = parse_docker_info((CT / "docker_info_with_devices.json.golden").read_text())
    entry = {**_docker_entry(info), "cdi_devices": [*info["cdi_devices"], "nvidia.com/gpu=all"]}
    facts = with_containers(base_facts(), {"runtimes": [entry], "docker_group": GROUP, "toolkit": NO_TOOLKIT})
    tv = judge_release(facts, KB, version("2.15.1"), backend="docker")
    assert tv.verdict == READY, tv.blockers
    plan = plan_container(KB, facts, "2.15.1", backend="docker", image_ref=None, smoke_script="/s.py", cache_dir="/c")
    argv = plan.steps[1].argv
    assert argv[:5] == ("docker", "run", "--rm", "--device", "nvidia.com/gpu=all")
    assert "--gpus" not in argv
    assert argv.count("--device") == 1


@given(st.lists(st.sampled_from(["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all", "amd.com/gpu=0",
                                 "com.example.device1", "nvidia.com/mig=0:1"]), max_size=6))
def test_cdi_args_name_only_nvidia_gpus_and_prefer_all(devices: list[str]):
    args = docker_cdi_gpu_args(devices)
    named = list(args[1::2])
    assert all(a == "--device" for a in args[::2])
    assert all(d.startswith("nvidia.com/gpu=") and d in devices for d in named)
    if "nvidia.com/gpu=all" in devices:
        assert named == ["nvidia.com/gpu=all"]
    assert bool(args) == any(d.startswith("nvidia.com/gpu=") for d in devices)


# --------------------------------------------------------------------------- the facts schema


def test_the_facts_schema_has_the_docker_cdi_fields():
    schema = json.loads((REPO / "src/tfgpu/core/schemas/facts.schema.json").read_text())
    info = parse_docker_info((CT / "docker_info_with_devices.json.golden").read_text())
    facts = with_containers(base_facts(), {"runtimes": [_docker_entry(info)], "docker_group": GROUP, "toolkit": NO_TOOLKIT})
    jsonschema.validate(facts, schema)
    facts["containers"]["runtimes"][0]["cdi_devices"] = "nvidia.com/gpu=all"  # not a list
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(facts, schema)


def test_the_planned_dockerfile_for_an_affected_tag_carries_the_workaround_and_lint_sees_it():
    from tfgpu.judge.containers import render_dockerfile

    text = render_dockerfile("tensorflow/tensorflow:2.19.0-gpu", tf="2.19.0", kb=KB)
    lines = text.splitlines()
    assert lines[2] == "FROM tensorflow/tensorflow:2.19.0-gpu"
    assert lines[-1] == "RUN apt-get update && apt-get install -y cudnn9-cuda-12"
    assert "https://github.com/tensorflow/tensorflow/issues/62412" in lines[-2]
    (check,) = _lint(text)["image.cudnn"]
    assert check.status == WARN
    # an unaffected tag: no extra line
    assert "cudnn9" not in render_dockerfile("tensorflow/tensorflow:2.17.1-gpu", tf="2.17.1", kb=KB)


# --------------------------------------------------------------------------- create and run through CDI



def _cdi_facts(tmp: Path) -> Path:
    path = tmp / "cdi-facts.json"
    path.write_text(_cdi_facts_text())
    return path


@pytest.mark.real_subprocess
def test_create_through_cdi_records_the_devices_and_run_uses_them(cli, request: pytest.FixtureRequest):
    from tfgpu.build.userenv import command_for

    home: Path = request.getfixturevalue("fake_docker")
    code, out, err = cli("create", "--tf", "2.15", "--backend", "docker", "--yes", "--facts",
                         str(_cdi_facts(home)), "--name", "cdi215")
    assert code == 0, out + err
    calls = (home / "docker.log").read_text().splitlines()
    assert calls[1].startswith("run --rm --device nvidia.com/gpu=all --volume ")
    code, out, _ = cli("envs", "--json")
    entry = next(e for e in json.loads(out)["envs"] if e["name"] == "cdi215")
    assert entry["gpu_args"] == ["--device", "nvidia.com/gpu=all"]
    code, out, err = cli("smoke", "--name", "cdi215")  # `tfgpu smoke --name` reruns it with the same devices
    assert code == 0, out + err
    assert (home / "docker.log").read_text().splitlines()[-1].startswith("run --rm --device nvidia.com/gpu=all ")
    argv, _env = command_for(entry, ["python3", "train.py"], base={}, cwd="/home/alice/proj")
    assert argv[:5] == ("docker", "run", "--rm", "--device", "nvidia.com/gpu=all")
    assert argv[-3:] == ("tensorflow/tensorflow:2.15.1-gpu", "python3", "train.py")


@pytest.mark.parametrize(("recorded", "expected"), [
    ([], ("--gpus", "all")),
    (["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"], ("--device", "nvidia.com/gpu=0")),
    (["--privileged"], ("--gpus", "all")),  # a registry another user can write: only CDI GPU flags pass
    (["--device", "/dev/sda"], ("--gpus", "all")),
    (["--device", "nvidia.com/gpu=all;rm"], ("--gpus", "all")),
])
def test_run_gives_the_container_only_recorded_cdi_gpu_flags(recorded: list[str], expected: tuple[str, ...]):
    from tfgpu.judge.containers import run_in_container

    argv = run_in_container("docker", "img:1", ["python3"], "/w", recorded)
    assert argv[3:5] == expected
    assert "--privileged" not in argv
    assert "/dev/sda" not in argv


def test_explain_points_a_gpus_all_failure_to_the_cdi_devices_the_daemon_lists():
    from tfgpu.judge import explain as ex

    facts = json.loads(_cdi_facts_text())
    lines = (CT / "docker_run_no_gpu_driver.stderr").read_text().splitlines()
    (finding,) = [f for f in ex.explain_lines(lines, facts=facts) if f.id == "container.no_gpu_runtime"]
    assert "docker run --device nvidia.com/gpu=all" in finding.cause
    # without the CDI devices the cause is the toolkit's, as before
    facts["containers"]["runtimes"][0]["cdi_devices"] = ["com.example.device1"]
    (finding,) = [f for f in ex.explain_lines(lines, facts=facts) if f.id == "container.no_gpu_runtime"]
    assert "nvidia.com/gpu" not in finding.cause
    assert "nvidia-ctk" in finding.cause


def _cdi_facts_text() -> str:
    info = parse_docker_info((CT / "docker_info_with_devices.json.golden").read_text())
    entry = {**_docker_entry(info), "cdi_devices": [*info["cdi_devices"], "nvidia.com/gpu=all"]}
    return json.dumps(with_containers(base_facts(), {"runtimes": [entry], "docker_group": GROUP, "toolkit": NO_TOOLKIT}))


def test_lint_fails_a_compose_service_on_an_affected_tag_with_the_same_finding():
    text = ("services:\n  train:\n    image: tensorflow/tensorflow:2.19.0-gpu-jupyter\n"
            "    deploy:\n      resources:\n        reservations:\n          devices:\n"
            "            - driver: nvidia\n              count: all\n              capabilities: [gpu]\n"
            "  web:\n    image: tensorflow/tensorflow:2.19.0-gpu\n    gpus: all\n")
    kind, checks = lint_text(text, KB, Machine.from_facts(FACTS, KB))
    assert kind == "compose"
    cudnn = [c for c in checks if c.id == "image.cudnn"]
    # the -gpu-jupyter tag carries the same cuDNN (tensorflow/build#221 read it in latest-gpu-jupyter)
    assert [c.summary.split(":")[0] for c in cudnn] == ["service train", "service web"]
    assert "tensorflow/tensorflow:2.19.0-gpu-jupyter carries cuDNN" in cudnn[0].summary
    assert all(c.status == FAIL and "cuDNN 8.9.6.50" in c.summary for c in cudnn)


@pytest.mark.parametrize("ref", ["tensorflow/tensorflow:2.18.0-gpu-jupyter", "docker.io/tensorflow/tensorflow:2.18.0-gpu"])
def test_an_image_named_with_image_is_judged_by_the_release_its_tag_names(ref: str):
    m = Machine.from_facts(FACTS, KB)
    verdict = judge_container(FACTS, KB, version("2.18.0"), m, wanted="docker", image_ref=ref)
    assert verdict.recipe == ref
    assert not verdict.viable
    assert any(f.check == "container.image_cudnn" and ref in f.summary for f in verdict.blockers)
    # a tag that names no release is judged as a custom image (nothing known about its contents)
    latest = judge_container(FACTS, KB, version("2.18.0"), m, wanted="docker", image_ref="tensorflow/tensorflow:latest-gpu")
    assert latest.viable


def test_plan_with_an_unknown_image_on_a_gpu_machine_is_not_an_internal_error(cli, tmp_path: Path):
    # a bug found here: a custom --image has no CUDA, and judging it on a GPU machine read version('') (exit 3)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS))
    code, out, err = cli("plan", "--tf", "2.15", "--backend", "docker", "--image", "myorg/tf:1", "--facts", str(facts))
    assert code == 0, out + err
    assert "myorg/tf:1" in out


def test_the_doctors_docker_recommendation_is_the_newest_unaffected_release():
    from tfgpu.judge.diagnose import diagnose

    result = diagnose(FACTS, KB, backend="docker")
    blocked = {t.tf for t in result.targets if t.verdict == BLOCKED}
    assert {"2.18.1", "2.19.1"} <= blocked  # every affected series' newest release
    assert result.recommendation is not None
    assert result.recommendation.tf == "2.17.1"
    assert result.recommendation.backend == "container"


def test_a_blocked_docker_target_recommends_the_working_image_instead():
    from tfgpu.build.pipeline import alternative
    from tfgpu.judge.diagnose import diagnose

    result = diagnose(FACTS, KB, tf="2.18", backend="docker")
    rec = result.recommendation
    assert rec is not None
    assert (rec.tf, rec.backend, rec.recipe) == ("2.17.1", "container", "tensorflow/tensorflow:2.17.1-gpu")
    assert rec.instead_of == "2.18.1"
    assert "cuDNN 8.9.6.50" in (rec.why_not or "")
    from tfgpu.judge.target import judge_target

    blocked = judge_target(FACTS, KB, "2.18.1", backend="docker")
    plan_alt = alternative(FACTS, blocked, "docker")  # what `tfgpu plan|create --backend docker` print instead
    assert plan_alt is not None
    assert plan_alt.tf == "2.17.1"
    # plan and doctor name the same command: the runtime asked for, not the generic container backend
    assert plan_alt.command == "tfgpu create --tf 2.17.1 --backend docker"
    assert diagnose(FACTS, KB, tf="2.18", backend="docker").recommendation.command == plan_alt.command  # type: ignore[union-attr]
    # without a container backend the doctor's general recommendation is unchanged (the newest that works)
    general = alternative(FACTS, blocked)
    assert general is not None
    assert general.backend != "container"
