"""The grading kernel ``rbtutor-student`` is confined: student code sees only its working folder.

Each test executes a small notebook with nbclient in the kernel, configured as
nbgrader_config.py configures nbgrader (ipc transport, sockets in a private folder),
from a working folder inside a scratch course (nbgrader_config.py, exercises/,
submitted/other/, gradebook.db). Probes print ``RESULT <exception name or ok>``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from conftest import require_sandbox
from traitlets.config import Config

from rbtutor.grading import sandbox

ROOT = Path(__file__).resolve().parents[1]
KEY = ROOT / "solutions" / "answer_key.yaml"
SECRET = "gradebook-secret-4711"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap needs Linux")


def make_course(base: Path) -> tuple[Path, Path]:
    """A scratch course with a working folder autograded/alice/problem03; return (course, work)."""
    course = base / "course"
    (course / "exercises" / "problem03").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copy2(ROOT / "exercises" / "problem03" / "problem03.ipynb", course / "exercises" / "problem03")
    other = course / "submitted" / "other" / "problem03"
    other.mkdir(parents=True)
    (other / "problem03.ipynb").write_text('{"answer": "the other student\'s work"}')
    (course / "gradebook.db").write_text(SECRET)
    for name in ("feedback", "autograded/other/problem03"):
        (course / name).mkdir(parents=True)
    work = course / "autograded" / "alice" / "problem03"
    work.mkdir(parents=True)
    return course, work


@pytest.fixture(params=["fresh", "zygote"])
def course(request, tmp_path, monkeypatch):
    """A scratch course; each test runs twice: with kernels started from nothing, and with kernels
    that are copies of a zygote (what grading workers use)."""
    require_sandbox()
    sandbox.install()
    if request.param == "zygote":
        monkeypatch.setenv("RBTUTOR_ZYGOTE", zygote())
    else:
        monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    return make_course(tmp_path)


@pytest.fixture
def one_course(tmp_path, monkeypatch):
    """A scratch course, for the tests that choose how kernels start themselves."""
    require_sandbox()
    sandbox.install()
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    return make_course(tmp_path)


def zygote() -> str:
    """The name of this test process's zygote (started once)."""
    name = sandbox.start_zygote()
    assert name, "the zygote did not start"
    return name


def probe(code: str) -> str:
    """A cell that runs ``code`` and prints RESULT ok, or RESULT and the exception's name."""
    body = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    return (f"try:\n{body}\n    print('RESULT ok')\n"
            "except BaseException as exc:\n    print('RESULT', type(exc).__name__, exc)")


def kernel_config() -> Config:
    """The kernel manager's configuration, as in nbgrader_config.py."""
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = sandbox.ipc_prefix()
    return config


def execute(work: Path, sources: list[str], timeout: int = 60) -> list[str]:
    """Run the cells in the grading kernel with cwd ``work``; return each cell's stdout."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = NotebookClient(nb, kernel_name=sandbox.KERNEL_NAME, timeout=timeout, allow_errors=True,
                            config=kernel_config(), resources={"metadata": {"path": str(work)}})
    client.execute()
    return ["".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream") +
            "".join(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")
            for cell in nb.cells]


def results(outputs: list[str]) -> list[str]:
    return [next((ln.split(" ", 2)[1] for ln in out.splitlines() if ln.startswith("RESULT ")), out)
            for out in outputs]


def test_honest_code_works(course):
    _, work = course
    out = execute(work, [probe("""
        import os, numpy as np, sympy as sp
        from scipy.integrate import solve_ivp
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        sol = solve_ivp(lambda t, y: -y, (0, 1), [1.0], rtol=1e-9, atol=1e-12)
        assert abs(sol.y[0, -1] - np.exp(-1)) < 1e-6
        assert sp.diff(sp.sin(sp.Symbol("x")), "x") == sp.cos(sp.Symbol("x"))
        plt.plot(sol.t, sol.y[0])
        plt.savefig("decay.png")
        with open("/tmp/scratch.txt", "w") as handle:
            handle.write("scratch")
        print("CWD", os.getcwd(), os.environ["RBTUTOR_AUTOGRADING"], "PNG", os.path.getsize("decay.png"),
              "BLAS", os.environ["OPENBLAS_NUM_THREADS"], os.environ["OMP_NUM_THREADS"])
    """)])
    assert results(out) == ["ok"], out
    assert f"CWD {work} 1" in out[0]
    assert "BLAS 1 1" in out[0], out  # one BLAS thread: no idle threads spinning on the workers' cores
    assert int(out[0].split("PNG ")[1].split()[0]) > 1000, out
    # the kernel's folder is its own tmpfs: what it writes never reaches the grader's disk
    assert not (work / "decay.png").exists()
    assert not Path("/tmp/scratch.txt").exists() or Path("/tmp/scratch.txt").read_text() != "scratch"


def test_course_files_cannot_be_read(course):
    root, work = course
    package = [KEY, ROOT / "rbtutor" / "problems" / "answer_key.yaml", ROOT / "rbtutor" / "problems" / "__init__.py"]
    for secret in package:
        assert secret.is_file(), f"{secret} must exist for its refusal to mean anything"
    paths = [root / "exercises" / "problem03" / "problem03.ipynb", "../../../exercises/problem03/problem03.ipynb",
             root / "submitted" / "other" / "problem03" / "problem03.ipynb", root / "gradebook.db",
             "../../../gradebook.db", *package, ROOT / "exercises" / "problem_data.yaml"]
    out = execute(work, [probe(f"print(open({str(p)!r}).read()[:50])") for p in paths]
                  + [probe(f"print(os.listdir({str(root)!r}))")])
    found = results(out)
    for path, result, text in zip(paths, found, out, strict=False):
        assert result in ("PermissionError", "FileNotFoundError"), (path, text)
        assert SECRET not in text, (path, text)
        assert "other student" not in text, (path, text)
        assert "nbgrader" not in text, (path, text)
    assert "submitted" not in out[-1], out[-1]
    assert "gradebook" not in out[-1], out[-1]


def test_writes_outside_the_working_folder_fail(course):
    root, work = course
    targets = [root / "gradebook.db", root / "feedback" / "x.html", root / "autograded" / "other" / "problem03" / "x",
               ROOT / "gradebook.db", ROOT / "pwned.txt", "/var/tmp/rbtutor-pwned", "/usr/rbtutor-pwned"]
    cells = [probe(f"open({str(t)!r}, 'w').write('pwned')") for t in targets]
    cells.append(probe("os.unlink('../../../gradebook.db')"))
    cells.append(probe("open('answer.txt', 'w').write('mine')"))
    out = execute(work, ["import os", *cells])
    assert all(r in ("PermissionError", "FileNotFoundError", "OSError") for r in results(out)[1:-1]), out
    assert results(out)[-1] == "ok", out
    assert (root / "gradebook.db").read_text() == SECRET
    assert not (work / "answer.txt").exists()
    for target in targets[1:]:
        path = Path(target)
        assert not path.exists() or "pwned" not in path.read_text(errors="replace"), path


def test_no_network_not_even_loopback(course):
    _, work = course
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        out = execute(work, [probe(f"""
            import socket
            socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        """), probe("import socket; socket.create_connection(('1.1.1.1', 53), timeout=3).close()")])
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    assert all(r in ("ConnectionRefusedError", "OSError", "TimeoutError") for r in results(out)), out


def test_course_library_cannot_be_imported(course):
    _, work = course
    out = execute(work, [probe("import rbtutor"), probe("from rbtutor.problems import answer_key")])
    assert results(out) == ["ModuleNotFoundError"] * 2, out
    assert all("instructor's library" in text for text in out), out  # refused, not merely missing


def test_no_debugger_while_grading(course):
    # ipykernel's debugger is left out of the grading kernel (its import was a fifth of each start)
    _, work = course
    out = execute(work, [probe("import debugpy"), "from ipykernel.debugger import _is_debugpy_available\n"
                         "print('RESULT', _is_debugpy_available)"])
    assert results(out) == ["ModuleNotFoundError", "False"], out


def test_memory_is_bounded(course):
    _, work = course
    six_gib = 6 * 2**30  # more than the kernel's limit, less than the machine: mmap without touching
    out = execute(work, [probe("x = bytearray(64 * 2**30)"),
                         probe(f"import mmap; m = mmap.mmap(-1, {six_gib}); print(len(m))"),
                         probe("print(sum(range(10)))")])
    assert results(out)[0] == "MemoryError", out
    assert results(out)[1] in ("OSError", "MemoryError"), out
    assert results(out)[2] == "ok", out
    assert "45" in out[2], out  # the kernel survives


def test_what_the_kernel_forks_is_stopped_before_it_at_the_memory_limit(course):
    """A process the kernel forks (os.fork, multiprocessing) raises its out-of-memory score to
    HELPER_OOM_SCORE_ADJ; the kernel keeps its own, so the system stops the children first. A program
    started with exec (subprocess) keeps the kernel's score, as the Operator guide's sandbox page says."""
    _, work = course
    out = execute(work, [probe("""
        import multiprocessing, os, subprocess, sys
        def score():
            with open("/proc/self/oom_score_adj") as handle:
                return handle.read().strip()
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(writer, score().encode())
            os._exit(0)
        os.waitpid(pid, 0)
        forked = os.read(reader, 16).decode()
        here, there = multiprocessing.Pipe()
        child = multiprocessing.Process(target=lambda: there.send(score()))
        child.start()
        spawned = here.recv()
        child.join()
        started = subprocess.run([sys.executable, "-c", "print(open('/proc/self/oom_score_adj').read().strip())"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        print("KERNEL", score(), "FORKED", forked, "MULTIPROCESSING", spawned, "EXEC", started)
    """)])
    assert results(out) == ["ok"], out
    assert f"FORKED {sandbox.HELPER_OOM_SCORE_ADJ} MULTIPROCESSING {sandbox.HELPER_OOM_SCORE_ADJ}" in out[0], out
    kernel = int(out[0].split("KERNEL ")[1].split()[0])
    assert kernel < sandbox.HELPER_OOM_SCORE_ADJ, out
    assert int(out[0].split("EXEC ")[1].split()[0]) == kernel, out


def test_fork_loop_hits_the_process_limit(course):
    _, work = course
    out = execute(work, [probe("""
        import os, time
        children, failure = [], None
        try:
            for _ in range(10_000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(1.0)
                    os._exit(0)
                children.append(pid)
        except BlockingIOError as exc:
            failure = exc
        finally:
            for pid in children:
                os.waitpid(pid, 0)
        print("FORKED", len(children))
        raise failure or AssertionError("no limit")
    """)], timeout=120)
    assert results(out) == ["BlockingIOError"], out
    forked = int(out[0].split("FORKED ")[1].split()[0])
    assert forked < 2000, out


def connection_file(folder: Path, transport: str, ip: str) -> Path:
    path = folder / "kernel-test.json"
    path.write_text(json.dumps({"transport": transport, "ip": ip, "shell_port": 1, "iopub_port": 2,
                                "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": "k"}))
    return path


def test_launcher_refuses_to_run_unconfined(course, tmp_path):
    _, work = course
    launcher = [sys.executable, "-m", "rbtutor.grading.sandbox", "-f"]
    tcp = connection_file(tmp_path, "tcp", "127.0.0.1")
    proc = subprocess.run([*launcher, str(tcp)], cwd=work, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert 'c.KernelManager.transport = "ipc"' in proc.stderr, proc.stderr
    assert proc.stderr.startswith("rbtutor.grading.sandbox: not starting the grading kernel: ")
    assert "c.KernelManager.ip = rbtutor.grading.sandbox.ipc_prefix()" in proc.stderr, proc.stderr
    run = Path(sandbox.ipc_prefix()).parent
    ipc = connection_file(run, "ipc", str(run / "kernel"))
    env = {**os.environ, "RBTUTOR_BWRAP": "/nonexistent/bwrap"}
    proc = subprocess.run([*launcher, str(ipc)], cwd=work, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "bwrap" in proc.stderr, proc.stderr
    assert "not found" in proc.stderr, proc.stderr
    # a bwrap that cannot make its namespaces (as where user namespaces are disabled): refused, with why
    env["RBTUTOR_BWRAP"] = shutil.which("false")
    proc = subprocess.run([*launcher, str(ipc)], cwd=work, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "cannot create its namespaces" in proc.stderr, proc.stderr


def test_a_launcher_whose_grader_is_gone_starts_no_kernel(course):
    """A grader killed while its kernel's launcher is still starting (a Dask worker lost mid-task, before
    the launcher has set its parent-death signal) must not leave a kernel that no one will stop.

    The "grader" below starts the kernelspec's launcher as jupyter_client does (JPY_PARENT_PID names it)
    and ends at once; the launcher goes on only when it has been handed to another parent, so it always
    starts too late for its parent-death signal. It must see that and refuse. The pipes end when the
    launcher and everything it started have ended (a kernel would keep the launcher alive)."""
    _, work = course
    run = Path(sandbox.ipc_prefix()).parent
    ipc = connection_file(run, "ipc", str(run / "kernel"))
    spec = Path(sys.prefix, "share", "jupyter", "kernels", sandbox.KERNEL_NAME, "kernel.json")
    launcher = [arg.replace("{connection_file}", str(ipc)) for arg in json.loads(spec.read_text())["argv"]]
    grader = textwrap.dedent("""
        import os, sys, time
        grader = os.getpid()
        if os.fork() == 0:
            while os.getppid() == grader:  # until the grader below has ended
                time.sleep(0.001)
            os.environ["JPY_PARENT_PID"] = str(grader)
            os.execv(sys.argv[1], sys.argv[1:])
        os._exit(0)
    """)
    proc = subprocess.Popen([sys.executable, "-c", grader, *launcher], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=60)  # safety net: the refusal takes well under a second
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        raise AssertionError("the launcher outlived its grader and kept a kernel running:\n" + err[-2000:]) from None
    assert proc.returncode == 0, err
    assert "not starting the grading kernel: the grader that asked for it (pid " in err, err
    assert "is gone" in err, err


def test_the_kernelspec_launcher_imports_this_package_alone(tmp_path):
    """At every kernel start the kernelspec runs the sandbox package's ``__main__.py`` as a script: it
    loads that package under its own name and nothing of rbtutor's own (which imports numpy and scipy),
    nor the kernel's libraries, and it refuses a start without a connection file."""
    sandbox.install()
    spec = Path(sys.prefix, "share", "jupyter", "kernels", sandbox.KERNEL_NAME, "kernel.json")
    argv = json.loads(spec.read_text())["argv"]
    assert argv[:2] == [sys.executable, "-I"], argv
    assert argv[3:] == ["-f", "{connection_file}"], argv
    assert Path(argv[2]) == Path(sandbox.__file__).resolve().with_name("__main__.py"), argv
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv[1:3]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert ("rbtutor.grading.sandbox: not starting the grading kernel: usage: python -m rbtutor.grading.sandbox "
            "-f CONNECTION_FILE") in proc.stderr, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    # (the package itself is loaded by __main__.py directly, so only its modules appear as imports)
    package = {"rbtutor.grading.sandbox.plan", "rbtutor.grading.sandbox.launch",
               "rbtutor.grading.sandbox.cgroups", "rbtutor.grading.sandbox.zygote_client"}
    assert package <= imported, sorted(imported)
    heavy = {"rbtutor", "rbtutor.grading", "rbtutor.grading.sandbox.zygote", "numpy", "scipy", "sympy",
             "zmq", "ipykernel", "ctypes"}
    assert not heavy & imported, sorted(heavy & imported)


def passable_interpreter(command: list[str]) -> list[str]:
    """``command`` in a private mount namespace where uid 65534 can reach this Python.

    The interpreter may live under a folder closed to others (here /root/.pyenv under
    /root, mode 0700): an empty tmpfs goes over that folder, with the interpreter's
    prefix bound back in, so that an ordinary user can run the venv's Python.
    """
    # the interpreter's prefix, the virtual environment and the checkout with these tests (the
    # clone may sit in a closed folder too)
    wanted = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1]]
    wanted = [p for p in wanted if not any(q != p and q in p.parents for q in wanted)]
    prefixes, closed = [], []
    for prefix in dict.fromkeys(wanted):
        shut = next((p for p in reversed(prefix.parents) if not p.stat().st_mode & 0o001), None)
        if shut is not None:
            prefixes.append(prefix)
            closed.append(shut)
    if not prefixes:
        return command
    lines = ["set -e"]
    lines += [f'stage{k}=$(mktemp -d); mount --bind "{p}" "$stage{k}"' for k, p in enumerate(prefixes)]
    lines += [f'mount -t tmpfs -o mode=755 none "{c}"' for c in dict.fromkeys(map(str, closed))]
    lines += [f'mkdir -p "{p}"; mount --move "$stage{k}" "{p}"' for k, p in enumerate(prefixes)]
    script = "; ".join(lines) + '; exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *command]


@pytest.mark.skipif(os.getuid() != 0, reason="checks the unprivileged path by dropping root")
@pytest.mark.parametrize("start", ["fresh", "zygote"])
def test_kernel_works_for_an_ordinary_grader(start):
    """Grading as uid 65534 (no root): bwrap runs unprivileged; confinement and limits hold, for a
    kernel started from nothing and for a copy of the zygote (which joins bwrap's user namespace)."""
    base = Path(tempfile.mkdtemp(prefix="rbtutor-sandbox-user-"))
    try:
        course, work = make_course(base)
        script = base / "run.py"
        script.write_text(textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import test_sandbox as t
            if {start == "zygote"}:
                t.zygote()
            out = t.execute(t.Path({str(work)!r}), [
                t.probe("import numpy; open('mine.txt', 'w').write('x')"),
                t.probe("open({str(course / 'gradebook.db')!r}).read()"),
                t.probe("open({str(course / 'gradebook.db')!r}, 'w')"),
                t.probe("import resource; print('LIMITS', resource.getrlimit(resource.RLIMIT_AS)[0])"),
                t.probe("import rbtutor"),
                t.probe("import sys; print('PRELOADED', 'sympy' in sys.modules)"),
                t.FACTS,
                t.probe("import ctypes; assert ctypes.CDLL(None).unshare(0x10000000) != 0, 'new user namespace'"),
            ])
            print("OUT", t.json.dumps(out))
        """))
        for path in [base, *base.rglob("*")]:
            os.chown(path, 65534, 65534)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY", "RBTUTOR_ZYGOTE"))}
        env.update(HOME=str(base), JUPYTER_PATH=str(Path(sys.prefix) / "share" / "jupyter"))
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, str(script)]
        proc = subprocess.run(passable_interpreter(command), cwd=base, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        out = json.loads(proc.stdout.split("OUT ", 1)[1])
        found = results(out)
        # the kernel writes into its private tmpfs, never into the grader's folder
        assert found[0] == "ok", out
        assert not (work / "mine.txt").exists(), out
        assert found[1] in ("PermissionError", "FileNotFoundError"), out
        assert found[2] in ("PermissionError", "FileNotFoundError", "OSError"), out
        assert f"LIMITS {sandbox.DEFAULT_MEMORY}" in out[3], out
        assert found[4] == "ModuleNotFoundError", out
        assert f"PRELOADED {start == 'zygote'}" in out[5], (out, proc.stderr[-2000:])
        assert "FACTS " in out[6], out
        facts = json.loads(out[6].split("FACTS ", 1)[1])
        assert facts["status"]["Uid"] == ["65534"] * 4, facts
        assert facts["status"]["NoNewPrivs"] == ["1"], facts
        assert all(set(facts["status"][k]) == {"0000000000000000"} for k in facts["status"] if k.startswith("Cap"))
        assert facts["pid"] in facts["processes"], facts
        assert set(facts["processes"]) <= {1, 2, 3}, facts
        # and no new user namespace can be made inside (bwrap's --disable-userns holds for the copy)
        assert found[7] == "ok", out
        assert (course / "gradebook.db").read_text() == SECRET
    finally:
        shutil.rmtree(base, ignore_errors=True)



def test_working_folder_is_a_private_bounded_copy(course):
    """The notebook's folder is copied in; the kernel's writes stay inside a tmpfs of bounded size."""
    _, work = course
    (work / "given.txt").write_text("from the assignment")
    out = execute(work, [
        probe("print('GIVEN', open('given.txt').read())"),
        probe("import os; open('given.txt', 'w').write('changed'); os.symlink('/etc/passwd', 'link')"),
        probe("open('big.bin', 'wb').write(b'x' * (" + str(sandbox.WORK_SIZE) + " + 2**20))"),
    ], timeout=120)
    assert "GIVEN from the assignment" in out[0], out
    assert results(out)[1] == "ok", out
    assert results(out)[2] == "OSError", out  # no space left in the kernel's own tmpfs
    assert (work / "given.txt").read_text() == "from the assignment"
    assert sorted(p.name for p in work.iterdir()) == ["given.txt"]


# What a kernel can tell of itself: identity, capabilities, limits, environment, open files,
# namespaces and the libraries already imported.
FACTS = """
import json, os, resource, sys
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
def link(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:  # the descriptor that listed the folder
        return "/proc/"
links = [link(fd) for fd in os.listdir("/proc/self/fd")]
def identity(fd, target):
    # what the descriptor is (device, inode, type), and what its path shows inside the sandbox
    try:
        st = os.fstat(int(fd))
    except OSError:  # the descriptor that listed the folder
        return None
    seen = None
    if target.startswith("/") and os.path.exists(target):
        there = os.stat(target)
        seen = [there.st_dev, there.st_ino]
    return [target, st.st_dev, st.st_ino, st.st_mode & 0o170000, seen]
descriptors = {fd: identity(fd, link(fd)) for fd in os.listdir("/proc/self/fd")}
print("FACTS", json.dumps({
    "status": {k: status[k].split() for k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd",
                                               "CapAmb", "NoNewPrivs", "Seccomp")},
    "limits": [resource.getrlimit(getattr(resource, "RLIMIT_" + n)) for n in ("AS", "NPROC", "FSIZE", "CORE")],
    "env": dict(os.environ), "cwd": os.getcwd(), "path0": sys.path[0], "umask": os.umask(0o022),
    "fds": sorted(link.split(":")[0] if ":" in link else link for link in links if "/proc/" not in link),
    "descriptors": {fd: d for fd, d in descriptors.items() if d is not None},
    "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("mnt", "pid", "net", "ipc", "uts", "cgroup")},
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "pid": os.getpid(),
    "ppid": os.getppid(), "preloaded": "sympy" in sys.modules,
    "new_user_namespace": __import__("ctypes").CDLL(None).unshare(0x10000000) == 0}))
"""


def kernel_facts(work: Path) -> dict:
    out = execute(work, [FACTS])
    assert "FACTS " in out[0], out
    return json.loads(out[0].split("FACTS ", 1)[1])


def test_a_zygote_copy_is_confined_as_a_fresh_kernel(one_course, monkeypatch):
    """The same user, no capability, no-new-privileges, limits, environment, kinds of open files and
    working folder; namespaces of its own; only its sandbox's processes in view."""
    _, work = one_course
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    monkeypatch.setenv("RBTUTOR_KERNEL_SEED", "4711")  # the same submission's seed for both
    fresh = kernel_facts(work)
    fresh_grader = grader_descriptors()
    address = zygote()
    monkeypatch.setenv("RBTUTOR_ZYGOTE", address)
    copy = kernel_facts(work)
    copy_grader = grader_descriptors(sandbox.zygote_address(address)[1])
    assert not fresh["preloaded"]
    assert copy["preloaded"]  # the copy really came from the zygote
    for facts in (fresh, copy):
        assert all(set(facts["status"][k]) == {"0000000000000000"} for k in facts["status"] if k.startswith("Cap"))
        assert facts["status"]["NoNewPrivs"] == ["1"]
        assert len(set(facts["status"]["Uid"])) == 1
        assert facts["status"]["Uid"] == facts["status"]["Gid"]
        # only its sandbox's processes: bwrap's init, the placeholder and itself; its parent is bwrap's
        # init (1) or, for a copy of the zygote, outside the sandbox (0)
        assert facts["pid"] in facts["processes"], facts
        assert set(facts["processes"]) <= {1, 2, 3}, facts
        assert facts["ppid"] == (0 if facts["preloaded"] else 1), facts
        assert not facts["new_user_namespace"]
        mine = {n: os.readlink(f"/proc/self/ns/{n}") for n in facts["ns"]}
        assert all(facts["ns"][n] != mine[n] for n in ("mnt", "pid", "net", "ipc", "uts")), facts["ns"]
    if os.getuid() != 0:
        assert fresh["status"]["Uid"] == copy["status"]["Uid"]
    for facts, grader in ((fresh, fresh_grader), (copy, copy_grader)):
        assert_own_descriptors(facts, grader)
    for key in ("limits", "env", "cwd", "path0", "umask"):
        if key == "limits" and os.getuid() == 0:  # the process limit counts the sandbox user's tasks
            assert fresh[key][:1] + fresh[key][2:] == copy[key][:1] + copy[key][2:]
            continue
        assert fresh[key] == copy[key], key
    assert {"status", "limits", "env", "cwd", "path0", "umask", "fds", "descriptors", "ns", "processes", "pid",
            "ppid", "preloaded", "new_user_namespace"} == set(fresh)


def grader_descriptors(*pids: int) -> set[tuple[int, int]]:
    """(st_dev, st_ino) of every open file of this test process (the grader) and of ``pids`` (the zygote)."""
    found = set()
    for pid in ("self", *pids):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                st = fd.stat()
            except OSError:
                continue
            found.add((st.st_dev, st.st_ino))
    return found


def assert_own_descriptors(facts: dict, grader: set[tuple[int, int]]) -> None:
    """Every descriptor of the kernel is its own: none is an open file of the grader or the zygote
    (compared by device and inode, as root too); stdin is /dev/null, stdout and stderr the launcher's
    pipe; a file or folder it holds is one the sandbox shows at that path, in its own /tmp or working
    folder."""
    kinds = {0o140000: "socket", 0o010000: "pipe", 0o100000: "file", 0o040000: "folder", 0o020000: "device"}
    for fd, (target, dev, ino, mode, seen) in facts["descriptors"].items():
        kind = kinds.get(mode, "other")
        if target == "/dev/null":  # the one device everyone shares
            assert kind == "device", (fd, target)
            assert seen == [dev, ino], (fd, target)
            continue
        if target.startswith("anon_inode:"):  # event fds, epoll: one inode for all of them, nothing to compare
            continue
        assert (dev, ino) not in grader, (fd, target, "an open file of the grader or the zygote")
        assert fd != "0", ("stdin is not /dev/null", target)
        if fd in ("1", "2"):
            assert kind == "pipe", facts["descriptors"]
        elif kind in ("file", "folder", "device"):
            assert target.startswith(("/tmp/", facts["cwd"])), (fd, target)
            assert seen == [dev, ino], (fd, target, "not the file the sandbox shows at that path")
        else:
            assert kind in ("socket", "pipe", "other"), (fd, target, kind)


def test_nothing_of_one_notebook_reaches_the_next(course):
    """Changed modules, files, background processes: all gone when the next kernel starts."""
    _, work = course
    first = execute(work, [probe("""
        import numpy, os, subprocess, time
        numpy.pi = 3.0
        open("/tmp/mark", "w").write("notebook 1")
        open("mine.txt", "w").write("notebook 1")
        subprocess.Popen(["sleep", "307"], start_new_session=True)
        if os.fork() == 0:
            time.sleep(307)
            os._exit(0)
    """)])
    assert results(first) == ["ok"], first
    deadline = time.monotonic() + 30
    while (left := [p for p in Path("/proc").glob("[0-9]*/cmdline") if _cmdline(p) == b"sleep\0307\0"]) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, "a process of the first notebook outlived its kernel"
    second = execute(work, [probe("""
        import numpy, os
        assert numpy.pi == 3.141592653589793, numpy.pi
        assert not os.path.exists("/tmp/mark") and os.listdir(".") == []
        assert {int(p) for p in os.listdir("/proc") if p.isdigit()} <= {1, 2, 3}
    """)])
    assert results(second) == ["ok"], second


def _cmdline(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_how_the_kernel_ended_is_reported(course):
    """A kernel killed by a signal is reported as killed by it, wherever it was started from."""
    from jupyter_client import KernelManager

    from rbtutor.grading.execute.preprocessor import _death_reason

    _, work = course
    km = KernelManager(kernel_name=sandbox.KERNEL_NAME, config=kernel_config())
    km.start_kernel(cwd=str(work))
    try:
        client = km.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        deadline = time.monotonic() + 30
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not km.is_alive()
        assert _death_reason(km) == "killed by SIGKILL, e.g. out of memory"
        client.stop_channels()
    finally:
        km.shutdown_kernel(now=True)


def test_the_zygote_cannot_be_reached_from_a_kernel(one_course):
    _, work = one_course
    name, _ = sandbox.zygote_address(zygote())
    out = execute(work, [probe(f"""
        import socket
        socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).connect("\\0" + {name!r})
    """)])
    assert results(out) == ["ConnectionRefusedError"], out


@pytest.mark.skipif(os.getuid() != 0, reason="needs a second user")
def test_the_zygote_serves_only_its_own_user(one_course):
    """Another uid on the same machine (it shares the zygote's network namespace) is turned away."""
    name, _ = sandbox.zygote_address(zygote())
    request = json.dumps({"uid": None, "limits": {}, "cwd": "/", "env": {}, "argv": [], "source": "print(1)"})
    code = textwrap.dedent(f"""
        import os, socket
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.connect("\\0" + {name!r})
            fds = [os.open("/dev/null", os.O_RDWR) for _ in range(5)]
            try:
                socket.send_fds(conn, [{request!r}.encode()], fds)
                conn.settimeout(20)
                print("ANSWER", repr(conn.recv(100)))
            except OSError as exc:
                print("ANSWER", type(exc).__name__)
    """)
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-I", "-c", code]
    proc = subprocess.run(passable_interpreter(command), capture_output=True, text=True, timeout=60)
    assert "ANSWER b''" in proc.stdout or "ANSWER BrokenPipeError" in proc.stdout \
        or "ANSWER ConnectionResetError" in proc.stdout, proc.stdout + proc.stderr


def test_an_unusable_zygote_falls_back_to_a_fresh_kernel(one_course, monkeypatch):
    _, work = one_course
    monkeypatch.setenv("RBTUTOR_ZYGOTE", "rbtutor-zygote-that-is-not-there")
    facts = kernel_facts(work)
    assert not facts["preloaded"]
    assert facts["status"]["NoNewPrivs"] == ["1"]


def test_the_run_s_zygote_ends_cleanly_when_the_run_does(monkeypatch):
    """A grading run's zygote (``zygote_running``) is stopped at the end of the block: it ends with
    status 0 once its standard input closes (without tearing down its libraries: see
    ``benchmarks/bench_grading.py``'s profile, "run: zygote stopped"), and the run's environment
    no longer names it."""
    from rbtutor.grading.sandbox import zygote_client

    require_sandbox()
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    monkeypatch.setattr(zygote_client, "_zygote", None)  # this test's own zygote, not the module's shared one
    with zygote_client.zygote_running() as name:
        assert name
        process = zygote_client._zygote[0]
        assert process.poll() is None
        # its HOME, made for loading its libraries, is gone once it is ready (a pool's worker that
        # started it ends without exit handlers, which left the folder in /tmp)
        home = os.readlink(f"/proc/{process.pid}/cwd")
        assert Path(home).name.startswith("rbtutor-zygote-"), home
        assert home.endswith(" (deleted)"), home
        assert not Path(home.removesuffix(" (deleted)")).exists(), home
    assert process.returncode == 0
    assert process.stdout.read() == b""  # nothing after its "ready"
    assert "RBTUTOR_ZYGOTE" not in os.environ


def _start_zygote_in_a_fork(_: int) -> tuple[str | None, int]:
    """In a forked worker: what ``start_zygote`` gives, and how many processes this worker started."""
    from rbtutor.grading import sandbox

    name = sandbox.start_zygote()
    return name, len(Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split())


def test_a_forked_worker_uses_the_run_s_zygote_instead_of_starting_its_own(monkeypatch):
    """A grading worker is forked from the run, which holds the run's zygote: the worker's
    ``start_zygote`` names that zygote and starts none of its own. (Each worker once started one,
    1.3 CPU s apiece: the Popen copied into the child could not be polled from there, which read as
    a zygote that had ended.)"""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from rbtutor.grading.sandbox import zygote_client

    require_sandbox()
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    monkeypatch.setattr(zygote_client, "_zygote", None)
    with zygote_client.zygote_running() as name, \
            ProcessPoolExecutor(2, mp_context=get_context("fork")) as pool:
        assert name
        answers = list(pool.map(_start_zygote_in_a_fork, range(4)))
    assert answers == [(name, 0)] * 4


def test_a_zygote_started_in_the_background_is_stopped_whether_awaited_or_not(monkeypatch):
    """``zygote_starting`` (a grading run works out the class's keys meanwhile): the run's
    environment names the zygote only once it is ready; the zygote is stopped at the end of the
    block, also when the block ends before waiting for it (a run that fails at its start)."""
    from rbtutor.grading.sandbox import zygote_client

    require_sandbox()
    monkeypatch.delenv("RBTUTOR_ZYGOTE", raising=False)
    monkeypatch.setattr(zygote_client, "_zygote", None)
    launched = []
    real_launch = zygote_client._launch_zygote
    monkeypatch.setattr(zygote_client, "_launch_zygote", lambda: launched.append(real_launch()) or launched[-1])
    with zygote_client.zygote_starting() as ready:
        assert "RBTUTOR_ZYGOTE" not in os.environ
        name = ready()
        assert name
        assert os.environ["RBTUTOR_ZYGOTE"] == name
        assert ready() == name
    assert launched[0][0].returncode == 0
    assert "RBTUTOR_ZYGOTE" not in os.environ
    assert zygote_client._zygote is None
    with pytest.raises(ValueError, match="due dates"), zygote_client.zygote_starting():
        raise ValueError("due dates: a broken file")
    process = launched[1][0]
    assert process.poll() is not None, "the zygote nobody waited for still runs"
    assert "RBTUTOR_ZYGOTE" not in os.environ
