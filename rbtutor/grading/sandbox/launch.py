"""Step: sandbox (the launch). What the launcher does with a plan: start the kernel, record it.

The kernelspec (:func:`install`) runs this package's ``__main__`` for each kernel; :func:`main`
lays out the sandbox (:func:`rbtutor.grading.sandbox.plan.sandbox_plan`), puts the kernel in a
memory cgroup (:mod:`rbtutor.grading.sandbox.cgroups`), starts it as a copy of the zygote
(:mod:`rbtutor.grading.sandbox.zygote_client`) or from nothing (:func:`start_fresh`), links the
grader's socket folder to the kernel's sockets, and drains and records what the kernel writes to
its standard streams (:func:`kernel_record`, read by the grader).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .cgroups import inside, memory_group, memory_kills, remove_group
from .plan import (
    DEFAULT_TREE_MEMORY,
    INNER_SOURCE,
    KERNEL_NAME,
    OUTPUT_KEEP,
    SANDBOX_UID_BASE,
    SOCKETS,
    SandboxError,
    SandboxInputs,
    SandboxPlan,
    check_sandbox,
    connection_argument,
    course_roots,
    fresh_kernel_argv,
    kernel_connection,
    kernel_connection_path,
    kernel_env,
    kernel_limits,
    read_connection,
    sandbox_plan,
    size_from_env,
)
from .zygote_client import start_from_zygote

PR_SET_PDEATHSIG = 1


def install(prefix: str | None = None) -> str:
    """Write (or refresh) the kernelspec under ``<prefix>/share/jupyter/kernels``; return its name."""
    folder = os.path.join(prefix or sys.prefix, "share", "jupyter", "kernels", KERNEL_NAME)
    spec = {
        # the launcher runs as a plain script (-I: isolated, its folder not on sys.path; __main__.py loads
        # this package alone), so a kernel start does not pay for importing the rbtutor package (numpy, scipy)
        "argv": [sys.executable, "-I", str(Path(__file__).resolve().with_name("__main__.py")), "-f",
                 "{connection_file}"],
        "display_name": "Python 3 (rbtutor grading)",
        "language": "python",
        # a signal would reach bwrap, not the kernel: interrupt over the control channel
        "interrupt_mode": "message",
        "env": {"RBTUTOR_AUTOGRADING": "1", "MPLBACKEND": "Agg"},
    }
    path = os.path.join(folder, "kernel.json")
    text = json.dumps(spec, indent=1)
    if not os.path.exists(path) or Path(path).read_text() != text:
        os.makedirs(folder, exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    return KERNEL_NAME


def ipc_prefix() -> str:
    """A fresh private folder for the kernels' IPC sockets (removed at exit); return the prefix.

    For ``c.KernelManager.ip`` with ``c.KernelManager.transport = "ipc"``.
    """
    folder = tempfile.mkdtemp(prefix="rbtutor-kernel-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return os.path.join(folder, "kernel")


def sandbox_inputs(argv: list[str], work: Path) -> SandboxInputs:
    """Find out what one kernel's sandbox is laid out from (:class:`SandboxInputs`): runs ``bwrap`` once
    to check that it can make its namespaces, reads the connection file, the environment and /proc."""
    bwrap = check_sandbox()
    connection = read_connection(argv[connection_argument(argv)])
    work = work.resolve()
    grader_uid = os.getuid()
    sandbox_uid = SANDBOX_UID_BASE + os.getpid()
    package = Path(__file__).resolve().parents[2]  # rbtutor itself: hidden, wherever it is installed
    checkout = package.parent if (package.parent / "pyproject.toml").is_file() else package
    secret = [*course_roots(work), checkout]
    secret += [Path(p).resolve() for p in os.environ.get("RBTUTOR_SANDBOX_HIDE", "").split(os.pathsep) if p]
    return SandboxInputs(
        argv=list(argv), connection=connection, bwrap=bwrap, grader_uid=grader_uid, sandbox_uid=sandbox_uid,
        env=kernel_env(), limits=kernel_limits(sandbox_uid if grader_uid == 0 else grader_uid), work=work,
        venv=Path(sys.prefix).resolve(), base=Path(sys.base_prefix).resolve(), package=package, secret=secret,
        import_path=list(sys.path if sys.flags.safe_path else sys.path[1:]))


def write_kernel_connection(plan: SandboxPlan) -> Path:
    """Write the connection file the kernel of ``plan`` reads inside its sandbox (its sockets in SOCKETS),
    owned by the sandbox user when grading as root; return its path. The one file a plan needs written."""
    path = kernel_connection_path(plan.run, plan.name)
    path.unlink(missing_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        json.dump(kernel_connection(plan.connection), handle)
    if plan.uid is not None:
        os.chown(path, plan.uid, plan.uid)
    return path


def prepare(argv: list[str], work: Path) -> SandboxPlan:
    """The plan of one kernel's sandbox (:func:`sandbox_plan`), with the file it needs written."""
    plan = sandbox_plan(sandbox_inputs(argv, work))
    write_kernel_connection(plan)
    return plan


def start_fresh(plan: SandboxPlan, stdio: tuple[int, int, int]) -> tuple[subprocess.Popen, int | None]:
    """Start the kernel of ``plan`` from nothing; return its ``bwrap`` process and the sandbox's first pid
    (None when bubblewrap could not set it up; it then exits with an error on the kernel's stderr)."""
    info_in, info_out = os.pipe()
    command = fresh_kernel_argv(plan)
    command[len(plan.bwrap):len(plan.bwrap)] = ["--info-fd", str(info_out)]
    box = subprocess.Popen(command, stdin=stdio[0], stdout=stdio[1], stderr=stdio[2], pass_fds=(info_out,))
    os.close(info_out)
    with os.fdopen(info_in, "rb") as info:
        facts = info.read(4096)
    try:
        return box, json.loads(facts)["child-pid"]
    except (ValueError, KeyError):
        return box, None


def link_sockets(plan: SandboxPlan, first_pid: int) -> None:
    """Links in the grader's socket folder to the kernel's sockets inside its sandbox.

    The grader connects to ``<ip>-<port>`` as the connection file says; each is a link to
    ``/proc/<first pid>/root/<SOCKETS>/...``, the socket as the sandbox's mount namespace shows it.
    The link's own path is as short as the folder ``ipc_prefix`` made, whatever the target's length
    (a Unix socket path has at most 107 bytes).
    """
    ip = Path(plan.connection["ip"])
    for key in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
        port = plan.connection[key]
        link = Path(f"{ip}-{port}")
        link.unlink(missing_ok=True)
        os.symlink(f"/proc/{first_pid}/root{SOCKETS}/{ip.name}-{port}", link)


# --------------------------------------------------------------------------- the kernel's own output

def kernel_files(run: str | Path, name: str) -> dict[str, Path]:
    """Where the launcher of the kernel whose connection file is ``<run>/<name>.json`` records: the first
    OUTPUT_KEEP bytes the kernel wrote to its stdout and stderr, the count of all of them, its status."""
    return {kind: Path(run) / f"{name}-{kind}" for kind in ("output.txt", "output.count", "status.json")}


def _drain(fd: int, files: dict[str, Path]) -> None:
    """Read the kernel's stdout and stderr until every writer has closed it: the first OUTPUT_KEEP bytes
    into a file, the number of all bytes read kept up to date in another (the launcher may be killed)."""
    kept = total = 0
    with open(files["output.txt"], "wb") as out, open(files["output.count"], "wb") as count:
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if kept < OUTPUT_KEEP:
                out.write(chunk[:OUTPUT_KEEP - kept])
                out.flush()
                kept = min(total, OUTPUT_KEEP)
            os.pwrite(count.fileno(), f"{total:020d}".encode(), 0)


def _write_status(path: Path, status: dict) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(status))
    os.replace(temporary, path)


def kernel_record(run: str | Path, name: str = "connection") -> dict:
    """What the launcher recorded of the kernel whose connection file was ``<name>.json`` with its sockets
    in ``run``: its status (memory bound, notices, exit status, processes killed over the memory limit),
    the first part of its output (``output``) and the bytes it wrote in all (``output_bytes``). Empty when
    nothing was recorded (not a kernel of this launcher)."""
    files = kernel_files(run, name)
    try:
        record = json.loads(files["status.json"].read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    record["output"] = files["output.txt"].read_bytes().decode("utf-8", "replace") \
        if files["output.txt"].exists() else ""
    try:
        record["output_bytes"] = int(files["output.count"].read_bytes() or b"0")
    except (OSError, ValueError):
        record["output_bytes"] = 0
    return record


def run_kernel(plan: SandboxPlan) -> int:
    """Start the kernel of ``plan`` (a copy of the zygote named by ``RBTUTOR_ZYGOTE`` if there is one and
    it answers, else from nothing) and stay until it ends; return its exit status.

    The kernel's standard input is /dev/null and its stdout and stderr go into a pipe this process
    reads (:func:`_drain`): nothing it writes reaches the grader's own streams. Its process tree is
    put in a memory cgroup of its own where one can be made (:func:`memory_group`).

    A SIGTERM (a kernel manager whose shutdown waited long enough) ends the sandbox at once; the
    launcher still records the end and removes the group.
    """
    boxes: list[subprocess.Popen] = []

    def end_sandbox(signum, frame) -> None:
        status["terminated"] = True
        for box in boxes:
            box.kill()

    files = kernel_files(plan.run, plan.name)
    tree_limit = size_from_env("RBTUTOR_KERNEL_TREE_MEMORY", DEFAULT_TREE_MEMORY)
    group, memory = memory_group(tree_limit)
    status = {"launcher": os.getpid(), "memory": memory, "cgroup": str(group) if group else None,
              "tree_limit": tree_limit if group else None, "notices": []}
    signal.signal(signal.SIGTERM, end_sandbox)
    out_r, out_w = os.pipe()
    stdio = (os.open(os.devnull, os.O_RDONLY), out_w, out_w)
    try:
        with inside(group):
            started = None
            if os.environ.get("RBTUTOR_ZYGOTE"):
                started = start_from_zygote(os.environ["RBTUTOR_ZYGOTE"], plan, stdio, status["notices"], group)
            if started is None:
                started = start_fresh(plan, stdio)
    finally:
        for fd in set(stdio):
            os.close(fd)
    box, first_pid = started
    boxes.append(box)
    if status.get("terminated"):
        box.kill()
    if first_pid is not None:
        link_sockets(plan, first_pid)
    status["sandbox"] = first_pid
    _write_status(files["status.json"], status)
    _drain(out_r, files)
    os.close(out_r)
    code = box.wait()
    code = 128 - code if code < 0 else code
    status.update(exit=code, memory_kills=memory_kills(group))
    _write_status(files["status.json"], status)
    remove_group(group)
    return code


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("RBTUTOR_UNCONFINED") == "1":
        print("rbtutor.grading.sandbox: RBTUTOR_UNCONFINED=1, the student's code runs UNCONFINED",
              file=sys.stderr)
        sys.argv = [sys.argv[0], *argv]
        exec(compile(INNER_SOURCE, "<rbtutor-student-kernel>", "exec"), {"__name__": "__main__"})
        return
    try:
        plan = prepare(argv, Path.cwd())
    except SandboxError as exc:
        print(f"rbtutor.grading.sandbox: not starting the grading kernel: {exc}", file=sys.stderr)
        sys.exit(2)
    # deferred: ctypes takes 1.8 ms to import (-X importtime, 2026-12-06), at every kernel start (see test_sandbox.py)
    import ctypes

    # the sandbox dies with this process (bwrap --die-with-parent), and this process with the grader
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if grader_gone():
        print("rbtutor.grading.sandbox: not starting the grading kernel: the grader that asked for it "
              f"(pid {os.environ['JPY_PARENT_PID']}) is gone", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_kernel(plan))


def grader_gone() -> bool:
    """Whether the process that started this launcher has already ended.

    The parent-death signal only covers a death after the ``prctl`` call: a grader killed while
    this launcher was still starting (a Dask worker lost mid-task) would otherwise leave a kernel
    that no one stops. jupyter_client names the grader in ``JPY_PARENT_PID``; once the grader is
    gone, this process has been handed to another parent. Without that variable nothing is known.
    """
    parent = os.environ.get("JPY_PARENT_PID", "")
    return parent.isdigit() and os.getppid() != int(parent)
