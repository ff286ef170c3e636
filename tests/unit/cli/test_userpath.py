"""The user's path (issue 18): a CPU route, an alternative for a blocked target, hints that run on this
machine, plan carrying the verdict, short and true messages, every refusal before the prompt."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from tests import REPO
from tfgpu.core.errors import NotReady, UsageError, clip_words
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.cpu import cpu_dist, plan_cpu_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
SCHEMAS = REPO / "src" / "tfgpu" / "core" / "schemas"
Cli = Callable[..., tuple[int, str, str]]


def no_gpu(pythons: tuple[str, ...] = ("3.11",)) -> dict[str, Any]:
    """A machine without an NVIDIA driver or GPU (as this workplace's machine is)."""
    return {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "arch": "x86_64", "glibc": "2.35"},
            "python": {"current": f"{pythons[0]}.4",
                       "interpreters": [{"version": f"{p}.4", "path": f"/usr/bin/python{p}"} for p in pythons]},
            "gpus": [], "driver": {"version": None, "cuda": None}}


def rtx_3080(driver: str = "550.54.15") -> dict[str, Any]:
    facts = no_gpu()
    facts["gpus"] = [{"index": 0, "name": "NVIDIA GeForce RTX 3080", "compute_capability": "8.6", "memory_mib": 10240}]
    facts["driver"] = {"version": driver, "cuda": None}
    return facts


def write(tmp_path: Path, facts: dict[str, Any]) -> str:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return str(path)


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The registry and environments of these tests are their own, never the user's."""
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "tfgpu-home"))


@pytest.fixture
def no_conda_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH without mamba, micromamba or conda (this machine has none either)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


# --------------------------------------------------------------------------- 1. the CPU route


@pytest.mark.parametrize("series", KB.series("linux"))
def test_cpu_plan_never_installs_cuda(series: str) -> None:
    facts = no_gpu(("3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"))
    try:
        plan = plan_cpu_environment(KB, facts, BuildRequest(tf=series), tools={"uv": "/usr/bin/uv"}, home="/h")
    except UsageError as exc:  # a release no listed Python runs (1.x on 2.7/3.5): the range comes first
        assert str(exc).startswith(f"TensorFlow {KB.resolve_tf(series)} supports Python")  # noqa: PT017
        return
    assert plan.cpu
    assert plan.recipe_id == "cpu"
    assert not any("[and-cuda]" in r or r.startswith("nvidia-") for r in plan.pip_requirements)
    dist = "tensorflow-cpu" if Version(plan.tf) >= Version("2.1") else "tensorflow"
    assert plan.pip_requirements[0] == f"{dist}=={plan.tf}"
    assert not plan.env_vars
    assert plan.to_json()["cpu"] is True
    jsonschema.validate(plan.to_json(), schema("plan"))


def test_cpu_dist_follows_pypi() -> None:
    # https://pypi.org/pypi/tensorflow-cpu/json: x86_64 Linux and Windows wheels from 2.1.0; no aarch64 wheel; macOS
    # x86_64 wheels only up to 2.16.2, where tfgpu installs tensorflow (a CPU build on macOS too)
    assert cpu_dist(KB, Version("2.21.0"), "linux") == "tensorflow-cpu"
    assert cpu_dist(KB, Version("2.21.0"), "windows", "AMD64") == "tensorflow-cpu"
    assert cpu_dist(KB, Version("2.0.4"), "linux") == "tensorflow"  # up to 2.0 `tensorflow` is the CPU build
    assert cpu_dist(KB, Version("2.21.0"), "linux", "aarch64") == "tensorflow"
    assert cpu_dist(KB, Version("2.21.0"), "macos", "arm64") == "tensorflow"


def test_plan_and_create_cpu_on_a_machine_without_a_gpu(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, no_gpu())
    code, out, err = cli("plan", "--tf", "2.21", "--cpu", "--facts", facts, "--json")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, schema("plan"))
    assert (doc["cpu"], doc["verdict"], doc["pip_requirements"][0]) == (True, "ready", "tensorflow-cpu==2.21.0")
    code, out, err = cli("create", "--tf", "2.21", "--cpu", "--facts", facts, "--dry-run")
    assert code == 0, err
    assert "tensorflow-cpu==2.21.0" in out
    assert "nvidia" not in out.replace("no nvidia-* wheels", "")
    assert "blocked" not in err


def test_doctor_without_a_gpu_says_so_once_and_recommends_the_cpu_route(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, no_gpu())
    code, out, err = cli("doctor", "--facts", facts)
    assert code == 0, err  # README "Exit codes": doctor without --tf/--require-gpu/--strict exits 0
    assert out.count("no NVIDIA driver (and no NVIDIA GPU found)") == 1  # one line per reason, not per release
    assert "No TensorFlow release can use a GPU here" in out
    assert "2.20.0   blocked" not in out
    assert "tfgpu create --tf 2.21 --cpu" in out
    code, out, _ = cli("doctor", "--facts", facts, "--json")
    doc = json.loads(out)
    jsonschema.validate(doc, schema("doctor"))
    assert doc["recommendation"]["backend"] == "cpu"
    assert doc["recommendation"]["command"] == "tfgpu create --tf 2.21 --cpu"
    assert doc["no_gpu"] == ["no NVIDIA driver (and no NVIDIA GPU found)"]
    assert cli("doctor", "--facts", facts, "--require-gpu")[0] == 1


def test_a_gpu_machine_gets_no_cpu_route(tmp_path: Path, cli: Cli) -> None:
    _code, out, _ = cli("doctor", "--facts", write(tmp_path, rtx_3080()), "--json")
    doc = json.loads(out)
    assert doc["recommendation"]["backend"] != "cpu"
    assert doc["no_gpu"] == []


# --------------------------------------------------------------------------- 2. the alternative for a blocked target


def test_a_blocked_target_gets_the_best_release_that_works_here(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, rtx_3080())
    code, out, err = cli("doctor", "--tf", "2.2", "--facts", facts, "--json")
    assert code == 1, err  # the CI gate still fails for the target
    rec = json.loads(out)["recommendation"]
    jsonschema.validate(json.loads(out), schema("doctor"))
    assert rec["instead_of"] == "2.2.3"
    assert Version(rec["tf"]) > Version("2.2.3")
    assert rec["backend"] != "cpu"
    assert rec["why_not"]
    assert not rec["why_not"].startswith("[")
    code, out, _ = cli("doctor", "--tf", "2.2", "--facts", facts)
    assert code == 1
    assert "Not 2.2.3: " in out
    assert f"Recommendation instead of 2.2.3: TensorFlow {rec['tf']}" in out
    assert rec["command"] in out


def test_a_blocked_target_without_a_gpu_gets_the_cpu_route(tmp_path: Path, cli: Cli) -> None:
    code, out, _ = cli("doctor", "--tf", "2.20", "--facts", write(tmp_path, no_gpu()), "--json")
    assert code == 1
    rec = json.loads(out)["recommendation"]
    assert (rec["backend"], rec["command"], rec["instead_of"]) == ("cpu", "tfgpu create --tf 2.21 --cpu", "2.20.0")


# --------------------------------------------------------------------------- 3. hints that run here


def test_no_hint_names_the_conda_backend_on_a_machine_without_conda(tmp_path: Path, cli: Cli) -> None:
    for facts in (rtx_3080(), rtx_3080("470.82.01"), no_gpu()):
        _code, out, _ = cli("doctor", "--facts", write(tmp_path, facts), "--json")
        doc = json.loads(out)
        assert "--backend conda" not in json.dumps(doc["targets"]) + json.dumps(doc["recommendation"])
    with_conda = dict(rtx_3080(), conda={"kind": "mamba", "path": "/opt/mamba/bin/mamba", "version": "1.5.8"})
    doc = json.loads(cli("doctor", "--facts", write(tmp_path, with_conda), "--json")[1])
    assert "--backend rattler" not in json.dumps(doc["recommendation"])


@pytest.mark.usefixtures("no_conda_on_path")
def test_environment_yml_and_sh_need_no_local_conda(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, rtx_3080())
    code, out, err = cli("plan", "--tf", "2.17", "--backend", "conda", "--facts", facts, "--format", "environment.yml")
    assert code == 0, err
    assert "dependencies:" in out
    assert "needs mamba" not in err
    code, out, err = cli("plan", "--tf", "2.17", "--backend", "conda", "--facts", facts, "--format", "sh")
    assert code == 0, err
    assert out.startswith("#!/bin/sh")
    # a pip plan as environment.yml: conda-forge's Python and pip, the same PyPI requirements
    code, out, err = cli("plan", "--tf", "2.21", "--backend", "pip", "--facts", facts, "--format", "environment.yml")
    assert code == 0, err
    assert '  - pip:\n    - "tensorflow[and-cuda]==2.21.0"' in out


# --------------------------------------------------------------------------- 4. plan carries the verdict


def test_plan_shows_the_verdict_and_exits_1_for_a_blocked_target(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, no_gpu())
    code, out, err = cli("plan", "--tf", "2.21", "--facts", facts)
    assert code == 1
    assert "verdict here: BLOCKED" in out
    assert "✗ no NVIDIA driver" in out
    assert "instead: tfgpu create --tf 2.21 --cpu" in err
    code, out, _ = cli("plan", "--tf", "2.21", "--facts", facts, "--json")
    doc = json.loads(out)
    jsonschema.validate(doc, schema("plan"))
    assert doc["verdict"] == "blocked"
    assert [b["check"] for b in doc["blockers"]] == ["driver.installed"]
    assert cli("plan", "--tf", "2.21", "--facts", facts, "--force")[0] == 0
    assert cli("plan", "--tf", "2.21", "--facts", facts, "--cpu")[0] == 0


def test_plan_json_carries_the_chosen_recipes_caveats(tmp_path: Path, cli: Cli) -> None:
    small = rtx_3080()
    small["gpus"][0]["memory_mib"] = 2048  # a small GPU: a target-wide caveat (memory growth)
    code, out, err = cli("plan", "--tf", "2.21", "--facts", write(tmp_path, small), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] in ("ready", "caveats")
    assert doc["blockers"] == []
    assert any(c["check"] == "gpu.memory" for c in doc["caveats"])


# --------------------------------------------------------------------------- 6. messages


def test_python_range_refusal_names_the_range_first(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, dict(rtx_3080(), python=no_gpu(("3.11", "3.12"))["python"]))
    code, _, err = cli("plan", "--tf", "2.2.0", "--python", "3.11", "--backend", "pip", "--facts", facts, "--force")
    assert code == 2
    assert err.startswith("tfgpu: error: TensorFlow 2.2.0 supports Python 3.5–3.8; 3.11 is outside it")
    assert "no such interpreter" not in err


def test_blocked_create_is_a_few_short_lines_with_the_chosen_backends_blockers() -> None:
    from tfgpu.build.pipeline import blocked_error
    from tfgpu.judge.target import judge_target

    facts = rtx_3080()
    verdict = judge_target(facts, KB, "2.2.3")
    err = blocked_error(facts, verdict, "2.2.3")
    assert isinstance(err, NotReady)
    lines = err.one_line().splitlines()
    assert lines[0].startswith("TensorFlow 2.2.3 is blocked on this machine")
    assert 2 <= len(lines) <= 6
    assert lines[-1].startswith("  fix: instead: tfgpu create --tf ")
    assert "--backend conda" not in err.one_line()  # no conda tool on this machine


@given(st.text(alphabet=st.sampled_from("ab c\n"), max_size=300), st.integers(min_value=10, max_value=200))
def test_clip_never_cuts_mid_word(text: str, limit: int) -> None:
    out = clip_words(text, limit)
    assert len(out) <= limit
    flat = " ".join(text.split())
    if out == flat:
        return
    assert out.endswith("…")
    kept = out[:-1]
    if " " in flat[:limit]:  # a space to cut at: the kept text ends where a word ended
        assert flat.startswith(kept)
        assert flat[len(kept)] == " " or kept.endswith((",", ";", ":", "("))


# --------------------------------------------------------------------------- 8. prompt order


def test_existing_prefix_is_refused_before_any_prompt(tmp_path: Path, cli: Cli) -> None:
    prefix = tmp_path / "taken"
    prefix.mkdir()
    (prefix / "file").write_text("x")
    code, _, err = cli("create", "--tf", "2.21", "--cpu", "--prefix", str(prefix), "--facts", write(tmp_path, no_gpu()))
    assert code == 2
    assert "already exists" in err
    assert "--yes" not in err  # the refusal comes first; --yes is never needed to reach it
    assert (prefix / "file").exists()


def test_blocked_target_is_refused_before_any_prompt(tmp_path: Path, cli: Cli) -> None:
    code, _, err = cli("create", "--tf", "2.21", "--facts", write(tmp_path, no_gpu()))
    assert code == 1
    assert "blocked" in err
    assert "--yes" not in err


@pytest.mark.real_subprocess
def test_this_machine_has_no_conda_tool_and_the_doctor_recommends_what_runs() -> None:
    if any(shutil.which(t) for t in ("conda", "mamba", "micromamba")):
        pytest.skip("a conda tool is installed here")
    from tfgpu.api.doctor import doctor_result
    from tfgpu.facts.gather import gather_facts

    facts, _ = gather_facts()
    rec = doctor_result(facts, KB).recommendation
    assert rec is not None
    assert "--backend conda" not in rec.command


# --------------------------------------------------------------------------- 5. environments you can use


def _venv(tmp_path: Path, name: str) -> Path:
    import subprocess
    import sys

    prefix = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    with (prefix / "bin" / "activate").open("a") as fh:  # what create appends for a recipe's variables
        fh.write("\n# added by tfgpu\nexport TFGPU_TEST_VAR=from-activate\n")
    return prefix


def _conda_like(tmp_path: Path, name: str) -> Path:
    """A conda environment as the embedded engine leaves it: conda-meta, bin/python, an activate.d script."""
    import sys

    prefix = tmp_path / name
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to(sys.executable)
    act = prefix / "etc" / "conda" / "activate.d"
    act.mkdir(parents=True)
    (act / "tfgpu_env_vars.sh").write_text('export _TFGPU_OLD_XLA_FLAGS="${XLA_FLAGS:-}"\n'
                                           "export XLA_FLAGS=--xla_gpu_cuda_data_dir=$CONDA_PREFIX/lib/\n")
    return prefix


@pytest.mark.real_subprocess
def test_run_uses_the_venvs_activation_and_returns_the_commands_exit_code(tmp_path: Path, cli: Cli) -> None:
    from tfgpu.build import registry

    prefix = _venv(tmp_path, "v")
    registry.record(name="v", prefix=str(prefix), backend="pip", tool="venv", tf="2.21.0", python="3.11", recipe="cpu",
                env_python=str(prefix / "bin" / "python"))
    out = tmp_path / "out.json"
    script = ("import json, os, sys; json.dump({'prefix': sys.prefix, 'var': os.environ.get('TFGPU_TEST_VAR'), "
              f"'growth': os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH')}}, open({str(out)!r}, 'w')); sys.exit(3)")
    code, _, err = cli("run", "v", "--", "python", "-c", script)
    assert code == 3, err  # the command's exit code
    seen = json.loads(out.read_text())
    assert seen == {"prefix": str(prefix), "var": "from-activate", "growth": "true"}
    code, _, err = cli("run", "--prefix", str(prefix), "--", "python", "-c", "import sys; sys.exit(0)")
    assert code == 0, err
    code, _, err = cli("run", "v", "--", "no-such-program-tfgpu")
    assert code == 1
    assert "not found" in err


@pytest.mark.real_subprocess
def test_run_sources_conda_activate_d_without_conda(tmp_path: Path, cli: Cli) -> None:
    from tfgpu.build import registry
    from tfgpu.build.userenv import activated_environ, find_entry

    prefix = _conda_like(tmp_path, "c")
    registry.record(name="c", prefix=str(prefix), backend="rattler", tool="rattler", tf="2.17.0", python="3.11",
                recipe="conda-forge-tensorflow-cuda", env_python=str(prefix / "bin" / "python"))
    env = activated_environ(find_entry("c"), {"PATH": "/usr/bin:/bin", "TF_FORCE_GPU_ALLOW_GROWTH": "false"})
    assert env["CONDA_PREFIX"] == str(prefix)
    assert env["XLA_FLAGS"] == f"--xla_gpu_cuda_data_dir={prefix}/lib/"
    assert env["PATH"].split(":")[0] == str(prefix / "bin")
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"  # what the caller set wins
    out = tmp_path / "o.txt"
    code, _, err = cli("run", "c", "--", "python", "-c", f"import os; open({str(out)!r}, 'w').write(os.environ['XLA_FLAGS'])")
    assert code == 0, err
    assert out.read_text() == f"--xla_gpu_cuda_data_dir={prefix}/lib/"


def test_run_refuses_what_tfgpu_did_not_make_and_a_missing_directory(tmp_path: Path, cli: Cli) -> None:
    from tfgpu.build import registry

    code, _, err = cli("run", "nope", "--", "python")
    assert code == 2
    assert "tfgpu envs" in err
    gone = tmp_path / "gone"
    registry.record(name="gone", prefix=str(gone), backend="pip", tool="venv", tf="2.21.0", python="3.11", recipe="cpu",
                env_python=str(gone / "bin" / "python"))
    code, _, err = cli("run", "gone", "--", "python")
    assert code == 2
    assert "is gone" in err
    assert "tfgpu remove gone" in err
    assert cli("run", "gone")[0] == 2  # no command


def test_smoke_without_a_target_picks_the_newest_environment_or_says_how(tmp_path: Path, cli: Cli) -> None:
    from tfgpu.build import registry
    from tfgpu.build.userenv import most_recent

    code, _, err = cli("smoke")
    assert code == 2
    assert "--name NAME, --prefix DIR or --python EXE" in err
    for n in ("old", "new"):
        (tmp_path / n).mkdir()
        registry.record(name=n, prefix=str(tmp_path / n), backend="pip", tool="venv", tf="2.21.0", python="3.11",
                    recipe="cpu", env_python=str(tmp_path / n / "bin" / "python"))
    entry = most_recent()
    assert entry is not None
    assert entry["name"] == "new"


def test_create_ends_with_how_to_use_the_environment() -> None:
    from tfgpu.build.userenv import how_to_use

    venv = how_to_use({"name": "tf2.21.0-cpu", "prefix": "/h/envs/tf2.21.0-cpu", "backend": "pip"})
    assert venv[0].startswith("use it: tfgpu run tf2.21.0-cpu -- python -c ")
    assert venv[1].strip() == "tfgpu shell tf2.21.0-cpu"
    assert venv[2].strip() == ". /h/envs/tf2.21.0-cpu/bin/activate"
    conda = how_to_use({"name": "tf2.17.0", "prefix": "/h/envs/tf2.17.0", "backend": "rattler"})
    assert conda[2].strip().startswith("conda activate /h/envs/tf2.17.0")


# --------------------------------------------------------------------------- 7. say only what is true


def test_envs_marks_a_missing_directory_and_remove_only_forgets_it(tmp_path: Path, cli: Cli) -> None:
    from tfgpu.build import registry

    gone = tmp_path / "gone"
    registry.record(name="gone", prefix=str(gone), backend="pip", tool="venv", tf="2.21.0", python="3.11", recipe="cpu",
                env_python=str(gone / "bin" / "python"))
    code, out, err = cli("envs")
    assert code == 0
    assert "missing" in out
    assert "`tfgpu remove gone` forgets it" in err
    assert json.loads(cli("envs", "--json")[1])["envs"][0]["missing"] is True
    code, out, err = cli("remove", "gone")  # no --yes needed: nothing on disk is deleted
    assert code == 0, err
    assert "forgot the registry entry of gone; nothing was on disk" in out
    assert registry.find("gone") is None


def test_overrides_are_marked_in_the_ci_log_and_the_driver_cuda_is_derived(tmp_path: Path, cli: Cli) -> None:
    _code, out, err = cli("doctor", "--facts", write(tmp_path, no_gpu()), "--driver", "535.104.05", "--ci")
    doc = json.loads(out)
    assert doc["facts"]["driver"]["cuda"] == "12.2"  # NVIDIA's table: 535 runs CUDA 12.2
    assert err.splitlines()[0].startswith("overrides active (not probed): driver=535.104.05")
    assert "NVIDIA driver 535.104.05 (CUDA 12.2) [override]" in err
    human = cli("doctor", "--facts", write(tmp_path, no_gpu()), "--driver", "535.104.05")[1]
    assert "overrides active" in human


def test_no_machine_paths_or_internal_references_in_the_knowledge_base_or_sources() -> None:
    import re

    root = REPO
    bad = re.compile(r"file:/(?!/)|seed:|/work/|\bseeds?\b(?![0-9]*=)|seed-00")  # file:// URLs are fine; seed=0 is an op attribute in real logs
    for path in [*(root / "compat").glob("*.toml"), *(root / "src" / "tfgpu").rglob("*.py")]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if path.suffix == ".py" and line.lstrip().startswith("#"):
                continue  # comments are for developers; what users see is strings and data
            assert not bad.search(line), f"{path.relative_to(root)}:{n}: {line.strip()[:120]}"


def test_compat_shows_each_oss_own_activation_lines(cli: Cli) -> None:
    def activations(os_name: str) -> list[str]:
        doc = json.loads(cli("compat", "--tf", "2.10", "--os", os_name, "--json")[1])
        return [a for row in doc["rows"] for rec in row["install"] for a in rec["activation"]]

    assert not any("LD_LIBRARY_PATH" in a for a in activations("windows"))  # native Windows: PATH, set by conda
    assert any("LD_LIBRARY_PATH" in a for a in activations("linux"))


def test_installed_cuda_is_read_from_what_was_installed(tmp_path: Path) -> None:
    from tfgpu.build.userenv import installed_cuda

    site = tmp_path / "v" / "lib" / "python3.12" / "site-packages"
    for dist in ("nvidia_cuda_runtime_cu12-12.9.79", "nvidia_cudnn_cu12-9.3.0.75", "tensorflow-2.20.0"):
        (site / f"{dist}.dist-info").mkdir(parents=True)  # pip's directory names (PEP 427 normalised)
    assert installed_cuda(tmp_path / "v") == {"cuda": "12.9.79", "cuda_from": "nvidia-cuda-runtime-cu12, pip",
                                              "cudnn": "9.3.0.75", "cudnn_from": "nvidia-cudnn-cu12, pip"}
    meta = tmp_path / "c" / "conda-meta"
    meta.mkdir(parents=True)
    (meta / "cudatoolkit-11.8.0-h6a678d5_0.json").write_text(json.dumps({"name": "cudatoolkit", "version": "11.8.0"}))
    (meta / "cudnn-8.9.2.26-cuda11_0.json").write_text(json.dumps({"name": "cudnn", "version": "8.9.2.26"}))
    assert installed_cuda(tmp_path / "c") == {"cuda": "11.8.0", "cuda_from": "cudatoolkit, conda",
                                              "cudnn": "8.9.2.26", "cudnn_from": "cudnn, conda"}
    assert installed_cuda(tmp_path / "none") == {}


# --------------------------------------------------------------------------- e2e: the CPU route, for real


@pytest.mark.e2e
@pytest.mark.real_subprocess
def test_e2e_cpu_route_create_run_and_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli) -> None:
    """`create --tf 2.21 --cpu` installs tensorflow-cpu from PyPI; `tfgpu run` imports it; `tfgpu smoke` with no
    target tests that environment (the newest) and passes on the CPU."""
    import os

    if not os.environ.get("TFGPU_E2E"):
        pytest.skip("set TFGPU_E2E=1 (nox -s e2e)")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    code, out, err = cli("create", "--tf", "2.21", "--cpu", "--name", "cpu221", "--yes", "--timeout", "1800")
    assert code == 0, (out, err)
    assert "tfgpu run cpu221 -- python" in out  # create ends with how to use it
    from tfgpu.build import registry

    entry = registry.find("cpu221")
    assert entry is not None
    site = next(iter(Path(entry["prefix"]).glob("lib/python*/site-packages")))
    assert not list(site.glob("nvidia*")), "the CPU route installed nvidia-* wheels"
    assert list(site.glob("tensorflow_cpu-2.21.*.dist-info"))
    probe = tmp_path / "probe.txt"
    monkeypatch.setenv("PROBE", str(probe))
    code, _, err = cli("run", "cpu221", "--", "python", "-c",
                       "import os, tensorflow as tf; open(os.environ['PROBE'], 'w').write(tf.__version__ + ' ' + "
                       "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'])")
    assert code == 0, err
    assert probe.read_text().startswith("2.21.")
    assert probe.read_text().endswith(" true")
    code, out, err = cli("smoke", "--json")
    assert code == 0, (out, err)
    doc = json.loads(out)
    assert doc["mode"] == "cpu"
    assert doc["tensorflow"]["version"].startswith("2.21")
    code, _, err = cli("smoke")
    assert "testing cpu221" in err


def test_run_in_a_container_environment_goes_through_the_container_seam() -> None:
    from tfgpu.build.userenv import command_for

    entry = {"name": "tf215-docker", "prefix": "tensorflow/tensorflow:2.15.0-gpu", "backend": "docker", "tool": "docker"}
    argv, _ = command_for(entry, ["python", "train.py"], base={}, cwd="/w")
    assert argv[:3] == ("docker", "run", "--rm")
    assert argv[-3:] == ("tensorflow/tensorflow:2.15.0-gpu", "python", "train.py")
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in argv


def test_python_range_refusal_of_a_conda_recipe_names_the_range_first(tmp_path: Path, cli: Cli) -> None:
    facts = write(tmp_path, dict(rtx_3080("450.80.02"), python=no_gpu(("3.11",))["python"]))
    code, _, err = cli("plan", "--tf", "2.2.0", "--python", "3.11", "--backend", "rattler", "--facts", facts, "--force")
    assert code == 2
    assert err.startswith("tfgpu: error: TensorFlow 2.2.0 supports Python 3.6–3.8 (recipe ")
    assert "3.11 is outside it" in err


@pytest.mark.real_subprocess
def test_run_puts_the_nvidia_wheels_libraries_on_ld_library_path_where_the_release_needs_it(tmp_path: Path) -> None:
    import sys

    from tfgpu.build import registry
    from tfgpu.build.userenv import activated_environ, find_entry
    from tfgpu.plan.activation import _venv_nvidia_snippet

    prefix = _venv(tmp_path, "tf217")
    xy = f"{sys.version_info.major}.{sys.version_info.minor}"
    lib = prefix / "lib" / f"python{xy}" / "site-packages" / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    with (prefix / "bin" / "activate").open("a") as fh:  # what create appends for TF 2.16/2.17 (tensorflow#63362)
        fh.write(_venv_nvidia_snippet(xy, KB))
    registry.record(name="tf217", prefix=str(prefix), backend="pip", tool="venv", tf="2.17.1", python=xy,
                recipe="pip-and-cuda", env_python=str(prefix / "bin" / "python"))
    env = activated_environ(find_entry("tf217"), {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/x"})
    assert env["LD_LIBRARY_PATH"].split(":") == [str(lib), "/opt/x"]
    assert env["VIRTUAL_ENV"] == str(prefix)


@pytest.mark.real_subprocess
def test_shell_opens_the_users_shell_inside_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            cli: Cli) -> None:
    from tfgpu.build import registry

    prefix = _venv(tmp_path, "sh-env")
    registry.record(name="sh-env", prefix=str(prefix), backend="pip", tool="venv", tf="2.21.0", python="3.11",
                recipe="cpu", env_python=str(prefix / "bin" / "python"))
    seen = tmp_path / "env.txt"
    fake_shell = tmp_path / "fake-shell"  # stands in for an interactive $SHELL: records what it was given
    fake_shell.write_text(f'#!/bin/sh\nenv > {seen}\nexit 7\n')
    fake_shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(fake_shell))
    code, _, err = cli("shell", "sh-env")
    assert code == 7  # the shell's own exit status
    assert "a shell in" in err
    lines = seen.read_text().splitlines()
    assert f"VIRTUAL_ENV={prefix}" in lines
    assert "TFGPU_ENV=sh-env" in lines
    assert "TFGPU_TEST_VAR=from-activate" in lines


def test_run_on_native_windows_sets_what_activation_sets() -> None:
    """`tfgpu run` on native Windows: a venv's Scripts first (activate.bat), conda's PATH order (conda's
    activate.py `_get_path_dirs`), PYTHONHOME dropped, the memory-growth default kept overridable."""
    from tfgpu.build.userenv import windows_environ

    venv = windows_environ({"prefix": "C:\\envs\\tf2.10", "backend": "pip"},
                           {"Path": "C:\\Windows", "PYTHONHOME": "C:\\Python", "TF_FORCE_GPU_ALLOW_GROWTH": "false"})
    assert venv["Path"] == "C:\\envs\\tf2.10\\Scripts;C:\\Windows"
    assert venv["VIRTUAL_ENV"] == "C:\\envs\\tf2.10"
    assert "PYTHONHOME" not in venv
    assert venv["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"
    conda = windows_environ({"prefix": "C:\\envs\\tf2.10\\", "backend": "conda", "name": "tf2.10"}, {})
    assert conda["PATH"].split(";") == ["C:\\envs\\tf2.10", "C:\\envs\\tf2.10\\Library\\mingw-w64\\bin",
                                        "C:\\envs\\tf2.10\\Library\\usr\\bin", "C:\\envs\\tf2.10\\Library\\bin",
                                        "C:\\envs\\tf2.10\\Scripts", "C:\\envs\\tf2.10\\bin"]
    assert conda["CONDA_PREFIX"] == "C:\\envs\\tf2.10"
    assert conda["CONDA_DEFAULT_ENV"] == "tf2.10"
    assert conda["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
