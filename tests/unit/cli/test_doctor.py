"""`tfgpu doctor` end to end in-process: facts files, JSON schema, gating flags, CI output, redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import REPO
from tests.conftest import DATA

SCHEMA = json.loads((REPO / "src/tfgpu/core/schemas/doctor.schema.json").read_text())
SEEDS = sorted((DATA / "facts").glob("*.json"))


def validate(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, SCHEMA)


@pytest.mark.parametrize("facts", SEEDS, ids=lambda p: p.stem)
def test_doctor_json_validates_for_every_seed_profile(cli, facts):
    code, out, err = cli("doctor", "--json", "--facts", str(facts))
    assert code == 0, err
    doc = json.loads(out)
    validate(doc)
    assert doc["schema"] == "tfgpu.doctor/1"
    assert doc["targets"]


@pytest.mark.real_subprocess
def test_doctor_json_validates_on_this_machine_and_reports_its_cuda_13_and_no_driver(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tfgpu", "doctor", "--json"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validate(doc)
    facts = doc["facts"]
    if Path("/usr/local/cuda-13.0").is_dir():  # this workplace's machine
        assert any(t["version"] == "13.0" for t in facts["cuda_toolkits"])
        assert facts["driver"]["version"] is None
        assert doc["recommendation"]["command"].endswith(" --cpu")  # no usable GPU: the CPU route (issue 18)


def test_doctor_target_exit_codes(cli):
    r740 = str(DATA / "facts" / "r740-4x-tesla-m60.json")
    code, out, _ = cli("doctor", "--facts", r740, "--tf", "1.14.0", "--backend", "pip", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["targets"][0]["verdict"] == "blocked"
    assert any("libcudart.so.10.0" in b["summary"] for b in doc["targets"][0]["blockers"])
    code, out, _ = cli("doctor", "--facts", r740, "--tf", "1.14", "--json")
    assert code == 0
    assert json.loads(out)["recommendation"]["command"] == "tfgpu create --tf 1.14.0 --backend conda"


def test_doctor_human_report_names_the_fix(cli):
    code, out, _ = cli("doctor", "--facts", str(DATA / "facts" / "windows-gtx1080.json"), "--tf", "2.15")
    assert code == 1
    assert "BLOCKED" in out
    assert "WSL2" in out


def test_require_gpu_and_strict(cli):
    mx = str(DATA / "facts" / "mx150-laptop-ubuntu1804.json")
    assert cli("doctor", "--facts", mx, "--require-gpu", "--json")[0] == 0
    no_gpu = {"schema": "tfgpu.facts/1", "platform": {"os": "linux"}, "driver": {"version": None}, "gpus": []}
    code, _, _ = cli("doctor", "--facts", mx, "--strict", "--json")
    assert code == 1  # the small-GPU memory warning fails --strict
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(no_gpu, fh)
    assert cli("doctor", "--facts", fh.name, "--require-gpu")[0] == 1
    assert cli("doctor", "--facts", fh.name)[0] == 0


def test_ci_mode_json_on_stdout_log_and_annotations_on_stderr(cli, monkeypatch, tmp_path):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = cli("doctor", "--ci", "--facts", str(DATA / "facts" / "windows-gtx1080.json"), "--tf", "2.15")
    assert code == 1
    doc = json.loads(out)
    validate(doc)
    assert "::error title=tfgpu TensorFlow 2.15.1 blocked::" in err
    assert "| TensorFlow | verdict |" in summary.read_text()


def test_bad_input_is_exit_2_one_line(cli, tmp_path):
    bad = tmp_path / "facts.json"
    bad.write_text("{not json")
    code, _, err = cli("doctor", "--facts", str(bad))
    assert code == 2
    assert err.count("\n") == 1
    code, _, err = cli("doctor", "--facts", str(DATA / "facts" / "r740-4x-tesla-m60.json"), "--tf", "banana")
    assert code == 2
    assert "banana" in err
    code, _, err = cli("doctor", "--facts", str(DATA / "facts" / "r740-4x-tesla-m60.json"), "--tf", "9.9")
    assert code == 2
    assert "closest known" in err


def test_redact_removes_user_names_hosts_and_tokens(cli):
    from tfgpu.render.report import redact, redactor

    clean = redactor(user="dell2", host="r740-lab", home="/home/dell2")
    doc = {"env": {"LD_LIBRARY_PATH": "/home/dell2/.mujoco/mjpro150/bin:/usr/local/cuda-10.1/lib64:"},
           "note": "on r740-lab token=ghp_abcdefghijklmnopqrstuvwxyz0123456789 by dell2",
           "paths": ["/home/alice/miniconda3/envs/tf"]}
    out = redact(doc, clean)
    text = json.dumps(out)
    assert "dell2" not in text
    assert "r740-lab" not in text
    assert "ghp_" not in text
    assert "alice" not in text
    assert "/usr/local/cuda-10.1/lib64" in text
    code, out_text, _ = cli("doctor", "--json", "--redact", "--facts", str(DATA / "facts" / "r740-4x-tesla-m60.json"))
    assert code == 0
    assert "/home/dell2" not in out_text


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("short", 160, "short"),
    ("the cuDNN/cuBLAS carry no kernels for this GPU", 30, "the cuDNN/cuBLAS carry no…"),
    ("x" * 50, 20, "x" * 19 + "…"),
])
def test_long_reasons_are_cut_at_a_word_with_an_ellipsis(text, limit, expected):
    from tfgpu.render.report import clip

    assert clip(text, limit) == expected
    assert len(clip(text, limit)) <= limit
