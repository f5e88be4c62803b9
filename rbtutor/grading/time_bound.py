"""A wall-time bound on a block of the grading process, for steps that have no bound of their own.

One helper for every such bound (a whole submission in a grading worker, one feedback page), so
that bounds can nest: a process has one real-time interval timer, and a bound set inside another
must give the outer one back, with the time it has left, when it ends.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from time import monotonic


@contextmanager
def time_bound(seconds: float, error: Exception):
    """Raise ``error`` in the block once ``seconds`` of wall time have passed.

    A real-time interval timer (``SIGALRM``), so it bounds code that waits as well as code
    that computes. Signals reach the main thread only: in any other thread, or for
    ``seconds <= 0``, the block runs unbounded here. Inside an outer bound that ends first,
    nothing is added (the outer one fires); otherwise the outer timer is restored with the
    time it has left when the block ends.

    >>> with time_bound(5.0, TimeoutError("too slow")):
    ...     total = sum(range(10))
    >>> total
    45
    """
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
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
