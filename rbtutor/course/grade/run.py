"""Grade, the run: start it, autograde every submission in a pool of workers, finish it
(grades, integrity report, class report)."""

from __future__ import annotations

import functools
import gc
import importlib
import os
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from ...grading.judge import course_reference, problems_answered, write_class_keys
from ...grading.report import event, terminal_text, write_integrity_report
from ...grading.sandbox import zygote_starting
from ...grading.sanitize import start_cleaner
from ...grading.student_ids import id_problem
from ...problems.variants import per_student
from ..class_report import write_class_report
from ..export import plural
from ..late import prepare_deadlines, settle_penalties
from ..layout import CourseLayout
from ..nbgrader import api, index_gradebook
from .grades_export import export_grades
from .submission import autograde_one, record_refused_id, source_notebooks, withdraw_submission

#: What a grading worker imports, once in the process the workers are forked from; the last
#: one fills the caches a worker's first notebook would otherwise fill (:mod:`rbtutor.course.warm_worker`).
WORKER_MODULES = ("rbtutor.course.grade", "nbgrader.apps", "nbgrader.converters.autograde", "nbclient",
                  "rbtutor.grading.execute", "rbtutor.grading.feedback", "rbtutor.grading.judge",
                  "rbtutor.grading.restore", "rbtutor.grading.intake", "rbtutor.grading.report",
                  "rbtutor.course.warm_worker")


def worker_pool(jobs: int, *, cleaners: bool = False):
    """A pool of ``jobs`` grading workers (a ``ProcessPoolExecutor``); with ``cleaners``, each worker
    starts its notebooks' cleaner (:func:`~rbtutor.grading.sanitize.start_cleaner`) first of all.

    The workers are forked from a process that has imported the grading code (each would spend
    1.3 CPU s on it otherwise): this one, which imports :data:`WORKER_MODULES` first, when it runs
    no other thread; else multiprocessing's fork server, which imports them itself. A fork copies
    only the forking thread, so a lock another thread held at that moment (a Dask client's event
    loop, a broken pool's manager thread still ending) would stay locked in the worker for ever.
    Forking this process spares the fork server's own import of the grading code: 1.75 CPU s and
    as many seconds before the first worker starts (measured 2026-12-04, class of 30). Before the
    fork, ``gc.freeze()`` moves this process's objects out of the collector's reach, so that a
    worker's collections do not write to (and so copy) every page it shares with this process:
    the run's processes held 676-682 MB at most instead of 825-830 (class of 300, two runs each).
    Each worker then takes this process's environment and working folder as they are now.
    """

    if threading.active_count() == 1:
        for name in WORKER_MODULES:
            importlib.import_module(name)
        gc.freeze()
        context = get_context("fork")
    else:
        context = get_context("forkserver")
        context.set_forkserver_preload(list(WORKER_MODULES))
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_adopt,
                               initargs=(dict(os.environ), os.getcwd(), cleaners))


def _adopt(environ: dict[str, str], folder: str, cleaner: bool) -> None:
    """A new worker's start: the grading process's environment and working folder, and the worker's
    cleaner when asked for. A Ctrl-C is for the grading process to act on
    (:func:`stop_when_interrupted`), so the worker ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(folder)
    if cleaner:
        start_cleaner()


def default_jobs() -> int:
    """Worker processes for ``grade``: one per usable core, plus one.

    A worker spends part of each notebook waiting (its kernel starting inside the
    sandbox, messages to and from it), so one spare worker keeps the cores busy:
    measured on 2 cores with 66 notebooks of the reference solutions (2026-12-03), 0.47 s
    per notebook with 3 workers, 0.45 s with 4 or 5, which cost 8 and 14 % more CPU.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


def _students(layout: CourseLayout) -> list[str]:
    """The folder names of ``submitted/`` (each a claimed student id), sorted."""
    folder = layout.submitted()
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))


def start_run(layout: CourseLayout):
    """Before a grading run: back up the gradebook, list the submissions as jobs
    ``(course root, assignment, student)`` and create their students (so that workers never race
    to create one). A folder of ``submitted/`` whose name is not an acceptable id is not a job: it
    is named (``bad_name``) and listed as not graded. Returns ``(grader, jobs, refused)``, refused
    as ``(assignment, student, reason)``."""
    root = layout.root
    grader = api(layout)
    if layout.gradebook_file.exists():
        shutil.copy2(layout.gradebook_file, root / "gradebook.db.bak")
    work, refused = [], []
    for assignment in layout.assignments():
        for student in _students(layout):
            if not (layout.submitted() / student / assignment).is_dir():
                continue
            why = id_problem(student)
            if why is None:
                work.append((str(root), assignment, student))
                continue
            reason = f"bad_name: the student id {why}; not graded"
            record_refused_id(layout, assignment, student, "grade", [event(
                "bad_name", f"The folder submitted/{student}/{assignment} names a student id that {why}; "
                "it was not graded.", path=f"submitted/{student}/{assignment}")])
            refused.append((assignment, student, reason))
    with grader.gradebook as gradebook:
        index_gradebook(gradebook.engine)  # each notebook's lookups: no scan of the class's rows
        for student in sorted({s for _, _, s in work}):
            gradebook.update_or_create_student(student)
        class_list = [s.id for s in gradebook.students]
    # due dates and extensions of exercises/due_dates.yaml, before any penalty is worked out
    for line in prepare_deadlines(layout, grader, [(a, s) for _, a, s in work]):
        print(f"due dates: {terminal_text(line)}", flush=True)
    if work:
        store_class_keys(layout, grader, class_list, sorted({a for _, a, _ in work}))
    return grader, work, refused


def store_class_keys(layout: CourseLayout, grader, students: list[str], assignments=None) -> Path | None:
    """Work out every student's key once, before the workers start, where the judges read them
    (``c.JudgeAnswers.class_keys``, under the grader's scratch folder): the keys of the problems
    that ``assignments`` (all the course's by default) ask for, not the whole course's: for a class
    of 30 handing in problem03 and problem10, the other problems' keys (problems 8 and 11
    simulate) cost 0.06 CPU s a notebook (``make grade``, 0.798 against 0.735, 2026-12-06). Only when the course has
    per-student variants: otherwise there are no classmates' numbers to compare with. Returns the
    folder, or None when nothing was stored."""

    section = grader.config.JudgeAnswers
    store = section.class_keys if "class_keys" in section else ""
    data_file = section.data_file if "data_file" in section else None
    data, _ = course_reference(data_file)
    if not store or not per_student(data):
        return None
    layout.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(layout.scratch, 0o700)
    print(f"working out the keys of {plural(len(students), 'student')} (each has their own numbers)...", flush=True)
    problems = None if assignments is None else set().union(
        *(problems_answered(source_notebooks(layout, a).values()) for a in assignments))
    return write_class_keys(store, data, students, problems, new_pool=lambda _: worker_pool(default_jobs()))


def finish_run(layout: CourseLayout, grader, count: int, failures: list, elapsed: float, where: str) -> int:
    """After a grading run: grades.csv, the integrity report, the class report, the summary line and
    every submission not graded with its reason. Returns the exit status (1 when some submission was
    not graded, or grades.csv or a report could not be written)."""

    status = 1 if failures else 0
    print("writing grades.csv, the integrity report and the class report...", flush=True)
    for assignment, student, reason in failures:  # no points anywhere for a submission not graded
        if id_problem(student):
            continue  # a refused id never reached the gradebook or the grader's folders
        try:
            withdraw_submission(layout, grader, assignment, student, str(reason))
        except (OSError, ValueError, SQLAlchemyError) as exc:
            print(f"could not withdraw {terminal_text(student)} {terminal_text(assignment)}, which was not "
                  f"graded: {terminal_text(exc)}", file=sys.stderr)
    try:  # every late penalty again, from the current due dates and the final scores
        late_changes = settle_penalties(layout, grader)
    except (OSError, ValueError) as exc:
        print(f"could not work out the late penalties: {terminal_text(exc)}", file=sys.stderr)
        late_changes, status = {}, 1
    for (student, assignment), change in sorted(late_changes.items()):
        print(f"late penalty changed: {terminal_text(student)} {terminal_text(assignment)} {terminal_text(change)}")
    refused: list[str] = []  # hand grades that are not a number from 0 to the part's points
    try:
        changed = export_grades(grader, layout.grades_csv, late_changes, refused, layout.not_graded())
    except (OSError, ValueError) as exc:
        print(f"could not write {layout.grades_csv}: {terminal_text(exc)}", file=sys.stderr)
        changed, status = [], 1
    for line in refused:
        print(f"hand grade not counted, grade this part again: {terminal_text(line)}", file=sys.stderr)
    status = 1 if refused else status
    if changed:
        print(f"{len(changed)} autograded score(s) changed by hand in the Formgrader (the overridden "
              "column of grades.csv):")
        for line in changed:
            print(f"  {terminal_text(line)}")
    try:
        print(f"integrity report: {write_integrity_report(layout.root)}")
    except (OSError, ValueError) as exc:
        print(f"could not write the integrity report: {terminal_text(exc)}", file=sys.stderr)
        status = 1

    try:
        print(f"class report: {write_class_report(layout, grader, failures)}")
    except (OSError, ValueError) as exc:
        print(f"could not write the class report: {terminal_text(exc)}", file=sys.stderr)
        status = 1
    left = f" ({len(failures)} not graded or with a problem, listed below)" if failures else ""
    print(f"graded {count - len(failures)} submissions{left} in {elapsed:.1f} s {where}; "
          f"grades: {layout.grades_csv}; feedback: {layout.root / 'feedback'}")
    for assignment, student, reason in failures:
        print(f"could not grade {terminal_text(student)} {terminal_text(assignment)}: {terminal_text(reason)}",
              file=sys.stderr)
    return status


def progress_line(k: int, total: int, student: str, assignment: str, summary: str, seconds: float,
                  elapsed: float | None = None) -> str:
    """One line of progress, with whatever a submission could put into it shown as text.

    With ``elapsed`` (seconds since the first submission started), the time the rest will take at
    the pace so far: ``[3/60] s1 problem03: 11/13 autograded (0.4 s; about 1 min left)``.
    """
    took = [] if seconds != seconds else [f"{seconds:.1f} s"]  # NaN: the task never returned
    if elapsed is not None and 0 < k < total:
        took.append(f"about {duration_text(elapsed / k * (total - k))} left")
    took_text = f" ({'; '.join(took)})" if took else ""
    return f"[{k}/{total}] {terminal_text(student)} {terminal_text(assignment)}: {terminal_text(summary)}{took_text}"


def record_result(done: int, total: int, result: tuple, start: float, failures: list) -> None:
    """Print the progress line of the ``done``-th graded submission (``result`` as
    :func:`autograde_one` returns it; ``start``: ``time.perf_counter()`` when the first began),
    and add it to ``failures`` as ``(assignment, student, problem)`` when it has a problem."""
    assignment, student, summary, seconds, problem = result
    print(progress_line(done, total, student, assignment, summary, seconds, time.perf_counter() - start),
          flush=True)
    if problem:
        failures.append((assignment, student, problem))


def duration_text(seconds: float) -> str:
    """A duration as a person says it: ``under 1 s``, ``40 s``, ``3 min``, ``1 h 20 min``."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


@contextmanager
def stop_when_interrupted(at_once: bool = False):
    """Within the block, a first Ctrl-C (SIGINT) asks the run to stop after the submissions being graded,
    and a second raises KeyboardInterrupt at once (in a notebook graded in this process, nbgrader
    takes it for that notebook's failure). Yields a function that says whether one came.

    nbgrader's ``capture_log`` ends in a bare ``except:``, so a KeyboardInterrupt raised while a
    notebook is graded was taken for that notebook's failure: the run marked it not graded and
    went on with the next. The signal is therefore a request the run checks between submissions.

    With ``at_once`` (the cluster's client, which grades nothing itself), the first Ctrl-C raises
    KeyboardInterrupt too, and is remembered all the same: one raised while the main thread runs
    a ``__del__`` or a weak reference's callback (Dask's futures have both) is printed and dropped
    by Python, and the run went on to write grades.csv (a fresh-clone run, 2026-12-06: exit 0
    after a Ctrl-C that came after the run's first line); so the run checks the flag too.
    """
    asked: list[bool] = []

    def on_interrupt(signum, frame):
        if asked or at_once:
            asked.append(True)
            raise KeyboardInterrupt
        asked.append(True)
        print("rbtutor grade: stopping after the submissions being graded now (Ctrl-C again: at once)",
              file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)


def grade(layout: CourseLayout, jobs: int | None = None) -> int:
    """Autograde every submission, ``jobs`` at a time (:func:`default_jobs` by default); a Ctrl-C stops the
    run after the submissions being graded (exit status 130, nothing of the run's end written)."""

    # one zygote for the run (the workers inherit its name): every kernel starts as a copy of it;
    # it starts while start_run works out the class's keys
    with zygote_starting() as zygote_ready:
        try:
            grader, work, failures = start_run(layout)
        except ValueError as exc:  # exercises/due_dates.yaml is checked before anything is graded
            print(f"rbtutor grade: {terminal_text(exc)}", file=sys.stderr)
            return 2
        jobs = jobs or default_jobs()
        count = len(work) + len(failures)
        with stop_when_interrupted() as interrupted:
            print(f"grading {plural(len(work), 'submission')} with {plural(jobs, 'worker')}: one line each as it "
                  "is done, with the time left at the pace so far", flush=True)
            start, done = time.perf_counter(), 0
            zygote_ready()
            if jobs == 1:
                results = map(autograde_one, work)
            else:
                pool = worker_pool(jobs, cleaners=True)
                results = _pool_results(pool, work)
            for done, result in enumerate(results, 1):
                record_result(done, len(work), result, start, failures)
                if interrupted():
                    break
            if jobs != 1:
                pool.shutdown(cancel_futures=True)
            if interrupted():
                print(f"rbtutor grade: stopped by Ctrl-C after {done} of {plural(len(work), 'submission')}; "
                      "grades.csv and the reports were not written. Run rbtutor grade again to grade "
                      "every submission.", file=sys.stderr)
                return 130
    return finish_run(layout, grader, count, failures, time.perf_counter() - start, f"with {jobs} worker(s)")


def _pool_results(pool, work, task=None, new_pool=None):
    """The result of every job of ``work``, in order, from ``pool``.

    When a worker process dies, ``ProcessPoolExecutor`` fails every job still pending, not
    only the one that worker held. So the jobs whose result was lost are tried once more, each
    in a pool of its own (``new_pool(1)``, :func:`worker_pool` with cleaners by default): a job that kills its
    worker again is its own failure, and the others are graded.
    """

    task = task or autograde_one
    new_pool = new_pool or functools.partial(worker_pool, cleaners=True)
    futures = [pool.submit(task, job) for job in work]
    for job, future in zip(work, futures, strict=True):
        try:
            yield future.result()
        except BrokenProcessPool:
            yield _alone(job, task, new_pool)


def _alone(job, task, new_pool):
    """``task(job)`` in a new one-worker pool; a worker that dies makes it NOT GRADED."""

    _, assignment, student = job
    with new_pool(1) as pool:
        try:
            return pool.submit(task, job).result()
        except BrokenProcessPool as exc:
            return assignment, student, "NOT GRADED", float("nan"), f"its worker process died ({exc})"
