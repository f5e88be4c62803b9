"""Helpers for a child process forked from the grading process to work beside it (the sanitising
cleaner of :mod:`.sanitize`): what the child keeps of its parent, how it dies with it, and whole
messages over pipes."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time


def keep_only(*kept: int) -> None:
    """Close every file descriptor but the standard three and ``kept``. A long-lived child must not hold
    the parent's other pipes open: whoever reads one (a subprocess waiting for its stdin to end, a
    pool waiting for a worker's sentinel) would wait for the cleaner's end too."""
    low = 3
    for fd in sorted(kept):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


_LENGTH = 8  # bytes of the length that comes before each message (big-endian)


def send_message(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` whole, after its length (:func:`read_message` reads it)."""
    view = memoryview(len(data).to_bytes(_LENGTH, "big") + data)
    while view:
        view = view[os.write(fd, view):]


def read_message(fd: int, deadline: float | None = None) -> bytes | None:
    """The next message :func:`send_message` wrote to ``fd``, or None when ``fd`` closes first.

    Raises
    ------
    TimeoutError
        ``deadline`` (of ``time.monotonic``) passed before the whole message came.
    """
    header = _read_exactly(fd, _LENGTH, deadline)
    return None if header is None else _read_exactly(fd, int.from_bytes(header, "big"), deadline)


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def child_of(parent: int) -> None:
    """In the child: ignore the terminal's interrupt (the parent ends the child) and die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (Linux): killed when the parent ends
    except (OSError, AttributeError):
        pass  # not Linux: the parent's own bound still kills the child
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)
