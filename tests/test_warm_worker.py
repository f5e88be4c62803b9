"""The warm-up of the process grading workers are forked from (rbtutor.course.warm_worker)."""

from __future__ import annotations

import os
import subprocess
import sys

from rbtutor.course import grade, warm_worker


def test_the_fork_server_preloads_the_warm_up_last():
    assert grade.WORKER_MODULES[-1] == "rbtutor.course.warm_worker"


def test_importing_it_fills_the_caches_of_a_first_notebook():
    """In a fresh process, as in the fork server: what the first notebook would load is loaded."""
    probe = """
import sys
import rbtutor.course.warm_worker
from nbformat import validator
from rbtutor.grading.judge import read_published
print("IPython.paths" in sys.modules, "pygments.lexers.python" in sys.modules,
      sorted(k[-1] for k in validator.validators) == [False, True], read_published.cache_info().currsize)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True", "1"]


def test_a_failing_step_is_skipped_not_raised(monkeypatch):
    """An exception at import would stop the fork server, and every worker with it."""
    def broken(*_, **__):
        raise RuntimeError("no feedback today")

    monkeypatch.setattr(warm_worker, "render_feedback", broken)
    monkeypatch.setattr(warm_worker, "read_published", broken)
    warm_worker.warm()  # returns


def test_only_the_fork_server_ends_without_teardown():
    """Imported anywhere but in the fork server, the module leaves the process's exit status alone."""
    result = subprocess.run([sys.executable, "-c", "import rbtutor.course.warm_worker; raise SystemExit(3)"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 3, result.stderr[-2000:]


def test_the_fork_server_ends_without_teardown_and_its_workers_work():
    """In the fork server (and so in the workers forked from it) the module knows where it is and
    registers the quick end; the pool works, and its fork server ends when told to. (How much
    quicker: benchmarks/bench_grading.py counts the CPU of the end of each run.)"""
    probe = """
import os, sys, threading
from multiprocessing import forkserver
from rbtutor.course.grade import worker_pool
where = "__import__('rbtutor.course.warm_worker').course.warm_worker.IN_FORK_SERVER"
other = threading.Thread(target=threading.Event().wait, args=(30,), daemon=True)
other.start()  # a second thread: the workers come from the fork server
with worker_pool(2) as pool:
    assert list(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]
    assert pool.submit(eval, where).result() is True
server = forkserver._forkserver._forkserver_pid
assert "rbtutor.course.warm_worker" not in sys.modules  # only the server imported it
forkserver._forkserver._stop()
print(server)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert not os.path.exists(f"/proc/{int(out[0])}"), "the fork server still runs"
    assert warm_worker.IN_FORK_SERVER is False  # imported by this test's process


def test_workers_are_forked_from_this_process_when_it_runs_one_thread():
    """The grading code is imported once, here, and the workers are this process's children: no
    fork server (which would import it all again). The warm-up ran here, without the fork
    server's quick end, and the objects the workers share with this process are frozen."""
    probe = """
import gc, os, sys
from multiprocessing import forkserver
from rbtutor.course.grade import worker_pool
with worker_pool(2) as pool:
    parents = set(pool.map(eval, ["__import__('os').getppid()"] * 4))
print(parents == {os.getpid()}, forkserver._forkserver._forkserver_pid is None,
      "rbtutor.course.warm_worker" in sys.modules, sys.modules["rbtutor.course.warm_worker"].IN_FORK_SERVER,
      gc.get_freeze_count() > 10000)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True", "False", "True"]  # the last: the shared objects frozen before the fork


def test_with_another_thread_running_the_workers_come_from_the_fork_server():
    """A fork copies only the forking thread: a lock another thread held at that moment would stay
    locked in the worker. So while a second thread runs, the workers come from the fork server."""
    probe = """
import os, threading
from multiprocessing import forkserver
from rbtutor.course.grade import worker_pool
done = threading.Event()
other = threading.Thread(target=done.wait)
other.start()
try:
    with worker_pool(2) as pool:
        parents = set(pool.map(eval, ["__import__('os').getppid()"] * 4))
finally:
    done.set()
    other.join()
server = forkserver._forkserver._forkserver_pid
print(parents == {server}, server != os.getpid())
forkserver._forkserver._stop()
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_grading_workers_start_their_cleaner_first_and_other_pools_none():
    """A grading pool's workers each have a cleaner before their first task (forked while the worker
    still shares its pages with this process); a pool that does not grade starts none."""
    probe = """
from rbtutor.course.grade import worker_pool
ask = "__import__('rbtutor.grading.sanitize').grading.sanitize.cleaner_pid()"
with worker_pool(2, cleaners=True) as pool:
    grading = pool.submit(eval, ask).result()
with worker_pool(2) as pool:
    other = pool.submit(eval, ask).result()
print(grading is not None, other is None)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]
