"""Step: execute, its kernel. The kernel client and manager that answer as soon as the kernel does,
and each submission's kernel seed."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import tempfile
from contextlib import suppress
from functools import partial
from pathlib import Path
from queue import Empty
from time import monotonic

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Type, default

from .messages import CheckedChannel

RECONNECT_SECONDS = 0.005  # a socket's wait before it tries again to reach a kernel still starting


class PromptClient(AsyncKernelClient):
    """jupyter_client's asynchronous client, ready as soon as the kernel is.

    ``wait_for_ready`` asks for the kernel's info until the reply has come on the shell channel
    and the kernel's idle status for that same request on the IOPub channel (which proves the
    subscription is live). jupyter_client's own then waits for 0.2 s of silence on IOPub to flush
    it, at every kernel start; here nothing is left to flush that nbclient would not ignore (it
    reads IOPub by the id of each request).

    The client connects its sockets before the kernel has bound them, and ZeroMQ tries again
    only after ``RECONNECT_IVL``, 0.1 s by default: here :data:`RECONNECT_SECONDS`. Measured with
    an empty notebook in the confined kernel (2 cores, 2026-12-05): ready 0.13-0.23 s after the
    start before, 0.09-0.11 s after.

    Its channels are :class:`CheckedChannel`: every message is checked where it arrives.
    """

    shell_channel_class = Type(CheckedChannel)
    iopub_channel_class = Type(CheckedChannel)
    stdin_channel_class = Type(CheckedChannel)
    control_channel_class = Type(CheckedChannel)

    @default("context")
    def _context_default(self) -> zmq.asyncio.Context:
        context = super()._context_default()
        context.setsockopt(zmq.RECONNECT_IVL, round(RECONNECT_SECONDS * 1000))
        return context

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            request = self.kernel_info()
            reply = await first(self.shell_channel, 1.0, partial(_answers, request))
            # not idle within 50 ms: IOPub was not subscribed yet when the kernel published, so ask again
            if reply is not None and await first(self.iopub_channel, 0.05, partial(_idle_after, request)):
                self._handle_kernel_info_reply(reply)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")


class PromptKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, without its two waits of 0.1 s at each kernel's end.

    - **Stop.** After it kills a kernel, jupyter_client checks whether the process has ended every
      0.1 s, so every graded notebook (its kernel is killed at once, ``shutdown_kernel =
      "immediate"``) waited one whole interval for the first check. Here it checks every 5 ms.
    - **Clean-up.** Before a kill, jupyter_client sends the kernel an ``interrupt_request`` on the
      control socket. When the kernel is dead before the message has left, ending the context
      waits for the socket's linger (0.1 s) to deliver it. Here anything still queued on the
      control socket is dropped at clean-up, when the kernel has ended. Measured with an empty
      notebook in the confined kernel (2 cores, 2026-12-05): the stop took 0.015 or 0.115 s,
      about half the time each; it now takes 0.015 s.
    """

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        await super()._async_wait(pollinterval=min(pollinterval, 0.005))

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        if self._control_socket is not None:
            self._control_socket.linger = 0
        await super()._async_cleanup_resources(restart=restart)


def _answers(request: str, msg: dict) -> bool:
    return msg.get("parent_header", {}).get("msg_id") == request


def _idle_after(request: str, msg: dict) -> bool:
    return (_answers(request, msg) and msg.get("msg_type") == "status"
            and msg.get("content", {}).get("execution_state") == "idle")


async def first(channel, wait: float, wanted):
    """The first message on ``channel`` for which ``wanted(msg)`` holds, or None after ``wait`` seconds
    (the messages before it are read and dropped)."""
    end = monotonic() + wait
    while (left := end - monotonic()) > 0:
        try:
            msg = await channel.get_msg(timeout=left)
        except Empty:
            return None
        if wanted(msg):
            return msg
    return None


def kernel_seed(key: bytes, student: str, assignment: str) -> int:
    """The seed of ``random`` and NumPy's global generator in the kernel that runs one submission:
    the same for a student's assignment on every re-grade, different between students and assignments.

    The seed is HMAC-SHA256 of the student and the assignment under ``key``, the grader's own
    random key (:func:`seed_key`), cut to 64 bits. Why not the course's variants salt: the kernel
    is the student's, so they can print their seed, and the function that makes it is public. A
    seed made from the salt by any public function (a hash, or an HMAC keyed by the salt) lets
    whoever knows the seed test salt guesses offline, one hash per guess, and a confirmed salt
    gives every classmate's numbers and key. Under a key that is random, kept by the grader and
    independent of the salt, the seed says nothing about the salt, and without the key a student
    cannot work out a classmate's seed either.
    """
    message = "\0".join(("rbtutor-kernel-seed-2", student, assignment)).encode("utf-8", "surrogateescape")
    return int.from_bytes(hmac.new(bytes(key), message, hashlib.sha256).digest()[:8], "big")


#: the grader's key of the kernels' seeds, in the course's private scratch folder (``<root>/.grading``)
SEED_KEY_FILE = Path(".grading") / "kernel_seed.key"


def seed_key(path: str | Path) -> bytes:
    """The grader's key of the kernels' seeds, read from ``path``; made there first if it is missing.

    A new key is 32 random bytes, written as hex to a file of mode 0600 (its folder made with
    mode 0700) and put in place with a hard link, so that grading processes starting together
    agree on one key. The file is opened without following a link and must be a regular file
    that only its owner can read and write.

    Raises
    ------
    ValueError
        If the file is a link or not a regular file, others may read or write it, or it does not
        hold a key (64 hexadecimal digits).
    """
    path = Path(path)
    if not os.path.lexists(path):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kernel_seed-")  # mode 0600
        try:
            with os.fdopen(handle, "w") as out:
                out.write(secrets.token_hex(32) + "\n")
            with suppress(FileExistsError):  # another process was first: its key is the one read below
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"expected the kernels' seed key {path} to be a regular file")
        if info.st_mode & 0o077:
            raise ValueError(f"expected the kernels' seed key {path} to be private (mode 0600), got mode "
                             f"{stat.S_IMODE(info.st_mode):04o}")
        text = handle.read(200).strip()
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise ValueError(f"expected 64 hexadecimal digits in the kernels' seed key {path}; remove the file "
                         "and a new key is made (re-graded kernels then draw other numbers)")
    return bytes.fromhex(text)
