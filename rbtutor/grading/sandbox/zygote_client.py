"""Step: sandbox (kernel start, the launcher's side of the zygote).

:func:`start_zygote`, :func:`zygote_starting` and :func:`zygote_running` start the zygote
(:mod:`rbtutor.grading.sandbox.zygote`) for a grading run; :func:`start_from_zygote`, called by
the launcher, checks that the zygote answers on its socket and has it put a copy of itself in a
new sandbox as the kernel.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .plan import INNER_SOURCE, SandboxError, SandboxPlan, check_sandbox, drop_to, kernel_env, kernel_python

# The sandbox's placeholder for a kernel started by the zygote: says it is ready (the sandbox is
# set up), then waits for the kernel's exit status and exits with it (125 if none comes).
PLACEHOLDER = 'echo; read -r status; exit "${status:-125}"'
# the zygote this process started, its name and the pid of the process that started it: a worker
# forked from the run has a copy of this, but the zygote is its parent's (the copied Popen cannot
# even be polled there: waitpid fails, and subprocess takes that for an ended process)
_zygote: tuple[subprocess.Popen, str, int] | None = None


def start_zygote(timeout: float = 120.0) -> str | None:
    """Start a zygote (see :mod:`rbtutor.grading.sandbox.zygote`) and return its address ``<name>@<pid>``, also
    set as ``RBTUTOR_ZYGOTE`` so that the kernels this process and its children start come from it.

    Returns the name of the running one if this process or its parent started one; None
    (kernels then start from nothing) where there is no sandbox or the zygote did not
    come up within ``timeout`` seconds. It ends with this process.
    """
    own = _zygote is not None and _zygote[2] == os.getpid()
    if own and _zygote[0].poll() is None:
        os.environ["RBTUTOR_ZYGOTE"] = _zygote[1]
        return _zygote[1]
    if not own and os.environ.get("RBTUTOR_ZYGOTE"):  # a parent's, such as the grading run's
        return os.environ["RBTUTOR_ZYGOTE"]
    launched = _launch_zygote()
    return None if launched is None else _await_zygote(*launched, timeout)


def _launch_zygote() -> tuple[subprocess.Popen, str] | None:
    """The zygote process started (not yet ready) and its name; None where there is no sandbox."""
    if os.environ.get("RBTUTOR_UNCONFINED") == "1":
        return None
    try:
        check_sandbox()
    except SandboxError:
        return None
    # deferred: secrets takes 5.1 ms to import (-X importtime, 2026-12-06), at every kernel start
    import secrets

    name = f"rbtutor-zygote-{os.getpid()}-{secrets.token_hex(8)}"
    home = tempfile.mkdtemp(prefix="rbtutor-zygote-")  # the zygote removes it once its libraries are loaded
    atexit.register(shutil.rmtree, home, ignore_errors=True)  # in case it never got that far
    source = (Path(__file__).parent / "zygote.py").read_text()
    process = subprocess.Popen([kernel_python(), "-s", "-c", source, name],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=home,
                               env={**kernel_env(), "HOME": home}, start_new_session=True)
    atexit.register(_stop_zygote, process)
    return process, name


def _await_zygote(process: subprocess.Popen, name: str, timeout: float) -> str | None:
    """Wait until the launched zygote says it is ready; then it is this process's zygote (returns
    its address, also set as ``RBTUTOR_ZYGOTE``). None, with the zygote stopped, when it is not
    ready within ``timeout`` seconds."""
    global _zygote

    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready or process.stdout.readline().strip() != b"ready":
        process.kill()
        process.wait()
        print(f"rbtutor: the kernel zygote did not start within {timeout:g} s; kernels start from nothing",
              file=sys.stderr)
        return None
    value = f"{name}@{process.pid}"  # the launcher checks that this pid answers on the socket
    _zygote = (process, value, os.getpid())
    os.environ["RBTUTOR_ZYGOTE"] = value
    return value


def _stop_zygote(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.stdin.close()  # the zygote ends when its standard input does
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def zygote_starting(timeout: float = 120.0):
    """A zygote for the kernels started in the block, by this process and its children, started in
    the background: the block gets a function that waits until it is ready and returns its name
    (None when kernels start from nothing), so that other work can go on meanwhile. The one already
    running if there is one; else one started for the block and stopped after it."""
    global _zygote
    if os.environ.get("RBTUTOR_ZYGOTE"):
        name = os.environ["RBTUTOR_ZYGOTE"]
        yield lambda: name
        return
    launched = _launch_zygote()
    answer: list[str | None] = []

    def ready() -> str | None:
        if launched and not answer:
            answer.append(_await_zygote(*launched, timeout))
        return answer[0] if answer else None

    try:
        yield ready
    finally:
        if launched:
            _stop_zygote(launched[0])
            if answer and answer[0]:
                _zygote = None
                os.environ.pop("RBTUTOR_ZYGOTE", None)


@contextmanager
def zygote_running(timeout: float = 120.0):
    """A zygote for the kernels started in the block (:func:`zygote_starting`), ready when the block
    starts. Yields its name, or None when kernels start from nothing."""
    with zygote_starting(timeout) as ready:
        yield ready()


def zygote_address(value: str) -> tuple[str, int]:
    """``RBTUTOR_ZYGOTE`` (``<name>@<pid>``) as the socket name and the pid of the zygote that must answer."""
    name, at, pid = value.rpartition("@")
    if not at or not name or not pid.isdigit():
        raise SandboxError(f"RBTUTOR_ZYGOTE must be <name>@<pid of the zygote>, got {value!r}")
    return name, int(pid)


def _peer(conn) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    # deferred: socket takes 3.2 ms to import (-X importtime, 2026-12-06), at every kernel start
    import socket

    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def start_from_zygote(value: str, plan: SandboxPlan, stdio: tuple[int, int, int], notices: list[str],
                      group: Path | None = None) -> tuple[subprocess.Popen, int] | None:
    """Start the sandbox of ``plan`` with a placeholder, and have zygote ``value`` (``name@pid``) put a
    copy of itself in it as the kernel, with ``stdio`` as its standard streams.

    Returns the sandbox's ``bwrap`` process and the pid of its first process, or None (with the reason
    appended to ``notices``) when the zygote could not be used; nothing of the notebook has run then,
    and the caller starts the kernel from nothing. Whoever answers on the zygote's socket must be
    the zygote (its pid and this user's uid, SO_PEERCRED) before anything is sent to it.
    """
    # deferred: socket takes 3.2 ms to import (-X importtime, 2026-12-06), at every kernel start
    import socket

    try:
        name, expected = zygote_address(value)
    except SandboxError as exc:
        notices.append(str(exc))
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(10)
        try:
            conn.connect("\0" + name)
            pid, uid = _peer(conn)
        except OSError as exc:
            notices.append(f"the zygote {name} cannot be reached ({exc})")
            return None
        if (pid, uid) != (expected, os.getuid()):
            notices.append(f"the zygote's socket {name} is answered by pid {pid} uid {uid}, not by the zygote "
                           f"(pid {expected} uid {os.getuid()}): nothing was sent to it")
            return None
        status_in, status_out = os.pipe()
        ready_in, ready_out = os.pipe()
        info_in, info_out = os.pipe()
        command = [*plan.bwrap, "--info-fd", str(info_out), "--", *drop_to(plan.uid), "sh", "-c", PLACEHOLDER]
        box = subprocess.Popen(command, stdin=status_in, stdout=ready_out, stderr=stdio[2], pass_fds=(info_out,))
        for fd in (status_in, ready_out, info_out):
            os.close(fd)
        with os.fdopen(info_in, "rb") as info, os.fdopen(ready_in, "rb") as ready:
            facts = info.read(4096)
            up = ready.read(1) == b"\n"
        first_pid = None
        try:
            if not up:
                raise OSError("the sandbox did not start")
            first_pid = json.loads(facts)["child-pid"]
            first = os.pidfd_open(first_pid)
            request = {"uid": plan.uid, "limits": plan.limits, "cwd": plan.work, "env": plan.env,
                       "argv": plan.args, "source": INNER_SOURCE,
                       "cgroup": str(group / "cgroup.procs") if group else None}
            try:
                socket.send_fds(conn, [json.dumps(request).encode()], [first, status_out, *stdio])
            finally:
                os.close(first)
            conn.settimeout(60)
            answer = conn.recv(4096)
        except (OSError, ValueError, KeyError) as exc:
            answer = f"error: {exc}".encode()
        finally:
            os.close(status_out)
        if answer != b"ready":
            box.kill()
            box.wait()
            notices.append("the zygote could not start the kernel: "
                           + _printable(answer.decode(errors="replace")[:300] or "no answer"))
            return None
    return box, first_pid


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)
