"""One submission never holds up the class: a time bound on all its steps, and a worker that dies.

``make grade`` runs each submission in a worker process (rbtutor.course.grade). A submission
that takes longer than its bound in all, or whose worker process dies, is NOT GRADED with its
reason, and the others are graded.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest

from rbtutor.course import grade
from rbtutor.course.grade import run as grade_run
from rbtutor.course.grade import submission as grade_submission
from rbtutor.grading.time_bound import time_bound


class Outer(Exception):
    pass


class Inner(Exception):
    pass


def test_time_bound_interrupts_a_wait():
    """A block that waits far longer than its bound is stopped at the bound."""
    start = time.monotonic()
    with pytest.raises(Inner), time_bound(0.2, Inner()):
        threading.Event().wait(60)
    assert time.monotonic() - start < 30


def test_time_bound_leaves_no_timer_behind():
    """After a block that ended in time, no alarm is left to fire into later code."""
    with time_bound(30, Inner()):
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_an_inner_bound_gives_the_outer_one_back():
    """A feedback page's bound inside a submission's: once the page is done, the submission's
    bound still holds (a process has one timer; the inner block must restore the outer's)."""

    def finish_a_page_then_wait():
        with time_bound(30, Inner()):
            pass
        threading.Event().wait(60)

    with pytest.raises(Outer), time_bound(0.3, Outer()):
        finish_a_page_then_wait()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_tighter_of_two_nested_bounds_fires():
    """An inner bound shorter than the outer fires as itself; an outer one that ends first wins."""
    with pytest.raises(Inner), time_bound(30, Outer()), time_bound(0.2, Inner()):
        threading.Event().wait(60)
    with pytest.raises(Outer), time_bound(0.2, Outer()), time_bound(30, Inner()):
        threading.Event().wait(60)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_stuck_submission_is_not_graded_and_the_next_one_is(monkeypatch, tmp_path):
    """A step that never returns costs that submission its grade, with the reason, and nothing else."""
    def stuck_then_fine(layout, assignment, student):
        if student == "stuck":
            threading.Event().wait(60)
        return "3/3 autograded", None

    monkeypatch.setattr(grade_submission, "_grade_submission", stuck_then_fine)
    _, student, summary, seconds, problem = grade.autograde_one((str(tmp_path), "problem01", "stuck"), seconds=0.3)
    assert (student, summary) == ("stuck", "NOT GRADED")
    assert "SubmissionTimeout" in problem
    assert "longer than 0.3 s" in problem
    assert seconds < 30
    assert grade.autograde_one((str(tmp_path), "problem01", "fine"), seconds=0.3)[2:5:2] == ("3/3 autograded", None)


def _dies_for_some(job):
    """A grading task whose worker process dies for the student named ``dies``."""
    _, assignment, student = job
    if student == "dies":
        os._exit(9)
    return assignment, student, "1/1 autograded", 0.0, None


def _fork_pool(jobs: int):
    return ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork"))


def test_a_worker_that_dies_costs_only_its_own_submission():
    """ProcessPoolExecutor fails every pending job when one worker dies; each is tried again alone.

    With one worker the jobs after ``dies`` are certainly still pending when it dies.
    """
    work = [("course", "problem01", name) for name in ("a", "dies", "b", "c")]
    with _fork_pool(1) as pool:
        results = list(grade_run._pool_results(pool, work, task=_dies_for_some, new_pool=_fork_pool))
    by_student = {student: (summary, problem) for _, student, summary, _, problem in results}
    assert [r[1] for r in results] == [job[2] for job in work]
    summary, problem = by_student.pop("dies")
    assert summary == "NOT GRADED"
    assert "worker process died" in problem
    assert all(value == ("1/1 autograded", None) for value in by_student.values()), by_student


def _in_thread(function):
    """Run ``function`` in a new thread (as a Dask worker runs a task) and return what it returned or raised."""
    result = {}

    def run():
        try:
            result["value"] = function()
        except BaseException as exc:  # noqa: BLE001 - the test checks the kind of whatever the block raised
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the bounded block was not stopped within 60 s"
    return result


def _polls_forever():
    while True:  # waits in short steps, as nbclient waits for kernel messages
        threading.Event().wait(0.05)


def test_time_bound_stops_a_block_in_another_thread():
    """Outside the main thread (no SIGALRM there) the bound still stops the block, with the given error."""
    start = time.monotonic()
    result = _in_thread(lambda: _bounded(0.3, Inner("the step took too long"), _polls_forever))
    assert isinstance(result.get("error"), Inner)
    assert str(result["error"]) == "the step took too long"
    assert time.monotonic() - start < 30


def _bounded(seconds, error, function):
    with time_bound(seconds, error):
        return function()


def test_a_thread_bound_never_fires_after_its_block():
    """A block that ends in time leaves nothing behind: later code in that thread runs on undisturbed."""
    def ends_in_time_then_waits():
        with time_bound(0.2, Inner("late")):
            pass
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:  # well past the bound: an error left pending would land here
            threading.Event().wait(0.05)
        return "undisturbed"

    assert _in_thread(ends_in_time_then_waits) == {"value": "undisturbed"}


def test_nested_bounds_in_another_thread():
    """In a thread as in the main one, the bound that ends first fires, and the outer one outlives the inner."""
    inner_first = _in_thread(lambda: _bounded(30, Outer(), lambda: _bounded(0.2, Inner(), _polls_forever)))
    assert isinstance(inner_first.get("error"), Inner)
    outer_after_inner = _in_thread(lambda: _bounded(0.4, Outer(), lambda: (_bounded(30, Inner(), lambda: None),
                                                                           _polls_forever())))
    assert isinstance(outer_after_inner.get("error"), Outer)


def test_a_stuck_submission_on_a_dask_worker_is_not_graded(monkeypatch, tmp_path):
    """On a real Dask worker (a thread of its own, as in ``dask worker --nthreads 1``) a submission
    past its bound is NOT GRADED with the reason, and the worker grades the next one."""
    distributed = pytest.importorskip("distributed")

    def stuck_then_fine(layout, assignment, student):
        if student == "stuck":
            _polls_forever()
        return "3/3 autograded", None

    monkeypatch.setattr(grade_submission, "_grade_submission", stuck_then_fine)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        stuck = client.submit(grade.autograde_one, (str(tmp_path), "problem01", "stuck"), 0.5, pure=False)
        _, student, summary, _seconds, problem = stuck.result(timeout=60)
        assert (student, summary) == ("stuck", "NOT GRADED")
        assert "SubmissionTimeout" in problem, problem
        assert "longer than 0.5 s" in problem, problem
        fine = client.submit(grade.autograde_one, (str(tmp_path), "problem01", "fine"), 0.5, pure=False)
        assert fine.result(timeout=60)[2:5:2] == ("3/3 autograded", None)


def test_progress_says_how_long_the_rest_will_take():
    """Each line of a long run says the time left at the pace so far; the last one says none."""
    line = grade.progress_line(3, 60, "s1", "problem03", "11/13 autograded", 0.4, elapsed=3.0)
    assert line == "[3/60] s1 problem03: 11/13 autograded (0.4 s; about 57 s left)"
    assert grade.progress_line(60, 60, "s1", "problem03", "done", 0.4, elapsed=60.0).endswith("(0.4 s)")
    assert grade.progress_line(1, 2, "s1", "p", "NOT GRADED", float("nan"), elapsed=1.0).endswith("(about 1 s left)")
    assert [grade.duration_text(s) for s in (0.2, 40, 200, 4800)] == ["under 1 s", "40 s", "3 min", "1 h 20 min"]
