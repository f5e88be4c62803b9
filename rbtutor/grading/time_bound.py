"""A wall-time bound on a block of the grading process, for steps that have no bound of their own.

One helper for every such bound (a whole submission in a grading worker, one feedback page), so
that bounds can nest. Two ways to stop a block, by the thread it runs in:

* the main thread (a worker process of ``make grade``): a real-time interval timer
  (``SIGALRM``). A process has one such timer, so a bound set inside another gives the outer
  one back, with the time it has left, when it ends.
* any other thread (a Dask worker runs each task in a thread of its own, and signals reach the
  main thread only): a watchdog timer thread that raises the error in the block's thread with
  CPython's ``PyThreadState_SetAsyncExc``. Such an error is raised at the next Python
  instruction the thread runs, so a call blocked in C code is stopped only when it returns; the
  grading steps that wait (kernel messages, the gradebook) do so with their own timeouts and
  come back to Python often.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from contextlib import contextmanager
from time import monotonic


@contextmanager
def time_bound(seconds: float, error: Exception):
    """Raise ``error`` in the block once ``seconds`` of wall time have passed.

    Bounds code that waits as well as code that computes, in the main thread or any other (see
    the module docstring for how each is stopped and what a thread cannot be stopped in). For
    ``seconds <= 0`` the block runs unbounded. Bounds nest: the one that ends first fires.
    In a thread other than the main one, the error raised is of a subclass of ``error``'s
    class made for this bound, with ``error``'s arguments.

    >>> with time_bound(5.0, TimeoutError("too slow")):
    ...     total = sum(range(10))
    >>> total
    45
    """
    if seconds <= 0:
        yield
    elif threading.current_thread() is threading.main_thread():
        with _alarm(seconds, error):
            yield
    else:
        with _watchdog(seconds, error):
            yield


@contextmanager
def _alarm(seconds: float, error: Exception):
    """The main thread's bound: ``SIGALRM`` after ``seconds``, nesting inside an outer alarm."""
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left and outer_left <= seconds:
        yield
        return

    def expired(signum, frame):
        raise error

    start = monotonic()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (monotonic() - start), 1e-3))


def _raiser(error: Exception) -> type[BaseException]:
    """A class to raise asynchronously (CPython raises a class, not an instance) carrying ``error``'s text."""
    args = error.args

    def __init__(self, *_ignored):
        type(error).__init__(self, *args)

    return type(type(error).__name__, (type(error),), {"__init__": __init__, "__module__": type(error).__module__})


@contextmanager
def _watchdog(seconds: float, error: Exception):
    """Any other thread's bound: a timer thread raises ``error`` in this thread after ``seconds``.

    The lock and flag make sure the error is never raised once the block has been left.
    """
    target = ctypes.c_ulong(threading.get_ident())
    raised = _raiser(error)
    lock, state = threading.Lock(), {"done": False}

    def expired():
        with lock:
            if not state["done"]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(raised))

    timer = threading.Timer(seconds, expired)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        timer.cancel()
