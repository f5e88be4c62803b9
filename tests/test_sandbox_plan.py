"""The plan of a grading kernel's sandbox, read as a command without running it (issue 25).

:func:`rbtutor.grading.sandbox.sandbox_plan` turns what the launcher found out (:class:`SandboxInputs`)
into the ``bwrap`` command. These tests give it folders of their own and read the command it returns:
what is bound read-only, which namespaces are new, the sizes of the tmpfs mounts, the user the kernel
runs as, where its sockets are. No bubblewrap runs here (the ``bwrap`` named does not exist), and
nothing may be written, chowned or started by the plan. That the command confines a real kernel is
``tests/test_sandbox.py``'s part.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from rbtutor.grading.sandbox import (
    ALWAYS_HIDDEN,
    CONNECTION,
    HIDE_SIZE,
    INPUT,
    SANDBOX_UID_BASE,
    SOCKET_FS_SIZE,
    SOCKETS,
    TMP_SIZE,
    WORK_SIZE,
    SandboxError,
    SandboxInputs,
    fresh_kernel_argv,
    kernel_connection,
    kernel_connection_path,
    sandbox_plan,
)

BWRAP = "/nonexistent/bwrap"  # never run: the plan only names it
# bwrap's options as the plan uses them, with the number of arguments each takes
ARITY = {"--ro-bind": 2, "--bind": 2, "--dev": 1, "--proc": 1, "--tmpfs": 1, "--dir": 1, "--remount-ro": 1,
         "--setenv": 2, "--chdir": 1, "--size": 1, "--perms": 1, "--unshare-ipc": 0, "--unshare-pid": 0,
         "--unshare-net": 0, "--unshare-uts": 0, "--unshare-cgroup-try": 0, "--unshare-user": 0,
         "--disable-userns": 0, "--die-with-parent": 0, "--clearenv": 0}
NAMESPACES = ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try")


def operations(cmd: list[str]) -> list[tuple[str, tuple[str, ...], str | None, str | None]]:
    """The command as bwrap reads it: (option, its arguments, the --size and --perms given for it)."""
    assert cmd[0] == BWRAP, cmd[:3]
    found, pending, at = [], {}, 1
    while at < len(cmd):
        option = cmd[at]
        assert option in ARITY, f"expected one of bwrap's options the plan uses, got {option!r} at {at}"
        args = tuple(cmd[at + 1:at + 1 + ARITY[option]])
        if option in ("--size", "--perms"):
            pending[option] = args[0]
        else:
            found.append((option, args, pending.get("--size"), pending.get("--perms")))
            pending = {}
        at += 1 + ARITY[option]
    assert not pending, f"--size or --perms for no mount: {pending}"
    return found


def mounts(cmd: list[str], option: str) -> dict[str, tuple]:
    """Each target of ``option`` in the command, with its source (binds) or its size and mode (tmpfs)."""
    found = {}
    for name, args, size, perms in operations(cmd):
        if name == option and option in ("--ro-bind", "--bind"):
            found[args[1]] = (args[0],)
        elif name == option:
            found[args[0]] = (size, perms)
    return found


@pytest.fixture
def folders(tmp_path):
    """A course with a submission's folder, a private socket folder with its connection file, an
    environment and an interpreter: everything under ``tmp_path``."""
    course = tmp_path / "course"
    work = course / "autograded" / "student1" / "ps1"
    work.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text("")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    venv, base, package = tmp_path / "venv", tmp_path / "python", tmp_path / "checkout" / "rbtutor"
    for folder in (venv, base, package):
        folder.mkdir(parents=True)
    return {"course": course, "work": work, "run": run, "venv": venv, "base": base, "package": package}


def inputs(folders: dict[str, Path], **changes) -> SandboxInputs:
    """What the launcher would find for a kernel of ``folders``, as the grader's own uid unless changed."""
    connection = {"transport": "ipc", "ip": str(folders["run"] / "kernel"), "shell_port": 1, "iopub_port": 2,
                  "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": "secret-key"}
    facts = {"argv": ["-f", str(folders["run"] / "kernel-7.json"), "--HistoryManager.enabled=False"],
             "connection": connection, "bwrap": BWRAP, "grader_uid": os.getuid(), "sandbox_uid": SANDBOX_UID_BASE + 42,
             "env": {"HOME": "/tmp", "RBTUTOR_AUTOGRADING": "1", "PYTHONHASHSEED": "0"},
             "limits": {"as": 4 * 2**30, "nproc": 140, "fsize": 2**30, "core": 0}, "work": folders["work"],
             "venv": folders["venv"], "base": folders["base"], "package": folders["package"],
             "secret": [folders["course"], folders["package"].parent], "import_path": []}
    facts.update(changes)
    return SandboxInputs(**facts)


def as_user(folders: dict[str, Path], **changes) -> SandboxInputs:
    """Inputs of a grader that is not root (uid 1000 when the tests run as root: the socket folder is its)."""
    uid = os.getuid()
    if uid == 0:
        uid = 1000
        os.chown(folders["run"], uid, uid)
    return inputs(folders, grader_uid=uid, **changes)


def as_root(folders: dict[str, Path], **changes) -> SandboxInputs:
    """Inputs of a grader that is root: the socket folder must be root's, so the tests must run as root."""
    if os.getuid() != 0:
        reason = "planning as root checks that root owns the socket folder: run the tests as root"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return inputs(folders, grader_uid=0, **changes)


def tree(folder: Path) -> dict[str, tuple]:
    """Every path under ``folder`` with its owner, mode, size and modification time."""
    return {str(p): (p.lstat().st_uid, p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in [folder, *folder.rglob("*")]}


def test_every_namespace_is_new_and_the_sandbox_dies_with_its_launcher(folders):
    """The command makes new IPC, PID, network, UTS and cgroup namespaces (and, grading unprivileged, a user
    namespace in which no further one can be made), clears the environment and dies with the launcher."""
    privileged = sandbox_plan(as_root(folders, env={})).bwrap
    unprivileged = sandbox_plan(as_user(folders)).bwrap  # the socket folder is now the user's
    for command in (unprivileged, privileged):
        flags = [name for name, *_ in operations(command)]
        assert set(NAMESPACES) <= set(flags), flags
        assert "--die-with-parent" in flags, flags
        assert "--clearenv" in flags, flags
        assert flags.index("--clearenv") < min(
            [flags.index("--setenv")] if "--setenv" in flags else [len(flags)]), flags
    assert "--unshare-user" in unprivileged
    assert "--disable-userns" in unprivileged
    # as root, no user namespace: setpriv drops to a real uid, which RLIMIT_NPROC then counts
    assert "--unshare-user" not in privileged
    assert "--disable-userns" not in privileged


def test_the_system_and_the_environment_are_bound_read_only(folders):
    """Everything bound is read-only (``--bind`` never appears): the root, the interpreter, the virtual
    environment, the kernel's connection file and the notebook's folder (at INPUT)."""
    plan = sandbox_plan(inputs(folders))
    assert mounts(plan.bwrap, "--bind") == {}
    ro = mounts(plan.bwrap, "--ro-bind")
    assert ro["/"] == ("/",)
    assert ro[str(folders["venv"])] == (str(folders["venv"]),)
    assert ro[str(folders["base"])] == (str(folders["base"]),)
    assert ro[CONNECTION] == (str(kernel_connection_path(folders["run"], "kernel-7")),)
    assert ro[INPUT] == (str(folders["work"]),)
    assert ("--dev", ("/dev",), None, None) in operations(plan.bwrap)
    assert ("--proc", ("/proc",), None, None) in operations(plan.bwrap)


def test_tmpfs_sizes_and_modes(folders):
    """/tmp, the sockets' folder and the working folder are tmpfs of their own sizes; the course and the
    repository are empty tmpfs of HIDE_SIZE, remounted read-only after everything is in place."""
    plan = sandbox_plan(inputs(folders))
    tmpfs = mounts(plan.bwrap, "--tmpfs")
    assert tmpfs["/tmp"] == (str(TMP_SIZE), "1777")
    assert tmpfs[SOCKETS] == (str(SOCKET_FS_SIZE), "1777")
    assert tmpfs[str(folders["work"])] == (str(WORK_SIZE), "0777")
    # the course holds the working folder: it is hidden, and the folders down to the working folder
    # are made (0755) inside its empty tmpfs
    course = str(folders["course"])
    assert tmpfs[course] == (str(HIDE_SIZE), None)
    made = [args[0] for name, args, _, perms in operations(plan.bwrap) if name == "--dir" and perms == "0755"]
    assert made[-2:] == [course + "/autograded", course + "/autograded/student1"]
    hidden = [args[0] for name, args, *_ in operations(plan.bwrap) if name == "--remount-ro"]
    assert course in hidden
    assert str(folders["package"].parent) in hidden
    assert {str(p) for p in map(Path, ALWAYS_HIDDEN) if p.exists()} <= set(tmpfs)
    order = [args[-1] if args else name for name, args, *_ in operations(plan.bwrap)]
    # later mounts cover earlier ones: the root first, the course over it, the working folder inside the
    # course, the read-only remounts last, then the working folder as the kernel's cwd
    assert order.index("/") < order.index(course) < order.index(str(folders["work"])) < order.index(INPUT)
    names = [name for name, *_ in operations(plan.bwrap)]
    assert set(names[names.index("--remount-ro"):-1]) == {"--remount-ro"}, names
    assert operations(plan.bwrap)[-1] == ("--chdir", (str(folders["work"]),), None, None)
    assert plan.work == str(folders["work"])


def test_an_installed_package_is_hidden_again(folders):
    """An rbtutor installed inside the bound environment is covered by an empty tmpfs after the bind."""
    package = folders["venv"] / "lib" / "site-packages" / "rbtutor"
    package.mkdir(parents=True)
    cmd = sandbox_plan(inputs(folders, package=package, secret=[folders["course"]])).bwrap
    order = [args[-1] if args else name for name, args, *_ in operations(cmd)]
    assert mounts(cmd, "--tmpfs")[str(package)] == (str(HIDE_SIZE), None)
    assert order.index(str(folders["venv"])) < order.index(str(package))


def test_the_kernel_reaches_its_sockets_in_a_folder_of_its_own(folders):
    """The kernel reads a connection file that puts its sockets in SOCKETS (its own tmpfs), bound
    read-only from the grader's socket folder, which itself is never shown to the kernel."""
    plan = sandbox_plan(inputs(folders))
    assert plan.args == ["-f", CONNECTION, "--HistoryManager.enabled=False"]
    assert plan.run == str(folders["run"])
    assert plan.name == "kernel-7"
    connection = kernel_connection(plan.connection)
    assert connection["ip"] == f"{SOCKETS}/kernel"
    assert connection["key"] == "secret-key"
    assert plan.connection["ip"] == str(folders["run"] / "kernel")  # the grader's, unchanged
    shown = {args[0] for name, args, *_ in operations(plan.bwrap) if name == "--ro-bind"}
    assert shown == {"/", str(folders["venv"]), str(folders["base"]), str(folders["work"]),
                     str(kernel_connection_path(folders["run"], "kernel-7"))}


def test_grading_as_root_drops_to_the_sandbox_user(folders):
    """As root, the plan's user is the sandbox's own uid, and the fresh kernel's command runs setpriv to
    it (no groups, no capabilities, no new privileges) before prlimit sets the limits; unprivileged,
    there is no user to drop to."""
    uid = SANDBOX_UID_BASE + 42
    root = sandbox_plan(as_root(folders))
    assert root.uid == uid
    argv = fresh_kernel_argv(root)
    tail = argv[argv.index("--", len(root.bwrap)) + 1:]
    assert tail[:tail.index("--") + 1] == ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                                           "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    assert tail[tail.index("--") + 1:tail.index("--") + 6] == [
        "prlimit", f"--as={4 * 2**30}", "--nproc=140", f"--fsize={2**30}", "--core=0"]
    user = sandbox_plan(as_user(folders, sandbox_uid=uid))
    assert user.uid is None
    argv = fresh_kernel_argv(user)
    assert "setpriv" not in argv
    assert argv[len(user.bwrap) + 1] == "prlimit"


def test_the_environment_is_only_what_the_plan_sets(folders):
    """After --clearenv, the kernel gets exactly the variables of its inputs."""
    env = {"HOME": "/tmp", "RBTUTOR_KERNEL_SEED": "7", "PYTHONHASHSEED": "0"}
    plan = sandbox_plan(inputs(folders, env=env))
    assert plan.env == env
    assert {args[0]: args[1] for name, args, *_ in operations(plan.bwrap) if name == "--setenv"} == env


def test_library_folders_outside_the_view_are_bound_read_only(folders, tmp_path):
    """A site-packages folder of the import path under /tmp (hidden by the sandbox's own /tmp) is bound
    read-only; a folder of the import path that is no library folder, or that is inside the course, is not."""
    if not str(tmp_path).startswith("/tmp/"):
        pytest.skip(f"expected the test's folder under /tmp, got {tmp_path}")
    library = tmp_path / "other-env" / "lib" / "site-packages"
    in_course = folders["course"] / "lib" / "site-packages"
    for folder in (library, in_course):
        folder.mkdir(parents=True)
    plan = sandbox_plan(inputs(folders, import_path=[str(library), str(in_course), "", "/usr/lib/python3"]))
    ro = mounts(plan.bwrap, "--ro-bind")
    assert ro[str(library)] == (str(library),)
    assert str(in_course) not in ro
    assert "/usr/lib/python3" not in ro


def test_a_closed_ancestor_is_hidden_when_grading_as_root(folders):
    """Grading as root, an ancestor of the working folder that the sandbox user could not pass (0700,
    another owner) is hidden under an empty tmpfs, with the folders down to the working folder made in it."""
    closed = Path(tempfile.mkdtemp(prefix="rbtutor-plan-", dir="/var/tmp"))  # 0700, outside /tmp
    try:
        work = closed / "ps1"
        work.mkdir()
        folders = {**folders, "work": work}
        plan = sandbox_plan(as_root(folders, secret=[]))
        assert mounts(plan.bwrap, "--tmpfs")[str(closed)] == (str(HIDE_SIZE), None)
        assert str(closed) in [args[0] for name, args, *_ in operations(plan.bwrap) if name == "--remount-ro"]
        made = [args[0] for name, args, _, perms in operations(plan.bwrap) if name == "--dir" and perms == "0755"]
        assert str(closed) not in made  # the working folder is the tmpfs right inside it
    finally:
        work.rmdir()
        closed.rmdir()


@pytest.mark.parametrize("mode", [0o750, 0o701, 0o777])
def test_a_socket_folder_others_can_enter_is_refused(folders, mode):
    folders["run"].chmod(mode)
    with pytest.raises(SandboxError, match=r"must be a private folder.*rbtutor\.grading\.sandbox\.ipc_prefix\(\)"):
        sandbox_plan(inputs(folders))


def test_a_socket_folder_of_another_user_is_refused(folders):
    with pytest.raises(SandboxError, match="must be a private folder"):
        sandbox_plan(inputs(folders, grader_uid=os.stat(folders["run"]).st_uid + 1))


def test_a_working_folder_holding_a_hidden_folder_is_refused(folders):
    with pytest.raises(SandboxError, match="must stay hidden"):
        sandbox_plan(inputs(folders, work=folders["course"].parent))
    with pytest.raises(SandboxError, match="must stay hidden"):
        sandbox_plan(inputs(folders, work=Path("/tmp")))


def test_the_socket_folder_inside_the_working_folder_is_refused(folders):
    run = folders["work"] / "run"
    run.mkdir(mode=0o700)
    connection = inputs(folders).connection | {"ip": str(run / "kernel")}
    with pytest.raises(SandboxError, match="must be apart"):
        sandbox_plan(inputs(folders, connection=connection))


@pytest.mark.parametrize("argv", [[], ["--debug"], ["-f"]])
def test_no_connection_file_is_refused(folders, argv):
    with pytest.raises(SandboxError, match=r"usage: python -m rbtutor\.grading\.sandbox -f CONNECTION_FILE"):
        sandbox_plan(inputs(folders, argv=argv))


def test_the_plan_writes_chowns_and_runs_nothing(folders, tmp_path, monkeypatch):
    """Planning as root changes no file under the folders it is given and starts no process: the
    launcher writes the kernel's connection file itself, after the plan."""
    def refused(*args, **kwargs):
        raise AssertionError(f"the plan tried a side effect: {args}")

    planned = as_root(folders)
    before = tree(tmp_path)
    for name in ("chown", "chmod", "open", "mkdir", "makedirs", "unlink", "remove", "rmdir", "symlink",
                 "replace", "rename", "fork", "execv", "execve", "posix_spawn"):
        monkeypatch.setattr(os, name, refused)
    monkeypatch.setattr("builtins.open", refused)
    monkeypatch.setattr(subprocess, "Popen", refused)
    plan = sandbox_plan(planned)
    monkeypatch.undo()
    assert tree(tmp_path) == before
    assert not kernel_connection_path(plan.run, plan.name).exists()
