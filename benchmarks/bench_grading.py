"""Grading throughput: the floor, then a generated class graded serially and in parallel.

* floor: start the grading kernel and execute an empty notebook (median of 5);
* a class of STUDENTS students x 10 assignments, every student answering with the
  reference solution, graded by ``rbtutor.course.grade`` with one worker and with one
  worker per core, each from a fresh copy of the same submissions.

Targets on the course machine (2 cores): parallel at least 1.7 times faster than
serial, and the cost per notebook within 1.5 times the floor; that ratio is printed
both for grading as `make grade` does it (in parallel) and one notebook at a time. The class size
can be lowered for a quick look: RBTUTOR_BENCH_STUDENTS=4 make bench.
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

    from rbtutor import student_kernel

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = student_kernel.ipc_prefix()
    name = student_kernel.install()
    samples = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "autograded" / "someone" / "problem00"  # like nbgrader's working folder
            work.mkdir(parents=True)
            client = NotebookClient(new_notebook(), kernel_name=name, config=config,
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
    from rbtutor.course import api, assignments

    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises", course / "exercises", ignore=shutil.ignore_patterns("problem_data.yaml"))
    grader = api(course)
    count = 0
    for name in assignments(course):
        assert grader.generate_assignment(name, force=True)["success"]
        nb = solution(course / "exercises" / name / f"{name}.ipynb")
        for k in range(STUDENTS):
            folder = course / "submitted" / f"student{k:03d}" / name
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{name}.ipynb")
            (folder / "timestamp.txt").write_text("2026-12-01 12:00:00.000000 UTC")
            count += 1
    return count


def timed_grade(template: Path, where: Path, jobs: int) -> float:
    from rbtutor.course import grade

    shutil.copytree(template, where)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = grade(where, jobs)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"grading with {jobs} job(s) failed")
    return seconds


def main() -> None:
    cores = os.cpu_count() or 1
    floor = floor_seconds()
    with tempfile.TemporaryDirectory(prefix="rbtutor-bench-grading-") as tmp:
        template = Path(tmp) / "template"
        count = make_class(template)
        serial = timed_grade(template, Path(tmp) / "serial", 1)
        parallel = timed_grade(template, Path(tmp) / "parallel", cores)
    per_serial, per_parallel = serial / count, parallel / count
    speedup = serial / parallel
    print(f"class: {STUDENTS} students x {count // max(STUDENTS, 1)} assignments = {count} notebooks; {cores} cores")
    print(f"{'quantity':<52} {'value':>9} {'target':>9}")
    print(f"{'floor: kernel start + empty notebook':<52} {floor:8.2f}s")
    print(f"{'serial, per notebook':<52} {per_serial:8.2f}s")
    print(f"{'parallel (make grade), per notebook, wall':<52} {per_parallel:8.2f}s")
    rows = [("parallel speed-up", speedup, f">= {PARALLEL_TARGET}", speedup >= PARALLEL_TARGET),
            ("per notebook / floor, parallel (make grade)", per_parallel / floor, f"<= {FLOOR_TARGET}",
             per_parallel / floor <= FLOOR_TARGET),
            ("per notebook / floor, serial (one at a time)", per_serial / floor, f"<= {FLOOR_TARGET}",
             per_serial / floor <= FLOOR_TARGET)]
    for name, value, target, ok in rows:
        print(f"{name:<52} {value:8.2f}x {target:>9}  {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
