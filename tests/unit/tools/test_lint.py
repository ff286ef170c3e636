"""`tfgpu lint`: real Dockerfiles and compose files (tests/data/lint/SOURCES.md) and the parser's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import REPO
from tests.conftest import DATA
from tests.unit.judge.test_verdict import gpu_facts
from tfgpu.core.errors import InputError
from tfgpu.facts.machine import Machine
from tfgpu.kb.knowledge import load_kb
from tfgpu.tools.dockerfile import parse_dockerfile, stages
from tfgpu.tools.lint import detect_kind, hides_every_gpu, lint_dockerfile, lint_paths, lint_text, tf_installs

KB = load_kb()
LINT = DATA / "lint"


def host(driver: str, cuda: str, name: str = "NVIDIA GeForce RTX 3090", cc: str = "8.6") -> dict[str, Any]:
    facts = gpu_facts(name, cc, driver=driver)
    facts["driver"]["cuda"] = cuda
    return facts


def checks_of(path: Path, facts: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    doc = lint_paths([str(path)], KB, facts)
    out: dict[str, list[dict[str, Any]]] = {}
    for c in doc["files"][0]["checks"]:
        out.setdefault(c["id"], []).append(c)
    return out


# (file, the reporter's host driver and its CUDA, the check that must fail/warn, a phrase it must say, the thread
# that established the problem or "" where only tfgpu's tables do; SOURCES.md says which drivers are not the
# reporter's because the thread named none)
CASES = [
    ("tabbyapi.Dockerfile", "550.144.03", "12.4", "image.driver", "570.26",
     "https://github.com/theroyallab/tabbyAPI/issues/324"),
    ("kokoro-fastapi-gpu.Dockerfile", "535.183.01", "12.2", "image.driver", "550.54.14",
     "https://github.com/remsky/Kokoro-FastAPI/issues/341"),
    ("llama-server-cuda.Dockerfile", "550.142", "12.4", "image.driver", "560.28.03",
     "https://github.com/ggml-org/llama.cpp/issues/9665"),
    ("odysseus.docker-compose.yml", "591.86", "13.1", "compose.gpu_reservation", "no service",
     "https://github.com/odysseus-dev/odysseus/issues/2659"),
    ("open-assistant.docker-compose.yaml", "535.183.01", "12.2", "compose.gpu_reservation", "no service",
     "https://github.com/LAION-AI/Open-Assistant/pull/2803"),
    ("smi2mqtt.Dockerfile", "550.163.01", "12.4", "image.driver", "580.65.06",
     "https://github.com/rbnhln/smi2mqtt/issues/1"),
    ("deepchem-tag.Dockerfile", "535.183.01", "12.2", "pip.tensorflow", "it loads CUDA 11.0, the image has CUDA 10.1",
     "https://github.com/deepchem/deepchem/issues/2467"),
    ("orbyter.docker-compose.yml", "535.183.01", "12.2", "compose.gpu_reservation", "no service of 2",
     "https://github.com/manifoldai/orbyter-cookiecutter/issues/81"),
    ("vortex.Dockerfile", "418.87.00", "10.1", "image.driver", "440.33",
     "https://github.com/nodefluxio/vortex/issues/106"),
    ("gpu-jupyter.Dockerfile", "390.138", "9.1", "image.driver", "418.39",
     "https://github.com/iot-salzburg/gpu-jupyter/issues/24"),
    ("gpu-jupyter.Dockerfile", "390.138", "9.1", "pip.tensorflow", "has no cuDNN",
     "https://github.com/iot-salzburg/gpu-jupyter/issues/25"),
    ("text-generation-webui.Dockerfile", "525.125.06", "12.0", "image.driver", "530.30.02",
     "https://github.com/oobabooga/textgen/issues/4407"),
    ("zonos.docker-compose.yml", "535.183.01", "12.2", "compose.gpu_runtime", "unknown or invalid runtime name",
     "https://github.com/Zyphra/Zonos/pull/161"),
    ("openedai-speech.docker-compose.yml", "535.183.01", "12.2", "compose.gpu_runtime", "`runtime: nvidia`",
     "https://github.com/matatonic/openedai-speech/issues/1"),
    ("comfyui-docker.docker-compose.yml", "535.183.01", "12.2", "compose.gpu_runtime", "`runtime: nvidia`",
     "https://github.com/Kaouthia/ComfyUI-Docker/issues/9"),
    ("graphrnn-mmw-denoising.Dockerfile", "535.183.01", "12.2", "pip.tensorflow", "no cuDNN", ""),
    ("seq2seq.Dockerfile", "535.183.01", "12.2", "pip.tensorflow", "cuDNN 5.1, the image has cuDNN 7", ""),
    ("screening.Dockerfile", "450.80.02", "11.0", "image.driver", "460.27.03", ""),
    ("advanced-measurments.Dockerfile", "535.183.01", "12.2", "image.driver", "555.42.02", ""),
    ("llama-server-cuda.Dockerfile", "550.142", "12.4", "dockerfile.syntax", "<<<<<<<", ""),
]
THREAD_CASES = [c for c in CASES if c[5]]


@pytest.mark.parametrize(("name", "driver", "cuda", "check", "phrase", "thread"), CASES, ids=lambda x: str(x)[:30])
def test_lint_finds_the_problem_each_real_file_has(name: str, driver: str, cuda: str, check: str, phrase: str,
                                                   thread: str):
    found = checks_of(LINT / name, host(driver, cuda))
    bad = [c for c in found.get(check, []) if c["status"] in ("fail", "warn")]
    assert bad, found
    assert any(phrase in c["summary"] for c in bad), bad
    assert all(c["fix"] for c in bad)


def test_at_least_twelve_real_files_have_a_problem_a_thread_established():
    """issue 19's "Done when": lint finds the GPU problems in >= 10 real files whose threads established them
    (12 kept as margin); each thread is the one SOURCES.md cites in that file's row."""
    rows = {line.split("|")[1].strip().strip("`"): line for line in (LINT / "SOURCES.md").read_text().splitlines()
            if line.startswith("| `")}
    for name, *_rest, thread in THREAD_CASES:
        assert thread in rows[name], (name, thread)
    assert len({c[0] for c in THREAD_CASES}) >= 12


@pytest.mark.parametrize(("name", "driver", "cuda"), [
    ("tabbyapi.Dockerfile", "570.124.04", "12.8"),
    ("kokoro-fastapi-gpu.Dockerfile", "550.54.15", "12.4"),
    ("screening.Dockerfile", "535.183.01", "12.2"),
    ("nomad2018.Dockerfile", "535.183.01", "12.2"),
    ("smi2mqtt.Dockerfile", "580.65.06", "13.0"),
    ("text-generation-webui.Dockerfile", "530.30.02", "12.1"),
    ("gpu-jupyter.Dockerfile", "418.39", "10.1"),
])
def test_a_new_enough_driver_passes(name: str, driver: str, cuda: str):
    found = checks_of(LINT / name, host(driver, cuda))
    assert [c["status"] for c in found["image.driver"]] == ["pass"]


def test_gpus_all_in_compose_is_a_reservation():
    found = checks_of(LINT / "tabbyapi.docker-compose.yml", host("570.124.04", "12.8"))
    assert [c["status"] for c in found["compose.gpu_reservation"]] == ["pass"]
    assert "env.visible_devices" not in found  # NVIDIA_VISIBLE_DEVICES=all hides nothing


def test_every_real_file_is_detected_by_content():
    for path in sorted(LINT.iterdir()):
        if path.name == "SOURCES.md":
            continue
        kind = detect_kind(path.read_text(encoding="utf-8"))
        assert kind == ("compose" if "compose" in path.name else "dockerfile"), path.name


def test_no_host_driver_skips_the_driver_check_with_the_way_to_give_one():
    _kind, checks = lint_text((LINT / "tabbyapi.Dockerfile").read_text(), KB, None)
    (c,) = [c for c in checks if c.id == "image.driver"]
    assert c.status == "skip"
    assert "--facts" in c.fix


def test_data_center_gpu_gets_forward_compatibility_for_ngc_images():
    text = "FROM nvcr.io/nvidia/tensorflow:24.02-tf2-py3\n"
    dc = Machine.from_facts(host("535.86.10", "12.2", "NVIDIA A100-SXM4-80GB", "8.0"))
    consumer = Machine.from_facts(host("535.86.10", "12.2"))
    assert [c.status for c in lint_dockerfile(text, KB, dc) if c.id == "image.driver"] == ["pass"]
    assert [c.status for c in lint_dockerfile(text, KB, consumer) if c.id == "image.driver"] == ["fail"]


# --------------------------------------------------------------------------- the parser


def test_continuations_comments_and_the_escape_directive():
    text = "# escape=`\nFROM ubuntu:22.04\nRUN pip install `\n# a comment inside\n    tensorflow==2.15.0\n"
    (frm, run) = parse_dockerfile(text)
    assert (frm.cmd, frm.args) == ("FROM", "ubuntu:22.04")
    assert run.cmd == "RUN"
    assert run.args == "pip install tensorflow==2.15.0"
    assert run.line == 3


def test_heredoc_body_belongs_to_its_instruction():
    text = "FROM python:3.11\nRUN <<EOF\npip install tensorflow[and-cuda]==2.16.1\nEOF\nENV A=1\n"
    ins = parse_dockerfile(text)
    assert [i.cmd for i in ins] == ["FROM", "RUN", "ENV"]
    assert tf_installs(ins[1].args, ins[1].line)[0].extras == "[and-cuda]"


def test_arg_substitution_and_stage_names():
    text = ("ARG CUDA=12.2.2\nFROM nvidia/cuda:${CUDA}-cudnn8-devel-ubuntu22.04 AS build\nFROM build\n"
            "ENV CUDA_VISIBLE_DEVICES=-1\n")
    st = stages(parse_dockerfile(text))
    assert [s.image for s in st] == ["nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04"] * 2
    assert st[1].env["CUDA_VISIBLE_DEVICES"] == ("-1", 4)


@pytest.mark.parametrize(("cmd", "expected"), [
    ("pip install tensorflow==2.15.0 numpy", [("tensorflow", "", "==", "2.15.0")]),
    ("python3 -m pip install --no-cache-dir 'tensorflow[and-cuda]==2.16.1'", [("tensorflow", "[and-cuda]", "==", "2.16.1")]),
    ("pip3 install tensorflow-gpu==1.15 && pip install tensorflow-datasets", [("tensorflow-gpu", "", "==", "1.15")]),
    ("apt-get install -y python3-pip", []),
    ("pip install -r requirements.txt", []),
    ("pip install 'tensorflow>=2.4, <2.6' keras", [("tensorflow", "", ">=", "2.4")]),
    ('pip install --no-cache-dir "tensorflow-gpu>=2.1.*"', [("tensorflow-gpu", "", ">=", "2.1.*")]),
])
def test_pip_installs_are_tokenised(cmd: str, expected: list[tuple[str, str, str, str]]):
    assert [(t.dist, t.extras, t.op, t.version) for t in tf_installs(cmd, 1)] == expected


def test_the_whole_specifier_set_is_kept():
    assert [t.spec for t in tf_installs("pip install 'tensorflow>=2.4, <2.6' tensorflow-gpu~=1.15", 1)] == [
        ">=2.4,<2.6", "~=1.15"]


def _pip_checks(image: str, req: str) -> list[tuple[str, str]]:
    text = f"FROM {image}\nRUN pip install '{req}'\n"
    return [(c.status, c.summary) for c in lint_dockerfile(text, KB, None) if c.id == "pip.tensorflow"]


def test_a_range_is_judged_only_by_what_every_release_in_it_shares():
    # the deepchem case (tests/data/lint): every release ~=2.4 allows needs CUDA 11 and cuDNN 8
    [(status, summary)] = _pip_checks("nvidia/cuda:10.1-cudnn7-devel", "tensorflow~=2.4")
    assert status == "fail"
    assert "2.4.0" in summary
    assert "every later release" in summary
    # 2.4 wants CUDA 11.0 (not served by 11.2 before TF 2.5), 2.5-2.11 match 11.2, 2.15+ want CUDA 12: no verdict
    [(status, summary)] = _pip_checks("nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04", "tensorflow>=2.4")
    assert status == "skip"
    assert "some of them match" in summary
    # an upper bound narrows the releases: 2.5-2.11 all match CUDA 11.2 / cuDNN 8
    [(status, summary)] = _pip_checks("nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04", "tensorflow>=2.5,<2.12")
    assert (status, "2.5.0..2.11.1") == ("pass", summary.split("(")[1].split(")")[0])
    assert _pip_checks("nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04", "tensorflow>=9.0") == [
        ("warn", "line 2: RUN pip install tensorflow>=9.0: tfgpu knows no TensorFlow GPU release in '>=9.0'")]


@settings(max_examples=25, deadline=None)
@given(floor=st.sampled_from(["1.13", "2.1", "2.3", "2.4", "2.5", "2.10", "2.12", "2.15"]),
       image=st.sampled_from(["nvidia/cuda:10.0-cudnn7-runtime", "nvidia/cuda:10.1-base-ubuntu18.04",
                              "nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04", "nvidia/cuda:12.3.2-cudnn9-devel-ubuntu22.04"]),
       op=st.sampled_from([">=", "~="]))
def test_a_failing_range_fails_for_each_release_pinned(floor: str, image: str, op: str):
    """A range fails only when each release it allows, pinned with ==, fails too (no range false positives)."""
    from tfgpu.kb.specifiers import VersionSpec

    checks = _pip_checks(image, f"tensorflow{op}{floor}")
    if [s for s, _ in checks] != ["fail"]:
        return
    spec = VersionSpec(f"{op}{floor}")
    allowed = [r.version for r in KB.gpu_releases("linux") if r.version in spec]
    assert allowed
    for v in allowed:
        assert [s for s, _ in _pip_checks(image, f"tensorflow=={v}")] == ["fail"], v


def test_runtime_nvidia_is_flagged_next_to_a_reservation_too():
    # the openedai-speech case (tests/data/lint): the daemon refuses an unregistered runtime before it reads the
    # reservation, so `runtime: nvidia` is the problem even where the reservation alone would give the GPU
    res = ("    deploy:\n      resources:\n        reservations:\n          devices:\n"
           "            - driver: nvidia\n              capabilities: [gpu]\n")
    _kind, checks = lint_text("services:\n  s:\n    image: x\n    runtime: nvidia\n" + res, KB, None)
    [c] = [c for c in checks if c.id == "compose.gpu_runtime"]
    assert c.status == "warn"
    assert c.fix.startswith("remove `runtime: nvidia`")
    _kind, checks = lint_text("services:\n  s:\n    image: x\n" + res, KB, None)
    assert not [c for c in checks if c.id == "compose.gpu_runtime"]
    _kind, checks = lint_text("services:\n  s:\n    image: x\n    runtime: nvidia\n", KB, None)
    [c] = [c for c in checks if c.id == "compose.gpu_runtime"]
    assert "reserve the GPU instead" in c.fix


@pytest.mark.parametrize(("name", "value", "hides"), [
    ("NVIDIA_VISIBLE_DEVICES", "void", True), ("NVIDIA_VISIBLE_DEVICES", "none", True),
    ("NVIDIA_VISIBLE_DEVICES", "all", False), ("CUDA_VISIBLE_DEVICES", "-1", True),
    ("CUDA_VISIBLE_DEVICES", "", True), ("CUDA_VISIBLE_DEVICES", "PCI_BUS_ID", True),
    ("CUDA_VISIBLE_DEVICES", "0,1", False), ("CUDA_VISIBLE_DEVICES", "GPU-8f6a", False),
])
def test_visible_devices(name: str, value: str, hides: bool):
    assert hides_every_gpu(name, value) is hides


def test_and_cuda_on_a_cuda_image_and_ld_library_path():
    text = ("FROM nvidia/cuda:12.3.2-cudnn9-runtime-ubuntu22.04\nENV LD_LIBRARY_PATH=/usr/local/cuda/lib64\n"
            "RUN pip install 'tensorflow[and-cuda]==2.16.1'\n")
    ids = {c.id: c.status for c in lint_dockerfile(text, KB, None)}
    assert ids["pip.and_cuda"] == "warn"
    assert ids["env.ld_library_path"] == "warn"


def test_compose_env_that_hides_every_gpu():
    text = ("services:\n  train:\n    image: tensorflow/tensorflow:2.15.0-gpu\n    gpus: all\n"
            "    environment:\n      CUDA_VISIBLE_DEVICES: ''\n")
    _kind, checks = lint_text(text, KB, None)
    assert any(c.id == "env.visible_devices" and c.status == "fail" for c in checks)


def test_gpu_image_without_reservation_fails():
    text = "services:\n  train:\n    image: nvcr.io/nvidia/tensorflow:25.02-tf2-py3\n    command: python t.py\n"
    _kind, checks = lint_text(text, KB, None)
    assert [c.status for c in checks if c.id == "compose.gpu_reservation"] == ["fail"]


# --------------------------------------------------------------------------- bad input and the CLI


def test_yaml_alias_bomb_is_refused():
    # billion laughs: each level doubles the one before; 40 levels would build 2**40 items
    bomb = "l0: &l0 [x, x]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]\n" for i in range(1, 41)) + "services: {}\n"
    with pytest.raises(InputError, match="aliases"):
        lint_text(bomb, KB, None)


def test_unrecognised_text_is_input_error():
    with pytest.raises(InputError, match="neither a Dockerfile"):
        lint_text("hello world\n", KB, None)


def test_cli_exit_codes(cli, tmp_path: Path):
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(host("550.144.03", "12.4")))
    code, out, _ = cli("lint", "--facts", str(facts), "--json", str(LINT / "tabbyapi.Dockerfile"))
    assert code == 1  # a ✗ finding: its base image needs a newer driver than this host's
    doc = json.loads(out)
    assert doc["schema"] == "tfgpu.lint/1"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "src/tfgpu/core/schemas/lint.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["files"][0]["kind"] == "dockerfile"
    assert cli("lint", "--facts", str(facts), "--strict", str(LINT / "tabbyapi.Dockerfile"))[0] == 1
    assert cli("lint", "--facts", str(facts), "--strict", str(LINT / "tabbyapi.docker-compose.yml"))[0] == 0
    code, _out, err = cli("lint", "--facts", str(facts), str(tmp_path / "missing"))
    assert code == 2
    assert "not a file" in err
    binary = tmp_path / "bin"
    binary.write_bytes(b"\x00\x01FROM")
    assert cli("lint", "--facts", str(facts), str(binary))[0] == 2
    code, out, _ = cli("lint", "--facts", str(facts), str(LINT / "odysseus.docker-compose.yml"))
    assert "no service of 4 reserves a GPU" in out


def test_a_pass_through_variable_is_not_an_empty_one():
    text = ("services:\n  tensorflow:\n    build:\n      context: ./.devcontainer\n    deploy:\n      resources:\n"
            "        reservations:\n          devices:\n            - driver: nvidia\n              capabilities: [gpu]\n"
            "    environment:\n      - CUDA_VISIBLE_DEVICES\n")
    _kind, checks = lint_text(text, KB, None)
    assert not [c for c in checks if c.id == "env.visible_devices"]
    assert [c.status for c in checks if c.id == "compose.gpu_reservation"] == ["pass"]


def test_exec_form_run_is_read_too():
    text = 'FROM nvidia/cuda:11.6.1-runtime-ubuntu20.04\nRUN ["python3", "-m", "pip", "install", "tensorflow==2.12.0"]\n'
    ids = [(c.id, c.status) for c in lint_dockerfile(text, KB, None)]
    assert ("pip.tensorflow", "fail") in ids
