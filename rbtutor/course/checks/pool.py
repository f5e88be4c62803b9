"""Step: instant checks, judging off the event loop. A small pool of worker processes, each with a :class:`.core.Judge`.

Working out a student's key (up to 0.15 s the first time) and judging (NumPy) use the CPU;
done in the service's event loop they held up every other request, a classmate's check
and the statistics page alike. Here they run in :data:`JUDGE_WORKERS` processes started
with ``spawn`` (a fresh interpreter: the service's threads and sockets are not copied),
each warmed up once (the judge imports nbgrader, about 3 s). The main process keeps the
bookkeeping (the limit, the counts, the log: :class:`.core.CheckCore`), so the limit is
counted in one place whatever the number of workers.

A worker that dies (say, stopped by the system for memory) breaks the pool: the pool is
made again and the check is refused with 503 and given back, so the student may send it
again at once.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ...problems import PROBLEMS
from ...problems.variants import problem_of
from .core import CheckCore, CheckRefused, Judge

#: worker processes that judge; the machine the course runs on has 2 cores
JUDGE_WORKERS = 2

# the Judge of a worker process, made by _start_worker
_JUDGE: Judge | None = None


def _start_worker(course: str) -> None:
    global _JUDGE
    _JUDGE = Judge(course)
    _JUDGE.warm()


def _verdict(student: str, answer_id: str, value) -> dict:
    return _JUDGE.verdict(student, answer_id, value)


def _kinds(problem: int) -> tuple:
    return _JUDGE.data_stamp(), _JUDGE.answer_kinds(problem)


def process_pool(course, workers: int = JUDGE_WORKERS) -> ProcessPoolExecutor:
    """The worker processes of ``course``: fresh interpreters, each with a :class:`.core.Judge` of its own."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(str(course),))


class JudgePool:
    """Checks of :class:`.core.CheckCore` with the judging done in ``executor``, awaited without blocking.

    Parameters
    ----------
    core : CheckCore
        The bookkeeping, used in the calling (event loop) thread only.
    make_executor : callable
        Makes the executor whose workers judge; called again when a worker process died.
        Each worker must have run :func:`_start_worker` (see :func:`process_pool`), or
        ``verdict`` and ``kinds`` must be given.
    verdict, kinds : callable, optional
        What runs in a worker: ``verdict(student, answer_id, value)`` and ``kinds(problem)``
        (by default the worker's :class:`.core.Judge`); tests pass others with a thread pool.
    """

    def __init__(self, core: CheckCore, make_executor, verdict=_verdict, kinds=_kinds):
        self.core = core
        self._make_executor = make_executor
        self._verdict = verdict
        self._kinds = kinds
        self.executor: Executor = make_executor()

    def warm(self) -> None:
        """Start and warm the workers now, learning the answer ids of every problem on the way."""
        for problem in range(1, len(PROBLEMS) + 1):
            future = self.executor.submit(self._kinds, problem)
            future.add_done_callback(lambda f, problem=problem: self._remember(problem, f))

    def _remember(self, problem: int, future) -> None:
        if not future.cancelled() and future.exception() is None:
            stamp, kinds = future.result()
            self.core.remember_kinds(problem, stamp, kinds)

    async def _run(self, function, *args):
        executor = self.executor
        try:
            return await asyncio.wrap_future(executor.submit(function, *args))
        except BrokenProcessPool:
            if self.executor is executor:  # the first request to learn of it replaces the pool
                self.executor = self._make_executor()
                executor.shutdown(wait=False, cancel_futures=True)
            raise CheckRefused(503, "the judge had to be restarted; the check was not counted, "
                                    "send it again") from None

    async def check(self, student: str, body: bytes) -> dict:
        """:meth:`.core.CheckCore.check`, with the key and the verdict worked out in a worker."""
        core = self.core
        answer_id, value = core.request(student, body)
        problem = problem_of(answer_id)
        kinds = core.cached_kinds(problem)
        if kinds is None:
            try:
                stamp, kinds = await self._run(self._kinds, problem)
            except ValueError as exc:
                raise CheckRefused(404, f"unknown answer id {answer_id!r} ({exc})") from None
            core.remember_kinds(problem, stamp, kinds)
        admission = core.admit(student, answer_id, value, kinds)
        try:
            outcome = await self._run(self._verdict, student, answer_id, value)
        except BaseException:
            core.release(admission)
            raise
        return core.settle(admission, outcome)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
