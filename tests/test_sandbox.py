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
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
import pytest
from conftest import require_sandbox
from traitlets.config import Config

from rbtutor.grading import sandbox as student_kernel

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


@pytest.fixture()
def course(tmp_path):
    require_sandbox()
    student_kernel.install()
    return make_course(tmp_path)


def probe(code: str) -> str:
    """A cell that runs ``code`` and prints RESULT ok, or RESULT and the exception's name."""
    body = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    return (f"try:\n{body}\n    print('RESULT ok')\n"
            "except BaseException as exc:\n    print('RESULT', type(exc).__name__, exc)")


def kernel_config() -> Config:
    """The kernel manager's configuration, as in nbgrader_config.py."""
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = student_kernel.ipc_prefix()
    return config


def execute(work: Path, sources: list[str], timeout: int = 60) -> list[str]:
    """Run the cells in the grading kernel with cwd ``work``; return each cell's stdout."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = NotebookClient(nb, kernel_name=student_kernel.KERNEL_NAME, timeout=timeout, allow_errors=True,
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
    paths = [root / "exercises" / "problem03" / "problem03.ipynb", "../../../exercises/problem03/problem03.ipynb",
             root / "submitted" / "other" / "problem03" / "problem03.ipynb", root / "gradebook.db",
             "../../../gradebook.db", KEY, ROOT / "rbtutor" / "problems.py", ROOT / "exercises" / "problem_data.yaml"]
    out = execute(work, [probe(f"print(open({str(p)!r}).read()[:50])") for p in paths]
                  + [probe(f"print(os.listdir({str(root)!r}))")])
    found = results(out)
    for path, result, text in zip(paths, found, out, strict=False):
        assert result in ("PermissionError", "FileNotFoundError"), (path, text)
        assert SECRET not in text and "other student" not in text and "nbgrader" not in text, (path, text)
    assert "submitted" not in out[-1] and "gradebook" not in out[-1], out[-1]


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
    assert results(out)[2] == "ok" and "45" in out[2], out  # the kernel survives


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
    assert proc.returncode == 2 and 'c.KernelManager.transport = "ipc"' in proc.stderr, proc.stderr
    run = Path(student_kernel.ipc_prefix()).parent
    ipc = connection_file(run, "ipc", str(run / "kernel"))
    env = {**os.environ, "RBTUTOR_BWRAP": "/nonexistent/bwrap"}
    proc = subprocess.run([*launcher, str(ipc)], cwd=work, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2 and "bwrap" in proc.stderr and "not found" in proc.stderr, proc.stderr
    # a bwrap that cannot make its namespaces (as where user namespaces are disabled): refused, with why
    env["RBTUTOR_BWRAP"] = shutil.which("false")
    proc = subprocess.run([*launcher, str(ipc)], cwd=work, capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2 and "cannot create its namespaces" in proc.stderr, proc.stderr


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
def test_kernel_works_for_an_ordinary_grader():
    """Grading as uid 65534 (no root): bwrap runs unprivileged; confinement and limits hold."""
    base = Path(tempfile.mkdtemp(prefix="rbtutor-sandbox-user-"))
    try:
        course, work = make_course(base)
        script = base / "run.py"
        script.write_text(textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import test_sandbox as t
            out = t.execute(t.Path({str(work)!r}), [
                t.probe("import numpy; open('mine.txt', 'w').write('x')"),
                t.probe("open({str(course / 'gradebook.db')!r}).read()"),
                t.probe("open({str(course / 'gradebook.db')!r}, 'w')"),
                t.probe("import resource; print('LIMITS', resource.getrlimit(resource.RLIMIT_AS)[0])"),
                t.probe("import rbtutor"),
            ])
            print("OUT", t.json.dumps(out))
        """))
        for path in [base, *base.rglob("*")]:
            os.chown(path, 65534, 65534)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY"))}
        env.update(HOME=str(base), JUPYTER_PATH=str(Path(sys.prefix) / "share" / "jupyter"))
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, str(script)]
        proc = subprocess.run(passable_interpreter(command), cwd=base, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        out = json.loads(proc.stdout.split("OUT ", 1)[1])
        found = results(out)
        # the kernel writes into its private tmpfs, never into the grader's folder
        assert found[0] == "ok" and not (work / "mine.txt").exists(), out
        assert found[1] in ("PermissionError", "FileNotFoundError"), out
        assert found[2] in ("PermissionError", "FileNotFoundError", "OSError"), out
        assert f"LIMITS {student_kernel.DEFAULT_MEMORY}" in out[3], out
        assert found[4] == "ModuleNotFoundError", out
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
        probe("open('big.bin', 'wb').write(b'x' * (" + str(student_kernel.WORK_SIZE) + " + 2**20))"),
    ], timeout=120)
    assert "GIVEN from the assignment" in out[0], out
    assert results(out)[1] == "ok", out
    assert results(out)[2] == "OSError", out  # no space left in the kernel's own tmpfs
    assert (work / "given.txt").read_text() == "from the assignment"
    assert sorted(p.name for p in work.iterdir()) == ["given.txt"]
