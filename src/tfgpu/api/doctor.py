"""The doctor as a library: gather the facts, judge them, choose each target's recipe as `tfgpu plan` would, and
make the versioned document (tfgpu.doctor/1). `tfgpu doctor` (tfgpu.cli.doctor) renders it (doctor_document: the
last run's answer when it is this run's, tfgpu.facts.lastrun); `tfgpu.doctor()` (tfgpu.api.notebook) returns it.

Next to nothing is imported at module level: the console script's fast path imports this module before it forks
its probe child, and the child should start soon."""

from __future__ import annotations

import os

from tfgpu.backends import names

TYPE_CHECKING = False
if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from tfgpu.backends.config import Config
    from tfgpu.judge.diagnose import DoctorResult
    from tfgpu.kb.knowledge import KnowledgeBase


def doctor_result(facts: dict[str, Any], kb: KnowledgeBase, *, tf: str | None = None, backend: str = "auto",
                  tools: dict[str, str | None] | None = None, prefer: str | None = None,
                  prefer_source: str = "config") -> DoctorResult:
    """Everything the doctor says (tfgpu.judge.verdict.diagnose), with each target's recipe and the recommendation
    chosen as `tfgpu plan` chooses them (tfgpu.plan.choose): the doctor and the planner cannot disagree."""
    from tfgpu.backends.runners import Preferences
    from tfgpu.facts.document import as_facts
    from tfgpu.judge.diagnose import diagnose
    from tfgpu.plan.choose import with_choices

    result = diagnose(as_facts(facts), kb, tf=tf, backend=backend)
    return with_choices(result, kb, as_facts(facts), tools, Preferences(backend=backend, prefer=prefer,
                                                                  prefer_source=prefer_source))


#: What the doctor judges: the recipe backends and the container routes (`doctor --backend`, `tfgpu.doctor(backend=)`).
BACKENDS = (*names.BACKENDS, *names.CONTAINER_BACKENDS)


def check_backend(backend: str) -> str:
    """``backend`` when the doctor judges it (a recipe backend or a container route), else a UsageError."""
    from tfgpu.core.errors import UsageError

    if backend not in BACKENDS:
        msg = f"--backend {backend!r} is not one of {', '.join(BACKENDS)}"
        raise UsageError(msg)
    return backend


def doctor_report(
    *, tf: str | None = None, facts_file: str | Path | None = None, backend: str = "auto",
    require_gpu: bool = False, strict: bool = False, overrides: dict[str, str | None] | None = None,
    timeout: float | None = None, fork_probes: bool = False, today: datetime.date | None = None,
    python: str | None = None, prefix: str | None = None, name: str | None = None, import_tf: bool = False,
) -> tuple[dict[str, Any], DoctorResult]:
    """The doctor's document and result for this machine (or ``facts_file``'s): the facts (flags beat TFGPU_*
    variables, which beat detection), the verdicts, the recommendation, ``exit_code`` as the command exits
    (``require_gpu``, ``strict``) and ``knowledge``: which data was used, how old it is, and one note when it is
    older than 90 days or this environment's TensorFlow is newer than it knows (``today``: the clock, for tests).
    ``python``/``prefix``/``name`` name the environment whose TensorFlow is judged (else the active one);
    ``import_tf`` imports it in a child to compare the prediction with what really loads."""
    doc, result = _doctor(tf=tf, facts_file=facts_file, backend=backend, require_gpu=require_gpu, strict=strict,
                          overrides=overrides, timeout=timeout, fork_probes=fork_probes, today=today, python=python,
                          prefix=prefix, name=name, import_tf=import_tf, reuse=False)
    if result is None:  # pragma: no cover - only a reused answer has no result, and reuse is off here
        msg = "doctor_report got no result"
        raise AssertionError(msg)
    return doc, result


def doctor_document(*, prepare: Callable[[], None] | None = None, **options: Any) -> dict[str, Any]:
    """The console script's document: :func:`doctor_report`'s (same keywords), or with ``fork_probes`` the answer
    of the doctor's last run on this machine when it answers this run (tfgpu.facts.lastrun): the same options, the
    same day, unchanged code, knowledge and configuration, and facts that differ only in the probes' timings. The
    machine is probed either way; then neither the knowledge base is loaded nor the facts judged again, and
    ``prepare`` (the renderer's imports) runs while the probes do."""
    return _doctor(**options, reuse=True, prepare=prepare)[0]


def _doctor(
    *, tf: str | None = None, facts_file: str | Path | None = None, backend: str = "auto",
    require_gpu: bool = False, strict: bool = False, overrides: dict[str, str | None] | None = None,
    timeout: float | None = None, fork_probes: bool = False, today: datetime.date | None = None,
    python: str | None = None, prefix: str | None = None, name: str | None = None, import_tf: bool = False,
    reuse: bool, prepare: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], DoctorResult | None]:
    check_backend(backend)
    from tfgpu.core.timeouts import check_timeout

    timeout = check_timeout(timeout)
    # Probes start first; with fork_probes they run in a child process while this one loads the
    # knowledge base (in a thread instead, it was slower: GIL and import-lock contention).
    from tfgpu.facts.gather import start_facts

    target = _named_environment(facts_file, python=python, prefix=prefix, name=name)
    pending = start_facts(facts_file=facts_file, overrides=overrides, timeout=timeout, fork=fork_probes,
                          environment=target)
    where = last = key = signed = None
    day = clock() if today is None else today  # one day for the whole run: the answer's key and its knowledge
    try:
        if fork_probes and facts_file is None:  # the console script, reading this machine: its last run helps
            from tfgpu.facts import lastrun

            where = lastrun.facts_file()
            last = lastrun.previous(where)
            if reuse and not import_tf:
                key = lastrun.answer_key({"tf": tf, "backend": backend, "require_gpu": require_gpu, "strict": strict,
                                          "overrides": overrides, "timeout": timeout, "python": python,
                                          "prefix": prefix, "name": name}, day)
                reused, pending = _reused(last, key, pending, prepare)
                if reused is not None:
                    return reused, None
                signed = _signed_inputs()  # before they are read: a change while judging is a change
        from tfgpu.kb.knowledge import load_kb
        from tfgpu.render import report
        kb = load_kb()
        config = _ready_to_judge(kb, prepare)
    except (Exception, KeyboardInterrupt):  # a bad knowledge base, a bug, or Ctrl-C / a signal (tfgpu turns
        # SIGINT/SIGTERM/SIGHUP into KeyboardInterrupt): stop the probe child before the error goes up
        pending.cancel()  # type: ignore[attr-defined]
        raise
    def judge(facts: dict[str, Any]) -> DoctorResult:
        return doctor_result(facts, kb, tf=tf, backend=backend, prefer=config.prefer, prefer_source=config.source)

    before = last["facts"] if last is not None else None
    facts, active, result = _judge_while_probing(pending, judge, before)
    doc = report.doctor_document(facts, result, data_version=kb.data_version, overrides=active)
    _environment_verdict(doc, facts, kb, import_tf=import_tf, timeout=timeout)
    doc["exit_code"] = int(result.exit_code(require_gpu=require_gpu, strict=strict))
    doc["knowledge"] = knowledge_of(kb, facts, day)
    if where is not None:
        _remember(where, last, facts, key, doc, signed)
    return doc, result


def _reused(last: dict[str, Any] | None, key: str, pending: Callable[[], tuple[dict[str, Any], list[str]]],
            prepare: Callable[[], None] | None) -> tuple[dict[str, Any] | None, Callable[[], Any]]:
    """The last run's answer, with this run's facts in it, when it answers this run (tfgpu.facts.lastrun); else None,
    and what gives this run's facts (gathered already, when waiting for them was needed to tell)."""
    from tfgpu.facts import lastrun

    doc = lastrun.answer_for(last, key)
    if doc is None or last is None:
        return None, pending
    if prepare is not None:
        prepare()
    from tfgpu.facts import document  # noqa: F401 - imported now, used to finish the facts (~2 ms: copy, weakref)

    facts, active = pending()
    if not lastrun.same(last["facts"], facts):
        return None, _gathered(facts, active)  # a changed machine: judged after all
    doc["facts"], doc["overrides"] = facts, active
    return doc, pending


def _gathered(facts: dict[str, Any], active: list[str]) -> Callable[[], tuple[dict[str, Any], list[str]]]:
    """What start_facts returns, for facts already gathered."""
    def finish() -> tuple[dict[str, Any], list[str]]:
        return facts, active

    finish.cancel = lambda: None  # type: ignore[attr-defined]
    finish.ready = lambda: True  # type: ignore[attr-defined]
    return finish


def _remember(where: Path, last: dict[str, Any] | None, facts: dict[str, Any], key: str | None,
              doc: dict[str, Any], signed: list[list[Any]] | None) -> None:
    """Keep this run's facts and (for the console script's own document, ``key``) its answer, made from the data
    files ``signed`` and the code imported, for the next run (tfgpu.facts.lastrun)."""
    from tfgpu.facts import lastrun

    if key is None or signed is None:  # --import, or inputs that cannot be named: the facts only
        if not lastrun.same(last["facts"] if last is not None else None, facts):
            lastrun.remember(where, facts)
        return
    lastrun.remember(where, facts, lastrun.answer(key, doc, signed))


def _signed_inputs() -> list[list[Any]] | None:
    """The signatures (tfgpu.facts.lastrun.signatures) of the files besides the code that a verdict is made from:
    the knowledge in use (its directory and every file in it), the store of fetched knowledge (its directory, and the
    record each version gets last, when it is complete: tfgpu.kb.bundles) and the configuration file; None when they
    cannot be named (e.g. a TFGPU_HOME that is not a directory: then no answer is kept)."""
    from tfgpu.backends.config import config_path
    from tfgpu.core.errors import TfgpuError
    from tfgpu.facts.lastrun import signatures
    from tfgpu.kb.bundles import RECORD, store_dir
    from tfgpu.kb.parse import compat_dir

    try:
        data, store = compat_dir(), store_dir()
        with os.scandir(data) as entries:
            files = [str(data), *(entry.path for entry in entries)]
        try:
            with os.scandir(store) as entries:
                files += [str(store / entry.name / RECORD) for entry in entries]
        except FileNotFoundError:  # nothing fetched yet: the store's own signature says when that changes
            pass
        return signatures([*files, str(store), str(config_path())])
    except (OSError, TfgpuError):
        return None


def _ready_to_judge(kb: KnowledgeBase, prepare: Callable[[], None] | None) -> Config:
    """What judging needs that no fact changes, made ready while the probes run (in the console script's probe
    child: here the parent would only wait): the configuration, whose [backends] prefer steers the recipe exactly
    as it does for plan and create, the knowledge base's patterns, the modules that judging (the facts
    document's too: gathering imports it only once the probes are done) and the knowledge report import, and
    ``prepare``: the renderer's imports (the console script's)."""
    from tfgpu.backends.config import load_config
    from tfgpu.facts import document  # noqa: F401 - imported now (~2 ms: copy, weakref), used by doctor_result
    from tfgpu.judge.containers import prepare as prepare_patterns
    from tfgpu.kb import freshness  # noqa: F401 - imported now, used by knowledge_of
    from tfgpu.plan import choose  # noqa: F401 - imported now, used by doctor_result

    prepare_patterns(kb)
    if prepare is not None:
        prepare()
    return load_config()


def _judge_while_probing(
    pending: Callable[[], tuple[dict[str, Any], list[str]]], judge: Callable[[dict[str, Any]], DoctorResult],
    before: dict[str, Any] | None,
) -> tuple[dict[str, Any], list[str], DoctorResult]:
    """The facts ``pending`` gathers, the overrides in force and ``judge``'s verdict on the facts. With ``before``
    (the facts of the last run, tfgpu.facts.lastrun: the console script probing this machine), those facts are judged
    while the probes still run, and that verdict is the answer when this run's facts are the same but for the
    probes' timings: judging is pure, so it is the verdict these facts get, without the wait for it after the
    probes (~8 ms with 8 GPUs). Different facts are judged again."""
    early = None
    if before is not None and not pending.ready():  # type: ignore[attr-defined]
        from tfgpu.core.errors import TfgpuError

        try:
            early = judge(before)
        except (TfgpuError, LookupError, TypeError, ValueError, AttributeError):
            # facts another version of tfgpu kept, in a shape this one does not read, or an error of the options
            # themselves: either way only the head start is lost, and this run's facts are judged below
            early = None
        except KeyboardInterrupt:  # Ctrl-C, or a signal tfgpu turned into it: stop the probe child, as doctor_report
            pending.cancel()  # type: ignore[attr-defined]
            raise
    from tfgpu.facts.lastrun import same

    facts, active = pending()
    if early is not None and same(before, facts):
        return facts, active, early
    return facts, active, judge(facts)


def _named_environment(facts_file: str | Path | None, *, python: str | None, prefix: str | None,
                       name: str | None) -> dict[str, Any] | None:
    """The environment named by --python, --prefix or --name (None: the active one is read)."""
    if not (python or prefix or name):
        return None
    from tfgpu.build.envtarget import named_environment
    from tfgpu.core.errors import UsageError

    if facts_file is not None:
        msg = "--facts judges another machine; --python/--prefix/--name read an environment on this one"
        raise UsageError(msg, hint="use one of them")
    return named_environment(python=python, prefix=prefix, name=name)


def _environment_verdict(doc: dict[str, Any], facts: dict[str, Any], kb: KnowledgeBase, *, import_tf: bool,
                         timeout: float | None) -> None:
    """A TensorFlow here (or named): its verdict opens the report (``doc["environment"]``)."""
    from tfgpu.core.errors import UsageError

    if isinstance(facts.get("environment"), dict):
        from tfgpu.judge.environment import judge_environment
        from tfgpu.kb.sonames import load_sonames

        doc["environment"] = judge_environment(facts["environment"], facts, kb, load_sonames())
        if import_tf:
            from tfgpu.verify.envprobe import import_check

            doc["environment"]["runtime"] = import_check(facts["environment"], doc["environment"],
                                                         timeout=max(120.0, timeout or 0))
    elif import_tf:
        msg = "--import needs an environment with TensorFlow: none is installed in the one judged"
        raise UsageError(msg, hint="name one with --python EXE, --prefix DIR or --name NAME")


def clock() -> datetime.date | tuple[int, int, int]:
    """Today, as the knowledge's age is measured (a function of its own: tests set the date): local time's (year,
    month, day), from :mod:`time` (importing :mod:`datetime` was ~1.5 ms of every `tfgpu doctor`)."""
    from tfgpu.core.sysio import local_today

    return local_today()


def knowledge_of(kb: KnowledgeBase, facts: dict[str, Any],
                 today: datetime.date | tuple[int, int, int] | None = None) -> dict[str, Any]:
    """The document's ``knowledge`` object (tfgpu.kb.freshness) for the data in use, judged on ``today``."""
    from tfgpu.kb.freshness import knowledge_in_use, knowledge_json

    source, _ = knowledge_in_use()
    tf = facts.get("tensorflow")
    installed = tf if isinstance(tf, list) else []
    return knowledge_json(data_version=kb.data_version, date=kb.date, source=source,
                          tf_versions=(r.version for r in kb.releases), installed=installed,
                          today=today or clock())
