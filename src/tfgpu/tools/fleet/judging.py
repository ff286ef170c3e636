"""Judging a fleet's distinct machines, and reading its report files: in this process, or, for a large
fleet, in worker processes (the main process merges what they send, in order).

A machine takes ~15 ms to judge (every TensorFlow series, every recipe); a fleet of a few hundred kinds
takes seconds, which on a multi-core machine the workers spend while the main process is still reading
reports. Workers are forks of this process (they share its loaded knowledge base; no program is run, no
argument parsed): where fork is not available, or there is one CPU, everything is judged here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tfgpu.tools.fleet.machines import Judgement, Judgements, judgement

Judge = Callable[[Mapping[str, Any], "str | None"], dict[str, Any]]

#: Distinct machines judged here before workers are started (a small fleet never forks).
IN_PROCESS_FIRST = 8
#: Report files read here at most; more are read by the workers, this many to a task.
READ_HERE = 256
READ_CHUNK = 128
#: Workers at most, whatever the CPU count.
MAX_WORKERS = 8

_WORKER_JUDGE: Judge | None = None  # set before the fork: each worker inherits it


def judge_machine(judge: Judge, facts: Mapping[str, Any], tf: str | None) -> Judgement:
    """One machine judged: every series, and the --tf target when asked."""
    doc = judge(facts, None)
    return judgement(doc, judge(facts, tf) if tf is not None else None)


def _in_worker(facts: Mapping[str, Any], tf: str | None) -> Judgement:
    assert _WORKER_JUDGE is not None
    return judge_machine(_WORKER_JUDGE, facts, tf)


_WORKER_SEEN: set[bytes] = set()  # the machines this worker has sent the facts of


def _read_in_worker(paths: list[str], data_version: str) -> list[Any]:
    from pathlib import Path

    from tfgpu.tools.fleet.preparing import prepare
    from tfgpu.tools.fleet.reading import read_file

    return [prepare(r, data_version, _WORKER_SEEN) for p in paths for r in read_file(Path(p))]


def default_workers() -> int:
    """The CPUs this process may run on (at most MAX_WORKERS); 0 where fork is unavailable or one CPU."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(cpus, MAX_WORKERS) if cpus > 1 else 0


class JudgePool:
    """Judges machines, in worker processes once more than ``first`` were judged here. ``submit`` returns
    a function that gives the Judgement (waiting for its worker if needed)."""

    def __init__(self, judge: Judge, tf: str | None, workers: int, first: int = IN_PROCESS_FIRST) -> None:
        self.judge, self.tf, self.workers, self.first = judge, tf, workers, first
        self._judged_here = 0
        self._pool: Any = None
        self.judgements = Judgements()  # machines judged alike share one Judgement

    def submit(self, facts: Mapping[str, Any]) -> Callable[[], Judgement]:
        if self.workers < 2 or self._judged_here < self.first:
            self._judged_here += 1
            done = judge_machine(self.judge, facts, self.tf)
            return lambda: done
        if self._pool is None:
            self._pool = self._start()
        future = self._pool.submit(_in_worker, facts, self.tf)

        def result() -> Judgement:
            from concurrent.futures.process import BrokenProcessPool

            try:
                found: Judgement = future.result()
            except BrokenProcessPool:  # a worker was killed (out of memory, a signal): judged here
                found = judge_machine(self.judge, facts, self.tf)
            return found

        return result

    def reads_in_workers(self, files: int) -> bool:
        """Whether ``files`` report files are better read by the workers."""
        return self.workers >= 2 and files > READ_HERE

    def map_files(self, files: list[Any], data_version: str) -> Iterator[Any]:
        """Each file's reports prepared (tfgpu.tools.fleet.merge.prepare) by the workers, in order."""
        if self._pool is None:
            self._pool = self._start()
        chunks = [[str(f) for f in files[i:i + READ_CHUNK]] for i in range(0, len(files), READ_CHUNK)]
        for prepared in self._pool.map(_read_in_worker, chunks, [data_version] * len(chunks)):
            yield from prepared

    def _start(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        global _WORKER_JUDGE
        _WORKER_JUDGE = self.judge
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork"))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
