"""A TensorFlow release newer than the knowledge base (issue 27, section 3): reported as unknown to it, with the
knowledge base's date and how to update, never judged as if it were an older release."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu.api.doctor import doctor_result
from tfgpu.core.errors import UsageError
from tfgpu.judge.findings import WARN
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.queries import newer_than_kb
from tfgpu.kb.versions import version

KB = load_kb()
NEWEST = max(r.version for r in KB.releases if r.dist == "tensorflow")
FACTS = {"platform": {"os": "linux", "glibc": "2.35"}, "cpu": {"avx": True},
         "driver": {"version": "580.65.06", "source": "nvidia-smi"},
         "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "memory_mib": 24564}]}
NEXT = [f"{NEWEST.major}.{NEWEST.minor + 1}", f"{NEWEST.major}.{NEWEST.minor + 1}.0",
        f"{NEWEST.major}.{NEWEST.minor + 1}.0rc0", f"{NEWEST.major}.{NEWEST.minor}.{NEWEST.micro + 1}",
        f"{NEWEST.major + 1}.0"]


@pytest.mark.parametrize("tf", NEXT)
def test_a_newer_release_is_unknown_to_the_knowledge_base(tf: str) -> None:
    with pytest.raises(UsageError) as err:
        doctor_result(FACTS, KB, tf=tf)
    assert "newer than tfgpu's knowledge base" in err.value.message
    assert (KB.date or KB.data_version) in err.value.message
    assert str(NEWEST) in err.value.message
    assert "update tfgpu" in (err.value.hint or "")


@pytest.mark.parametrize("command", ["doctor", "plan", "lock"])
def test_every_command_refuses_it_with_exit_2(command: str, tmp_path: Path,
                                              cli: Callable[..., tuple[int, str, str]]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"schema": "tfgpu.facts/1", **FACTS}))
    args = [command, "--facts", str(facts), "--tf", NEXT[0]]
    code, _out, err = cli(*args, *(["--platform", "linux-64", "--output", str(tmp_path / "l")] if command == "lock" else []))
    assert code == 2, err
    assert "newer than tfgpu's knowledge base" in err


def test_a_release_it_knows_is_never_called_newer() -> None:
    for r in KB.gpu_releases("linux"):
        assert newer_than_kb(KB, str(r.version), r.version) is None
    for s in KB.series("linux"):
        assert newer_than_kb(KB, s, version(s)) is None


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3), st.integers(0, 40), st.integers(0, 12))
def test_exactly_the_versions_past_the_newest_are_newer(major: int, minor: int, micro: int) -> None:
    text = f"{major}.{minor}.{micro}"
    assert (newer_than_kb(KB, text, version(text)) is not None) == (version(text) > NEWEST)
    series = f"{major}.{minor}"
    assert (newer_than_kb(KB, series, version(series)) is not None) == ((major, minor) > NEWEST.release[:2])


def test_an_installed_newer_tensorflow_is_said_not_judged() -> None:
    facts = {**FACTS, "tensorflow": [{"distribution": "tensorflow", "version": NEXT[1]}]}
    checks = doctor_result(facts, KB).checks
    unknown = [c for c in checks if c.id == "tf.unknown"]
    assert len(unknown) == 1
    assert unknown[0].status == WARN
    assert NEXT[1] in unknown[0].summary
    assert not [c for c in checks if c.id == "tf.cpu_build"]
