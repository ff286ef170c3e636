"""The runners: every way tfgpu builds or runs an environment, behind one small interface, in one ordered table.

A runner says whether it runs a recipe (``runs``), which tool would run it here (``available``), whether it
can build the recipe here (``can_build``: None, or the error an explicit ``--backend`` raises) and the steps
that build it (``steps``: a venv and pip; a conda create; for the container runtimes, pull the image and run
the smoke script in it with the GPU).
:data:`RUNNERS` maps each ``--backend`` value to the runners it may use, in order, as cibuildwheel's
platform modules and nox's ``uv|virtualenv`` chain do; :func:`first_able` is the one loop that walks a row.

pip, conda and rattler build a recipe of compat/recipes.toml; docker, podman and apptainer run a GPU image
of compat/containers.toml (a recipe whose backend is "container"). tfgpu.plan.choose picks recipes and images
with this table; tfgpu.judge.containers picks the runtime of the doctor's container row with it too. A leaf
module (no tfgpu module it imports imports it back), so both can.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from packaging.version import Version

from tfgpu.backends.steps import Step
from tfgpu.core.errors import UsageError
from tfgpu.core.record import field, record
from tfgpu.core.tfnames import ALLOW_GROWTH
from tfgpu.kb.versions import version

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase
    from tfgpu.kb.records import Recipe

#: conda executables in the order tfgpu prefers them (issue 7: mamba, micromamba or conda).
CONDA_TOOLS = ("mamba", "micromamba", "conda")
CONDA_FAMILY = frozenset({"conda", "conda+pip"})
PIP_FAMILY = frozenset({"pip"})
#: Recipe.backend of a GPU image (tfgpu.plan.choose.image_recipe): what the container runtimes run.
CONTAINER = "container"


@record
class Preferences:
    """What the user asked for: --backend, --python, --image, and the config file's ``[backends] prefer``."""

    backend: str = "auto"
    python: str | None = None  # X.Y
    prefer: str | None = None
    prefer_source: str = "config"
    image: str | None = None  # --image REF (container backends)


@record
class Choice:
    """The recipe and the runner: ``backend`` is what Plan.backend says (pip | conda | rattler, or the
    container runtime: docker | podman | apptainer)."""

    recipe: Recipe
    backend: str
    tool: str  # uv | venv | mamba | micromamba | conda | rattler | docker | podman | apptainer | singularity
    reason: str
    python: str = ""  # the interpreter X.Y a pip runner uses ("" for conda runners: decided by plan)
    python_from_conda: bool = False  # a pip recipe run inside a conda-made interpreter
    blocked: str = ""  # a container route chosen to be shown although no runtime here can run it: why not


class RuntimeState(Protocol):
    """A container runtime as the facts show it, judged (tfgpu.judge.containers.Runtime)."""

    @property
    def name(self) -> str: ...
    @property
    def gpu_ready(self) -> bool: ...
    @property
    def blockers(self) -> tuple[tuple[str, str, str], ...]:  # (check, summary, fix)
        ...


@record
class Context:
    """What a runner needs to decide whether it can build a recipe."""

    v: Version
    os: str
    tools: Mapping[str, str | None]
    interpreters: Mapping[str, str]  # X.Y -> path
    wheel_pythons: tuple[str, ...]
    python: str | None
    newest_python: str = ""  # the newest Python any known release has wheels for (an example in hints)
    runtimes: Mapping[str, RuntimeState] = field(default_factory=dict)  # installed container runtime -> its state


@record
class PlannedBuild:
    """What the planner decided for a recipe (tfgpu.plan.planner.plan_environment), for its runner's ``steps``: where
    the environment goes, what goes in, and with which interpreter and tool."""

    recipe: Recipe
    tf: Version
    os: str
    prefix: str
    conda_name: str | None  # `-n NAME` in conda's envs directory (None: `-p PREFIX`)
    tool: str  # Choice.tool
    tools: Mapping[str, str | None]
    channels: tuple[str, ...]
    conda_specs: tuple[str, ...]
    pip_requirements: tuple[str, ...]
    python: str  # X.Y
    base_python: str  # the interpreter that makes a venv ("" for conda runners)
    env_python: str  # the new environment's interpreter
    facts: Mapping[str, Any]
    kb: KnowledgeBase
    engine_python: str = ""
    driver_cuda: str | None = None  # for the embedded engine: tfgpu.plan.planner.engine_driver_cuda
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    offline: bool = False


class Runner(Protocol):
    """One way of building an environment (the small interface every backend has)."""

    name: str  # Plan.backend

    def runs(self, recipe: Recipe) -> bool: ...

    def available(self, ctx: Context) -> str | None:
        """The tool that would run it, or None when it is not installed."""

    def can_build(self, recipe: Recipe, ctx: Context) -> UsageError | None:
        """None when it can build ``recipe`` here, else why not (the error an explicit --backend raises)."""


class RecipeRunner(Runner, Protocol):
    """A runner of compat/recipes.toml's recipes: its steps make the environment and install the packages."""

    def steps(self, b: PlannedBuild) -> list[Step]: ...


def _pip_into_conda_env(b: PlannedBuild) -> list[Step]:
    """A conda+pip recipe (or a pip recipe in a conda-made interpreter): pip installs into the new environment."""
    from tfgpu.backends import pip as pip_backend

    if not b.pip_requirements:
        return []
    return [pip_backend.pip_install_step(
        b.env_python, b.pip_requirements, uv=None, index_url=b.index_url, find_links=b.find_links,
        offline=b.offline, why=f"install TensorFlow {b.tf} from PyPI into the environment, as recipe {b.recipe.id} does")]


def conda_tool(tools: Mapping[str, str | None]) -> str | None:
    return next((t for t in CONDA_TOOLS if tools.get(t)), None)


def python_range_text(pythons: Sequence[str]) -> str:
    """3.5, 3.6, 3.7, 3.8 -> "3.5–3.8" (one version: itself)."""
    if not pythons:
        return ""
    ordered = sorted(pythons, key=Version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}–{ordered[-1]}"


# --------------------------------------------------------------------------- recipes: pip, conda, rattler


class PipRunner:
    """A venv (uv, else python -m venv) and pip: needs an interpreter in the release's wheel range."""

    name = "pip"

    def runs(self, recipe: Recipe) -> bool:
        return recipe.backend in PIP_FAMILY

    def available(self, ctx: Context) -> str | None:
        return "uv" if ctx.tools.get("uv") else "venv"

    def python_for(self, ctx: Context) -> str | None:
        if ctx.python is not None:
            ok = ctx.python in ctx.interpreters and (ctx.python in ctx.wheel_pythons or not ctx.wheel_pythons)
            return ctx.python if ok else None
        cands = [p for p in ctx.wheel_pythons if p in ctx.interpreters]
        return max(cands, key=version) if cands else None  # memoized: the doctor asks once per target

    def can_build(self, recipe: Recipe, ctx: Context) -> UsageError | None:
        if self.python_for(ctx) is not None:
            return None
        other = f"--backend {'conda' if conda_tool(ctx.tools) else 'rattler'}"
        if ctx.python is not None and ctx.wheel_pythons and ctx.python not in ctx.wheel_pythons:
            # the supported range first: the interpreter may well exist, it is the release that cannot use it
            msg = f"TensorFlow {ctx.v} supports Python {python_range_text(ctx.wheel_pythons)}; {ctx.python} is outside it"
            return UsageError(msg, hint=f"use --python {ctx.wheel_pythons[-1]}, or leave --python out")
        want = ctx.python or python_range_text(ctx.wheel_pythons) or "?"
        example = ctx.python or (ctx.wheel_pythons[-1] if ctx.wheel_pythons else ctx.newest_python)
        msg = f"TensorFlow {ctx.v} supports Python {want}; no such interpreter was found"
        install = f"install one (`uv python install {example}`)" if example else "install one"
        return UsageError(msg, hint=f"{install}, or use {other}")

    def steps(self, b: PlannedBuild) -> list[Step]:
        """A venv (uv venv, else python -m venv), then pip (or uv pip) installs the recipe's requirements."""
        from tfgpu.backends import pip as pip_backend

        uv = b.tools.get("uv") if b.tool == "uv" else None
        reqs = b.pip_requirements
        what = ("CUDA and cuDNN come as nvidia-* wheels" if b.recipe.provides_cuda else "uses the system CUDA/cuDNN")
        return [pip_backend.venv_step(b.base_python, b.prefix, uv=uv, python=b.python),
                pip_backend.pip_install_step(
                    b.env_python, reqs, uv=uv, index_url=b.index_url, find_links=b.find_links, offline=b.offline,
                    why=f"install {reqs[0]} ({b.recipe.id}: {what})"
                        + (f" with {len(reqs) - 1} pin(s)" if len(reqs) > 1 else ""))]


class CondaRunner:
    """mamba, micromamba or conda (the first installed)."""

    name = "conda"

    def runs(self, recipe: Recipe) -> bool:
        return recipe.backend in CONDA_FAMILY

    def available(self, ctx: Context) -> str | None:
        return conda_tool(ctx.tools)

    def can_build(self, recipe: Recipe, ctx: Context) -> UsageError | None:
        if self.available(ctx) is not None:
            return None
        msg = "--backend conda needs mamba, micromamba or conda, and none is installed"
        return UsageError(msg, hint="install one (e.g. micromamba), or use --backend rattler "
                                    "(tfgpu's embedded conda engine)")

    def steps(self, b: PlannedBuild) -> list[Step]:
        """`TOOL create --override-channels -c ...` (a fresh prefix, or -n NAME), then pip for a conda+pip recipe."""
        from tfgpu.backends import conda as conda_backend

        return [*conda_backend.conda_create_steps(
            b.tool, b.tools.get(b.tool) or b.tool, prefix=b.prefix, name=b.conda_name, channels=b.channels,
            specs=b.conda_specs, facts=b.facts, kb=b.kb, tf=b.tf, os_name=b.os), *_pip_into_conda_env(b)]


class RattlerRunner:
    """tfgpu's embedded conda engine (py-rattler)."""

    name = "rattler"

    def runs(self, recipe: Recipe) -> bool:
        return recipe.backend in CONDA_FAMILY

    def available(self, ctx: Context) -> str | None:
        return "rattler" if ctx.tools.get("rattler", "embedded") is not None else None

    def can_build(self, recipe: Recipe, ctx: Context) -> UsageError | None:
        if self.available(ctx) is not None:
            return None
        msg = "no mamba, micromamba or conda, and tfgpu's embedded conda engine needs Python >= 3.10"
        return UsageError(msg, hint="install micromamba (or mamba/conda), or run tfgpu with Python >= 3.10")

    def steps(self, b: PlannedBuild) -> list[Step]:
        """`python -m tfgpu.backends.rattler create` (py-rattler solves and installs), then pip for a conda+pip recipe."""
        import sys

        from tfgpu.backends import conda as conda_backend

        return [*conda_backend.rattler_create_steps(
            b.engine_python or sys.executable, b.prefix, b.channels, b.conda_specs, facts=b.facts, kb=b.kb, tf=b.tf,
            os_name=b.os, driver_cuda=b.driver_cuda), *_pip_into_conda_env(b)]


# --------------------------------------------------------------------------- images: docker, podman, apptainer

SMOKE_IN_CONTAINER = "/tfgpu-smoke.py"
#: The GPU check a script for another host runs in the image: needs only TensorFlow (TF 1.x and 2.x: tf.test's
#: is_gpu_available exists in both, list_physical_devices from 2.1), exit 1 when it sees no GPU.
GPU_CHECK = ('import sys, tensorflow as tf; c = getattr(tf, "config", None); '
             'g = c.list_physical_devices("GPU") if hasattr(c, "list_physical_devices") else tf.test.is_gpu_available(); '
             'print("TensorFlow", tf.__version__, "GPUs:", g); sys.exit(0 if g else 1)')
WORKDIR = "/workspace"


def sif_path(image: str, cache_dir: str) -> str:
    """Where `apptainer pull` writes the image (a name derived from the reference, no path separators)."""
    return f"{cache_dir.rstrip('/')}/{re.sub(r'[^A-Za-z0-9_.-]+', '_', image)}.sif"


def gpu_run_argv(runtime: str, image: str, command: list[str], *, mounts: tuple[tuple[str, str, bool], ...] = (),
                 workdir: str | None = None, env: tuple[tuple[str, str], ...] = (), tty: bool = False,
                 gpu_args: tuple[str, ...] = ()) -> tuple[str, ...]:
    """One GPU container run, the way each runtime's documentation gives it: ``docker run --gpus all``,
    ``podman run --device nvidia.com/gpu=all`` (CDI), ``apptainer exec --nv``. ``mounts`` are
    (host, container, read_only); ``image`` for apptainer is the .sif file or a docker:// URI. ``gpu_args``
    replaces the usual flag (Docker through CDI: ``--device nvidia.com/gpu=all``, tfgpu.judge.containers.Runtime)."""
    if runtime == "apptainer":  # --nv binds the host driver's libraries; no TTY flag (it inherits the terminal)
        argv = ["apptainer", "exec", "--nv"]
        mount_flag, workdir_flag = "--bind", "--pwd"
    else:
        argv = [runtime, "run", "--rm", *(["-it"] if tty else []),
                *(gpu_args or (["--gpus", "all"] if runtime == "docker" else ["--device", "nvidia.com/gpu=all",
                                                                               "--security-opt=label=disable"]))]
        mount_flag, workdir_flag = "--volume", "--workdir"
    for host, inside, ro in mounts:
        _check_mount(runtime, mount_flag, host, inside)
        argv += [mount_flag, f"{host}:{inside}" + (":ro" if ro else "")]
    if workdir:
        argv += [workdir_flag, workdir]
    for k, v in env:
        argv += ["--env", f"{k}={v}"]
    return (*argv, image, *command)


def _check_mount(runtime: str, flag: str, host: str, inside: str) -> None:
    """A mount the runtime would read as something else is refused (exit 2): ``--volume SRC:DST[:ro]`` splits
    at every ':', and apptainer's ``--bind`` takes a comma-separated list, so a directory named ``a,b`` would
    become two binds (apptainer's documentation: "--bind src[:dest[:opts]][,src[:dest[:opts]]]")."""
    separators = ",:" if runtime == "apptainer" else ":"
    for path in (host, inside):
        found = next((c for c in separators if c in path), None)
        if found is not None:
            msg = f"{runtime} cannot mount {path!r}: {flag} reads its {found!r} as a separator"
            raise UsageError(msg, hint=f"run tfgpu from a directory whose path has no {' or '.join(map(repr, separators))}")


class ContainerRunner:
    """A container runtime: runs a GPU image (a recipe whose backend is "container") when it is installed and
    set up for GPUs here (tfgpu.judge.containers.judge_runtime: daemon, toolkit, CDI spec)."""

    def __init__(self, name: str, programs: tuple[str, ...]) -> None:
        self.name = name
        self.programs = programs  # the installed programs it answers to, in order (Singularity: Apptainer's predecessor)

    def runs(self, recipe: Recipe) -> bool:
        return recipe.backend == CONTAINER

    def available(self, ctx: Context) -> str | None:
        """The installed program (one set up for GPUs first), or None."""
        found = [p for p in self.programs if p in ctx.runtimes]
        ready = [p for p in found if ctx.runtimes[p].gpu_ready]
        return next(iter(ready or found), None)

    def can_build(self, recipe: Recipe, ctx: Context) -> UsageError | None:
        if not self.runs(recipe):
            msg = f"{self.name} runs GPU images, not recipe {recipe.id}"
            return UsageError(msg, hint="use --backend auto, pip, conda or rattler")
        return self.can_run(ctx)

    def can_run(self, ctx: Context) -> UsageError | None:
        """None when a GPU container runs here (any image: the image is judged on its own), else why not."""
        tool = self.available(ctx)
        if tool is None:
            msg = f"{' or '.join(self.programs)} is not installed"
            return UsageError(msg, hint=f"tfgpu doctor --backend {self.name} says how to install it")
        state = ctx.runtimes[tool]
        if state.gpu_ready:
            return None
        msg = f"{tool} cannot run a GPU container here: " + "; ".join(b[1] for b in state.blockers)
        return UsageError(msg, hint=state.blockers[0][2] if state.blockers and state.blockers[0][2] else "")

    def target(self, image: str, cache_dir: str) -> str:
        """What the run step names: the image itself, or apptainer's .sif file in ``cache_dir``."""
        return sif_path(image, cache_dir) if self.name == "apptainer" else image

    def smoke_argv(self, target: str, smoke_script: str, *args: str, gpu_args: tuple[str, ...] = ()) -> tuple[str, ...]:
        """tfgpu's smoke script (mounted read-only) run by the image's python3 with the GPU: the smoke step of
        :meth:`steps`, and `tfgpu smoke --name NAME` for an image tfgpu recorded (``gpu_args``: how the runtime
        judged here reaches the GPUs, e.g. Docker's CDI devices; () = the usual flag)."""
        return gpu_run_argv(self.name, target, ["python3", SMOKE_IN_CONTAINER, *args],
                            mounts=((smoke_script, SMOKE_IN_CONTAINER, True),),
                            env=(ALLOW_GROWTH,), gpu_args=gpu_args)

    def steps(self, image: str, *, smoke_script: str | None, cache_dir: str,
              gpu_args: tuple[str, ...] = ()) -> tuple[Step, ...]:
        """Pull ``image`` (progress shown), then run tfgpu's smoke script inside it with the GPU. Without a
        ``smoke_script`` (a script for another host, `plan --format sh`, where tfgpu's own file is not): the
        image's TensorFlow lists its GPUs and the step fails when there is none; nothing mounted or fetched."""
        target = self.target(image, cache_dir)
        pull = (("apptainer", "pull", target, f"docker://{image}") if self.name == "apptainer"
                else (self.name, "pull", image))
        if smoke_script is None:
            check = gpu_run_argv(self.name, target, ["python3", "-c", GPU_CHECK],
                                 env=(("TF_FORCE_GPU_ALLOW_GROWTH", "true"),), gpu_args=gpu_args)
            return (Step(pull, f"pull {image} (progress shown)"),
                    Step(check, "check that TensorFlow in the image sees the GPU (tfgpu create runs the full smoke "
                                "test: matmul, Conv2D and an XLA op)"))
        return (Step(pull, f"pull {image} (progress shown)"),
                Step(self.smoke_argv(target, smoke_script, gpu_args=gpu_args),
                     "run tfgpu's GPU smoke test inside the image, with the GPU"))


# --------------------------------------------------------------------------- the table

PIP, CONDA, RATTLER = PipRunner(), CondaRunner(), RattlerRunner()
DOCKER, PODMAN = ContainerRunner("docker", ("docker",)), ContainerRunner("podman", ("podman",))
APPTAINER = ContainerRunner("apptainer", ("apptainer", "singularity"))
#: --backend -> the runners it may use, in order (auto: a conda tool before the embedded engine; container:
#: whichever runtime is set up, Docker first). The keys are tfgpu.cli.options' BACKENDS and CONTAINER_BACKENDS.
RUNNERS: dict[str, tuple[Runner, ...]] = {
    "auto": (PIP, CONDA, RATTLER),
    "pip": (PIP,),
    "conda": (CONDA,),
    "rattler": (RATTLER,),
    "container": (DOCKER, PODMAN, APPTAINER),
    "docker": (DOCKER,),
    "podman": (PODMAN,),
    "apptainer": (APPTAINER,),
}
CONTAINER_RUNNERS: dict[str, ContainerRunner] = {r.name: r for r in (DOCKER, PODMAN, APPTAINER)}
#: Choice.backend -> the runner whose ``steps`` build a recipe (tfgpu.plan.planner.plan_environment asks it).
RECIPE_RUNNERS: dict[str, RecipeRunner] = {r.name: r for r in (PIP, CONDA, RATTLER)}


def first_able(runners: Sequence[Runner], recipe: Recipe, ctx: Context) -> tuple[Runner | None, list[tuple[Runner, UsageError]]]:
    """The first runner of a row that runs ``recipe`` and can build it here (None: none can), and why each
    one before it could not."""
    refused: list[tuple[Runner, UsageError]] = []
    for runner in runners:
        if not runner.runs(recipe):
            continue
        error = runner.can_build(recipe, ctx)
        if error is None:
            return runner, refused
        refused.append((runner, error))
    return None, refused


def pick_container_runner(backend: str, ctx: Context) -> tuple[ContainerRunner, str | None, str]:
    """The runtime of a container backend's row: the first that can run a GPU container here, else the first
    installed (so that the doctor and the plan can say what blocks it), else the row's first. Whether it can
    does not depend on the image (the image is judged on its own), so the doctor's container row, which is
    judged before an image is picked, and the plan get the same answer. Returns (runner, installed program
    or None, why it cannot run here: "" when it can)."""
    row = [r for r in RUNNERS[backend] if isinstance(r, ContainerRunner)]
    refused: list[tuple[ContainerRunner, UsageError]] = []
    for runner in row:
        error = runner.can_run(ctx)
        if error is None:
            return runner, runner.available(ctx), ""
        refused.append((runner, error))
    chosen, error = next(((r, e) for r, e in refused if r.available(ctx) is not None), refused[0])
    return chosen, chosen.available(ctx), error.message
