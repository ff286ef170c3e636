"""tfgpu.facts.probe._ctx.run_concurrently: quick jobs take turns in one thread, a slow or hung job holds up only
itself, and nothing starts after the deadline."""

from __future__ import annotations

import threading
import time
from typing import Any

from tfgpu.facts.probe._ctx import run_concurrently


def _recorder(seen: dict[str, int], name: str, value: Any = None, sleep: float = 0.0) -> Any:
    def job() -> Any:
        seen[name] = threading.get_ident()
        if sleep:
            time.sleep(sleep)
        return value if value is not None else name
    return job


def test_quick_jobs_take_turns_in_one_thread_and_all_answer() -> None:
    seen: dict[str, int] = {}
    jobs = {n: _recorder(seen, n) for n in ("platform", "python", "conda", "pci")}
    results, timings, errors = run_concurrently(jobs, timeout=5.0)
    assert results == {n: n for n in jobs}
    assert errors == {}
    assert set(timings) == set(jobs)
    assert len(set(seen.values())) == 1  # one thread did them all
    assert threading.get_ident() not in seen.values()  # and not the caller's: it keeps the deadline


def test_a_job_that_hangs_holds_up_only_itself() -> None:
    release = threading.Event()
    seen: dict[str, int] = {}

    def hung() -> str:
        seen["hung"] = threading.get_ident()
        release.wait(10)  # a stuck read: it outlives the call
        return "late"

    jobs = {"hung": hung, **{n: _recorder(seen, n) for n in ("a", "b", "c")}}
    t0 = time.monotonic()
    try:
        results, timings, errors = run_concurrently(jobs, timeout=1.0, stall=0.05)
    finally:
        release.set()
    assert results == {"a": "a", "b": "b", "c": "c"}  # another thread took the others after the stall
    assert errors == {"hung": "timed out after 1 s"}
    assert timings["a"] < 0.5
    assert seen["a"] != seen["hung"]
    assert time.monotonic() - t0 < 3.0


def test_slow_jobs_get_company_and_finish_together() -> None:
    seen: dict[str, int] = {}
    jobs = {n: _recorder(seen, n, sleep=0.2) for n in ("x", "y", "z")}
    t0 = time.monotonic()
    results, _timings, errors = run_concurrently(jobs, timeout=5.0, stall=0.02)
    assert errors == {}
    assert set(results) == {"x", "y", "z"}
    assert time.monotonic() - t0 < 0.55  # not 0.6 s in turn: each stall started one more thread
    assert len(set(seen.values())) > 1


def test_a_job_that_crashes_is_an_error_and_the_others_go_on() -> None:
    def boom() -> None:
        raise RuntimeError("bug")

    seen: dict[str, int] = {}
    results, _timings, errors = run_concurrently({"boom": boom, "ok": _recorder(seen, "ok")}, timeout=5.0)
    assert results == {"ok": "ok"}
    assert errors == {"boom": "probe crashed: RuntimeError: bug"}


def test_nothing_starts_after_the_deadline() -> None:
    release = threading.Event()
    started: list[str] = []

    def hung() -> None:
        started.append("hung")
        release.wait(10)

    def later() -> str:
        started.append("later")
        return "later"

    # a stall longer than the wait: no second thread starts, so "later" is still waiting at the deadline
    results, _timings, errors = run_concurrently({"hung": hung, "later": later}, timeout=0.2, stall=30.0)
    release.set()
    time.sleep(0.2)  # the thread that ran "hung" is free again: it must not take "later" now
    assert results == {}
    assert errors == {"hung": "timed out after 0.2 s", "later": "timed out after 0.2 s"}
    assert started == ["hung"]
