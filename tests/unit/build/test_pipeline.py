"""The pipeline's shared seams (issue 17): one set of facts options for every command that reads the machine,
and one environment directory. The import rules are tests/unit/test_architecture.py's."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests import REPO, TESTS
from tests.conftest import RTX3080_FACTS
from tfgpu.backends.rattler import virtual
from tfgpu.cli.options import FACTS_OPTIONS, SHARED
from tfgpu.plan.request import BuildRequest

SRC = REPO / "src" / "tfgpu"
FACTS_COMMANDS = ("doctor", "plan", "create", "lock", "smoke", "explain", "lint")


def _commands() -> dict[str, Any]:
    import typer.main

    from tfgpu.cli.app import _register, app

    _register()
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", FACTS_COMMANDS)
def test_every_command_that_reads_the_machine_takes_the_same_facts_options(command: str) -> None:
    params = {opt: p for p in _commands()[command].params for opt in p.opts}
    for key in FACTS_OPTIONS:
        spec = SHARED[key]
        param = params.get(spec.flags[0])
        assert param is not None, (command, spec.flags[0])
        assert param.metavar == spec.metavar
        if key != "facts":  # --facts may say more about what the facts are for (explain)
            assert param.help == spec.help


def test_lint_judges_the_host_the_overrides_give(cli: Any, tmp_path: Path) -> None:
    # tabbyAPI's base image carries CUDA 12.8.1 (driver >= 570.26); the thread's host had 550.144.03
    dockerfile = TESTS / "data" / "lint" / "tabbyapi.Dockerfile"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(RTX3080_FACTS))
    code, out, err = cli("lint", str(dockerfile), "--facts", str(path), "--driver", "550.144.03", "--json")
    assert code == 1, err  # the ✗ below
    doc = json.loads(out)
    assert doc["host"]["driver"] == "550.144.03"
    assert any(c["status"] == "fail" and "570.26" in c["summary"] for c in doc["files"][0]["checks"])
    code, out, err = cli("lint", str(dockerfile), "--facts", str(path), "--driver", "575.51.03", "--json")
    assert not any(c["status"] == "fail" for c in json.loads(out)["files"][0]["checks"])


def test_backend_means_the_same_and_defaults_to_auto_everywhere() -> None:
    for command in ("doctor", "plan", "create", "lock"):
        param = next(p for p in _commands()[command].params if "--backend" in p.opts)
        assert param.default == "auto", command


def test_plan_takes_the_driver_and_gpu_overrides(cli: Any, tmp_path: Path) -> None:
    # RTX 3080 on driver 470: plan judges the overridden driver exactly as the doctor does
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(RTX3080_FACTS))
    # --force: the plan is printed either way; without it a blocked target exits 1 (issue 18)
    code, out, err = cli("plan", "--tf", "2.15", "--facts", str(path), "--driver", "470.82.01", "--json", "--force")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["verdict"] == "blocked"  # driver 470 (CUDA 11.4) runs none of 2.15's builds as recorded
    code, out, err = cli("doctor", "--tf", "2.15", "--facts", str(path), "--driver", "470.82.01", "--json")
    target = json.loads(out)["targets"][0]
    assert (target["tf"], target["recipe_id"], target["verdict"]) == (plan["tf"], plan["recipe_id"], plan["verdict"])
    code, out, err = cli("plan", "--tf", "2.15", "--facts", str(path), "--json", "--force")
    newer = json.loads(out)  # without the override: driver 550, as the facts file says
    code, out, err = cli("doctor", "--tf", "2.15", "--facts", str(path), "--json")
    assert json.loads(out)["targets"][0]["recipe_id"] == newer["recipe_id"]


def test_smoke_name_finds_environments_under_tfgpu_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfgpu.verify.runner import resolve_env_python

    home = tmp_path / "home"
    exe = home / "envs" / "tf2.16.1" / "bin" / "python"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("TFGPU_HOME", str(home))
    for var in ("CONDA_PREFIX", "CONDA_ENVS_PATH", "CONDA_ROOT", "MAMBA_ROOT_PREFIX", "CONDA_EXE"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_env_python("tf2.16.1", environ={}, home=tmp_path / "nohome") == exe


# --------------------------------------------------------------------------- the engine child gets the facts


def test_the_engine_child_is_told_the_drivers_cuda_and_does_not_probe_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfgpu.backends import rattler as engine
    from tfgpu.backends.conda import rattler_create_steps
    from tfgpu.facts.document import as_facts
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.plan.planner import engine_driver_cuda, plan_environment

    kb = load_kb()

    def told(facts: dict[str, Any]) -> tuple[str, ...]:
        return rattler_create_steps("/p", "/env", ["conda-forge"], ["python=3.11"], facts=facts, kb=kb, tf=None,
                                    os_name="linux", driver_cuda=engine_driver_cuda(as_facts(facts), kb))[0].argv

    facts = {"platform": {"os": "linux"}, "driver": {"version": "470.82.01", "cuda": None}}
    argv = told(facts)
    assert argv[argv.index("--driver-cuda") + 1] == "11.4"  # derived from the driver table, as the verdict does
    none = told({"platform": {"os": "linux"}, "driver": {"version": None}})
    assert none[none.index("--driver-cuda") + 1] == "none"
    assert "--driver-cuda" not in told({"platform": {"os": "linux"}})  # the facts do not say: the child probes
    # and the plan's rattler step is told the same (the runner's steps get it from the planner)
    planned = plan_environment(kb, as_facts({**facts, "gpus": [{"name": "GeForce GTX 1080", "compute_capability":
                                                              "6.1", "memory_mib": 8192}]}), BuildRequest(tf="2.9.1", backend="rattler"), tools={"rattler": "embedded"}, home="/h")
    engine_step = next(s.argv for s in planned.steps if "tfgpu.backends.rattler" in s.argv)
    assert engine_step[engine_step.index("--driver-cuda") + 1] == "11.4"
    if not engine.available():
        pytest.skip("the embedded engine needs Python >= 3.10")

    def no_probe() -> tuple[bool, str | None]:
        raise AssertionError("the engine probed the machine again")

    monkeypatch.setattr(virtual, "_probe_driver_cuda", no_probe)
    vps, _ = virtual.detect_virtual_packages(env={}, driver_cuda_known=("11.4",))
    assert [v.version for v in vps if v.name == "__cuda"] == ["11.4"]
    vps, _ = virtual.detect_virtual_packages(env={}, driver_cuda_known=(None,))
    assert not [v for v in vps if v.name == "__cuda"]


# --------------------------------------------------------------------------- create as a library function


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def note(self, text: str) -> None:
        self.seen.append(("note", text))

    def say(self, text: str) -> None:
        self.seen.append(("say", text))

    def planned(self, plan: Any) -> None:
        self.seen.append(("planned", plan.recipe_id))

    def confirm(self, plan: Any, replacing: str | None) -> bool:
        self.seen.append(("confirm", plan.prefix))
        return False

    def building(self, plan: Any) -> Any:
        raise AssertionError("nothing is built in these tests")

    def step(self, i: int, n: int, step: Any) -> None: ...

    def line(self, line: str) -> None: ...

    def built(self, plan: Any) -> None: ...


def test_create_environment_is_a_library_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfgpu.api.doctor import doctor_result
    from tfgpu.build.pipeline import CreateRequest, create_environment
    from tfgpu.kb.knowledge import load_kb

    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    facts = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.35"},
             "python": {"current": "3.11.4", "interpreters": [{"version": "3.11.4", "path": "/usr/bin/python3.11"}]},
             "gpus": [{"index": 0, "name": "GeForce MX150", "compute_capability": "6.1", "memory_mib": 2002}],
             "driver": {"version": "450.80.02", "cuda": None}}
    events = _Recorder()
    dry = create_environment(CreateRequest(build=BuildRequest(tf="2.9"), facts=facts, dry_run=True), events)
    assert dry.exit_code == 0
    assert dry.plan.tf == "2.9.1"  # the series' release the doctor names
    assert ("planned", "conda-forge-tensorflow-cuda") in events.seen
    assert ("say", "dry run: nothing was changed") in events.seen
    row = doctor_result(facts, load_kb(), tf="2.9").targets[0]
    assert (row.tf, row.recipe_id) == (dry.plan.tf, dry.plan.recipe_id)
    declined = create_environment(CreateRequest(build=BuildRequest(tf="2.9"), facts=facts), _Recorder())
    assert declined.exit_code == 1
    assert declined.built is None


def test_a_driver_override_does_not_keep_the_probed_drivers_cuda() -> None:
    from tfgpu.facts.document import apply_overrides

    probed = {"driver": {"version": "418.87.01", "cuda": "10.1", "kernel_module": "418.87.01"}}
    facts, _ = apply_overrides(probed, {"driver": "550.54.15"})
    assert facts["driver"]["version"] == "550.54.15"
    assert facts["driver"]["cuda"] == "12.4"  # the overridden driver's own, from the driver table (issue 18)
    assert "kernel_module" not in facts["driver"]
    both, _ = apply_overrides(probed, {"cuda_driver": "12.4", "driver": "550.54.15"})
    assert both["driver"]["cuda"] == "12.4"


def test_a_pip_lock_is_for_the_python_this_machine_would_build_with() -> None:
    from tfgpu.build.lock import lock_target
    from tfgpu.kb.knowledge import load_kb

    facts = {"platform": {"os": "linux", "arch": "x86_64", "glibc": "2.35"},
             "python": {"current": "3.11.4", "interpreters": [{"version": "3.11.4", "path": "/usr/bin/python3.11"}]}}
    assert lock_target(load_kb(), facts, "2.16.1", "linux-64", backend="pip").python == "3.11"
    # no interpreter in the release's range here: uv locks for the newest Python its wheels support
    assert lock_target(load_kb(), {"platform": {"os": "linux"}}, "2.16.1", "linux-64", backend="pip").python == "3.12"


def test_python_means_a_python_version_or_interpreter_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfgpu.core import process as run
    from tfgpu.verify.runner import resolve_python

    seen: list[str] = []
    monkeypatch.setattr(run, "which", lambda name, env=None: seen.append(name) or f"/usr/bin/{name}")
    assert resolve_python(python="3.11") == "/usr/bin/python3.11"
    assert resolve_python(python="python3") == "/usr/bin/python3"
    assert seen == ["python3.11", "python3"]
    helps = {c: next(p for p in _commands()[c].params if "--python" in p.opts) for c in ("plan", "create", "lock", "smoke")}
    assert all("Python" in (p.help or "") for p in helps.values())


@pytest.mark.real_subprocess
def test_create_shows_compiling_on_a_line_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: the smoke test's first import in a new environment compiles TensorFlow's Python files; create says
    how long that took on its own line, before the smoke test's summary (a real smoke script, on a copy of the
    fake TensorFlow that has no .pyc yet; the build itself is stood in for)."""
    import shutil
    import sys

    from tests import REPO
    from tfgpu.build import execute
    from tfgpu.build.pipeline import CreateRequest, create_environment
    from tfgpu.verify import runner

    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    fake = tmp_path / "site"
    shutil.copytree(REPO / "tests" / "fake_tf", fake, ignore=shutil.ignore_patterns("__pycache__"))
    prefix = tmp_path / "env"

    def built(plan: Any, **_kw: Any) -> Any:
        prefix.mkdir()
        return execute.CreateResult(prefix, tmp_path / "create.log", False, 1.0)

    real_smoke = runner.run_smoke

    def smoke(_python: str, **kw: Any) -> runner.SmokeReport:
        env = {"PYTHONPATH": str(fake), "PYTHONDONTWRITEBYTECODE": "", "FAKE_TF_VERSION": "2.21.0"}
        return real_smoke(sys.executable, timeout=60, env=env, facts=kw.get("facts"))

    monkeypatch.setattr(execute, "run_plan", built)
    monkeypatch.setattr(runner, "run_smoke", smoke)
    events = _Recorder()
    events.confirm = lambda plan, replacing: True  # type: ignore[method-assign]
    events.building = lambda plan: contextlib.nullcontext()  # type: ignore[method-assign]
    from tests.conftest import RTX3080_FACTS

    outcome = create_environment(CreateRequest(build=BuildRequest(tf="2.21", cpu=True, prefix=str(prefix)), facts=RTX3080_FACTS), events)
    said = [text for kind, text in events.seen if kind == "say"]
    compiling = next(i for i, text in enumerate(said) if text.startswith("compiling TensorFlow's Python files: "))
    assert said[compiling + 1].startswith("smoke test: ")
    assert outcome.smoke is not None
    assert outcome.smoke["import"]["compiled_files"] >= 1
