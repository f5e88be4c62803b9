"""``grade`` on a Dask cluster: one task per submission, each graded on a worker as locally.

Step of the pipeline: the instructor's loop (:mod:`rbtutor.course.grade`), with the local
process pool replaced by the workers of a Dask scheduler (``python -m rbtutor.course grade
--scheduler tcp://host:8786``). Each task is :func:`rbtutor.course.grade.autograde_one`
unchanged: the worker takes the submission in, runs it in its own sandbox, judges it with the
same judge, records the scores in the gradebook and writes the feedback pages. The client
then exports ``grades.csv`` and writes the integrity report, as locally.

What a worker needs (checked before anything is written, see :func:`check_workers`):

* rbtutor installed with the ``course`` extra, the same version as the client;
* the course folder at the same path as on the client (a shared file system), readable and
  writable by the worker's user;
* the same gradebook: the SQLite file of the course when every worker runs on the client's
  machine, otherwise a PostgreSQL server named by ``RBTUTOR_GRADEBOOK`` in the environment of
  the client and of every worker;
* a working sandbox (bubblewrap with user namespaces, or root), see
  :func:`rbtutor.grading.sandbox.check_sandbox`;
* one thread per worker process (``dask worker --nthreads 1``; use ``--nworkers`` for more
  processes): a worker process grades one notebook at a time.

Nothing is lost. A worker that dies while grading a submission (a killed process, a lost
machine) has its task rescheduled by the scheduler on another worker; since
``autograde_one`` re-grades with ``force=True`` from the submission, the grade is the same.
A task whose workers died :data:`ALLOWED_FAILURES` + 1 times, or that raised on every one of
its :data:`RETRIES` + 1 tries, is listed at the end with its reason (exit status 1); so is a
submission whose student id is refused (it is never sent to a worker). What one submission
raises while it is graded is caught in the task itself and is that submission's result. A client
interrupted part-way leaves nothing half-done that a second run does not redo: the second run
first waits for the tasks the first one left running on the workers, then grades every
submission again.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..grading.config import GRADING
from ..grading.report import terminal_text
from ..grading.sandbox import SandboxError, check_sandbox
from .layout import CourseLayout

#: times a task may lose its worker before it is listed as failed (the scheduler's
#: ``distributed.scheduler.allowed-failures``, set for the run by the client): a lost machine or
#: two are survived, a submission that keeps taking its worker down stops after three
ALLOWED_FAILURES = GRADING.run_allowed_failures
#: times a task that raised (rather than lost its worker) is tried again, anywhere
RETRIES = GRADING.run_retries
#: seconds to wait for the scheduler to answer, and for a first worker to join it
CONNECT_TIMEOUT = GRADING.run_connect_timeout
WORKER_TIMEOUT = GRADING.run_worker_timeout
#: every task of a grading run has a key starting with this (see :func:`task_key`)
KEY_PREFIX = "rbtutor-grade"


class ClusterError(RuntimeError):
    """The scheduler cannot be reached, or a worker cannot grade this course (the message says why)."""


def task_key(assignment: str, student: str) -> str:
    """The Dask key of the task that grades ``student``'s ``assignment`` (one per submission).

    Examples
    --------
    >>> task_key("problem03", "ann")
    'rbtutor-grade-problem03-ann'
    """
    return f"{KEY_PREFIX}-{assignment}-{student}"


def _redacted(url: str) -> str:
    """A database URL without its password (for messages)."""
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return url


def worker_facts(root: str, dask_worker=None) -> dict:
    """What one worker knows of the course at ``root``; run on every worker by :func:`check_workers`.

    Parameters
    ----------
    root : str
        The course folder, as the client names it.
    dask_worker : distributed.Worker
        The worker (given by ``Client.run``).

    Returns
    -------
    dict
        ``host``, ``pid``, ``nthreads`` (of this worker), ``version`` (rbtutor's),
        ``course`` (None, or why the folder is not usable here), ``gradebook`` (the URL this
        worker would use), ``sandbox`` (None, or why no sandbox can start here).
    """


    layout = CourseLayout(Path(root))
    course = None
    if not layout.config.is_file():
        course = f"no {layout.config} on this worker (the course folder must be shared, at the same path)"
    elif not os.access(layout.root, os.R_OK | os.W_OK | os.X_OK):
        course = f"{layout.root} is not readable and writable by this worker's user (uid {os.getuid()})"
    elif not layout.submitted().is_dir():
        course = f"no {layout.submitted()} on this worker (is the shared folder up to date?)"
    sandbox = None
    if os.environ.get("RBTUTOR_UNCONFINED") == "1":
        sandbox = "RBTUTOR_UNCONFINED=1 is set on this worker"
    else:
        try:
            check_sandbox()
        except SandboxError as exc:
            sandbox = str(exc)
    try:
        installed = version("rbtutor")
    except PackageNotFoundError:
        installed = None
    return {"host": socket.gethostname(), "pid": os.getpid(), "nthreads": dask_worker.state.nthreads,
            "version": installed, "course": course, "gradebook": layout.gradebook_url, "sandbox": sandbox}


def check_workers(client, layout: CourseLayout, *, timeout: float = WORKER_TIMEOUT) -> dict[str, dict]:
    """Raise :class:`ClusterError` unless every worker of ``client`` can grade ``layout``'s course.

    Waits up to ``timeout`` seconds for a first worker, runs :func:`worker_facts` on each and
    compares what it saw with the client: the course folder, rbtutor's version, the gradebook
    URL, the sandbox and one thread per worker. Returns the facts by worker address.
    """

    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise ClusterError(f"the scheduler {client.scheduler.address} has no worker (waited {timeout:g} s); "
                           "start some with `dask worker ADDRESS --nthreads 1`") from None
    try:
        facts = client.run(worker_facts, str(layout.root), on_error="return")
    except Exception as exc:  # noqa: BLE001 - the function could not even be sent or run: any exception says why
        raise ClusterError(f"cannot run the worker check: {exc!r}") from None
    try:
        mine = version("rbtutor")
    except PackageNotFoundError:
        mine = None
    here = socket.gethostname()
    problems = []
    for address, fact in sorted(facts.items()):
        if isinstance(fact, BaseException):
            problems.append(f"{address}: the check failed there ({type(fact).__name__}: {fact}); "
                            "is rbtutor installed with its course extra on that worker?")
            continue
        where = f"{address} ({fact['host']})"
        if fact["course"]:
            problems.append(f"{where}: {fact['course']}")
        if fact["sandbox"]:
            problems.append(f"{where}: no grading sandbox: {fact['sandbox']}")
        if fact["nthreads"] != 1:
            problems.append(f"{where}: {fact['nthreads']} threads; a worker grades one notebook at a time "
                            "(start workers with --nthreads 1, and --nworkers N for more processes)")
        if fact["version"] != mine:
            problems.append(f"{where}: rbtutor {fact['version']} installed, the client has {mine}")
        if fact["gradebook"] != layout.gradebook_url:
            problems.append(f"{where}: gradebook {_redacted(fact['gradebook'])}, the client's is "
                            f"{_redacted(layout.gradebook_url)} (set the same RBTUTOR_GRADEBOOK everywhere)")
        elif fact["host"] != here and layout.gradebook_url.startswith("sqlite"):
            problems.append(f"{where}: runs on another machine than the client ({here}) and the gradebook is "
                            "the course's SQLite file; with workers on several machines set RBTUTOR_GRADEBOOK "
                            "to a PostgreSQL URL for the client and every worker")
    if problems:
        raise ClusterError("these workers cannot grade this course:\n  " + "\n  ".join(problems))
    return facts


def _running_grading_tasks(dask_worker) -> list[str]:
    """Keys of grading tasks still occupying a thread of this worker (also those a client gave up)."""
    return sorted(str(ts.key) for ts in dask_worker.state.all_running_tasks
                  if str(ts.key).startswith(KEY_PREFIX))


def wait_for_earlier_run(client, *, timeout: float = 900.0) -> int:
    """Wait until no worker is still grading for an earlier, interrupted client; return how many were.

    A task cannot be stopped once its worker runs it; a client that was interrupted leaves it
    running, writing the same submission's folders and gradebook rows that the new run is about
    to write. ``timeout`` is a safety net above the notebook time limit.
    """
    deadline = time.monotonic() + timeout
    first = None
    while True:
        running = sorted({k for keys in client.run(_running_grading_tasks).values() for k in keys})
        if first is None:
            first = len(running)
            if running:
                print(f"waiting for {len(running)} grading task(s) of an earlier run still running on "
                      "the workers", flush=True)
        if not running:
            return first
        if time.monotonic() > deadline:
            raise ClusterError(f"grading tasks of an earlier run still running after {timeout:g} s: "
                               + ", ".join(running[:5]))
        time.sleep(0.5)  # polling the workers, not waiting for a guess: the loop ends when they are idle


def set_allowed_failures(client, count: int) -> None:
    """Set the scheduler's ``allowed_failures`` (config ``distributed.scheduler.allowed-failures``).

    The function sent is defined here, inside, so that it travels by value: the scheduler needs
    ``distributed`` only, not rbtutor. Where the scheduler refuses to run it, its own setting
    stays, and a note says so.
    """
    def setting(count, dask_scheduler=None):
        dask_scheduler.allowed_failures = count
        return dask_scheduler.allowed_failures

    try:
        client.run_on_scheduler(setting, count)
    except Exception as exc:  # noqa: BLE001 - a scheduler that blocks run_function: any exception just means "not set"
        print(f"note: the scheduler kept its own allowed-failures ({type(exc).__name__}: {exc})",
              file=sys.stderr)


def connect(address: str, *, timeout: float = CONNECT_TIMEOUT):
    """A ``distributed.Client`` of the scheduler at ``address``; :class:`ClusterError` if it cannot be reached."""
    try:
        # deferred: distributed takes 505 ms to import (-X importtime, 2026-12-06); optional, for --scheduler
        from distributed import Client
    except ImportError:
        raise ClusterError("grading on a cluster needs Dask's `distributed` "
                           "(pip install 'rbtutor[course]')") from None
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address!r} (waited {timeout:g} s): "
                           f"{exc}") from None


def grade_on_cluster(layout: CourseLayout, address: str, *, worker_timeout: float = WORKER_TIMEOUT) -> int:
    """Autograde every submission of ``layout`` on the workers of the Dask scheduler at ``address``.

    ``worker_timeout`` is how long to wait for a first worker (longer where workers are batch
    jobs that queue). The workers present then are checked; a worker that joins later is not
    (a task it cannot run fails there, is tried once more, and is listed if it fails again).

    Returns the exit status of ``python -m rbtutor.course grade``: 0 when every submission was
    graded, 1 when some could not be (each listed on stderr with its reason), 2 when the
    scheduler cannot be reached or a worker cannot grade this course (nothing is written then).
    """
    try:
        client = connect(address)
    except ClusterError as exc:
        print(f"rbtutor grade: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            facts = check_workers(client, layout, timeout=worker_timeout)
            wait_for_earlier_run(client)
        except ClusterError as exc:
            print(f"rbtutor grade: {exc}", file=sys.stderr)
            return 2
        set_allowed_failures(client, ALLOWED_FAILURES)
        return _grade(client, layout, facts)
    finally:
        client.close()


def _grade(client, layout: CourseLayout, facts: dict) -> int:
    """One task per submission on the cluster's workers, results recorded as they come."""
    # deferred: distributed takes 505 ms to import (-X importtime, 2026-12-06); only a cluster run needs it
    from distributed import as_completed

    # deferred: distributed.scheduler takes 568 ms to import (-X importtime, 2026-12-06); only a cluster run needs it
    from distributed.scheduler import KilledWorker

    # deferred: rbtutor.course.grade takes 1748 ms to import (-X importtime, 2026-12-06); only a cluster run needs it
    from .grade import autograde_one, finish_run, record_result, start_run, stop_when_interrupted

    try:
        grader, work, failures = start_run(layout)
    except ValueError as exc:  # exercises/due_dates.yaml is checked before anything is graded
        print(f"rbtutor grade: {terminal_text(exc)}", file=sys.stderr)
        return 2
    count = len(work) + len(failures)
    hosts = sorted({f["host"] for f in facts.values()})
    futures: dict = {}
    with stop_when_interrupted(at_once=True) as interrupted:
        try:
            print(f"grading {len(work)} submissions on {len(facts)} worker(s) on {', '.join(hosts)} "
                  f"(scheduler {client.scheduler.address})", flush=True)
            start = time.perf_counter()
            futures = {client.submit(autograde_one, job, key=task_key(job[1], job[2]), pure=False,
                                     retries=RETRIES): job for job in work}
            for k, future in enumerate(as_completed(futures, loop=client.loop), 1):
                _, assignment, student = futures[future]
                try:
                    assignment, student, summary, seconds, problem = future.result()
                except KilledWorker as exc:
                    summary, seconds = "NOT GRADED", float("nan")
                    problem = (f"its worker died {exc.allowed_failures + 1} times while grading it "
                               f"(last {exc.last_worker.address})")
                except Exception as exc:  # noqa: BLE001 - raised by the task on every try: listed, never lost
                    summary, seconds = "NOT GRADED", float("nan")
                    problem = f"{type(exc).__name__}: {exc}"
                record_result(k, len(work), (assignment, student, summary, seconds, problem), start, failures)
                if interrupted():
                    break
            if interrupted():
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            client.cancel(list(futures))
            print("rbtutor grade: stopped by Ctrl-C; grades.csv and the reports were not written. Tasks already "
                  "running on the workers finish there; run rbtutor grade again, which waits for them and then "
                  "grades every submission.", file=sys.stderr, flush=True)
            return 130
    where = f"on {len(client.scheduler_info()['workers'])} worker(s) of {client.scheduler.address}"
    return finish_run(layout, grader, count, failures, time.perf_counter() - start, where)
