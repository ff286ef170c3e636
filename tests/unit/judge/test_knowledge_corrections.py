"""Issue 27, section 2: knowledge corrections, each checked against the decision that reads it.

- CUDA 11.0 ships libcusolver.so.10; pip's TF 2.5+ loads libcusolver.so.11 (tensorflow/tensorflow#43947, #45263),
  so a system CUDA 11.0 does not serve TF >= 2.5 (compat/rules.toml cuda-libraries-per-major starts at 11.1).
- explain's dlopen.cusolver cause: TF 2.4 loads .so.10; .so.11 is 2.5-2.11.
- explain's container.cuda_requirement fix names NVIDIA_DISABLE_REQUIRE (nvidia-container-toolkit's spelling).
- containers.toml: the NGC `-py3` series ends at 19.10; `-tf1-py3` / `-tf2-py3` start at 19.11.
- rules.toml tensorflow-cpu-package: PyPI has macOS x86_64 tensorflow-cpu wheels up to 2.16.2.
"""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from tests.casebook.test_verdict_casebook_bugs import checks, linux_facts
from tests.unit.kb.test_rules_table import with_rule
from tfgpu.judge.explain import explain_lines
from tfgpu.judge.explain_catalog import load_catalog
from tfgpu.judge.system import system_cuda_serves
from tfgpu.judge.target import judge_target
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import load_toml
from tfgpu.kb.queries import load_container_table
from tfgpu.plan.cpu import cpu_dist

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


# --------------------------------------------------------------------------- explain


def test_dlopen_cusolver_names_the_right_soname_per_release() -> None:
    entry = next(e for e in load_catalog().entries if e.id == "dlopen.cusolver")
    assert "TensorFlow 2.4 (built with CUDA 11.0) asks for libcusolver.so.10" in entry.cause
    assert "TensorFlow 2.5-2.11 (built with CUDA 11.2) ask for libcusolver.so.11" in entry.cause
    assert "2.4-2.11" not in entry.cause
    # each log line is told only about the release range of its own soname
    for have, tells, never in ((".so.10", "TensorFlow 2.4 ", "2.5-2.11"), (".so.11", "TensorFlow 2.5-2.11", "TensorFlow 2.4 ")):
        line = (f"W tensorflow/stream_executor/platform/default/dso_loader.cc:60] Could not load dynamic library "
                f"'libcusolver{have}'; dlerror: libcusolver{have}: cannot open shared object file: No such file or directory")
        (found,) = explain_lines([line])
        assert found.id == "dlopen.cusolver"
        assert tells in found.cause, (have, found.cause)
        assert never not in found.cause, (have, found.cause)


def test_container_requirement_fix_names_the_variable_the_toolkit_reads() -> None:
    entry = next(e for e in load_catalog().entries if e.id == "container.cuda_requirement")
    assert "NVIDIA_DISABLE_REQUIRE=true" in entry.fix
    assert "NVIDIA_DISABLE_REQUIRES" not in entry.fix
    line = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver "
            "to a newer version, or use an earlier cuda container: unknown")
    found = explain_lines([line])
    assert [f.id for f in found][:1] == ["container.cuda_requirement"]
    assert "NVIDIA_DISABLE_REQUIRE=true" in found[0].fix


def test_no_table_spells_the_variable_wrong() -> None:
    from tests import REPO

    for path in sorted((REPO / "compat").glob("*.toml")):
        assert "NVIDIA_DISABLE_REQUIRES" not in path.read_text(encoding="utf-8"), path.name


# --------------------------------------------------------------------------- NGC series


def _month_after(yymm: str) -> str:
    yy, mm = (int(p) for p in yymm.split("."))
    return f"{yy + (mm == 12):02d}.{mm % 12 + 1:02d}"


def test_the_ngc_tf1_tf2_split_follows_the_last_single_flavour_release() -> None:
    series = {s.id: s for s in load_container_table()[1]}
    assert series["ngc-py3"].last == "19.10"  # rel_19.10: 19.10-py2 and 19.10-py3
    assert series["ngc-tf1"].first == series["ngc-tf2"].first == _month_after(series["ngc-py3"].last)


# --------------------------------------------------------------------------- tensorflow-cpu on macOS


def test_tensorflow_cpu_rule_states_the_macos_wheels_and_tfgpu_still_installs_tensorflow_there() -> None:
    rule = KB.rule("tensorflow-cpu-package")
    assert "2.16.2" in rule.text
    assert "only the tensorflow name" not in rule.text
    # on macOS tfgpu installs `tensorflow` (a CPU build there; arm64 and 2.17+ have no tensorflow-cpu wheel at all)
    assert cpu_dist(KB, Version("2.16.2"), "macos", "x86_64") == "tensorflow"
    assert cpu_dist(KB, Version("2.21.0"), "macos", "arm64") == "tensorflow"
    assert cpu_dist(KB, Version("2.16.2"), "linux", "x86_64") == "tensorflow-cpu"
