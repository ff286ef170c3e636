"""One recommendation function (issue 29, item 2): the doctor, `tfgpu plan` and `tfgpu create` print the same
alternative to a blocked target, and every recommendation they print is one `tfgpu create` accepts on that
machine (its judge and plan path: the release is not blocked with that backend, and a recipe and runner are
chosen for it), over the casebook's machines and generated ones."""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import TESTS
from tfgpu.api.doctor import doctor_result
from tfgpu.backends.names import CONTAINER_BACKENDS
from tfgpu.backends.runners import Preferences
from tfgpu.build.pipeline import alternative
from tfgpu.cli.commands.plan import _alternative as plan_alternative
from tfgpu.core.errors import UsageError
from tfgpu.facts.machine import Machine
from tfgpu.judge.findings import BLOCKED
from tfgpu.judge.recommend import Recommendation
from tfgpu.judge.target import judge_target
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version
from tfgpu.plan.choose import choose_for_target, tools_from_facts
from tfgpu.plan.cpu import plan_cpu_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
SEED = TESTS / "data" / "facts" / "mx150-laptop-ubuntu1804.json"


def _command(rec: Recommendation) -> tuple[str, str, bool]:
    """(--tf, --backend, --cpu) of a printed `tfgpu create` command."""
    argv = shlex.split(rec.command)
    assert argv[:3] == ["tfgpu", "create", "--tf"], rec.command
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else "auto"
    return argv[3], backend, "--cpu" in argv


def machine_tools(facts: dict[str, Any], tf: str) -> dict[str, str | None]:
    """What `tfgpu create` finds on the machine: the facts' conda and Pythons (each interpreter the facts name,
    the current one too; a machine whose Pythons the facts leave out may have any of the release's)."""
    m = Machine.from_facts(facts, KB)
    pythons = m.pythons if m.pythons is not None else KB.pythons_for(KB.resolve_tf(tf, "linux"), "linux")
    return {**tools_from_facts(facts), **{f"python{p}": f"/usr/bin/python{p}" for p in pythons}}


def assert_create_accepts(facts: dict[str, Any], rec: Recommendation) -> None:
    """`tfgpu create` with the printed command is not refused here (judge and plan, no install)."""
    tf, backend, cpu = _command(rec)
    m = Machine.from_facts(facts, KB)
    tools = machine_tools(facts, tf)
    if cpu:  # the CPU route: a release whose CPU wheels this CPU runs, planned with the machine's Pythons
        assert m.avx is not False or KB.cpu_requirement("avx", KB.resolve_tf(tf)) is None, rec.command
        refused = ""
        try:
            plan_cpu_environment(KB, facts, BuildRequest(tf=tf), tools=tools, home="/h")
        except UsageError as exc:  # no interpreter of the release's range here: the refusal names the range
            refused = str(exc)
        assert not refused or "supports Python" in refused, rec.command
        return
    verdict = judge_target(facts, KB, tf, backend=backend)
    assert verdict.verdict != BLOCKED, (rec.command, [b.summary for b in verdict.blockers])
    if backend not in CONTAINER_BACKENDS:
        choice = choose_for_target(KB, facts, verdict, tools, Preferences(backend=backend))
        assert choice is not None, rec.command
        assert choice.recipe.id == rec.recipe_id, (rec.command, choice.recipe.id, rec.recipe_id)


def assert_one_recommendation(facts: dict[str, Any], tf: str | None, backend: str = "auto") -> None:
    """The doctor's recommendation for ``tf`` (the whole machine when None) is what `plan` and `create` print
    instead of a blocked target, and `create` accepts it."""
    try:
        rec = doctor_result(facts, KB, tf=tf, backend=backend).recommendation
    except UsageError:  # a release this machine's OS does not have: refused alike everywhere
        return
    if tf is not None:
        verdict = judge_target(facts, KB, tf, backend=backend)
        if verdict.verdict == BLOCKED:
            instead = alternative(facts, verdict, backend)
            assert (rec and rec.command) == (instead and instead.command)
            assert plan_alternative(facts, tf, backend) == (rec.command if rec else "")
    if rec is not None:
        assert_create_accepts(facts, rec)


def _cases() -> list[Any]:
    from tests.casebook import load_cases

    return load_cases()  # every real machine, held-out ones too: a property of the code, not a score


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.id)
def test_one_recommendation_on_the_casebook(case: Any) -> None:
    facts = copy.deepcopy(case.facts)
    assert_one_recommendation(facts, case.tf, case.backend)
    assert_one_recommendation(facts, None)


def test_mx150_on_driver_441_keeps_the_asked_release_on_another_backend() -> None:
    # issue 29: `doctor --tf 2.2.0` said "READY via conda", `create --tf 2.2.0 --backend pip` refused with
    # "instead: tfgpu create --tf 2.9.1 --backend rattler", another release
    facts = json.loads(SEED.read_text())
    facts["driver"] = {"version": "441.22", "cuda": None, "source": "nvidia-smi"}
    facts["cuda_toolkits"], facts["cudnn"] = [], []
    verdict = judge_target(facts, KB, "2.2.0", backend="pip")
    assert verdict.verdict == BLOCKED
    instead = alternative(facts, verdict, "pip")
    assert instead is not None
    assert (instead.tf, instead.instead_of) == ("2.2.0", "2.2.0")
    assert instead.backend == "conda"
    assert instead.command == doctor_result(facts, KB, tf="2.2.0", backend="pip").recommendation.command  # type: ignore[union-attr]
    assert_one_recommendation(facts, "2.2.0", "pip")


DRIVERS = ("384.81", "410.48", "418.39", "441.22", "450.80.02", "460.32.03", "470.82.01", "525.60.13",
           "535.54.03", "550.54.15", "560.28.03", "580.65.06")
GPUS = (("GeForce GT 730", "3.5"), ("Quadro K4200", "3.0"), ("Tesla K80", "3.7"), ("GeForce MX150", "6.1"),
        ("GeForce GTX 1080", "6.1"), ("Tesla V100-SXM2-16GB", "7.0"), ("NVIDIA GeForce RTX 3080", "8.6"),
        ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GeForce RTX 5090", "12.0"))


@st.composite
def machines(draw: st.DrawFn) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads(SEED.read_text())
    os_name = draw(st.sampled_from(("linux", "linux", "wsl2", "windows")))
    facts["platform"] = {"os": "linux" if os_name == "wsl2" else os_name, "wsl": 2 if os_name == "wsl2" else None,
                         "arch": "x86_64", "glibc": "2.35" if os_name != "windows" else None}
    facts["cpu"] = {"avx": draw(st.sampled_from((True, True, False)))}
    pythons = draw(st.lists(st.sampled_from(("2.7", "3.6", "3.8", "3.10", "3.12")), max_size=2, unique=True))
    facts["python"] = {"current": f"{pythons[0]}.1" if pythons else "3.11.1",
                       "interpreters": [{"version": f"{p}.1", "path": f"/usr/bin/python{p}"} for p in pythons]}
    driver = draw(st.one_of(st.none(), st.sampled_from(DRIVERS)))
    facts["driver"] = {"version": driver, "cuda": None, "source": "nvidia-smi", "error": None if driver else "absent"}
    kinds = draw(st.lists(st.sampled_from(GPUS), min_size=0, max_size=2))
    facts["gpus"] = [{"index": i, "name": n, "compute_capability": cc, "memory_mib": 8192, "uuid": None}
                     for i, (n, cc) in enumerate(kinds)]
    toolkit = draw(st.sampled_from((None, "10.0", "11.2")))
    facts["cuda_toolkits"] = [{"version": toolkit, "path": f"/usr/local/cuda-{toolkit}"}] if toolkit else []
    conda = draw(st.sampled_from((None, "conda")))
    facts["conda"] = {"kind": conda, "path": f"/opt/{conda}/bin/{conda}", "version": "24.1.0"} if conda else None
    return facts


TARGETS = sorted({str(r.version) for r in KB.gpu_releases("linux")}, key=version)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines(), st.sampled_from(TARGETS), st.sampled_from(("auto", "pip", "conda", "rattler")))
def test_one_recommendation_on_generated_machines(facts: dict[str, Any], tf: str, backend: str) -> None:
    assert_one_recommendation(facts, tf, backend)
    assert_one_recommendation(facts, None)
