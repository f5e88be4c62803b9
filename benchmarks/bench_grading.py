"""Grading throughput: the floor, then a generated class graded one at a time and as `make grade` does.

* floor: start the grading kernel (confined, as nbgrader_config.py sets it up),
  execute an empty notebook and stop the kernel the way grading stops it (median of 5);
* a class of STUDENTS students x 10 assignments, every student answering with the
  reference solution, graded by ``rbtutor.course.grade`` one notebook at a time
  (``--jobs 1``) and with its default number of workers (``make grade``), each from
  a fresh copy of the same submissions; wall time and the CPU time of the whole
  machine (from /proc/stat) per notebook.

Targets on the course machine (2 cores): grading as `make grade` does it at least
1.7 times faster than one at a time, and its cost per notebook (wall time / notebooks)
within 1.5 times the floor.

The per-notebook target is read for `make grade`, the way the instructor grades. The
one-at-a-time ratio is printed for information, not as a target: it cannot be met
together with the speed-up on 2 cores. One at a time, a notebook costs its kernel start
(the floor) plus its own work, with no overlap; under 1.5 times the floor would leave
0.5 floor for executing the notebook, judging it and writing its feedback, which take
about as long as the kernel start alone. Overlapping them (starting the next kernel while
a notebook runs) would use the second core, and then `make grade` could no longer be 1.7
times faster than it. The CPU seconds per notebook make this visible: the two cores can
do at best (CPU per notebook) / 2 per notebook.

The class size can be lowered for a quick look: RBTUTOR_BENCH_STUDENTS=4 make bench.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
STUDENTS = int(os.environ.get("RBTUTOR_BENCH_STUDENTS", "20"))
PARALLEL_TARGET, FLOOR_TARGET = 1.7, 1.5


def floor_seconds() -> float:
    """Start the grading kernel (confined, as nbgrader_config.py sets it up) and run an empty notebook."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_notebook
    from traitlets.config import Config

    from rbtutor.grading import sandbox as student_kernel

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = student_kernel.ipc_prefix()
    name = student_kernel.install()
    samples = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "autograded" / "someone" / "problem00"  # like nbgrader's working folder
            work.mkdir(parents=True)
            # stopped as grading stops its kernels (BoundedExecute.shutdown_kernel)
            client = NotebookClient(new_notebook(), kernel_name=name, config=config,
                                    shutdown_kernel="immediate",
                                    resources={"metadata": {"path": str(work)}})
            start = time.perf_counter()
            client.execute()  # starts, runs and shuts down its own kernel
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def solution(source: Path) -> nbformat.NotebookNode:
    """The source notebook as a student would hand it in: solutions in, markers out."""
    import re

    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        cell.source = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", "", cell.source, flags=re.M)
    return nb


def make_class(course: Path) -> int:
    from rbtutor.course import CourseLayout, api

    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises", course / "exercises", ignore=shutil.ignore_patterns("problem_data.yaml"))
    grader = api(course)
    count = 0
    for name in CourseLayout(course).assignments():
        assert grader.generate_assignment(name, force=True)["success"]
        nb = solution(course / "exercises" / name / f"{name}.ipynb")
        for k in range(STUDENTS):
            folder = course / "submitted" / f"student{k:03d}" / name
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{name}.ipynb")
            (folder / "timestamp.txt").write_text("2026-12-01 12:00:00.000000 UTC")
            count += 1
    return count


def timed_grade(template: Path, where: Path, jobs: int | None) -> float:
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import grade

    shutil.copytree(template, where)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = grade(CourseLayout(where), jobs)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"grading with {jobs or 'the default number of'} job(s) failed")
    return seconds


def cpu_seconds() -> float:
    """CPU time used by the whole machine so far (all processes, user + system), from /proc/stat."""
    try:
        with open("/proc/stat") as handle:
            ticks = [int(v) for v in handle.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    from rbtutor.course.grade import default_jobs

    cores, jobs = os.cpu_count() or 1, default_jobs()
    floor = floor_seconds()
    with tempfile.TemporaryDirectory(prefix="rbtutor-bench-grading-") as tmp:
        template = Path(tmp) / "template"
        count = make_class(template)
        cpu = cpu_seconds()
        serial = timed_grade(template, Path(tmp) / "serial", 1)
        cpu_serial, cpu = cpu_seconds() - cpu, cpu_seconds()
        parallel = timed_grade(template, Path(tmp) / "parallel", None)
        cpu_parallel = cpu_seconds() - cpu
    per_serial, per_parallel = serial / count, parallel / count
    speedup = serial / parallel
    print(f"class: {STUDENTS} students x {count // max(STUDENTS, 1)} assignments = {count} notebooks; "
          f"{cores} cores; make grade uses {jobs} workers")
    print(f"{'quantity':<52} {'value':>9} {'target':>9}")
    print(f"{'floor: kernel start + empty notebook + stop':<52} {floor:8.2f}s")
    print(f"{'one at a time (--jobs 1), per notebook':<52} {per_serial:8.2f}s   "
          f"(CPU {cpu_serial / count:.2f} s)")
    print(f"{'make grade, per notebook (wall / notebooks)':<52} {per_parallel:8.2f}s   "
          f"(CPU {cpu_parallel / count:.2f} s)")
    rows = [("speed-up of make grade over one at a time", speedup, f">= {PARALLEL_TARGET}",
             speedup >= PARALLEL_TARGET),
            ("make grade, per notebook / floor", per_parallel / floor, f"<= {FLOOR_TARGET}",
             per_parallel / floor <= FLOOR_TARGET)]
    for name, value, target, ok in rows:
        print(f"{name:<52} {value:8.2f}x {target:>9}  {'PASS' if ok else 'FAIL'}")
    print(f"{'one at a time, per notebook / floor (information)':<52} {per_serial / floor:8.2f}x")


if __name__ == "__main__":
    main()
