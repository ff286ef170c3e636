"""`tfgpu lint`: real Dockerfiles and compose files (tests/data/lint/SOURCES.md) and the parser's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA
from tests.test_verdict import gpu_facts
from tfgpu.errors import InputError
from tfgpu.knowledge import load_kb
from tfgpu.lint import (
    detect_kind,
    hides_every_gpu,
    lint_dockerfile,
    lint_paths,
    lint_text,
    parse_dockerfile,
    stages,
    tf_installs,
)
from tfgpu.verdict import Machine

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


# (file, the reporter's host driver and its CUDA, the check that must fail/warn, a phrase it must say)
THREAD_CASES = [
    ("tabbyapi.Dockerfile", "550.144.03", "12.4", "image.driver", "570.26"),
    ("kokoro-fastapi-gpu.Dockerfile", "535.183.01", "12.2", "image.driver", "550.54.14"),
    ("llama-server-cuda.Dockerfile", "550.142", "12.4", "image.driver", "560.28.03"),
    ("odysseus.docker-compose.yml", "591.86", "13.1", "compose.gpu_reservation", "no service"),
    ("open-assistant.docker-compose.yaml", "535.183.01", "12.2", "compose.gpu_reservation", "no service"),
    ("graphrnn-mmw-denoising.Dockerfile", "535.183.01", "12.2", "pip.tensorflow", "no cuDNN"),
    ("seq2seq.Dockerfile", "535.183.01", "12.2", "pip.tensorflow", "cuDNN 5.1, the image has cuDNN 7"),
    ("screening.Dockerfile", "450.80.02", "11.0", "image.driver", "460.27.03"),
    ("advanced-measurments.Dockerfile", "535.183.01", "12.2", "image.driver", "555.42.02"),
    ("llama-server-cuda.Dockerfile", "550.142", "12.4", "dockerfile.syntax", "<<<<<<<"),
]


@pytest.mark.parametrize(("name", "driver", "cuda", "check", "phrase"), THREAD_CASES, ids=lambda x: str(x)[:30])
def test_lint_finds_the_problem_each_real_file_has(name: str, driver: str, cuda: str, check: str, phrase: str):
    found = checks_of(LINT / name, host(driver, cuda))
    bad = [c for c in found.get(check, []) if c["status"] in ("fail", "warn")]
    assert bad, found
    assert any(phrase in c["summary"] for c in bad), bad
    assert all(c["fix"] for c in bad)


@pytest.mark.parametrize(("name", "driver", "cuda"), [
    ("tabbyapi.Dockerfile", "570.124.04", "12.8"),
    ("kokoro-fastapi-gpu.Dockerfile", "550.54.15", "12.4"),
    ("screening.Dockerfile", "535.183.01", "12.2"),
    ("nomad2018.Dockerfile", "535.183.01", "12.2"),
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
])
def test_pip_installs_are_tokenised(cmd: str, expected: list[tuple[str, str, str, str]]):
    assert [(t.dist, t.extras, t.op, t.version) for t in tf_installs(cmd, 1)] == expected


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
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "tfgpu.lint/1"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parent.parent / "src/tfgpu/schemas/lint.schema.json").read_text())
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
