"""Step: sandbox (kernel start). The zygote: kernels that start as a copy of a prepared process.

Starting a grading kernel from nothing costs a new Python, ipykernel, numpy and scipy:
about 0.3 CPU s per notebook, several times what a notebook's own code costs. A grading
run therefore starts one zygote (:func:`rbtutor.grading.sandbox.start_zygote`), which its
workers share: a process that has imported those libraries once and never runs a student's
code itself.
For each notebook, the launcher (:mod:`rbtutor.grading.sandbox`) first starts that
notebook's own bubblewrap sandbox, exactly as for a kernel started from nothing, with a
placeholder in it; the zygote then forks a copy of itself that joins the sandbox's
namespaces and becomes the kernel. The sandbox, not the copy, defines what the kernel
can see, so each notebook still has its own file system view, process numbering, IPC,
network (none) and host name, all of which end with it.

What the copy does before any student code runs (:func:`_become_kernel`), in this order:
close every file descriptor but its standard streams (the launcher's), set the limits,
drop to the sandbox user when grading as root, drop every capability (effective,
permitted, inheritable, ambient and bounding), set no-new-privileges, and then read
back ``/proc/self/status`` to check all of it; only when the check passes does it tell
the launcher that it is ready and start the kernel. Any failure before that point ends
the copy, and the launcher starts the kernel from nothing instead, so a kernel never runs
less confined than one started without the zygote.

Protocol: a SEQPACKET socket in the abstract namespace of the grader's network namespace
(sandboxes have their own, so no kernel can reach it). Both ends check the other with
SO_PEERCRED: the zygote serves only its own uid; the launcher talks only to the pid the
zygote's address names (``RBTUTOR_ZYGOTE`` is ``<name>@<pid>``) with the launcher's uid, and
sends nothing to anyone else. Each connection is read in a process of its own, at most
RECEIVE_TIMEOUT seconds, so a silent peer holds up no other request. The launcher sends one
message: the request as JSON (with the path of the kernel's memory cgroup, which the copy
joins before it enters the sandbox), with five descriptors (a pidfd of the sandbox's first
process, the write end of the placeholder's status pipe, the kernel's stdin, stdout and
stderr, which are /dev/null and the launcher's output pipe, never the grader's); the copy
answers ``ready`` or ``error: ...``.
When the kernel ends, its parent writes the exit status (128 + signal when killed) to
the status pipe; the placeholder exits with it, and so does the sandbox, which is how
the kernel manager learns how its kernel ended.

This file is run as a program (``python -s -c <this file's text> NAME``): it imports
nothing of rbtutor, which the sandbox hides and a kernel must not see.
"""

import contextlib
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys

# namespace flags of setns(2)
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
SANDBOX_NAMESPACES = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
# prctl(2) options
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
LIMITS = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC,
          "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}
RECEIVE_TIMEOUT = 10  # seconds a launcher has to send its request once connected
# what the kernels import, once here rather than once per notebook (ipykernel skips the debugger, as
# the grading kernel does: debugpy is refused before ipykernel is imported); the second line is what
# a kernel's IPKernelApp.initialize() imported after the first, 14 ms a kernel (2026-12-04)
PRELOAD = ("numpy", "scipy.integrate", "sympy", "ipykernel.kernelapp", "ipykernel.ipkernel",
           "IPython.core.completerlib", "IPython.core.debugger", "IPython.core.oinspect",
           "IPython.extensions.storemagic", "sqlite3", "tornado.gen", "tornado.queues",
           "tornado.platform.asyncio", "ipykernel.debugger")

_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _drop_bounding_and_ambient() -> None:
    """Empty the bounding and ambient capability sets (the former needs CAP_SETPCAP, still held)."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"dropping capability {cap} from the bounding set")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")


def _clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets."""
    _check(_libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), (_CapData * 2)()), "capset")


def _confined_as(uid: int, gid: int) -> None:
    """Raise unless /proc/self/status shows ``uid`` and ``gid``, no capability and no-new-privileges."""
    with open("/proc/self/status") as handle:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)
    wrong = [f"{key} {status.get(key)}" for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
             if int(status.get(key, "1"), 16) != 0]
    wrong += [f"{key} {status.get(key)}" for key, want in (("Uid", uid), ("Gid", gid))
              if set(status.get(key, "").split()) != {str(want)}]
    wrong += [] if status.get("NoNewPrivs") == "1" else [f"NoNewPrivs {status.get('NoNewPrivs')}"]
    if wrong:
        raise OSError(f"the kernel process is not confined as required: {', '.join(wrong)}")


def _become_kernel(request: dict, stdio: list[int], conn: socket.socket) -> None:
    """In the sandbox's namespaces, as the new process of its PID namespace: confine, then run the kernel."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
    os.setsid()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    keep = conn.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    for name, value in request["limits"].items():
        resource.setrlimit(LIMITS[name], (value, value))
    uid = request["uid"]
    _drop_bounding_and_ambient()
    if uid is None:  # bwrap's user namespace, joined: the grader's own uid and gid, mapped there
        uid, gid = os.getuid(), os.getgid()
    else:  # grading as root: the sandbox's own user, as setpriv makes the placeholder
        gid = uid
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        # dumpable again, as after the exec that a kernel started from nothing goes through
        _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    _clear_capabilities()
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no-new-privileges")
    _confined_as(uid, gid)
    os.chdir(request["cwd"])
    os.umask(0o022)
    os.environ.clear()
    os.environ.update(request["env"], PWD=request["cwd"])  # PWD as bwrap sets it
    sys.argv = ["-c", *request["argv"]]
    sys.path[0] = ""  # the working folder, as for ``python -c``
    conn.sendall(b"ready")
    conn.close()
    exec(compile(request["source"], "<rbtutor-grading-kernel>", "exec"), {"__name__": "__main__"})


def _join(procs: str) -> None:
    """Move this process into the cgroup whose ``cgroup.procs`` is ``procs`` (a kernel's memory group, made
    by the launcher; this process stays in it with the kernel, which dies with it)."""
    if not procs.startswith("/sys/fs/cgroup/") or os.path.basename(procs) != "cgroup.procs" or ".." in procs:
        raise OSError(f"expected a cgroup.procs file under /sys/fs/cgroup, got {procs!r}")
    with open(procs, "w") as handle:
        handle.write(str(os.getpid()))


def _serve(request: dict, fds: list[int], conn: socket.socket) -> int:
    """A copy of the zygote: join the sandbox, fork the kernel, report how it ended. Returns a status."""
    pidfd, status_pipe, *stdio = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    flags = SANDBOX_NAMESPACES | (CLONE_NEWUSER if request["uid"] is None else 0)
    group = request.get("cgroup")
    try:
        if group:  # the kernel's memory group, joined while the host's /sys is still in view
            _join(group)
        _check(_libc.setns(pidfd, flags), "joining the sandbox's namespaces")
        os.close(pidfd)
        kernel = os.fork()
    except OSError as exc:
        conn.sendall(f"error: {exc}".encode())
        os.write(status_pipe, b"125\n")
        return 1
    if kernel == 0:
        os.close(status_pipe)
        code = 1
        try:
            _become_kernel(request, stdio, conn)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - reported, then this process ends
            with contextlib.suppress(OSError):
                conn.sendall(f"error: {type(exc).__name__}: {exc}".encode())
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(code)
    conn.close()
    for fd in stdio:
        os.close(fd)
    _, status = os.waitpid(kernel, 0)
    code = os.waitstatus_to_exitcode(status)
    os.write(status_pipe, f"{128 - code if code < 0 else code}\n".encode())
    return 0


def main(name: str) -> None:
    """Prepare, then start a kernel for each request until standard input closes (the worker is gone)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    sys.modules["debugpy"] = None
    for module in PRELOAD:
        __import__(module)
    _remove_own_home()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    listener.bind("\0" + name)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the copies are reaped by the system
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            return
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        try:
            _, peer_uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            # each request is read in a process of its own, with a time limit: a peer that says
            # nothing holds up no one else
            if peer_uid == os.getuid() and os.fork() == 0:
                listener.close()
                os._exit(_receive(conn))
        finally:
            conn.close()


def _remove_own_home() -> None:
    """Remove the folder this process was started in as HOME, once the libraries are loaded: nothing
    later uses it (a kernel gets the sandbox's HOME), and the process that made it may end without
    running its exit handlers (a pool's worker ends with os._exit), which left one folder a worker
    in /tmp. Only the client's folder (``rbtutor-zygote-*``, this process's working folder) is removed."""
    home = os.environ.get("HOME", "")
    if os.path.basename(home).startswith("rbtutor-zygote-") and os.path.realpath(home) == os.getcwd():
        shutil.rmtree(home, ignore_errors=True)


def _receive(conn: socket.socket) -> int:
    """Read one request (RECEIVE_TIMEOUT seconds at most) and serve it; return this process's status."""
    fds: list[int] = []
    try:
        conn.settimeout(RECEIVE_TIMEOUT)
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 5)
        conn.settimeout(None)
        if len(fds) != 5:
            return 1
        request = json.loads(message)
        if not isinstance(request, dict):
            return 1
        return _serve(request, fds, conn)
    except (OSError, ValueError):
        return 1


if __name__ == "__main__":
    main(sys.argv[1])
    # No interpreter shutdown: tearing down numpy, scipy and sympy took 0.28 s after the last
    # request (the grading run waits for it), and this process has nothing left to flush or close.
    sys.stdout.flush()
    os._exit(0)
