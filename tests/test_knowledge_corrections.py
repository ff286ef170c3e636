"""Issue 27, section 2: knowledge corrections, each checked against the decision that reads it.

- CUDA 11.0 ships libcusolver.so.10; pip's TF 2.5+ loads libcusolver.so.11 (tensorflow/tensorflow#43947, #45263),
  so a system CUDA 11.0 does not serve TF >= 2.5 (compat/rules.toml cuda-libraries-per-major starts at 11.1).
"""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from tests.test_rules_table import with_rule
from tests.test_verdict_casebook_bugs import checks, linux_facts
from tfgpu.knowledge import load_kb, load_toml
from tfgpu.verdict import judge_target, system_cuda_serves

KB = load_kb()


# --------------------------------------------------------------------------- CUDA 11.0 and TF >= 2.5


@pytest.mark.parametrize(("have", "built", "tf", "serves"), [
    ("11.0", "11.2", "2.5.0", False),   # 11.0 has libcusolver.so.10; 2.5 loads libcusolver.so.11
    ("11.0", "11.2", "2.11.1", False),
    ("11.1", "11.2", "2.5.0", True),    # tensorflow#45263: 2.5.0-rc1 runs on CUDA 11.1
    ("11.3", "11.2", "2.5.3", True),    # tensorflow#43947: 2.5 on CUDA 11.3
    ("11.0", "11.0", "2.4.1", True),    # 2.4 was built with 11.0 and loads libcusolver.so.10
    ("11.1", "11.0", "2.4.1", False),
])
def test_cuda_11_0_serves_only_what_was_built_with_it(have: str, built: str, tf: str, serves: bool) -> None:
    assert system_cuda_serves(Version(have), Version(built), Version(tf), KB) is serves


def test_a_machine_with_system_cuda_11_0_is_not_ready_for_pip_tf_2_5() -> None:
    bad = judge_target(linux_facts(cuda=["11.0"], cudnn=["8.1.0"]), KB, "2.5.0", backend="pip")
    assert bad.verdict == "blocked"
    assert "cuda.system_toolkit" in checks(bad)
    text = " ".join(b.summary for b in bad.blockers)
    assert "CUDA 11.x (11.1 or later)" in text
    assert "installed here: 11.0" in text
    ok = judge_target(linux_facts(cuda=["11.1"], cudnn=["8.1.0"]), KB, "2.5.0", backend="pip")
    assert "cuda.system_toolkit" not in checks(ok)
    assert ok.verdict in ("ready", "caveats"), ok.blockers


def test_the_toolkit_side_is_read_from_the_row() -> None:
    """With the row back at its old range (>=11) a CUDA 11.0 would serve 2.5 again: the code follows the data."""
    assert system_cuda_serves(Version("11.0"), Version("11.2"), Version("2.5.0"),
                              with_rule(KB, "cuda-libraries-per-major", ">=11"))
    assert not system_cuda_serves(Version("11.0"), Version("11.2"), Version("2.5.0"), KB)


def test_the_rule_rows_cite_the_threads_that_show_it() -> None:
    rows = {r["id"]: r for r in load_toml("rules")["rules"]}
    sources = load_toml("rules")["sources"]
    assert rows["cuda-libraries-per-major"]["applies"] == ">=11.1"
    for rid in ("cuda-libraries-per-major", "system-cuda-any-minor"):
        cited = {rows[rid][k] for k in rows[rid] if re.fullmatch(r"source\d*", k)}
        assert "https://github.com/tensorflow/tensorflow/issues/43947" in {sources[c]["url"] for c in cited}, rid
