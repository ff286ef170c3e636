"""Issue 16, --redact: the gaps (secrets in URLs with '/', the short host name, user names in another
case, pypi- and AIza tokens) and a redacted report that judges the same machine (values only, user
names as whole path components) even when the user is called `cuda`, `python`, `conda` or `root`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import TESTS
from tfgpu.render import report

pytestmark = pytest.mark.safety

Cli = Callable[..., tuple[int, str, str]]
DATA = TESTS / "data" / "facts"


@pytest.mark.parametrize(("text", "secret"), [
    ("s3://AKIDKEY:wJal/rXUt/nFEMI@bucket/data", "wJal/rXUt/nFEMI"),
    ("https://user:pa/ss@pypi.example.org/simple", "pa/ss"),
    ("TWINE_PASSWORD pypi-AgEIcHlwaS5vcmcCJGQ4YzNiN2Y1LTk2ZTUtNDc0Zi1hNGRmLWNmZDc4YzI5OWE2NgAC", "pypi-AgEI"),
    ("key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD"),
])
def test_redact_removes_secrets_the_old_patterns_missed(text: str, secret: str) -> None:
    clean = report.redactor(user="nobody-here", host="nohost-here", home="/nonexistent")
    assert secret not in clean(text)


def test_redact_removes_the_short_host_name_when_the_fqdn_is_known() -> None:
    clean = report.redactor(user="nobody-here", host="gpu17.cluster.example.org", home="/nonexistent")
    out = clean("ssh gpu17 failed; gpu17.cluster.example.org up; /scratch/gpu17/tmp")
    assert "gpu17" not in out
    assert out.count("<host>") == 3


def test_redact_matches_user_names_in_any_case_in_paths() -> None:
    clean = report.redactor(user="alice", host="nohost-here", home="/home/alice")
    out = clean("C:\\Users\\Alice\\envs D:\\ALICE\\data /scratch/Alice/x")
    assert "alice" not in out.lower()


@pytest.mark.parametrize("user", ["cuda", "python", "conda", "root", "nvidia", "lib"])
def test_redact_never_renames_keys_or_parts_of_names(user: str) -> None:
    clean = report.redactor(user=user, host="nohost-here", home=f"/home/{user}")
    doc = {"cuda": {"python": "3.11", "path": "/usr/local/cuda-12.4/bin/nvcc"}, "conda": "/opt/miniconda3/bin/conda",
           "env": {"PYTHONPATH": f"/home/{user}/src"}, "text": "libcudart.so.12 python3.11 CUDA 12.4"}
    out = report.redact(doc, clean)
    assert out["cuda"]["python"] == "3.11"
    assert out["cuda"]["path"] == "/usr/local/cuda-12.4/bin/nvcc"
    assert set(out) == set(doc)
    assert out["env"]["PYTHONPATH"] == "~/src"
    assert out["text"] == "libcudart.so.12 python3.11 CUDA 12.4"


def _verdicts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [*sorted([(c["id"], c["status"]) for c in doc["checks"]] + [(t["tf"], t["verdict"]) for t in doc["targets"]]), ("rec", str(doc.get("recommendation")))]


_FACTS = sorted(DATA.glob("*.json"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=st.sampled_from(["cuda", "python", "conda", "root", "nvidia", "tensorflow", "usr", "local", "bin", "x86_64",
                             "alice", "Lib"]),
       host=st.sampled_from(["cuda", "gpu", "localhost", "node1.cluster.example.org", "linux"]),
       facts=st.sampled_from(_FACTS))
def test_a_redacted_report_rejudges_to_the_same_verdicts(cli: Cli, tmp_path_factory: pytest.TempPathFactory,
                                                          user: str, host: str, facts: Path) -> None:
    tmp = tmp_path_factory.mktemp("redact")
    code, out, err = cli("doctor", "--facts", str(facts), "--json")
    assert code in (0, 1), err
    original = json.loads(out)
    redacted = report.redact(original, report.redactor(user=user, host=host, home=f"/home/{user}"))
    path = tmp / "report.json"
    path.write_text(json.dumps(redacted))
    code, out, err = cli("doctor", "--facts", str(path), "--json")
    assert code in (0, 1), err
    assert _verdicts(json.loads(out)) == _verdicts(original)
