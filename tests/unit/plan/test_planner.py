"""Plans for every GPU release x backend x OS of the knowledge base, checked against the tables (pure, fast)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tfgpu.core.errors import UsageError
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.queries import load_pins
from tfgpu.plan.activation import nvidia_libpath_needed
from tfgpu.plan.choose import candidate_recipes
from tfgpu.plan.envspec import check_name
from tfgpu.plan.formats import render_environment_yml, render_sh
from tfgpu.plan.model import Plan
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
HOME = "/home/u/.local/share/tfgpu"


def facts_for(os_name: str, pythons: list[str], *, gpu_mib: int | None = 24564, driver_cuda: str | None = "12.4",
              cuda_toolkits: list[str] | None = None) -> dict[str, Any]:
    plat: dict[str, Any] = {"os": "linux" if os_name == "wsl2" else os_name, "wsl": 2 if os_name == "wsl2" else None}
    return {
        "schema": "tfgpu.facts/1",
        "platform": plat,
        "python": {"current": "3.11.7",
                   "interpreters": [{"version": f"{p}.1", "path": f"/usr/bin/python{p}"} for p in pythons]},
        "driver": {"version": "550.54.15", "cuda": driver_cuda} if driver_cuda else {"version": None, "cuda": None},
        "gpus": [] if gpu_mib is None else [{"index": 0, "name": "GPU", "memory_mib": gpu_mib,
                                              "compute_capability": "8.6"}],
        "cuda_toolkits": [{"version": v, "path": f"/usr/local/cuda-{v}"} for v in (cuda_toolkits or [])],
    }


ALL_PY = [f"3.{m}" for m in range(5, 14)] + ["2.7"]
TOOLS_ALL: dict[str, str | None] = {"uv": "/usr/bin/uv", "mamba": "/opt/mamba/bin/mamba",
                                     "micromamba": None, "conda": "/opt/conda/bin/conda"}
TOOLS_NONE: dict[str, str | None] = {"uv": None, "mamba": None, "micromamba": None, "conda": None}


def _targets() -> list[tuple[str, str]]:
    out = []
    for os_name in ("linux", "wsl2", "windows"):
        for r in KB.gpu_releases("linux" if os_name == "wsl2" else os_name):
            if [x for x in KB.recipes_for(r.version, os_name) if x.gpu]:
                out.append((os_name, str(r.version)))
    return out


TARGETS = _targets()


def _plan(os_name: str, tf: str, backend: str, tools: dict[str, str | None] | None = None, **kw: Any) -> Plan:
    return plan_environment(KB, facts_for(os_name, ALL_PY), BuildRequest(tf=tf, backend=backend), tools=tools if tools is not None else TOOLS_ALL, home=HOME, engine_python="/usr/bin/python3", **kw)


def _check_consistent(plan: Plan, os_name: str) -> None:
    v = Version(plan.tf)
    recipe = next(r for r in KB.recipes if r.id == plan.recipe_id)
    # WSL2 runs Linux's recipes too (the verdict judges them there, tfgpu.plan.choose.candidate_recipes)
    assert recipe.applies(v, os_name) or (os_name == "wsl2" and recipe.applies(v, "linux")), (plan.recipe_id, plan.tf)
    # Python: in the release's wheel range for pip installs, in the recorded conda builds for conda ones
    if plan.pip_requirements and plan.backend == "pip":
        assert plan.python in KB.pythons_for(v, os_name)
    if recipe.backend == "conda":
        rows = [r for r in KB.conda_packages(None, v, os_name)
                if (r.channel == "conda-forge") == ("conda-forge" in recipe.channels)]
        if rows:
            assert plan.python in {p for r in rows for p in r.python}
        assert f"python={plan.python}" in plan.conda_specs
    # TensorFlow requirement agrees with the tables: distribution and exact version
    if plan.pip_requirements:
        tf_reqs = [Requirement(r) for r in plan.pip_requirements if Requirement(r).name in ("tensorflow", "tensorflow-gpu")]
        assert len(tf_reqs) == 1
        req = tf_reqs[0]
        assert req.name == KB.gpu_dist(v)
        install_as = KB.install_as_for(v, recipe.id) if recipe.backend == "pip" else None
        assert str(req.specifier) == f"=={install_as.install if install_as else plan.tf}"
        assert ("and-cuda" in req.extras) == (v >= Version("2.14") and recipe.backend == "pip")
        for pin in load_pins():
            assert (pin.requirement in plan.pip_requirements) == (v in pin.tf)
    # conda: explicit channels only, never base
    for step in plan.steps:
        if step.kind == "run" and step.argv[1:2] == ("create",) and plan.backend == "conda":
            assert "--override-channels" in step.argv
            assert "-c" in step.argv
            assert "base" not in step.argv
            assert "-n" in step.argv or "-p" in step.argv
        assert "sudo" not in step.argv
    # activation scripts where the recipe has them
    writes = [s for s in plan.steps if s.kind != "run"]
    if recipe.backend == "conda+pip" and recipe.activation and os_name != "windows" and plan.backend != "pip":
        act = [s for s in writes if s.path and s.path.endswith("activate.d/tfgpu_env_vars.sh")]
        assert act, plan.recipe_id
        for line in recipe.activation:
            assert f"export {line}" in (act[0].content or "")
    nvidia = plan.backend == "pip" and recipe.provides_cuda and nvidia_libpath_needed(KB, v) and os_name != "windows"
    assert any("tensorflow/tensorflow/issues/63362" in (s.content or "") for s in writes) == nvidia
    assert plan.prefix.startswith(HOME)


@pytest.mark.parametrize(("os_name", "tf"), TARGETS)
def test_auto_plan_is_consistent_with_the_tables(os_name: str, tf: str) -> None:
    plan = _plan(os_name, tf, "auto")
    _check_consistent(plan, os_name)
    assert plan.backend_reason


@pytest.mark.parametrize(("os_name", "tf"), TARGETS)
@pytest.mark.parametrize("backend", ["pip", "conda", "rattler"])
def test_forced_backend_plans_or_refuses_cleanly(os_name: str, tf: str, backend: str) -> None:
    recipes = candidate_recipes(KB, Version(tf), os_name)  # WSL2: its own recipes and Linux's
    want = {"pip": ("pip",), "conda": ("conda", "conda+pip"), "rattler": ("conda", "conda+pip")}[backend]
    if not any(r.backend in want for r in recipes):
        with pytest.raises(UsageError):
            _plan(os_name, tf, backend)
        return
    plan = _plan(os_name, tf, backend)
    _check_consistent(plan, os_name)
    assert plan.backend == backend
    if backend == "conda":
        assert plan.tool == "mamba"  # mamba before conda
    if backend == "rattler":
        first = plan.steps[0].argv
        assert first[:4] == ("/usr/bin/python3", "-m", "tfgpu.backends.rattler", "create")
        assert "--prefix" in first


def test_seed_000_tf_2_2_conda_recipe_matches_the_blog() -> None:
    # seed 000: `conda install python=3.8` + `conda install tensorflow-gpu=2.2.0` (anaconda defaults)
    plan = _plan("linux", "2.2.0", "conda")
    assert plan.conda_specs == ("python=3.8", "tensorflow-gpu=2.2.0")
    assert plan.channels == ("defaults",)
    assert plan.steps[0].argv == ("/opt/mamba/bin/mamba", "create", "--yes", "-p", f"{HOME}/envs/tf2.2.0",
                                  "--override-channels", "-c", "defaults", "python=3.8", "tensorflow-gpu=2.2.0")
    assert any("Terms of Service" in n for n in plan.notes)


def test_series_on_a_conda_only_recipe_picks_a_release_the_channel_has() -> None:
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.2", backend="conda"), tools=TOOLS_ALL, home=HOME)
    assert plan.tf == "2.2.0"
    assert plan.name == "tf2.2.0"


def test_auto_prefers_pip_with_uv_and_explains() -> None:
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.16.1"), tools=TOOLS_ALL, home=HOME)
    assert (plan.backend, plan.tool) == ("pip", "uv")
    assert "uv" in plan.backend_reason
    assert plan.steps[0].argv == ("/usr/bin/uv", "venv", "--no-project", "--python", "/usr/bin/python3.11",
                                  f"{HOME}/envs/tf2.16.1")
    assert plan.pip_requirements == ("tensorflow[and-cuda]==2.16.1", "numpy<2", "keras>=3.0.0,<3.5")
    assert plan.steps[1].argv[:5] == ("/usr/bin/uv", "pip", "install", "--python", f"{HOME}/envs/tf2.16.1/bin/python")


def test_stdlib_venv_when_uv_is_missing() -> None:
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.20"), tools=TOOLS_NONE, home=HOME)
    assert plan.tool == "venv"
    assert plan.steps[0].argv == ("/usr/bin/python3.11", "-m", "venv", f"{HOME}/envs/tf2.20.0")
    assert plan.steps[1].argv[:3] == (f"{HOME}/envs/tf2.20.0/bin/python", "-m", "pip")


def test_no_python_in_range_falls_back_to_a_conda_made_interpreter() -> None:
    # TF 2.21 needs Python >= 3.10; only 3.8 here, no conda, and conda-forge has no 2.21 build on record: on
    # Linux and WSL2 rattler makes python=3.x and pip installs TF (the verdict judges the pip way there too).
    # TF 1.8 has no conda recipe at all: the same.
    for os_name in ("linux", "wsl2"):
        plan = plan_environment(KB, facts_for(os_name, ["3.8"]), BuildRequest(tf="2.21"), tools=TOOLS_NONE, home=HOME)
        assert plan.backend == "rattler"
        assert plan.conda_specs == ("python=3.13", "pip")
        assert plan.pip_requirements[0] == "tensorflow[and-cuda]==2.21.0"
        assert "no Python in" in plan.backend_reason
    old = facts_for("linux", ["3.8"])
    old["python"]["current"] = "3.8.1"
    plan = plan_environment(KB, old, BuildRequest(tf="1.8.0"), tools=TOOLS_NONE, home=HOME)
    assert plan.backend == "rattler"
    assert plan.conda_specs == ("python=3.6", "pip")
    assert plan.pip_requirements[0] == "tensorflow-gpu==1.8.0"
    with pytest.raises(UsageError, match=r"supports Python .*; no such interpreter"):
        plan_environment(KB, facts_for("linux", ["3.8"]), BuildRequest(tf="2.21", backend="pip"), tools=TOOLS_NONE, home=HOME)


def test_conda_backend_without_conda_names_the_fix() -> None:
    with pytest.raises(UsageError) as exc:
        plan_environment(KB, facts_for("linux", ["3.8"]), BuildRequest(tf="2.2", backend="conda"), tools=TOOLS_NONE, home=HOME)
    assert "--backend rattler" in exc.value.one_line()


def test_system_cuda_match_keeps_the_pip_recipe_for_old_tf() -> None:
    f = facts_for("linux", ["3.8"], cuda_toolkits=["10.1"])
    plan = plan_environment(KB, f, BuildRequest(tf="2.2.0"), tools=TOOLS_ALL, home=HOME)
    assert plan.recipe_id == "pip-system-cuda"
    # numpy<2 resolved to numpy 1.24 and `import tensorflow` failed (np.object removed): compat/pins.toml
    assert plan.pip_requirements == ("tensorflow==2.2.0", "numpy<1.19", "protobuf<3.20")
    assert any("system's CUDA 10.1" in n for n in plan.notes)


def test_tf1_uses_tensorflow_gpu_distribution() -> None:
    f = facts_for("linux", ["3.7"], cuda_toolkits=["10.0"])
    plan = plan_environment(KB, f, BuildRequest(tf="1.15.5"), tools=TOOLS_ALL, home=HOME)
    assert plan.pip_requirements[0] == "tensorflow-gpu==1.15.5"


def test_small_gpu_gets_memory_growth_in_activation() -> None:
    small = facts_for("linux", ["3.11"], gpu_mib=2048)  # seed 000's MX150 2 GB
    plan = plan_environment(KB, small, BuildRequest(tf="2.20"), tools=TOOLS_ALL, home=HOME)
    assert plan.env_vars["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert "export TF_FORCE_GPU_ALLOW_GROWTH=true" in (plan.steps[-1].content or "")
    big = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.20"), tools=TOOLS_ALL, home=HOME)
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in big.env_vars


def test_conda_cuda_build_without_driver_sets_conda_override_cuda() -> None:
    f = facts_for("linux", ["3.11"], driver_cuda=None)
    plan = plan_environment(KB, f, BuildRequest(tf="2.18.0", backend="conda"), tools=TOOLS_ALL, home=HOME)
    assert "tensorflow=2.18.0=cuda*" in plan.conda_specs
    # the newest CUDA variant conda-forge's main history built for 2.18.0 (12.8 from feedstock 1d65c30)
    newest = max(
        (p for p in KB.conda_forge_tf_builds() if str(p.version) == "2.18.0"), key=lambda p: tuple(map(int, p.cuda.split("."))))
    assert newest.cuda == "12.8"
    assert ("CONDA_OVERRIDE_CUDA", newest.cuda) in plan.steps[0].env
    withdrv = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.18.0", backend="rattler"), tools=TOOLS_ALL, home=HOME, engine_python="/p")
    assert "--virtual-package" in withdrv.steps[0].argv
    assert "__cuda=12.4" in withdrv.steps[0].argv


def test_channel_option_replaces_recipe_channels() -> None:
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.10.0", backend="conda", channels=("https://example.invalid/mirror/conda-forge",)), tools=TOOLS_ALL, home=HOME)
    argv = plan.steps[0].argv
    assert argv[argv.index("-c") + 1] == "https://example.invalid/mirror/conda-forge"
    assert argv.count("-c") == 1


def test_named_conda_env_goes_to_the_conda_envs_dir() -> None:
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.10.0", backend="conda", name="tf210"), tools=TOOLS_ALL, home=HOME, conda_envs_dir="/opt/conda/envs")
    assert plan.prefix == "/opt/conda/envs/tf210"
    assert plan.steps[0].argv[3:5] == ("-n", "tf210")
    assert plan.conda_named


def test_windows_native_after_2_10_is_refused_with_the_reason() -> None:
    with pytest.raises(UsageError) as exc:
        plan_environment(KB, facts_for("windows", ["3.11"]), BuildRequest(tf="2.10.0", backend="conda"), tools=TOOLS_NONE, home=HOME)
    # 2.10 on native Windows has a conda-forge cudatoolkit recipe; rattler runs it with the Windows layout
    plan = plan_environment(KB, facts_for("windows", ["3.10"]), BuildRequest(tf="2.10.0", backend="rattler"), tools=TOOLS_NONE, home="C:\\Users\\u\\tfgpu", engine_python="C:\\py\\python.exe")
    assert plan.env_python.endswith("\\python.exe")
    assert "--platform" in plan.steps[0].argv
    assert "win-64" in plan.steps[0].argv
    assert "mamba, micromamba or conda" in exc.value.one_line()


@pytest.mark.parametrize("bad", ["", "-rf", "../x", "a..b", "a/b", "x" * 65, ".hidden", "a b"])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        check_name(bad)
    with pytest.raises(UsageError):
        plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.20", name=bad), tools=TOOLS_ALL, home=HOME)


@pytest.mark.parametrize("good", ["tf", "tf2.16", "my_env-1", "A" * 64])
def test_good_names(good: str) -> None:
    assert check_name(good) == good


def test_unknown_backend_and_version() -> None:
    with pytest.raises(UsageError, match="unknown backend"):
        _plan("linux", "2.20", "docker")
    with pytest.raises(UsageError):
        _plan("linux", "9.9", "auto")


def test_plan_json_matches_the_schema_for_every_target() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("tfgpu").joinpath("core/schemas/plan.schema.json").read_text(encoding="utf-8"))
    seen: set[tuple[str, str, str]] = set()
    validator = jsonschema.Draft202012Validator(schema)
    for os_name, tf in TARGETS:  # one plan of each (OS, recipe, tool) shape keeps this fast
        plan = _plan(os_name, tf, "auto")
        key = (os_name, plan.recipe_id, plan.tool)
        if key in seen:
            continue
        seen.add(key)
        doc = plan.to_json()
        validator.validate(doc)
        assert json.loads(json.dumps(doc)) == doc
    assert len(seen) >= 5


def test_sh_rendering_is_a_valid_script_with_every_step() -> None:
    plan = plan_environment(KB, facts_for("linux", ["3.11"], gpu_mib=2048), BuildRequest(tf="2.12.0", backend="conda"), tools=TOOLS_ALL, home=HOME)
    text = render_sh(plan)
    assert text.startswith("#!/bin/sh\n")
    assert "\nset -eu\n" in text
    assert text.count("TFGPU_EOF") == 2 * sum(1 for s in plan.steps if s.kind != "run")
    for step in plan.steps:
        assert step.why in text


def test_environment_yml_for_conda_and_refusal_for_pip() -> None:
    turing = facts_for("linux", ["3.11"])
    turing["gpus"][0]["compute_capability"] = "7.5"  # SASS in both builds: the docs' conda+pip recipe is preferred
    plan = plan_environment(KB, turing, BuildRequest(tf="2.12.0", backend="conda", name="tf212"), tools=TOOLS_ALL, home=HOME)
    yml = render_environment_yml(plan)
    assert 'name: "tf212"\n' in yml
    assert '  - "cudatoolkit=11.8.0"' in yml
    assert '    - "tensorflow==2.12.0"' in yml
    assert '    - "nvidia-cudnn-cu11==8.6.0.163"' in yml
    # a pip plan is written too (issue 18: the file describes another machine's run): conda-forge's Python and
    # pip, then the same PyPI requirements
    pip_plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.20"), tools=TOOLS_ALL, home=HOME)
    yml = render_environment_yml(pip_plan)
    assert '  - "python=3.11"\n  - "pip"\n  - pip:\n' in yml
    assert f'    - "{pip_plan.pip_requirements[0]}"' in yml
    assert '  - "conda-forge"\n  - nodefaults\n' in yml


def test_planning_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    # the autouse fixture already blocks subprocesses; also forbid filesystem access during planning
    import builtins
    import os

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("plan_environment touched the filesystem")

    KB.series()  # the knowledge base is loaded (cached) before the check
    monkeypatch.setattr(builtins, "open", boom)
    monkeypatch.setattr(os, "stat", boom)
    monkeypatch.setattr(os, "listdir", boom)
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.16.1"), tools=TOOLS_ALL, home=HOME)
    assert plan.steps


def _rtx_5090(facts: dict[str, Any]) -> dict[str, Any]:
    facts["driver"] = {"version": "581.29", "cuda": "13.0"}
    facts["gpus"] = [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "memory_mib": 32607, "compute_capability": "12.0"}]
    return facts


@pytest.mark.parametrize(("tools", "runner"), [(TOOLS_ALL, "conda"), (TOOLS_NONE, "rattler")])
def test_auto_takes_conda_forges_build_when_the_official_wheels_cannot_use_the_gpu(tools, runner):
    # RTX 50-series: no official wheel carries code that loads on 12.0 (tensorflow#99592); conda-forge's
    # 2.19.1 builds carry sm_120 (tensorflow-feedstock 13015ae). `tfgpu create --tf 2.19.1` must take those.
    plan = plan_environment(KB, _rtx_5090(facts_for("linux", ALL_PY)), BuildRequest(tf="2.19.1", backend="auto"), tools=tools, home=HOME, engine_python="/usr/bin/python3")
    assert plan.recipe_id == "conda-forge-tensorflow-cuda"
    assert plan.backend == runner
    assert "the official wheels cannot use this GPU" in plan.backend_reason


def test_auto_stays_with_pip_when_the_wheels_can_use_the_gpu():
    plan = plan_environment(KB, facts_for("linux", ALL_PY), BuildRequest(tf="2.19.1", backend="auto"), tools=TOOLS_ALL, home=HOME, engine_python="/usr/bin/python3")
    assert plan.backend == "pip"


def test_an_explicit_backend_is_never_overridden_by_the_gpu_verdict():
    plan = plan_environment(KB, _rtx_5090(facts_for("linux", ALL_PY)), BuildRequest(tf="2.19.1", backend="pip"), tools=TOOLS_ALL, home=HOME, engine_python="/usr/bin/python3")
    assert plan.backend == "pip"  # the user asked for it; `tfgpu doctor` / create's judging says it is blocked


def test_tf_2_14_and_cuda_plans_a_python_tensorrt_has_wheels_for() -> None:
    """`nox -s recipes`: tensorflow[and-cuda]==2.14.1 pins tensorrt==8.5.3.1 (wheels cp36-cp310 only), so
    uv could not resolve it in the Python 3.11 venv the planner picked (compat/pins.toml `pythons`)."""
    plan = plan_environment(KB, facts_for("linux", ["3.10", "3.11"]), BuildRequest(tf="2.14.1", backend="pip"), tools=TOOLS_ALL, home=HOME)
    assert plan.recipe_id == "pip-and-cuda"
    assert plan.python == "3.10"
    assert any("tensorrt==8.5.3.1" in n for n in plan.notes)
    with pytest.raises(UsageError, match=r"supports Python 3\.9–3\.10; no such interpreter"):
        plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.14.1", backend="pip"), tools=TOOLS_ALL, home=HOME)
    # 2.15 pins no tensorrt: 3.11 stays
    assert plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.15.1", backend="pip"), tools=TOOLS_ALL, home=HOME).python == "3.11"


def test_tf_2_15_0_and_cuda_installs_the_post1_release() -> None:
    """tensorflow[and-cuda]==2.15.0 requires tensorrt-libs==8.6.1, which PyPI does not have (uv: 'there is
    no version of tensorrt-libs==8.6.1'); 2.15.0.post1 drops TensorRT from the extra (compat/pins.toml
    `installs`, found by checking every recorded and-cuda requirement against PyPI)."""
    rel = next(r for r in KB.releases if r.dist == "tensorflow" and str(r.version) == "2.15.0")
    assert any(p.startswith("tensorrt-libs==8.6.1") for p in rel.and_cuda)
    post = next(r for r in KB.releases if r.dist == "tensorflow" and str(r.version) == "2.15.0.post1")
    assert not any(p.startswith("tensorrt") for p in post.and_cuda)
    plan = plan_environment(KB, facts_for("linux", ["3.11"]), BuildRequest(tf="2.15.0", backend="pip"), tools=TOOLS_ALL, home=HOME)
    assert plan.recipe_id == "pip-and-cuda"
    assert plan.pip_requirements[0] == "tensorflow[and-cuda]==2.15.0.post1"
    assert any("tensorrt-libs==8.6.1" in n for n in plan.notes)
    # the CPU recipe and other releases are untouched
    assert KB.install_as_for(Version("2.15.1"), "pip-and-cuda") is None
    assert KB.install_as_for(Version("2.15.0"), "pip-cpu") is None


@pytest.mark.parametrize(("tf", "pinned"), [("1.14.0", True), ("1.15.0", True), ("2.1.0", True), ("2.2.0", False)])
def test_keras_hdf5_needs_h5py_below_3_before_2_2(tf: str, pinned: bool) -> None:
    """`nox -s recipes`: 1.14.0 resolved h5py 3.8.0 through keras-applications and Keras' load_model failed
    ('str' object has no attribute 'decode'); TF 2.2+ bound h5py themselves (compat/pins.toml)."""
    plan = plan_environment(KB, facts_for("linux", ["3.7", "3.8"]), BuildRequest(tf=tf, backend="pip"), tools=TOOLS_ALL, home=HOME)
    assert ("h5py<3" in plan.pip_requirements) == pinned


def test_a_plans_build_steps_are_its_runners_steps() -> None:
    # the planner decides where and what; the chosen runner of tfgpu.backends.runners makes the steps (pip: a venv and
    # pip; conda: TOOL create; rattler: the embedded engine), so a backend's steps live in one place
    from tests.unit.judge.test_verdict import gpu_facts
    from tfgpu.backends.runners import RECIPE_RUNNERS, RUNNERS

    assert set(RECIPE_RUNNERS) == {r.name for r in RUNNERS["auto"]}
    facts = gpu_facts("NVIDIA GeForce RTX 3090", "8.6", driver="550.54.15")
    pip = plan_environment(KB, facts, BuildRequest(tf="2.15.1", backend="pip"), home="/h", tools={"uv": "/usr/bin/uv", "python3.11": "/usr/bin/python3.11"})
    assert pip.steps[0].argv == ("/usr/bin/uv", "venv", "--no-project", "--python", "/usr/bin/python3.11",
                                 "/h/envs/tf2.15.1")
    assert pip.steps[1].argv[:4] == ("/usr/bin/uv", "pip", "install", "--python")
    assert "tensorflow[and-cuda]==2.15.1" in pip.steps[1].argv
    conda = plan_environment(KB, facts, BuildRequest(tf="2.15.1", backend="conda"), home="/h", tools={"micromamba": "/opt/mm/bin/micromamba"})
    assert conda.steps[0].argv[:6] == ("/opt/mm/bin/micromamba", "create", "--yes", "-p", "/h/envs/tf2.15.1",
                                       "--override-channels")
    rattler = plan_environment(KB, facts, BuildRequest(tf="2.15.1", backend="rattler"), home="/h", tools={"rattler": "embedded"}, engine_python="/usr/bin/python3")
    argv = rattler.steps[0].argv
    assert argv[:5] == ("/usr/bin/python3", "-m", "tfgpu.backends.rattler", "create", "--prefix")
    assert argv[argv.index("--driver-cuda") + 1] == facts["driver"]["cuda"]  # the driver's CUDA, told by the planner
