"""compat/rules.toml and the other tables that replaced version literals in code (issue 17, item 6).

Each rule is read from data: the table loads into typed records, every row cites a source a user can open, a
missing rule is a DataError (no default in code), and changing a row changes the decision that reads it."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version

from tfgpu.backends.runners import PIP, Context
from tfgpu.core.errors import DataError
from tfgpu.core.record import replace
from tfgpu.facts.machine import Machine, _apply_cvd
from tfgpu.judge.checks import machine_checks
from tfgpu.judge.release_checks import last_windows_gpu_series
from tfgpu.judge.system import system_cuda_serves
from tfgpu.judge.target import judge_target
from tfgpu.kb import parse, records
from tfgpu.kb.knowledge import KnowledgeBase, load_kb
from tfgpu.kb.parse import load_toml
from tfgpu.kb.records import RULE_IDS, Rule
from tfgpu.kb.specifiers import VersionSpec
from tfgpu.plan.cpu import cpu_dist
from tfgpu.tools.lint import lint_dockerfile

KB = load_kb()
A100 = {"index": 0, "name": "A100-SXM4-40GB", "compute_capability": "8.0", "uuid": "GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf"}
T4 = {"index": 1, "name": "Tesla T4", "compute_capability": "7.5", "uuid": "GPU-11111111-2222-3333-4444-555555555555"}
R470_MIG = "MIG-c9b9e8b4-6e9a-5b7e-9f45-0d1c2b3a4f5e"


def with_rule(kb: KnowledgeBase, rule_id: str, applies: str) -> KnowledgeBase:
    """A knowledge base whose rule ``rule_id`` holds for ``applies`` instead (a different compat/rules.toml row)."""
    rules = tuple(replace(r, applies=VersionSpec(applies)) if r.id == rule_id else r for r in kb.rules)
    return replace(kb, rules=rules)


def linux_facts(**extra: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "schema": "tfgpu.facts/1", "platform": {"os": "linux", "glibc": "2.31", "arch": "x86_64"},
        "python": {"current": "3.8"}, "driver": {"version": "470.57.02", "cuda": None},
        "gpus": [{"index": 0, "name": "GeForce GTX 1070", "compute_capability": "6.1", "memory_mib": 8192}],
        "cuda_toolkits": [], "cudnn": [],
    }
    facts.update(extra)
    return facts


# --------------------------------------------------------------------------- the table


def test_the_rules_table_loads_into_typed_records_with_every_rule_the_code_asks_for() -> None:
    assert load_toml("rules")["schema"] == parse.SCHEMAS["rules"] == "tfgpu.compat.rules/1"
    assert sorted(r.id for r in KB.rules) == sorted(RULE_IDS)
    for rule in KB.rules:
        assert isinstance(rule, Rule)
        assert isinstance(rule.applies, VersionSpec)
        assert rule.subject in records.RULE_SUBJECTS
        assert KB.rule(rule.id) is rule


def test_every_rule_cites_a_source_a_user_can_open_and_quotes_it() -> None:
    data = load_toml("rules")
    sources = KB.sources("rules")
    assert sources == data["sources"]  # kept in the knowledge base (and so in its cache)
    for row in data["rules"]:
        for key in ("source", "source2"):
            if key in row:
                assert sources[row[key]]["url"].startswith("https://"), row["id"]
        assert row["quote"].strip(), row["id"]
        assert row["text"].strip(), row["id"]


def test_a_missing_rule_is_a_data_error_not_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    real = parse.load_toml

    def without_mig(name: str) -> dict[str, Any]:
        data = real(name)
        if name == "rules":
            data = {**data, "rules": [r for r in data["rules"] if r["id"] != "mig"]}
        return data

    monkeypatch.setattr(parse, "load_toml", without_mig)
    with pytest.raises(DataError, match="'mig'"):
        parse._parse_rules()
    with pytest.raises(DataError, match="no rule 'mig'"):
        replace(KB, rules=tuple(r for r in KB.rules if r.id != "mig")).rule("mig")


def test_a_rule_row_with_an_unknown_subject_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = parse.load_toml

    def bad(name: str) -> dict[str, Any]:
        data = real(name)
        if name == "rules":
            data = {**data, "rules": [{**r, "subject": "driver"} if r["id"] == "mig" else r for r in data["rules"]]}
        return data

    monkeypatch.setattr(parse, "load_toml", bad)
    with pytest.raises(DataError, match="subject 'driver'"):
        parse._parse_rules()


def test_a_rule_checks_os_and_arch_only_when_they_are_known() -> None:
    rule = KB.rule("tensorflow-cpu-package")
    assert rule.holds("2.15.0", "linux", "x86_64")
    assert rule.holds("2.15.0", "linux", "")  # an unknown architecture is not checked
    assert not rule.holds("2.15.0", "macos", "x86_64")
    assert not rule.holds("2.15.0", "linux", "aarch64")


# --------------------------------------------------------------------------- each rule is read from the data


def test_system_cuda_any_minor_follows_the_row() -> None:
    have, built, tf = Version("11.1"), Version("11.2"), Version("2.5.0")
    assert system_cuda_serves(have, built, tf, KB)
    assert not system_cuda_serves(have, built, tf, with_rule(KB, "system-cuda-any-minor", ">=2.6"))
    # (a toolkit pair the cuda-libraries-per-major row lets through: from 11.1; CUDA 11.0 ships libcusolver.so.10)
    assert not system_cuda_serves(Version("11.1"), Version("11.2"), Version("2.4.1"), KB)
    assert system_cuda_serves(Version("11.1"), Version("11.2"), Version("2.4.1"),
                              with_rule(KB, "system-cuda-any-minor", ">=2.4"))


def test_cuda_libraries_per_major_follows_the_row() -> None:
    have, built, tf = Version("11.1"), Version("11.2"), Version("2.5.0")
    assert not system_cuda_serves(have, built, tf, with_rule(KB, "cuda-libraries-per-major", ">=12"))
    facts = linux_facts()  # no system CUDA: the finding names the soname pip's TF would load
    msg = " ".join(b.summary for b in judge_target(facts, KB, "2.5.0", backend="pip").blockers)
    assert "libcudart.so.11.0" in msg
    assert "CUDA 11.x" in msg
    changed = with_rule(KB, "cuda-libraries-per-major", ">=12")
    msg = " ".join(b.summary for b in judge_target(facts, changed, "2.5.0", backend="pip").blockers)
    assert "libcudart.so.11.2" in msg
    assert "CUDA 11.x" not in msg


def test_mig_follows_the_row() -> None:
    assert _apply_cvd([T4, A100], R470_MIG, KB) == (A100,)
    assert _apply_cvd([T4, A100], R470_MIG, with_rule(KB, "mig", ">=7.5")) == (T4,)
    assert _apply_cvd([T4, A100], R470_MIG, with_rule(KB, "mig", ">=9.0")) == ()


def test_an_r470_mig_uuid_reaches_the_verdict_through_the_knowledge_base() -> None:
    facts = linux_facts(gpus=[dict(T4), dict(A100)], env={"CUDA_VISIBLE_DEVICES": R470_MIG})
    assert [g["name"] for g in Machine.from_facts(facts, KB).gpus or ()] == ["A100-SXM4-40GB"]
    assert "env.cuda_visible_devices" not in {b.check for b in judge_target(facts, KB, "2.11").blockers}


def test_tensorflow_cpu_package_follows_the_row() -> None:
    assert cpu_dist(KB, Version("2.1.0"), "linux") == "tensorflow-cpu"
    assert cpu_dist(with_rule(KB, "tensorflow-cpu-package", ">=2.2"), Version("2.1.0"), "linux") == "tensorflow"


def test_gpu_in_tensorflow_package_follows_the_row() -> None:
    assert KB.gpu_dist("2.1.0") == "tensorflow"
    assert KB.gpu_dist("2.0.4") == "tensorflow-gpu"
    assert with_rule(KB, "gpu-in-tensorflow-package", ">=2.2").gpu_dist("2.1.0") == "tensorflow-gpu"


# --------------------------------------------------------------------------- rules read from the other tables


def test_the_avx_floor_is_the_cpu_requirements_row_and_the_row_is_required() -> None:
    facts = linux_facts(cpu={"avx": False})
    avx = {c.id: c for c in machine_checks(Machine.from_facts(facts, KB), KB)}["cpu.avx"]
    assert "TensorFlow >= 1.6 " in avx.summary
    moved = tuple(replace(r, tf=VersionSpec(">=1.7")) if r.feature == "avx" else r for r in KB.cpu_requirements)
    avx = {c.id: c for c in machine_checks(Machine.from_facts(facts, KB), replace(KB, cpu_requirements=moved))}["cpu.avx"]
    assert "TensorFlow >= 1.7 " in avx.summary
    with pytest.raises(DataError, match="'avx'"):
        machine_checks(Machine.from_facts(facts, KB), replace(KB, cpu_requirements=()))


def test_the_last_windows_gpu_series_is_the_build_table_and_the_rows_are_required() -> None:
    assert last_windows_gpu_series(KB) == "2.10"
    fewer = replace(KB, builds=tuple(b for b in KB.builds if not (b.os == "windows" and b.series == "2.10")))
    assert last_windows_gpu_series(fewer) == "2.9"
    with pytest.raises(DataError, match="Windows"):
        last_windows_gpu_series(replace(KB, builds=tuple(b for b in KB.builds if b.os != "windows")))


def test_the_tensorflow_gpu_placeholder_is_the_releases_row() -> None:
    facts = linux_facts(tensorflow=[{"distribution": "tensorflow-gpu", "version": "2.12.0"}])
    ids = {c.id for c in machine_checks(Machine.from_facts(facts, KB), KB)}
    assert "tf.placeholder" in ids
    unmarked = tuple(replace(r, placeholder=False) if r.dist == "tensorflow-gpu" else r for r in KB.releases)
    ids = {c.id for c in machine_checks(Machine.from_facts(facts, KB), replace(KB, releases=unmarked))}
    assert "tf.placeholder" not in ids


def test_the_and_cuda_hint_follows_the_releases_table() -> None:
    def summaries(kb: KnowledgeBase, tf: str) -> str:
        text = f"FROM ubuntu:22.04\nRUN pip install tensorflow=={tf}\n"
        return " ".join(c.summary for c in lint_dockerfile(text, kb, None) if c.id == "pip.tensorflow")

    assert "from 2.14 the GPU libraries come with tensorflow[and-cuda]" in summaries(KB, "2.15.0")
    assert "loads the system CUDA" in summaries(KB, "2.13.0")
    no_extra = tuple(replace(r, and_cuda=()) if r.version < Version("2.16") else r for r in KB.releases)
    assert "from 2.16 the GPU libraries" in summaries(replace(KB, releases=no_extra), "2.16.1")
    assert "loads the system CUDA" in summaries(replace(KB, releases=no_extra), "2.15.0")


def test_minor_version_compatibility_exists_for_the_majors_the_cuda_table_has() -> None:
    """A CUDA 11.0 driver runs TF 2.11 (CUDA 11.2) through minor-version compatibility because compat/cuda.toml
    has a CUDA 11 row; the code no longer says "from CUDA 11" itself."""
    facts = linux_facts(driver={"version": "450.80.02", "cuda": "11.0"})
    v = "2.11.0"
    base = judge_target(facts, KB, v, backend="conda")
    assert "driver.cuda" not in {b.check for b in base.blockers}
    no_row = replace(KB, minor_compats=tuple(mc for mc in KB.minor_compats if mc.major != 11))
    assert "driver.cuda" in {b.check for b in judge_target(facts, no_row, v, backend="conda").blockers}


def test_the_hint_for_a_missing_interpreter_names_a_python_from_the_data() -> None:
    ctx = Context(v=Version("2.15.0"), os="linux", tools={}, interpreters={}, wheel_pythons=(), python=None,
                  newest_python=KB.newest_python("linux"))
    err = PIP.can_build(None, ctx)  # type: ignore[arg-type]  # the pip runner does not look at the recipe
    assert err is not None
    newest = max((p for r in KB.gpu_releases("linux") for p in r.linux_pythons), key=Version)
    assert f"uv python install {newest}" in str(err.hint)
    err = PIP.can_build(None, replace(ctx, newest_python=""))  # type: ignore[arg-type]
    assert err is not None
    assert "uv python install" not in str(err.hint)


def test_nvidia_library_path_follows_the_row() -> None:
    from tfgpu.plan.activation import _venv_nvidia_snippet, nvidia_libpath_needed

    assert nvidia_libpath_needed(KB, Version("2.17.1"))
    assert not nvidia_libpath_needed(KB, Version("2.18.0"))
    assert not nvidia_libpath_needed(KB, Version("2.20.0"))
    assert nvidia_libpath_needed(KB, Version("2.21.0"))  # cusolver is off its framework's RUNPATH (sonames.toml)
    wider = with_rule(KB, "nvidia-wheels-need-library-path", ">=2.16,<2.19")
    assert nvidia_libpath_needed(wider, Version("2.18.0"))
    snippet = _venv_nvidia_snippet("3.12", KB)
    assert "TensorFlow >=2.16,!=2.18.*,!=2.19.*,!=2.20.* " in snippet
    assert "https://github.com/tensorflow/tensorflow/issues/63362" in snippet


def test_a_pip_lock_may_name_every_python_the_releases_table_has() -> None:
    from tfgpu.build.lock import _any_python

    assert "python3.13" in _any_python(KB)
    newer = tuple(replace(r, linux_pythons=(*r.linux_pythons, "3.15")) if r.version == Version("2.21.0") else r
                  for r in KB.releases)
    assert "python3.15" in _any_python(replace(KB, releases=newer))
    assert "python3.15" not in _any_python(KB)


def test_the_machine_checks_name_the_series_the_tables_give() -> None:
    mac = {c.id: c for c in machine_checks(Machine.from_facts(linux_facts(platform={"os": "darwin"}), KB), KB)}
    assert "none since TF 1.1" in mac["os.supported"].summary
    facts = linux_facts(cuda_toolkits=[{"version": "11.8", "path": "/usr/local/cuda-11.8", "source": "path"}])
    toolkit = {c.id: c for c in machine_checks(Machine.from_facts(facts, KB), KB)}["cuda.toolkit"]
    assert "TF < 2.14 use a system CUDA" in toolkit.fix
    later = tuple(replace(r, and_cuda=()) if r.version < Version("2.15") else r for r in KB.releases)
    toolkit = {c.id: c for c in machine_checks(Machine.from_facts(facts, KB), replace(KB, releases=later))}["cuda.toolkit"]
    assert "TF < 2.15 use a system CUDA" in toolkit.fix


def test_native_windows_names_the_cuda_11_runtime_dll_by_its_major() -> None:
    """CUDA 11's runtime is cudart64_110.dll whichever 11.x (tensorflow/tensorflow#44381's log: TF 2.5 nightly
    'Successfully opened dynamic library cudart64_110.dll'), not cudart64_112.dll; CUDA 10.1's is cudart64_101.dll."""
    facts = linux_facts(platform={"os": "windows"}, driver={"version": "472.12", "cuda": "11.4"})
    facts.pop("cuda_toolkits")

    def summary(tf: str) -> str:
        target = judge_target(facts, KB, tf, backend="pip")
        return " ".join(f.summary for b in target.backends for f in (*b.caveats, *b.blockers)
                        if f.check == "cuda.system_toolkit")

    assert "cudart64_110.dll" in summary("2.10.1")
    assert "cudart64_101.dll" in summary("2.3.0")
