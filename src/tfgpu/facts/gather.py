"""Facts from a file or from probing, then the single-fact overrides: the one way every command reads the machine.

Nothing here imports typing, pathlib or json at module level: the console script forks its probe child after
importing this module, and the child should start soon."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any


def gather_facts(
    *, facts_file: str | Path | None = None, overrides: dict[str, str | None] | None = None,
    timeout: float | None = None, environment: dict[str, Any] | None = None, env_overrides: bool = True,
) -> tuple[dict[str, Any], list[str]]:
    """Facts from a file or from probing, then single-fact overrides: flags beat TFGPU_* variables.
    ``env_overrides`` False: the machine as probed, whatever TFGPU_* variables assume (`tfgpu smoke`)."""
    return start_facts(facts_file=facts_file, overrides=overrides, timeout=timeout, fork=False,
                       environment=environment, env_overrides=env_overrides)()


def machine_facts(facts_file: str | None, *, probe: bool, overrides: dict[str, str | None] | None = None,
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """Facts for machine-specific causes: from --facts FILE, else probed here (never fatal), then the
    overrides (tfgpu.facts.gather.gather_facts, as for every command), and a note."""
    if facts_file:
        return gather_facts(facts_file=facts_file, overrides=overrides)[0], \
            f"machine-specific causes use the facts in {facts_file}"
    if not probe:
        return None, None
    try:
        facts, _ = gather_facts(overrides=overrides)
    except Exception as exc:  # a probe bug must not hide the log's explanation
        return None, f"this machine could not be probed ({type(exc).__name__}); causes are generic"
    return facts, "machine-specific causes describe THIS machine (--facts FILE for another one, --no-probe to turn off)"


def start_facts(
    *, facts_file: str | Path | None = None, overrides: dict[str, str | None] | None = None,
    timeout: float | None = None, fork: bool = False, environment: dict[str, Any] | None = None,
    env_overrides: bool = True,
) -> Callable[[], tuple[dict[str, Any], list[str]]]:
    """Start gathering facts and return a function that finishes it (see :func:`gather_facts`).

    With ``fork`` (the console script), probing the machine runs in a forked child on Linux while
    this process loads the knowledge base (tfgpu.facts.probe._child); the result is the same. The child forks
    before anything else is imported: the probes and the knowledge base each import what they need. The returned
    function's ``ready`` attribute says, without waiting, whether calling it would wait for the probes no more."""
    if facts_file is not None:
        from tfgpu.facts.document import load_facts_file

        facts: dict[str, Any] = load_facts_file(facts_file)

        def probed() -> dict[str, Any]:
            return facts
    else:
        from tfgpu.facts.probe import DEFAULT_TIMEOUT, _timeout_from

        budget = timeout if timeout and timeout > 0 else DEFAULT_TIMEOUT

        def detect() -> dict[str, Any]:
            from tfgpu.facts.probe import detect_facts

            return detect_facts(timeout=budget, isolate_nvml=fork, environment=environment)

        probed = detect
        if fork:
            from tfgpu.facts.probe import _child

            if _child.fork_enabled(os.environ):
                def in_child() -> dict[str, Any]:
                    return _mark(detect(), "a forked child")

                def here(why: str) -> dict[str, Any]:
                    return _mark(detect(), f"this process (the probe child {why})")

                # the probes wait as long as TFGPU_PROBE_TIMEOUT says (it overrides --timeout): their child gets as
                # long, or the parent would give up on it and probe all over again in-process
                probed = _child.start(in_child, here, _timeout_from(os.environ, budget) + _child.DEADLINE_GRACE)

    def finish() -> tuple[dict[str, Any], list[str]]:
        from tfgpu.facts.document import apply_overrides, overrides_from_env

        merged = overrides_from_env(os.environ) if env_overrides else {}
        merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return apply_overrides(probed(), merged)

    finish.cancel = getattr(probed, "cancel", lambda: None)  # type: ignore[attr-defined]
    finish.ready = getattr(probed, "ready", lambda: True)  # type: ignore[attr-defined]
    return finish


def _mark(facts: dict[str, Any], where: str) -> dict[str, Any]:
    """Record in facts["probe"]["process"] where the probes ran (a report of a fallback explains a slow run)."""
    probe = facts.get("probe")
    if isinstance(probe, dict):
        probe["process"] = where
    return facts
