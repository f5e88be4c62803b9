"""Step: sandbox. The kernel that runs student notebooks while they are graded, confined by bubblewrap.

It is an IPython kernel with these differences from a plain one:

* ``import rbtutor`` fails (the course library is the instructor's, and a student's
  code must not lean on it), and ``RBTUTOR_AUTOGRADING=1`` is set so that notebooks
  skip their plots;
* it runs in a bubblewrap (``bwrap``, Debian package ``bubblewrap``) sandbox: the
  whole file system is read-only; the course folder (the nearest ancestor of the
  working folder holding ``nbgrader_config.py``, or ``RBTUTOR_COURSE_ROOT``), the
  repository holding this package, ``/home``, ``/root``, ``/srv`` and any folder in
  ``RBTUTOR_SANDBOX_HIDE`` (``os.pathsep``-separated) are covered by empty read-only
  tmpfs; the interpreter and the virtual environment are bound read-only (inside a
  hidden folder too); ``/tmp`` is a private tmpfs; there is no network at all (a new network namespace with
  nothing in it, not even the host's loopback); the environment is reduced to a short
  list of variables;
* its working folder is not the grader's folder: at the same path it is a tmpfs of the
  sandbox's own (``WORK_SIZE``, gone with the sandbox), and the notebook's folder, bound
  read-only at ``INPUT``, is copied into it when the kernel starts; whatever the kernel
  writes there never reaches the grader's disk;
* it runs as an unprivileged user: when grading runs as root, as a uid/gid of its own,
  ``SANDBOX_UID_BASE`` plus the launcher's pid (unique among running kernels, so that
  one kernel's fork loop cannot use up the process limit of another graded at the same
  time), otherwise as the grading user; of the grader's files, only the kernel's own
  connection file (read-only inside) is handed to that uid;
* it is bounded: resident memory of the kernel and every process it starts
  ``RBTUTOR_KERNEL_TREE_MEMORY`` (default 2 GiB, no swap) in a memory cgroup of its own, a
  child of the grader's (v2, else v1; where none can be made, for instance when grading
  unprivileged, only the per-process bound holds and the launcher records why), where the
  processes the kernel forks are stopped before it (``HELPER_OOM_SCORE_ADJ``); address
  space per process ``RBTUTOR_KERNEL_MEMORY`` (bytes, default 4 GiB), processes and threads
  ``RBTUTOR_KERNEL_NPROC`` more than that user has at launch (default 128), files
  ``RBTUTOR_KERNEL_FSIZE`` (default 1 GiB), ``/tmp`` 512 MiB, the working folder 256 MiB,
  the socket folder 16 KiB;
* it never holds the grader's standard streams: its stdin is ``/dev/null``, its stdout and
  stderr a pipe the launcher reads, keeping the first 64 KiB and counting the rest
  (:func:`kernel_record`, which the grader reads and names in the integrity report);
* it is seeded: ``random`` and NumPy's global generator get the submission's seed
  (``RBTUTOR_KERNEL_SEED``, which the grader derives from the student and the assignment under a
  random key of its own, never from the course salt; a random one when none is given) just
  before the first cell, and every grading kernel runs with ``PYTHONHASHSEED=0``, so a kernel
  started from nothing and a zygote copy draw the same numbers and order sets the same way.

:func:`install` writes the kernelspec ``rbtutor-student`` into the environment; its
argv is ``python -I <this package>/__main__.py -f {connection_file}`` (a script that loads
this package alone, so that starting a kernel does not import rbtutor with numpy and
scipy). The launcher (:func:`main`) runs outside the sandbox: it takes its working folder
from its cwd at launch (nbgrader sets it to the folder of the notebook it executes), has
:func:`sandbox_plan` lay out the ``bwrap`` command, starts it, and stays as the kernel's
parent until the kernel ends, draining its output and recording its exit status. Inside,
a short program (``INNER_SOURCE``) installs the ``rbtutor`` refusal, copies the notebook's
folder in and starts ipykernel.

The kernel cannot be reached over TCP from outside its network namespace, so the
kernel manager must use the ``ipc`` transport with a private folder for its connection
files (mode 0700, the grader's). That folder is not shown to the kernel: the kernel binds
its sockets in a tmpfs of 16 KiB of its own inside the sandbox (``SOCKETS``), and the
launcher puts links in the private folder, one per socket, to
``/proc/<sandbox's first pid>/root/<SOCKETS>/...`` (:func:`link_sockets`), where the grader
connects. The grader's :class:`rbtutor.grading.execute.BoundedExecute` makes such a folder
for each notebook; elsewhere, in an nbgrader_config.py::

    from rbtutor.grading import sandbox
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = sandbox.ipc_prefix()

The launcher refuses a connection file with another transport.

A kernel starts in one of two ways, in the same sandbox. From nothing: bwrap runs a new
Python with ipykernel. From the zygote (:mod:`rbtutor.grading.sandbox.zygote`), when
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

The package, module by module, in the order a kernel start meets them:

1. :mod:`.plan`: the policy (sizes, limits, hidden folders, kept variables), the program run inside
   the sandbox, and :func:`sandbox_plan`, a pure function from what the launcher found out
   (:class:`SandboxInputs`) to one kernel's sandbox (:class:`SandboxPlan`, the ``bwrap`` command
   with it): it writes, chowns and runs nothing, so it is tested without bubblewrap.
2. :mod:`.launch`: the kernelspec (:func:`install`) and the launcher's side effects, in order:
   :func:`sandbox_inputs` (runs ``bwrap`` once to check it, reads the connection file),
   :func:`prepare` (the plan, then the one file it needs: the kernel's connection file, handed to
   the sandbox user), :func:`run_kernel` (the kernel started, its sockets linked, its output
   recorded for :func:`kernel_record`), all from :func:`main`.
3. :mod:`.cgroups`: the memory cgroup of each kernel's process tree.
4. :mod:`.zygote_client`: the zygote started for a grading run, and asked for a kernel by the launcher.
5. :mod:`.zygote`: the zygote itself, run as a program (never imported by the launcher).

``python -m rbtutor.grading.sandbox`` and ``python -I <this package>/__main__.py`` run the launcher.
Every public name is importable from this package, as it was from the single module it replaces.
"""

from .cgroups import CGROUP_MOUNT, GROUP_PREFIX, inside, memory_group, memory_kills, remove_group
from .launch import (
    PR_SET_PDEATHSIG,
    install,
    ipc_prefix,
    kernel_files,
    kernel_record,
    link_sockets,
    main,
    prepare,
    run_kernel,
    sandbox_inputs,
    start_fresh,
    write_kernel_connection,
)
from .plan import (
    ALWAYS_HIDDEN,
    CONNECTION,
    DEFAULT_FSIZE,
    DEFAULT_MEMORY,
    DEFAULT_NPROC,
    DEFAULT_TREE_MEMORY,
    GIB,
    HELPER_OOM_SCORE_ADJ,
    HIDE_SIZE,
    INNER_SOURCE,
    INPUT,
    KEPT_ENV,
    KERNEL_HASH_SEED,
    KERNEL_NAME,
    OUTPUT_KEEP,
    SANDBOX_UID_BASE,
    SOCKET_FS_SIZE,
    SOCKETS,
    TMP_SIZE,
    WORK_SIZE,
    SandboxError,
    SandboxInputs,
    SandboxPlan,
    bwrap_path,
    check_sandbox,
    connection_argument,
    fresh_kernel_argv,
    kernel_connection,
    kernel_connection_path,
    kernel_env,
    kernel_limits,
    sandbox_plan,
)
from .zygote_client import PLACEHOLDER, start_from_zygote, start_zygote, zygote_address, zygote_running, zygote_starting

__all__ = [
    "ALWAYS_HIDDEN", "CGROUP_MOUNT", "CONNECTION", "DEFAULT_FSIZE", "DEFAULT_MEMORY", "DEFAULT_NPROC",
    "DEFAULT_TREE_MEMORY", "GIB", "GROUP_PREFIX", "HELPER_OOM_SCORE_ADJ", "HIDE_SIZE", "INNER_SOURCE", "INPUT",
    "KEPT_ENV",
    "KERNEL_HASH_SEED", "KERNEL_NAME", "OUTPUT_KEEP", "PLACEHOLDER", "PR_SET_PDEATHSIG", "SANDBOX_UID_BASE",
    "SOCKETS", "SOCKET_FS_SIZE", "SandboxError", "SandboxInputs", "SandboxPlan", "TMP_SIZE", "WORK_SIZE",
    "bwrap_path", "check_sandbox", "connection_argument", "fresh_kernel_argv", "inside", "install", "ipc_prefix",
    "kernel_connection", "kernel_connection_path", "kernel_env", "kernel_files", "kernel_limits", "kernel_record",
    "link_sockets", "main", "memory_group", "memory_kills", "prepare", "remove_group", "run_kernel",
    "sandbox_inputs", "sandbox_plan", "start_fresh", "start_from_zygote", "start_zygote", "write_kernel_connection",
    "zygote_address", "zygote_running", "zygote_starting"
]
