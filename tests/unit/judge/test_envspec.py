"""The environment spec's comparison (tfgpu.judge.envspec), on plain values: a spec validates against the environment
it describes; each single change is classified as the rules say (docs/envspec.md); and the spec made from an
environment tree (the environment verdict's facts) holds what it loads, the floor, the GPU code and the pins."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.unit.judge.test_environment_verdict import ALL_NVIDIA_RUNPATH, CU12, make_env
from tfgpu.facts.environment import probe_environment
from tfgpu.judge.environment import judge_environment
from tfgpu.judge.envspec import (
    BLOCKING,
    INFO,
    RISKY,
    check_spec,
    compare,
    make_spec,
    outcome,
    pin_range,
)
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.sonames import load_sonames

Spec = dict[str, Any]


def base_spec() -> Spec:
    """A TF 2.16.1 [and-cuda] environment on an RTX 3080, as `tfgpu export` writes it."""
    return {
        "schema": "tfgpu.envspec/1", "tfgpu_version": "0.1.0", "data_version": "x", "verdict": "gpu",
        "summary": "tensorflow 2.16.1: uses the GPU", "blockers": [],
        "python": {"version": "3.11.7"},
        "tensorflow": {"distribution": "tensorflow", "version": "2.16.1", "cuda_build": True},
        "cuda": {"build": "12.3", "library": "libcudart.so.12", "status": "found", "version": "12.3.101"},
        "cudnn": {"build": "8.9", "library": "libcudnn.so.8", "status": "found", "version": "8.9.7.29"},
        "driver": {"floor": "525.60.13", "cuda": "12.0", "source": "compat/cuda.toml (cuda-rn-table3)"},
        "gpu": {"sass": ["5.0", "6.0", "7.0", "8.0", "9.0"], "ptx": ["9.0"], "source": "t", "cc_min": "5.0",
                "cc_max": "9.0"},
        "pins": {"numpy": {"version": "1.26.4", "range": "<2,>=1.23.5", "from": "t"},
                 "nvidia-cudnn-cu12": {"version": "8.9.7.29", "range": "==8.9.7.29", "from": "t"}},
        "machine": {"os": "linux", "driver": "550.54.15",
                    "gpus": [{"name": "NVIDIA GeForce RTX 3080", "compute_capability": "8.6"}]},
    }


def found(spec: Spec, actual: Spec) -> list[tuple[str, str]]:
    return [(d["id"], d["severity"]) for d in compare(spec, actual)]


def test_a_spec_matches_itself() -> None:
    spec = base_spec()
    assert compare(spec, copy.deepcopy(spec)) == []
    assert outcome([]) == ("matches", 0)
    assert check_spec(spec) is None


def _set(path: str, value: Any) -> Callable[[Spec], None]:
    def change(doc: Spec) -> None:
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[p]
        if value is _DROP:
            del node[last]
        else:
            node[last] = value
    return change


_DROP = object()

#: (what changes in the environment compared, the one difference it makes, how much it matters)
SINGLE_CHANGES: list[tuple[str, Callable[[Spec], None], str, str]] = [
    ("another TF patch", _set("tensorflow.version", "2.16.2"), "tf.patch", INFO),
    ("another TF series", _set("tensorflow.version", "2.15.1"), "tf.version", BLOCKING),
    ("another TF major", _set("tensorflow.version", "3.0.0"), "tf.version", BLOCKING),
    ("tensorflow-gpu instead", _set("tensorflow.distribution", "tensorflow-gpu"), "tf.distribution", RISKY),
    ("a CPU build", _set("tensorflow.cuda_build", False), "tf.cuda_build", BLOCKING),
    ("another Python minor", _set("python.version", "3.12.4"), "python.version", RISKY),
    ("another Python patch", _set("python.version", "3.11.9"), "python.patch", INFO),
    ("no CUDA runtime found", _set("cuda.status", "missing"), "cuda.missing", BLOCKING),
    ("CUDA 11 loaded", _set("cuda.version", "11.8.89"), "cuda.major", BLOCKING),
    ("an older CUDA minor", _set("cuda.version", "12.1.105"), "cuda.older", RISKY),
    ("a newer CUDA minor", _set("cuda.version", "12.5.82"), "cuda.version", INFO),
    ("a CUDA patch", _set("cuda.version", "12.3.52"), "cuda.version", INFO),
    ("cuDNN 9", _set("cudnn.version", "9.1.0.70"), "cudnn.major", BLOCKING),
    ("no cuDNN found", _set("cudnn.status", "missing"), "cudnn.missing", BLOCKING),
    ("an older cuDNN minor", _set("cudnn.version", "8.6.0.163"), "cudnn.older", RISKY),
    ("a driver below the floor", _set("machine.driver", "470.82.01"), "driver.below_floor", BLOCKING),
    ("no driver", _set("machine.driver", _DROP), "driver.none", BLOCKING),
    ("another driver above the floor", _set("machine.driver", "535.104.05"), "driver.version", INFO),
    ("a driver at the floor", _set("machine.driver", "525.60.13"), "driver.version", INFO),
    ("a GPU the build has no code for", _set("machine.gpus", [{"name": "Tesla K80", "compute_capability": "3.7"}]),
     "gpu.arch", BLOCKING),
    ("a GPU newer than the CUDA", _set("machine.gpus", [{"name": "RTX 5090", "compute_capability": "12.0"}]),
     "gpu.arch", BLOCKING),
    ("no GPU", _set("machine.gpus", []), "gpu.none", BLOCKING),
    ("GPUs not described", _set("machine.gpus", _DROP), "gpu.unknown", RISKY),
    ("a GPU of unknown compute capability", _set("machine.gpus", [{"name": "X", "compute_capability": ""}]),
     "gpu.unknown", RISKY),
    ("another GPU the build runs", _set("machine.gpus", [{"name": "A100", "compute_capability": "8.0"}]),
     "gpu.model", INFO),
    ("a pin within its range", _set("pins.numpy.version", "1.24.3"), "pin.version", INFO),
    ("a pin outside its range", _set("pins.numpy.version", "2.1.0"), "pin.range", RISKY),
    ("an nvidia wheel moved", _set("pins.nvidia-cudnn-cu12.version", "8.9.4.25"), "pin.range", RISKY),
    ("a pin gone", _set("pins.numpy", _DROP), "pin.missing", RISKY),
    ("a new key pin", _set("pins.tf-keras", {"version": "2.16.0", "range": "", "from": "t"}), "pin.extra", INFO),
    ("a new blocker of the environment", _set("blockers", [{"id": "libs.missing", "summary": "x"}]),
     "environment.libs.missing", BLOCKING),
    ("another OS", _set("machine.os", "windows"), "os.family", RISKY),
    ("WSL2", _set("machine.os", "wsl2"), "os.variant", INFO),
]


@pytest.mark.parametrize(("change", "expected_id", "severity"), [c[1:] for c in SINGLE_CHANGES],
                         ids=[c[0] for c in SINGLE_CHANGES])
def test_each_single_change_is_classified_as_the_rules_say(change: Callable[[Spec], None], expected_id: str,
                                                           severity: str) -> None:
    spec, actual = base_spec(), base_spec()
    change(actual)
    assert found(spec, actual) == [(expected_id, severity)]
    result, code = outcome(compare(spec, actual))
    assert code == (1 if severity == BLOCKING else 0)
    assert outcome(compare(spec, actual), strict=True)[1] == (0 if severity == INFO else 1)
    assert result == {BLOCKING: "blocked", RISKY: "risky", INFO: "compatible"}[severity]


def test_only_ptx_for_a_gpu_is_risky() -> None:
    spec, actual = base_spec(), base_spec()
    spec["gpu"] = {"sass": ["7.0", "8.0"], "ptx": ["8.0"], "source": "t"}
    actual["machine"]["gpus"] = [{"name": "RTX 4090", "compute_capability": "8.9"}, {"name": "H100", "compute_capability": "9.0"}]
    assert found(spec, actual) == [("gpu.ptx_jit", RISKY)]  # 8.9 runs the 8.0 SASS; 9.0 only the 8.0 PTX


def test_no_tensorflow_is_the_one_difference() -> None:
    actual = base_spec()
    del actual["tensorflow"]
    assert found(base_spec(), actual) == [("tf.missing", BLOCKING)]


def test_machine_findings_of_the_verdict_are_left_to_the_spec_s_own_rules() -> None:
    # a facts file's machine judged with this machine's loader cache says "no libcuda": validate judges the driver
    # by the facts (the floor), not by that
    actual = base_spec()
    actual["blockers"] = [{"id": "driver.libcuda", "summary": "libcuda.so.1 is absent"}]
    assert found(base_spec(), actual) == []


def test_a_blocker_the_exported_environment_had_is_informational() -> None:
    spec, actual = base_spec(), base_spec()
    spec["blockers"] = actual["blockers"] = [{"id": "python.numpy", "summary": "numpy 2"}]
    assert found(spec, actual) == [("environment.python.numpy", INFO)]


def test_a_cpu_build_spec_asks_nothing_of_the_machine() -> None:
    spec = base_spec()
    spec["tensorflow"] = {"distribution": "tensorflow-cpu", "version": "2.16.1", "cuda_build": False}
    for key in ("cuda", "cudnn", "driver", "gpu"):
        del spec[key]
    actual = copy.deepcopy(spec)
    actual["machine"] = {"os": "linux", "gpus": []}
    assert found(spec, actual) == []


# -------------------------------------------------------------------------------- properties

versions = st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 300)).map(lambda t: ".".join(map(str, t)))
ccs = st.sampled_from(["3.5", "3.7", "5.0", "5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"])


@st.composite
def specs(draw: st.DrawFn, blockers: bool = False) -> Spec:
    """A spec and the working machine it was exported on: every GPU runs the build's SASS, the driver is at or
    above the floor, every pin inside its range."""
    spec = base_spec()
    spec["tensorflow"]["version"] = draw(versions)
    spec["python"]["version"] = f"3.{draw(st.integers(8, 14))}.{draw(st.integers(0, 20))}"
    spec["cuda"]["version"] = draw(versions)
    spec["cudnn"]["version"] = draw(versions)
    sass = sorted(set(draw(st.lists(ccs, min_size=1, max_size=6))), key=Version)
    spec["gpu"] = {"sass": sass, "ptx": draw(st.lists(ccs, max_size=2)), "source": "t"}
    floor = draw(versions)
    spec["driver"]["floor"] = floor
    spec["machine"]["driver"] = draw(st.sampled_from([floor, f"{int(floor.split('.')[0]) + 1}.0"]))
    spec["machine"]["gpus"] = [{"name": f"GPU {cc}", "compute_capability": cc}
                               for cc in draw(st.lists(st.sampled_from(sass), min_size=1, max_size=3))]
    pins = draw(st.dictionaries(st.sampled_from(["numpy", "protobuf", "keras", "ml-dtypes", "nvidia-cublas-cu12"]),
                                versions))
    spec["pins"] = {name: {"version": v, "range": f">={v}", "from": "t"} for name, v in pins.items()}
    if blockers:
        spec["blockers"] = draw(st.lists(st.sampled_from([{"id": "libs.missing", "summary": "x"},
                                                          {"id": "gpu.memory_growth", "summary": "y"}]), max_size=1))
    return spec


@settings(max_examples=150, deadline=None)
@given(specs(blockers=True))
def test_property_a_spec_validates_against_the_environment_it_was_exported_from(spec: Spec) -> None:
    diffs = compare(spec, copy.deepcopy(spec))
    assert outcome(diffs, strict=True) == ("compatible" if diffs else "matches", 0)
    assert {d["id"] for d in diffs} <= {"environment.libs.missing"}  # said, as the exported one had it
    assert check_spec(spec) is None


@settings(max_examples=150, deadline=None)
@given(specs(), versions)
def test_property_the_driver_blocks_exactly_below_the_floor(spec: Spec, driver: str) -> None:
    actual = copy.deepcopy(spec)
    actual["machine"]["driver"] = driver
    severities = {d["severity"] for d in compare(spec, actual)}
    assert (BLOCKING in severities) == (Version(driver) < Version(spec["driver"]["floor"]))
    assert RISKY not in severities


@settings(max_examples=150, deadline=None)
@given(specs(), versions)
def test_property_tensorflow_patch_is_informational_and_series_blocking(spec: Spec, tf: str) -> None:
    actual = copy.deepcopy(spec)
    actual["tensorflow"]["version"] = tf
    got = found(spec, actual)
    old, new = Version(spec["tensorflow"]["version"]), Version(tf)
    if old == new:
        assert got == []
    elif old.release[:2] == new.release[:2]:
        assert got == [("tf.patch", INFO)]
    else:
        assert got == [("tf.version", BLOCKING)]


@settings(max_examples=150, deadline=None)
@given(specs(), st.sampled_from(["cuda", "cudnn"]), versions)
def test_property_cuda_and_cudnn_majors_block(spec: Spec, key: str, loaded: str) -> None:
    actual = copy.deepcopy(spec)
    actual[key]["version"] = loaded
    got = found(spec, actual)
    old, new = Version(spec[key]["version"]), Version(loaded)
    if old == new:
        assert got == []
    elif old.major != new.major:
        assert got == [(f"{key}.major", BLOCKING)]
    else:
        assert got == [(f"{key}.older", RISKY)] if new.release[:2] < old.release[:2] else [(f"{key}.version", INFO)]


@settings(max_examples=150, deadline=None)
@given(specs(), ccs)
def test_property_a_gpu_is_judged_by_the_code_the_build_carries(spec: Spec, cc: str) -> None:
    spec["gpu"].pop("cc_min", None)
    spec["gpu"].pop("cc_max", None)
    actual = copy.deepcopy(spec)
    actual["machine"]["gpus"] = [{"name": "the GPU", "compute_capability": cc}]
    c = Version(cc)
    sass = [Version(s) for s in spec["gpu"]["sass"]]
    ptx = [Version(p) for p in spec["gpu"]["ptx"]]
    expected = ([] if any(s.major == c.major and s <= c for s in sass) else
                [("gpu.ptx_jit", RISKY)] if any(p <= c for p in ptx) else [("gpu.arch", BLOCKING)])
    got = [g for g in found(spec, actual) if g[0] != "gpu.model"]
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(versions, versions, st.sampled_from(["", ">=", "<", "==", "~=", "!="]))
def test_property_a_pin_is_informational_inside_its_range_and_risky_outside(spec_v: str, have: str, op: str) -> None:
    rng = f"{op}{spec_v}" if op else ""
    spec = base_spec()
    spec["pins"] = {"numpy": {"version": spec_v, "range": rng, "from": "t"}}
    actual = base_spec()
    actual["pins"] = {"numpy": {"version": have, "range": rng, "from": "t"}}
    got = found(spec, actual)
    if have == spec_v:
        assert got == []
    else:
        inside = SpecifierSet(rng).contains(Version(have), prereleases=True)
        assert got == [("pin.version", INFO) if inside else ("pin.range", RISKY)]


@given(versions, st.lists(st.tuples(st.sampled_from(["<", ">=", "==", "!=", "~="]), versions), max_size=3))
def test_property_a_pin_s_range_always_holds_the_installed_version(version: str, reqs: list[tuple[str, str]]) -> None:
    allowed = [(f"{op}{v}", "t") for op, v in reqs if not (op == "~=" and "." not in v)]
    pin = pin_range(version, allowed)
    assert SpecifierSet(pin["range"]).contains(Version(version), prereleases=True)


# ------------------------------------------------------------------------ from an environment tree

MACHINE = {"platform": {"os": "linux"}, "driver": {"version": "550.54.15"},
           "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3080", "compute_capability": "8.6", "memory_mib": 10240}]}


def spec_of(root: Path, machine: dict[str, Any] = MACHINE) -> Spec:
    doc = probe_environment(str(root), how="--prefix", shell_env={}, explicit=True, ld_cache=b"")
    assert doc is not None
    kb = load_kb()
    return make_spec(doc, judge_environment(doc, machine, kb, load_sonames()), machine, kb)


def test_the_spec_of_a_working_2_16_environment(tmp_path: Path) -> None:
    (tmp_path / "drv").mkdir()
    (tmp_path / "drv" / "libcuda.so.1").write_bytes(b"")
    env = make_env(tmp_path / "e", runpath=f"{ALL_NVIDIA_RUNPATH}:{tmp_path / 'drv'}", nvidia=CU12,
                   cudnn_wheel="8.9.7.29", requires=("numpy <2.0.0,>=1.23.5",
                                                      "nvidia-cudnn-cu12 ==8.9.7.29 ; extra == 'and-cuda'"),
                   dists={"numpy": "1.26.4", "ml_dtypes": "0.3.2", "requests": "2.31.0",
                          "nvidia_cuda_runtime_cu12": "12.3.101"})
    spec = spec_of(env)
    assert spec["verdict"] == "gpu", spec["blockers"]
    assert spec["tensorflow"] == {"distribution": "tensorflow", "version": "2.16.1", "cuda_build": True}
    assert spec["cuda"] == {"build": "12.3", "library": "libcudart.so.12", "status": "found", "version": "12.3.101"}
    assert spec["cudnn"]["version"] == "8.9.7.29"
    assert spec["driver"]["floor"] == str(load_kb().toolkit("12.0").linux_min_driver)  # type: ignore[union-attr]
    assert spec["gpu"]["sass"] == ["5.0", "6.0", "7.0", "8.0", "9.0"]  # compat/tf_archs.toml: the wheel's fatbins
    assert spec["gpu"]["source"].startswith("compat/tf_archs.toml")
    assert spec["python"] == {"version": "3.11.7"}
    assert sorted(spec["pins"]) == ["ml-dtypes", "numpy", "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12"]
    assert spec["pins"]["numpy"]["range"] == "<2,>=1.23.5"
    assert spec["pins"]["nvidia-cudnn-cu12"]["range"] == "==8.9.7.29"
    assert spec["pins"]["ml-dtypes"]["range"] == "==0.3.*"  # no published range: the installed series
    assert spec["machine"]["gpus"] == [{"name": "NVIDIA GeForce RTX 3080", "compute_capability": "8.6"}]
    assert check_spec(spec) is None
    assert compare(spec, spec_of(env)) == []


def test_a_conda_build_s_gpu_code_comes_from_its_build_info(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", runpath=ALL_NVIDIA_RUNPATH, nvidia=CU12, cudnn_wheel="8.9.7.29")
    (env / "conda-meta").mkdir()
    spec = spec_of(env)
    assert spec["gpu"]["sass"] == ["5.0", "6.0", "7.0", "8.0"]  # make_env's build_info.py
    assert spec["gpu"]["ptx"] == ["9.0"]
    assert "build_info.py" in spec["gpu"]["source"]


def test_a_cpu_build_has_no_cuda_sections(tmp_path: Path) -> None:
    env = make_env(tmp_path / "e", dist="tensorflow-cpu",
                   build_info="build_info = collections.OrderedDict([('is_cuda_build', False)])\n")
    spec = spec_of(env)
    assert spec["tensorflow"]["cuda_build"] is False
    assert not {"cuda", "cudnn", "driver", "gpu"} & set(spec)
    assert check_spec(spec) is None


@pytest.mark.parametrize(("change", "problem"), [
    (_set("schema", "tfgpu.envspec/2"), "spec.schema"),
    (_set("tensorflow.version", "two"), "spec.tensorflow.version"),
    (_set("driver.floor", "latest"), "spec.driver.floor"),
    (_set("pins.numpy.range", ">>1"), "spec.pins.numpy.range"),
    (_set("gpu.sass", ["sm_80"]), "spec.gpu.sass[0]"),
    (_set("tensorflow", _DROP), "missing 'tensorflow'"),
    (_set("machine.gpus", "many"), "spec.machine.gpus"),
])
def test_a_malformed_spec_is_named(change: Callable[[Spec], None], problem: str) -> None:
    spec = base_spec()
    change(spec)
    assert problem in (check_spec(spec) or "")


def test_the_docs_list_every_rule() -> None:
    from tests import REPO

    docs = (REPO / "docs" / "envspec.md").read_text(encoding="utf-8")
    ids = {c[2] for c in SINGLE_CHANGES} | {"tf.missing", "gpu.ptx_jit"}
    missing = sorted(i for i in ids if f"`{i}`" not in docs and not i.startswith("environment."))
    assert missing == []
    assert "`environment.<id>`" in docs
