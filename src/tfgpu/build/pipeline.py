"""The create pipeline as a library: gather facts → resolve the target → judge → choose and plan → confirm →
execute → verify → register. ``create_environment(request, events) -> Outcome`` is what `tfgpu create` calls;
the command only parses the arguments, calls it and renders (``events`` is how it shows progress and asks
for confirmation), so another interface (fleet, CI) can run the same pipeline.

``build_plan`` and ``build_from_lock_plan`` read the config file and detect the installed tools (effects), then
plan (pure): `tfgpu plan` and `tfgpu create` share them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from tfgpu.core.record import field, record, replace
from tfgpu.facts.document import as_facts
from tfgpu.kb.versions import Target
from tfgpu.plan.request import BuildRequest

if TYPE_CHECKING:
    from tfgpu.judge.findings import TargetVerdict
    from tfgpu.judge.recommend import Recommendation


@record
class CreateRequest:
    """What `tfgpu create` was asked for: what to build (``build``), the facts already gathered
    (tfgpu.facts.gather.gather_facts), and what only creating decides."""

    build: BuildRequest
    facts: Mapping[str, Any]
    dry_run: bool = False
    force: bool = False
    no_smoke: bool = False
    allow_cpu: bool = False
    timeout: float | None = None
    facts_from_file: bool = False  # someone else's machine: judged with, never used to pick programs to run


@record(frozen=False)
class Outcome:
    """What happened: the plan, the target's verdict, the build, the smoke test and the exit code."""

    exit_code: int
    plan: Any = None  # tfgpu.plan.model.Plan
    verdict: TargetVerdict | None = None
    built: Any = None  # tfgpu.build.execute.CreateResult
    smoke: dict[str, Any] | None = None  # the smoke report's JSON document
    notes: list[str] = field(default_factory=list)


class CreateEvents(Protocol):
    """How a caller sees the pipeline (the command renders with rich and typer; tests record)."""

    def note(self, text: str) -> None: ...  # a note, warning or caveat (stderr)

    def say(self, text: str) -> None: ...  # a result line (stdout)

    def planned(self, plan: Any) -> None: ...

    def confirm(self, plan: Any, replacing: str | None) -> bool: ...

    def building(self, plan: Any) -> Any: ...  # a context manager around the build

    def step(self, i: int, n: int, step: Any) -> None: ...

    def line(self, line: str) -> None: ...

    def built(self, plan: Any) -> None: ...


def without_programs(facts: dict[str, Any]) -> dict[str, Any]:
    """Facts with the paths of programs removed (interpreters, conda): what is kept is their versions
    and kinds, which this machine's PATH then resolves (`pythonX.Y`, `conda`)."""
    out = dict(facts)
    py = facts.get("python")
    if isinstance(py, dict):
        out["python"] = {**py, "interpreters": [
            {k: v for k, v in it.items() if k != "path"} for it in py.get("interpreters") or [] if isinstance(it, dict)]}
        out["python"].pop("executable", None)
    conda = facts.get("conda")
    if isinstance(conda, dict):
        out["conda"] = {k: v for k, v in conda.items() if k not in ("path", "root", "exe")}
    return out


def refuse_foreign_prefix(prefix: str | None, force: bool) -> None:
    """`create --force --prefix DIR`: a directory tfgpu did not make is refused before anything else."""
    if prefix is not None and force:
        from tfgpu.build.registry import check_prefix

        what_force_replaces(str(check_prefix(prefix)), force)


def create_environment(req: CreateRequest, events: CreateEvents) -> Outcome:
    """Judge the target, plan, confirm, build, smoke-test and register an environment (a venv or conda
    environment, or a GPU container image pulled and recorded: the container runtimes are runners too)."""
    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.core.errors import UsageError

    facts = dict(req.facts)
    # facts from a file describe someone else's machine: judge with them, but never run a program
    # (an interpreter, a conda) whose path came from the file
    build_facts = without_programs(facts) if req.facts_from_file else facts
    if req.build.backend in CONTAINER_BACKENDS:
        return _create_container(req, events, facts)
    tf = req.build.tf
    lock_plan: Any = None
    if req.build.from_lock is not None:  # validate the lockfile first: a bad one is exit 2 before anything else
        lock_plan = build_from_lock_plan(req.build, build_facts)
        tf = lock_plan.tf
    assert tf is not None
    # 1. judge
    from tfgpu.judge.target import judge_target
    from tfgpu.kb.knowledge import load_kb

    verdict: TargetVerdict | None = None
    if req.build.cpu:
        return _create_cpu(req, events, build_facts, tf)
    if lock_plan is not None and lock_plan.cpu:  # a lock of the CPU route: no GPU verdict to judge
        events.planned(lock_plan)
        return _build_and_verify(req, events, facts, lock_plan, None)
    try:
        # a lock fixes the backend: judge the conda (rattler) or pip route it takes
        verdict = judge_target(as_facts(facts), load_kb(), tf,
                               backend=lock_plan.backend if lock_plan is not None else req.build.backend)
    except UsageError:
        if lock_plan is None:
            raise
        events.note(f"tfgpu: note: TensorFlow {tf} from the lock is not in the knowledge base; no pre-check")
    if verdict is not None and verdict.verdict == "blocked":
        _go_ahead_blocked(req, events, facts, verdict, tf,
                          lock_plan.backend if lock_plan is not None else req.build.backend)
    if verdict is not None and Target.parse(tf).is_latest:
        tf = verdict.tf
    # 2. choose and plan
    plan = lock_plan if lock_plan is not None else build_plan(replace(req.build, tf=tf), build_facts)
    events.planned(plan)
    for c in verdict.caveats if verdict is not None else ():
        events.note(f"tfgpu: caveat: {c.summary}")
    return _build_and_verify(req, events, facts, plan, verdict)


def _go_ahead_blocked(req: CreateRequest, events: CreateEvents, facts: Mapping[str, Any], verdict: TargetVerdict,
                      tf: str, backend: str) -> None:
    """A blocked target: refused, unless --force or --allow-cpu (then said, and built anyway)."""
    reasons = "; ".join(b.summary for b in verdict.blockers)
    if not (req.force or req.allow_cpu):
        raise blocked_error(facts, verdict, tf, backend)
    why = "--force" if req.force else "--allow-cpu: the smoke test will accept a CPU-only result"
    events.note(f"tfgpu: warning: TensorFlow will not use a GPU here ({reasons}); building anyway ({why})")
    if req.allow_cpu:
        events.note(f"tfgpu: note: `tfgpu create --tf {verdict.tf} --cpu` builds a CPU-only environment "
                    "without the CUDA libraries this one installs")


def _create_cpu(req: CreateRequest, events: CreateEvents, facts: dict[str, Any], tf: str) -> Outcome:
    """--cpu: no GPU verdict to judge; plan a CPU-only venv, build it and smoke-test CPU ops."""
    plan = build_plan(replace(req.build, tf=tf), facts)
    events.planned(plan)
    return _build_and_verify(req, events, facts, plan, None)


def _create_container(req: CreateRequest, events: CreateEvents, facts: dict[str, Any]) -> Outcome:
    """The container route: plan (the image and the runtime that runs it), confirm, pull, smoke-test inside the
    image with the GPU, record it; the runner is the runtime (tfgpu.backends.runners.ContainerRunner)."""
    from tfgpu.build.container import create_container
    from tfgpu.core.errors import NotReady
    from tfgpu.plan.envspec import check_name

    check_container_target(req.build, "create")
    plan = build_container_plan(req.build, facts)
    name = check_name(req.build.name or f"tf{plan.tf}-{plan.backend}")
    events.planned(plan)
    outcome = Outcome(0, plan)
    if req.dry_run:
        events.say("dry run: nothing was changed")
        return outcome
    if "blocked" in plan.backend_reason and not req.allow_cpu:
        msg = f"the container route is blocked on this machine: {'; '.join(plan.notes[:2])}"
        raise NotReady(msg, hint="fix the blockers above, or pass --allow-cpu to pull and test it anyway")
    if not events.confirm(plan, None):
        outcome.exit_code = 1
        return outcome
    done = create_container(plan, name=name, facts=facts, timeout=req.timeout, no_smoke=req.no_smoke,
                            allow_cpu=req.allow_cpu, echo=events.note)
    events.say(f"recorded {name}: {plan.recipe_id} ({plan.backend}); log: {done['log']}")
    if done["smoke"] is None:
        events.say("smoke test skipped (--no-smoke)")
        return outcome
    _say_smoke(events, done["smoke"])
    outcome.smoke = done["smoke"]
    outcome.exit_code = 0 if done["passed"] else 1
    return outcome


def _say_smoke(events: CreateEvents, doc: Mapping[str, Any]) -> None:
    events.say(f"smoke test: {doc.get('summary')}")
    for f in doc.get("findings") or []:
        if f.get("severity") in ("fatal", "error", "warning"):
            events.say(f"  - {f.get('meaning')}" + (f" (fix: {f.get('fix')})" if f.get("fix") else ""))


def _build_and_verify(req: CreateRequest, events: CreateEvents, facts: dict[str, Any], plan: Any,
                      verdict: TargetVerdict | None) -> Outcome:
    from tfgpu.core.errors import TfgpuError

    outcome = Outcome(0, plan, verdict)
    if req.dry_run:
        events.say("dry run: nothing was changed")
        return outcome
    refuse_existing(plan.prefix, req.force)  # every refusal before the prompt: --yes never needed to reach one
    replacing = what_force_replaces(plan.prefix, req.force)
    if replacing:
        events.note(f"tfgpu: --force replaces {plan.prefix} ({replacing}); it is kept until the new one works")
    if not events.confirm(plan, replacing):
        outcome.exit_code = 1
        return outcome
    # 3. execute
    from tfgpu.build.execute import run_plan

    try:
        with events.building(plan):
            result = run_plan(plan, force=req.force, timeout=req.timeout, on_step=events.step, on_line=events.line,
                              keep_old=not req.no_smoke)
            events.built(plan)
    except TfgpuError as exc:
        tail = getattr(exc, "log_tail", None)
        if tail:
            events.note("tfgpu: last lines of the log:")
            for line in tail:
                events.note(f"  | {line}")
        raise
    outcome.built = result
    for note in result.notes:
        events.note(f"tfgpu: note: {note}")
    replaced = f"; replaced {result.replaced_what}" if result.replaced_what else ""
    events.say(f"created {result.prefix} in {result.seconds:.0f} s{replaced} (log: {result.log_path})")
    from tfgpu.build.userenv import how_to_use, installed_cuda

    libs = installed_cuda(result.prefix)
    if libs:  # what was installed, not what the release was built with
        events.say("installed: " + ", ".join(f"{k.upper() if k == 'cuda' else 'cuDNN'} {libs[k]} ({libs[k + '_from']})"
                                             for k in ("cuda", "cudnn") if k in libs))

    for line in how_to_use({"name": plan.name, "prefix": str(result.prefix), "backend": plan.backend}, plan.os):
        events.say(line)
    # 4. verify, 5. register the smoke result; a replaced environment waits aside until the new one passed
    if req.no_smoke:
        events.say("smoke test skipped (--no-smoke)")
        return outcome
    passed = False
    try:
        passed = _smoke(req, events, facts, plan, result, outcome)
    finally:
        from tfgpu.build.execute import finish_replace

        done = finish_replace(result, keep_new=passed, log=None)
        if done and not passed:
            events.note(f"tfgpu: the new environment did not pass its smoke test; {done}")
    outcome.exit_code = 0 if passed else 1
    return outcome


def _smoke(req: CreateRequest, events: CreateEvents, facts: dict[str, Any], plan: Any, result: Any,
           outcome: Outcome) -> bool:
    """Run the smoke test in the new environment and record its result in the registry; whether it passed."""
    from tfgpu.build import registry
    from tfgpu.build.execute import activation_env
    from tfgpu.verify.runner import run_smoke

    allow_cpu = req.allow_cpu or bool(getattr(plan, "cpu", False))
    report = run_smoke(plan.env_python, timeout=req.timeout or 600, env=activation_env(plan), facts=facts)
    passed = bool(report.passed(allow_cpu))
    doc = report.to_json(allow_cpu=allow_cpu)
    outcome.smoke = doc
    registry.update_smoke(str(result.prefix), {"passed": passed, "allow_cpu": allow_cpu, "mode": doc.get("mode"),
                                               "summary": doc.get("summary")})
    compiling = report.compile_line()
    if compiling:  # a new environment's first import: its own line, so the time is not taken for the test's
        events.say(compiling)
    _say_smoke(events, doc)
    if not passed and doc.get("mode") == "cpu" and not allow_cpu:
        events.note("tfgpu: the environment works but TensorFlow used no GPU here; pass --allow-cpu to accept that")
    return passed


def build_plan(req: BuildRequest, facts: dict[str, Any], *, for_another_machine: bool = False,
               facts_from_file: bool = False) -> Any:
    """Read the config file and detect the installed tools (effects), then plan (pure); ``req.cpu``: the CPU route.
    ``facts_from_file``: the facts are someone else's report: a conda they name is planned with, never run."""

    from tfgpu.backends.detect import detect_conda_envs_dir, detect_tools
    from tfgpu.backends.runners import CONDA_TOOLS
    from tfgpu.build.registry import home
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.plan.planner import plan_environment, resolve_target

    kb = load_kb()
    req = _checked(_with_config(req))
    tools = detect_tools(facts)
    # the programs this machine has: a conda path that only a facts file names is never run here
    local = detect_tools(without_programs(facts)) if facts_from_file else tools
    if for_another_machine and req.backend == "conda" and not any(tools.get(t) for t in CONDA_TOOLS):
        tools["conda"] = "conda"  # a file for another machine's conda (plan --format) needs none here
    tf = str(req.tf)
    if req.cpu:
        from tfgpu.plan.cpu import plan_cpu_environment

        if Target.parse(tf).is_latest:
            tf = kb.series("linux")[0]  # the CPU builds follow the releases, not an OS's GPU builds
        return plan_cpu_environment(kb, as_facts(facts), replace(req, tf=tf), tools=tools, home=str(home()))
    tf, notes = resolve_target(kb, as_facts(facts), tf, backend=req.backend)
    envs_dir = None
    if req.backend in ("auto", "conda") and req.prefix is None:
        tool = next((t for t in CONDA_TOOLS if tools.get(t)), None)
        if tool and local.get(tool) == tools[tool]:
            envs_dir = detect_conda_envs_dir(tool, str(tools[tool]))
    plan = plan_environment(kb, as_facts(facts), replace(req, tf=tf), tools=tools, home=str(home()),
                            conda_envs_dir=envs_dir, engine_python=sys.executable)
    return replace(plan, notes=tuple(notes) + plan.notes) if notes else plan


def _with_config(req: BuildRequest) -> BuildRequest:
    """The config file's channels (when --channel gives none) and preferred backend, with where they came from;
    the pip index from TFGPU_PIP_INDEX_URL when --index-url gives none."""
    import os

    from tfgpu.backends.config import load_config

    config = load_config()
    if not req.channels and config.channels:
        req = replace(req, channels=tuple(config.channels), channels_source=config.source)
    return replace(req, prefer=config.prefer, prefer_source=config.source,
                   index_url=req.index_url or os.environ.get("TFGPU_PIP_INDEX_URL") or None)


def _checked(req: BuildRequest) -> BuildRequest:
    """Values that reach a plan's argv and scripts checked (no control characters), --name and --prefix
    exclusive, --prefix made absolute and refused where tfgpu may not build."""
    import os

    from tfgpu.build.registry import check_prefix
    from tfgpu.core.errors import UsageError
    from tfgpu.core.safety import check_text

    for value, what in [*((c, "the channel") for c in req.channels), *((f, "--find-links") for f in req.find_links),
                        (req.index_url or "", "--index-url"),
                        (os.environ.get("TFGPU_PIP_INDEX_URL", ""), "TFGPU_PIP_INDEX_URL")]:
        check_text(value, what)
    if req.name is not None and req.prefix is not None:
        msg = "--name and --prefix are exclusive"
        raise UsageError(msg, hint="pass one of them")
    return replace(req, prefix=str(check_prefix(req.prefix))) if req.prefix is not None else req


def build_container_plan(req: BuildRequest, facts: dict[str, Any], *, portable: bool = False) -> Any:
    """The container plan (tfgpu.plan.planner.plan_container) with this installation's smoke script and the
    image cache directory (effects: where they are). ``portable``: a file for another host (`plan --format`),
    which cannot mount this installation's smoke script: the image checks its GPU with its own TensorFlow."""
    from tfgpu.build.registry import home
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.plan.planner import plan_container
    from tfgpu.verify.runner import SCRIPT

    return plan_container(load_kb(), as_facts(facts), str(req.tf), backend=req.backend, image_ref=req.image,
                          smoke_script=None if portable else str(SCRIPT),
                          cache_dir="." if portable else str(home() / "images"), name=req.name)


def build_from_lock_plan(req: BuildRequest, facts: dict[str, Any]) -> Any:
    """Read and validate the lockfile and detect tools (effects), then plan exactly its packages (pure)."""
    import os

    from tfgpu.backends.detect import detect_tools
    from tfgpu.backends.lockfiles import read_lock
    from tfgpu.build.registry import check_prefix, home
    from tfgpu.core.errors import UsageError
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.plan.fromlock import plan_from_lock

    assert req.from_lock is not None
    if req.name is not None and req.prefix is not None:
        msg = "--name and --prefix are exclusive"
        raise UsageError(msg, hint="pass one of them")
    lock = read_lock(req.from_lock)
    if req.prefix is not None:
        req = replace(req, prefix=str(check_prefix(req.prefix)))
    if req.platform is None and lock.kind == "conda":
        from tfgpu.backends.rattler.virtual import current_platform

        req = replace(req, platform=current_platform())
    req = replace(req, index_url=req.index_url or os.environ.get("TFGPU_PIP_INDEX_URL") or None)
    return plan_from_lock(load_kb(), as_facts(facts), lock, req, tools=detect_tools(facts), home=str(home()),
                          engine_python=sys.executable)


def check_container_target(req: BuildRequest, command: str) -> None:
    """A container backend runs a release's GPU image: --tf, and no --from-lock."""
    from tfgpu.core.errors import UsageError

    if req.tf is None or req.from_lock is not None:
        msg = "a container backend needs --tf (and no --from-lock)"
        raise UsageError(msg, hint=f"e.g. tfgpu {command} --tf 2.15 --backend docker")


def check_target(req: BuildRequest) -> None:
    """The target options make sense together: --tf or --from-lock (one), a lock fixing backend, Python and
    channels, --image only with a container backend, and --tf a release, a series or `latest`."""
    from packaging.version import InvalidVersion

    from tfgpu.backends.names import CONTAINER_BACKENDS
    from tfgpu.core.errors import UsageError

    if (req.tf is None) == (req.from_lock is None):
        msg = "pass --tf VERSION or --from-lock FILE" if req.tf is None else "--tf and --from-lock are exclusive"
        raise UsageError(msg, hint="--tf plans a new environment; --from-lock rebuilds a locked one")
    if req.from_lock is not None:
        given = [o for o, bad in (("--backend", req.backend != "auto"), ("--python", req.python is not None),
                                  ("--channel", bool(req.channels))) if bad]
        if given:
            msg = f"{', '.join(given)} cannot be used with --from-lock"
            raise UsageError(msg, hint="the lockfile fixes the packages, their channels and Python")
    if req.image is not None and req.backend not in CONTAINER_BACKENDS:
        msg = "--image needs --backend docker|podman|apptainer|container"
        raise UsageError(msg)
    if req.tf is not None:
        try:
            Target.parse(req.tf)
        except InvalidVersion:  # the knowledge base says it, with the releases it knows as examples
            from tfgpu.kb.knowledge import load_kb

            load_kb().resolve_tf(req.tf)
            raise


def refuse_existing(prefix: str, force: bool) -> None:
    """A non-empty directory at ``prefix`` without --force: refused before any prompt (create refuses it
    again under its lock, for a directory that appears in between)."""
    from pathlib import Path

    from tfgpu.core.errors import UsageError

    path = Path(prefix)
    try:
        occupied = path.is_dir() and any(path.iterdir())
    except OSError:
        return
    if occupied and not force:
        msg = f"{prefix} already exists"
        raise UsageError(msg, hint="pass --force to replace it (the old one is kept until the new one "
                                   "works), or choose another --name/--prefix")


_TAG = re.compile(r"^\[[^\]]*\] ")  # "[pip: pip-and-cuda] " before a backend's blocker


def blocked_error(facts: Mapping[str, Any], verdict: TargetVerdict, tf: str, backend: str = "auto") -> Exception:
    """A blocked target in a few short lines: what; why (the blockers of the backend auto takes, the other
    backends in one line); what works here instead. Every blocker is in `tfgpu doctor --tf X --json`."""
    from tfgpu.core.errors import NotReady, clip_words
    from tfgpu.judge.findings import chosen_blockers

    shown, others = chosen_blockers(verdict.to_json())  # as the doctor's report shows them
    lines = [f"TensorFlow {verdict.tf or tf} is blocked on this machine:"]
    lines += [f"- {clip_words(_TAG.sub('', str(b.get('summary'))), 160)}" for b in shown[:3]]
    if len(shown) > 3:
        lines.append(f"- and {len(shown) - 3} more: tfgpu doctor --tf {verdict.tf or tf}")
    if others:
        lines.append(others)
    alt = alternative(facts, verdict, backend)
    hint = (f"instead: {alt.command}; " if alt else "") + "--force builds it anyway, --cpu a CPU-only environment"
    return NotReady("\n".join(lines), hint=hint)


def alternative(facts: Mapping[str, Any], verdict: TargetVerdict, backend: str = "auto") -> Recommendation | None:
    """What works here instead of a blocked target: the doctor's recommendation, from the one function that makes
    it (tfgpu.plan.choose.recommendation: the asked release on another backend, else the best release anywhere,
    else the CPU route; for a container backend, that route's best release first)."""
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.plan.choose import recommendation

    return recommendation(load_kb(), as_facts(facts), target=verdict, backend=backend)


def what_force_replaces(prefix: str, force: bool) -> str | None:
    """What `create --force` would replace at ``prefix`` (None: nothing there); refuses, before any
    prompt, a directory tfgpu did not make."""
    from pathlib import Path

    from tfgpu.build import registry
    from tfgpu.build.execute import describe_entry

    path = Path(prefix)
    try:
        occupied = path.is_dir() and any(path.iterdir())
    except OSError:
        return None
    if not (force and occupied):
        return None
    from tfgpu.build.asides import stranded

    with registry.prefix_lock(path):  # another tfgpu building it is "being created", not "not tfgpu's"
        entry = registry.created_by_tfgpu(path)
        # what a killed create left at the prefix is tfgpu's only when its records and marker say so
        if entry is None and not any(s.path == path for s in stranded([path])):
            raise registry.not_created_error(path)
    return describe_entry(entry) if entry is not None else "the environment a killed create left unfinished"
