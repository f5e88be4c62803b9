"""Grading speed, measured fairly on one real class: stock nbgrader (serially by assignment, and
per student in as many processes as `make grade` uses), `make grade`, execution alone and the
floor, each measured several times in turn in one run; then how `make grade`'s cost grows with
the class, and where one notebook's time goes.

The class (:mod:`grading_class`) is shaped as a real one: every student hands in the same
assignments (problem03 and problem10 for a class ``N``), each with their own numbers and text;
one notebook in four has a wrong answer, the written parts are answered in words, one notebook is
slow. The same work on both sides: the class is copied for each run; stock nbgrader's kernel
(``python3``, no sandbox, a minimal ``nbgrader_config.py``) gets the course's grading switch
``RBTUTOR_AUTOGRADING=1`` (no plots) and the grading kernel's thread settings (one BLAS/OpenMP
thread), and both sides write feedback. Both run as commands of their own (``nbgrader ...``,
``rbtutor grade``), with no machine-wide Jupyter configuration, so each pays its own start-up.
CPU time and peak memory are those of a cgroup made for each run (:mod:`run_cgroup`; the output
says where none could be made); the peak memory is shown twice: the run's processes' own
(sampled) and the group's, which adds the page cache of the files the run writes.

Contenders, per notebook (CPU and wall):

* stock nbgrader, serial: ``nbgrader autograde A`` and ``nbgrader generate_feedback A``, one
  assignment after another (nbgrader's own way);
* stock nbgrader, N processes: ``nbgrader autograde A --student S`` and ``generate_feedback`` for
  each submission, N at once (as GNU parallel would), N being `make grade`'s worker count;
* make grade: ``rbtutor grade`` with its default workers, a process of its own;
* execution only: `make grade`'s worker pool and confined kernel running each handed-in notebook
  as it is, and nothing else (what the students' own code costs; no grader can do less and still
  run it);
* floor: the same pool running one empty notebook per submission.

The first class is measured by every contender ``BENCH_REPEAT`` times (default 3) in turn (:mod:`alternating`:
A B C A B C, not A A B B), and the report gives each one's median, lowest and highest, with the
load average each measurement started at. Targets (issue 38), on medians: `make grade`'s CPU at
most 1.2 times execution alone's, for every class measured; against stock nbgrader on the first
class, CPU per notebook at most a third of the stock run of the lower CPU, and wall time at least
6 times faster than the faster stock run. A missed target makes the script exit with status 1
(after printing everything).

Classes: ``BENCH_CLASS`` (default ``30``; ``make bench BENCH_CLASS=30,300`` or ``30,300,273xall``
for the growth), each entry ``N`` (N students handing in problem03 and problem10) or ``Nxall``
(N students handing in every assignment: ``273xall`` is 3 276 notebooks). Every contender grades
the first class; for the others, `make grade` and execution only are measured in turn. The Dask
cluster (``grade --scheduler``, 1, 2 and 3 workers) grades, once, each class of at most
``BENCH_CLUSTER_UP_TO`` notebooks (default 300), for the growth table, the plot
(``_build/bench/grading-growth.png``, not in git) and the projection to 100 000 notebooks.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternating import in_turn, load_average, repeat_count, spread
from grading_class import ClassShape, Submission, make_class, parse_shape
from run_cgroup import RunGroup

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
OUTPUT = ROOT / "_build" / "bench"
CPU_SHARE_TARGET, STOCK_TARGET, OWN_COST_TARGET = 1 / 3, 6.0, 1.2
CLUSTER_WORKERS = (1, 2, 3)
PROJECTED = 100_000
STOCK_CONFIG = """c = get_config()
c.CourseDirectory.course_id = "rbtutor"
c.CourseDirectory.source_directory = "exercises"
"""
# what the grading kernel gets (rbtutor.grading.sandbox), given to stock nbgrader's kernel too
SAME_KERNEL_ENV = {"RBTUTOR_AUTOGRADING": "1", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1",
                   "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# a progress line of rbtutor grade: [3/60] s0001 problem03: 11/13 autograded (0.4 s; about 1 min left)
PROGRESS = re.compile(r"^\[\d+/\d+\] (\S+) (\S+): (\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) autograded.* "
                      r"\((\d+\.\d) s(?:; [^)]*)?\)$")


@dataclass
class Run:
    label: str
    wall: float  # seconds, the whole class
    cpu: float  # CPU seconds, the whole class
    peak_memory: int | None  # bytes charged to the run's cgroup at most (processes and page cache)
    count: int
    source: str = ""
    peak_processes: int | None = None  # the run's processes' own memory at most (sampled), bytes
    load: float = 0.0  # the machine's one-minute load average when the run started

    @property
    def wall_per(self) -> float:
        return self.wall / self.count

    @property
    def cpu_per(self) -> float:
        return self.cpu / self.count


LEFT_GROUPS: list[Path] = []  # cgroups the grading left behind in the runs' own (a finding to report)


def measured(label: str, count: int, work, *args) -> Run:
    """Run ``work(*args)`` (which returns its wall seconds) in a cgroup of its own.

    multiprocessing's fork server (where the workers come from while a second thread runs, such as
    a Dask client's) and resource tracker live as long as the process that started them: they are
    stopped at the end of each run, so that each run starts and pays for its own. The pools of
    execution only and the floor are forked from this process, which imported the grading code
    before the first measurement; `make grade` runs as a command of its own and pays for its import.
    """
    load = load_average()
    with RunGroup(re.sub(r"\W+", "-", label)) as group:
        try:
            wall = work(*args)
        finally:
            stop_multiprocessing_helpers()
    LEFT_GROUPS.extend(group.left_groups)
    run = Run(label, wall, group.usage.cpu, group.usage.peak_memory, count, group.usage.source,
              group.usage.peak_processes, load)
    print(f"measured {datetime.now(UTC):%H:%M:%S} (load {load:.2f}): {label}: {run.cpu_per:.2f} CPU s, "
          f"{run.wall_per:.2f} s a notebook", flush=True)
    return run


def stop_multiprocessing_helpers() -> None:
    from multiprocessing import forkserver, resource_tracker

    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        if not hasattr(helper, "_stop"):
            raise RuntimeError(f"expected {type(helper).__name__} to have _stop (Python {sys.version}), it has not")
        helper._stop()


# --------------------------------------------------------------------------- stock nbgrader


def stock_env(same_kernel: bool = True) -> dict[str, str]:
    """A command's environment: no machine-wide Jupyter configuration (such as a hub's
    /etc/jupyter/nbgrader_config.py), only the course's own file; for stock nbgrader
    (``same_kernel``), the grading kernel's switch and threads too."""
    return {**os.environ, **(SAME_KERNEL_ENV if same_kernel else {}), "JUPYTER_NO_CONFIG": "1",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def nbgrader(where: Path, *args: str) -> None:
    # JUPYTER_NO_CONFIG makes each command a configuration folder in TMPDIR: kept beside the
    # course copy, so that they go with the benchmark's scratch (left in /tmp, 384 a run)
    temporary = where.with_name(f"{where.name}-tmp")
    temporary.mkdir(mode=0o700, exist_ok=True)
    result = subprocess.run([str(VENV_BIN / "nbgrader"), *args], cwd=where,
                            env={**stock_env(), "TMPDIR": str(temporary)}, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed in {where}:\n{result.stderr[-2000:]}")


def stock_submissions(where: Path) -> list[tuple[str, str]]:
    """(assignment, student) of every notebook handed in to the course at ``where``."""
    return sorted((p.parent.name, p.parent.parent.name) for p in (where / "submitted").glob("*/*/*.ipynb"))


def stock_course(template: Path, where: Path) -> None:
    """A copy of the class for stock nbgrader (its own config and gradebook), made before a stock
    run and outside its measurement, as `make grade`'s copy is made before its run."""
    from nbgrader.api import Gradebook

    shutil.copytree(template, where, ignore=shutil.ignore_patterns("nbgrader_config.py", "gradebook.db*"))
    (where / "nbgrader_config.py").write_text(STOCK_CONFIG)
    subs = stock_submissions(where)
    for name in sorted({a for a, _ in subs}):  # the gradebook needs the assignments first
        nbgrader(where, "generate_assignment", name, "--force")
    with Gradebook(f"sqlite:///{where / 'gradebook.db'}") as gradebook:  # no race to create a student
        for student in sorted({s for _, s in subs}):
            gradebook.update_or_create_student(student)


def stock_serial(where: Path) -> float:
    start = time.perf_counter()
    for name in sorted({a for a, _ in stock_submissions(where)}):
        nbgrader(where, "autograde", name, "--force")
        nbgrader(where, "generate_feedback", name, "--force")
    return time.perf_counter() - start


#: what stock nbgrader says when its kernel died while starting (seen 2026-12-06 in the parallel
#: run, 1 of 60 submissions, which ended the benchmark). Not looked into; one known cause with
#: several processes starting kernels at once: jupyter_client picks a free TCP port by binding and
#: letting go, so two kernels can be given the same port.
KERNEL_START_RACE = "Kernel died before replying to kernel_info"
STOCK_RETRIES: list[str] = []  # submissions stock nbgrader graded again after KERNEL_START_RACE


def stock_parallel(where: Path, processes: int) -> float:
    def one(sub: tuple[str, str]) -> None:
        try:
            nbgrader(where, "autograde", sub[0], "--student", sub[1], "--force")
        except RuntimeError as exc:  # graded again once, as a user running them in parallel would
            if KERNEL_START_RACE not in str(exc):
                raise
            STOCK_RETRIES.append(f"{sub[1]} {sub[0]}")
            nbgrader(where, "autograde", sub[0], "--student", sub[1], "--force")
        nbgrader(where, "generate_feedback", sub[0], "--student", sub[1], "--force")

    start = time.perf_counter()
    with ThreadPoolExecutor(processes) as pool:
        list(pool.map(one, stock_submissions(where)))
    return time.perf_counter() - start


# --------------------------------------------------------------------------- make grade, floor


def timed_grade(where: Path, record: list) -> float:
    """``rbtutor grade`` (what `make grade` runs) on the course at ``where``; its progress lines go to ``record``."""
    start = time.perf_counter()
    result = subprocess.run([str(VENV_BIN / "rbtutor"), "--root", str(where), "grade"], cwd=where,
                            env=stock_env(same_kernel=False), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"make grade failed on the benchmark class:\n{(result.stdout + result.stderr)[-3000:]}")
    record += [(m[1], m[2], float(m[3]), float(m[4]), float(m[5]))
               for m in map(PROGRESS.match, result.stdout.splitlines()) if m]
    return seconds


def check_scores(plan: list[Submission], lines: list) -> None:
    """Right and slow submissions earn every autograded point; wrong ones lose some."""
    got = {(s, a): (score, top) for s, a, score, top, _ in lines}
    if len(got) != len(plan):
        raise RuntimeError(f"expected {len(plan)} graded submissions, got {len(got)}")
    for sub in plan:
        score, top = got[(sub.student, sub.assignment)]
        if (score < top) != (sub.kind == "wrong"):
            raise RuntimeError(f"expected {sub.student} {sub.assignment} ({sub.kind}) to score "
                               f"{'less than' if sub.kind == 'wrong' else ''} {top:g}, got {score:g}")


def _in_grading_kernel(nb) -> None:
    """Start the confined grading kernel, run ``nb`` in a throwaway folder, stop it (as grading does)."""
    from nbclient import NotebookClient

    from rbtutor.grading import sandbox
    from rbtutor.grading.execute import PromptClient, PromptKernelManager, throwaway_folder

    sandbox.start_zygote()  # as each grading worker does
    with throwaway_folder("rbtutor-work-") as work, throwaway_folder("rbtutor-ipc-") as ipc:
        client = NotebookClient(nb, kernel_name=sandbox.install(), shutdown_kernel="immediate", allow_errors=True,
                                resources={"metadata": {"path": str(work)}})
        client.km = PromptKernelManager(kernel_name=sandbox.KERNEL_NAME, transport="ipc",
                                        ip=str(ipc / "kernel"), connection_file=str(ipc / "c.json"),
                                        client_class=f"{PromptClient.__module__}.PromptClient")
        client.execute()
        group = sandbox.kernel_record(ipc, "c").get("cgroup")
        if group:  # its launcher was killed with the kernel: the group is removed as grading does
            sandbox.remove_group(Path(group), wait=2.0)


def _empty_notebook(_: int) -> None:
    from nbformat.v4 import new_notebook

    _in_grading_kernel(new_notebook())


def _handed_in(path: str) -> None:
    import nbformat

    _in_grading_kernel(nbformat.read(path, as_version=4))


def _pool_seconds(task, items: list, jobs: int) -> float:
    """Wall time for ``task`` over ``items`` on `make grade`'s worker pool (``jobs`` workers)."""
    from rbtutor.course.grade import worker_pool
    from rbtutor.grading.sandbox import zygote_running

    start = time.perf_counter()
    with zygote_running(), worker_pool(jobs) as pool:
        list(pool.map(task, items))
    return time.perf_counter() - start


def floor_seconds(count: int, jobs: int) -> float:
    """Wall time for ``count`` empty notebooks on `make grade`'s worker pool."""
    return _pool_seconds(_empty_notebook, list(range(count)), jobs)


def execution_seconds(course: Path, jobs: int) -> float:
    """Wall time for the class's handed-in notebooks run as they are, on the same pool and kernel, and
    nothing else: no intake, no nbgrader, no judging, no feedback, no gradebook."""
    paths = sorted(str(path) for path in (course / "submitted").glob("*/*/*.ipynb"))
    return _pool_seconds(_handed_in, paths, jobs)


# --------------------------------------------------------------------------- cluster


def cluster_seconds(template: Path | None, where: Path, workers: int) -> float:
    """A scheduler and ``workers`` workers started, the class graded (if any), all stopped.

    Returns the wall seconds of the grading alone (0 without a class)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dask_processes import DaskProcesses

    from rbtutor.course import CourseLayout
    from rbtutor.course.cluster import grade_on_cluster

    wall = 0.0
    if template is not None:
        shutil.copytree(template, where)
    processes = DaskProcesses(where.parent / f"{where.name}-dask", workers=workers)
    try:
        processes.wait_for_workers(workers)
        if template is not None:
            out = io.StringIO()
            start = time.perf_counter()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                status = grade_on_cluster(CourseLayout(where), processes.address)
            wall = time.perf_counter() - start
            if status != 0:
                raise RuntimeError(f"grade --scheduler with {workers} worker(s) failed:\n{out.getvalue()[-3000:]}")
    finally:
        processes.close()
    return wall


def cluster_run(template: Path, tmp: Path, workers: int, count: int) -> Run:
    """Grading on the cluster, less the CPU of an idle cluster's start and stop."""
    run = measured(f"cluster: grade --scheduler, {workers} worker(s)", count, cluster_seconds,
                   template, tmp / f"cluster{workers}-{count}", workers)
    idle = measured(f"idle cluster {workers}", count, cluster_seconds, None, tmp / f"idle{workers}-{count}", workers)
    run.cpu -= idle.cpu
    return run


def scheduler_overhead(folder: Path, tasks: int = 400, workers: int = 2) -> tuple[float, float]:
    """Seconds per trivial task (the builtin ``abs``) through a local scheduler: (all at once, one at a time)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dask_processes import DaskProcesses

    processes = DaskProcesses(folder, workers=workers)
    try:
        processes.wait_for_workers(workers)
        with processes.client() as client:
            client.submit(abs, -1, pure=False).result()
            start = time.perf_counter()
            client.gather([client.submit(abs, -k, pure=False) for k in range(tasks)])
            batch = (time.perf_counter() - start) / tasks
            start = time.perf_counter()
            for k in range(tasks // 4):
                client.submit(abs, -k, pure=False).result()
            serial = (time.perf_counter() - start) / (tasks // 4)
    finally:
        processes.close()
    return batch, serial


# --------------------------------------------------------------------------- growth


def gradebook_queries(course: Path) -> dict[str, float]:
    """Milliseconds of the gradebook reads a grading run makes, on the graded class at ``course``."""
    from nbgrader.api import Gradebook

    from rbtutor.course import CourseLayout, api
    from rbtutor.course.grade import export_grades

    layout = CourseLayout(course)
    grader = api(layout)
    found = {}
    with Gradebook(f"sqlite:///{layout.gradebook_file}") as gradebook:
        student = sorted(s.id for s in gradebook.students)[0]
        assignment = gradebook.assignments[0].name
        start = time.perf_counter()
        sorted(s.id for s in gradebook.students)  # the judge's classmates, read for a notebook with a wrong answer
        found["list the students"] = time.perf_counter() - start
        start = time.perf_counter()
        sub = gradebook.find_submission(assignment, student)
        [g.score for nb in sub.notebooks for g in nb.grades]  # what the feedback page reads
        found["one submission's grades"] = time.perf_counter() - start
    start = time.perf_counter()
    export_grades(grader, course / "grades-again.csv")
    found["grades.csv (every submission)"] = time.perf_counter() - start
    return {k: v * 1e3 for k, v in found.items()}


def by_kind(plan: list[Submission], lines: list) -> dict[str, float]:
    """Median seconds a worker spent on a submission, by kind (right, wrong, slow)."""
    kinds = {(s.student, s.assignment): s.kind for s in plan}
    seconds = defaultdict(list)
    for student, assignment, _, _, took in lines:
        seconds[kinds[(student, assignment)]].append(took)
    return {k: statistics.median(v) for k, v in sorted(seconds.items())}


def plot_growth(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in rows]
    index_of = {"wall": 0, "cpu": 1}
    panels = [("wall per notebook (s)", "wall"), ("CPU per notebook (s)", "cpu"),
              ("peak memory of the run (MB)", "memory"), ("grades.csv query (ms)", "export")]
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.2))
    for ax, (title, key) in zip(axes, panels, strict=True):
        label = "make grade, with page cache" if key == "memory" else "make grade"
        ax.plot(sizes, [r[key] for r in rows], "o-", label=label)
        if key == "memory":
            ax.plot(sizes, [r["processes"] for r in rows], "o:", label="make grade, processes only")
            ax.legend(fontsize=7)
        if key in ("wall", "cpu"):  # the cluster, where it graded the class too
            for index, workers in enumerate(CLUSTER_WORKERS):
                points = [(r["size"], r["cluster"][workers][index_of[key]]) for r in rows if workers in r["cluster"]]
                if points:
                    ax.plot(*zip(*points, strict=True), "s--", markersize=4, label=f"cluster, {workers} worker(s)",
                            color=f"C{index + 1}")
            ax.legend(fontsize=7)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [str(size) for size in sizes])
        ax.minorticks_off()
        ax.set_xlabel("notebooks in the class")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
    fig.suptitle("make grade and the Dask cluster: cost against class size (benchmarks/bench_grading.py)",
                 fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- profile of one notebook


class StageClock:
    """Wall seconds spent in chosen functions, by label, while patched (see :func:`profile_one`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}  # in the order the stages were first entered
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner, attr: str, label) -> None:
        original = getattr(owner, attr)
        name = label if callable(label) else (lambda *_: label)
        clock = self.seconds

        if inspect.iscoroutinefunction(original):
            async def timed(*args, **kwargs):
                clock.setdefault(name(*args), 0.0)
                start = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    clock[name(*args)] += time.perf_counter() - start
        else:
            def timed(*args, **kwargs):
                clock.setdefault(name(*args), 0.0)
                start = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    clock[name(*args)] += time.perf_counter() - start
        setattr(owner, attr, functools.wraps(original)(timed))
        self._undo.append((owner, attr, original))

    def restore(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo = []


def _stage_clock() -> StageClock:
    """The stages of grading one notebook, each timed where the code enters it (names are
    checked: a renamed function fails here instead of silently dropping out of the profile)."""
    import nbclient
    from nbconvert.preprocessors import Preprocessor
    from nbconvert.writers import FilesWriter
    from nbgrader.apps import NbGraderAPI
    from nbgrader.converters.autograde import Autograde

    from rbtutor.course.grade import run as grade_run
    from rbtutor.course.grade import submission as grade_submission
    from rbtutor.grading.execute import BoundedExecute
    from rbtutor.grading.sandbox import zygote_client  # zygote_starting looks the names up there

    clock = StageClock()
    for owner, attr, label in (
            (grade_run, "start_run", "run: gradebook backup, students listed"),
            (zygote_client, "_await_zygote", "run: zygote awaited (started with the run)"),
            (grade_run, "api", "run: nbgrader API objects made"),
            (grade_submission, "take_in_submission", "intake (checks, copy)"),
            (grade_submission, "hand_grades_before_regrade", "gradebook: hand grades read"),
            (NbGraderAPI, "autograde", "nbgrader autograde, whole"),
            (Autograde, "init_assignment", "  gradebook: submission rows"),
            (FilesWriter, "write", "  notebook files written"),
            (Preprocessor, "__call__", lambda self, *_: f"  preprocessor {type(self).__name__}"),
            (BoundedExecute, "start_new_kernel", "    kernel copy started (zygote fork, sandbox)"),
            (nbclient.NotebookClient, "start_new_kernel_client", "    kernel ready (client connected)"),
            (BoundedExecute, "execute_cell", "    cells executed"),
            (nbclient.NotebookClient, "_cleanup_kernel", "    kernel stopped"),
            (grade_submission, "keep_hand_grades", "gradebook: hand grades kept"),
            (grade_submission, "write_feedback_pages", "feedback pages"),
            (grade_run, "finish_run", "run: grades.csv, integrity report"),
            (zygote_client, "_stop_zygote", "run: zygote stopped")):
        clock.wrap(owner, attr, label)
    return clock


def profile_one(template: Path, tmp: Path, plan: list[Submission], rounds: int = 3) -> list[tuple[str, float]]:
    """Where one right notebook's time goes, graded alone in this process (one worker): the
    median over ``rounds`` runs after a first one that warms the caches."""
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import grade

    chosen = next(s for s in plan if s.kind == "right" and s.assignment == "problem03")
    course = one_notebook_course(template, tmp / "profile", chosen)
    rounds_seen = []
    for k in range(rounds + 1):
        clock = _stage_clock()
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                status = grade(CourseLayout(course), jobs=1)
        finally:
            clock.restore()
        if status != 0:
            raise RuntimeError(f"grading the profiled notebook ({chosen}) failed")
        clock.seconds["whole grade run"] = time.perf_counter() - start
        if k:
            rounds_seen.append(dict(clock.seconds))
    labels = list(rounds_seen[0])  # in the order the stages were first entered
    return [(label, statistics.median(r.get(label, 0.0) for r in rounds_seen)) for label in labels]


# --------------------------------------------------------------------------- report


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    load = Path("/proc/loadavg").read_text().split()[:3]
    return (f"{os.cpu_count()} cores ({model}), {platform.system()} {platform.release()}, "
            f"load average {' '.join(load)} (1, 5, 15 min)")


def code_state() -> str:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--short"], cwd=ROOT, capture_output=True, text=True).stdout
    changed = [line for line in dirty.splitlines() if line.strip()]
    return f"commit {head}, {len(changed)} uncommitted path(s)" + (f": {', '.join(changed[:8])}" if changed else "")


def megabytes(size: int | None) -> str:
    return f"{size / 2**20:.0f} MB" if size is not None else "unknown"


def print_table(series: dict[str, list[Run]]) -> None:
    """Each contender's median per notebook, with the lowest and highest, CPU first."""
    print(f"{'per notebook: median (lowest-highest)':<58} {'CPU s':>17} {'wall s':>17}  {'load at each run':<18}"
          f" {'peak MB: processes':>18} {'with cache':>10}")
    for label, runs in series.items():
        cpu, wall = spread([r.cpu_per for r in runs]), spread([r.wall_per for r in runs])
        loads = " ".join(f"{r.load:.1f}" for r in runs)
        processes = statistics.median((r.peak_processes or 0) / 2**20 for r in runs)
        cache = statistics.median((r.peak_memory or 0) / 2**20 for r in runs)
        print(f"{label:<58} {cpu!s:>17} {wall!s:>17}  {loads:<18} {processes:18.0f} {cache:10.0f}")


def median_of(runs: list[Run], what: str) -> float:
    return statistics.median(getattr(r, what) for r in runs)


def stock_targets(stock: list[list[Run]], ours: list[Run]) -> list[tuple[str, float, str, bool]]:
    """make grade against stock nbgrader (medians): CPU against the stock run of lower CPU, wall
    against the faster one."""
    thrifty = min(stock, key=lambda runs: median_of(runs, "cpu"))
    faster = min(stock, key=lambda runs: median_of(runs, "wall"))
    share = median_of(ours, "cpu") / median_of(thrifty, "cpu")
    speed = median_of(faster, "wall") / median_of(ours, "wall")
    return [(f"CPU per notebook: make grade / {thrifty[0].label}", share, f"<= {CPU_SHARE_TARGET:.3f}",
             share <= CPU_SHARE_TARGET),
            (f"wall: {faster[0].label} / make grade", speed, f">= {STOCK_TARGET:g}", speed >= STOCK_TARGET)]


def own_cost_target(shape: ClassShape, ours: list[Run], alone: list[Run]) -> tuple[str, float, str, bool]:
    """make grade's CPU over that of executing the same notebooks alone (medians)."""
    ratio = median_of(ours, "cpu") / median_of(alone, "cpu")
    return (f"CPU: make grade / execution only, class {shape.students}"
            f"{'xall' if shape.assignments is None else ''}", ratio, f"<= {OWN_COST_TARGET:g}",
            ratio <= OWN_COST_TARGET)


def print_round_ratios(series: dict[str, list[Run]], ours: str = "make grade") -> None:
    """Each contender over make grade, round by round (both met about the same machine in a round)."""
    print("\nratios to make grade, round by round (CPU; wall):")
    for label, runs in series.items():
        if label != ours:
            cpu = ", ".join(f"{r.cpu / o.cpu:.2f}" for r, o in zip(runs, series[ours], strict=True))
            wall = ", ".join(f"{r.wall / o.wall:.2f}" for r, o in zip(runs, series[ours], strict=True))
            print(f"  {label:<58} CPU {cpu}; wall {wall}")


def class_shapes() -> list[ClassShape]:
    text = os.environ.get("BENCH_CLASS", "30")
    try:
        return [parse_shape(part) for part in text.split(",")]
    except ValueError as exc:
        raise SystemExit(f"BENCH_CLASS: {exc}") from exc


def cluster_limit() -> int:
    """The largest class (in notebooks) the Dask cluster also grades (``BENCH_CLUSTER_UP_TO``, default 300)."""
    text = os.environ.get("BENCH_CLUSTER_UP_TO", "300")
    if not text.isdigit():
        raise SystemExit(f"BENCH_CLUSTER_UP_TO: expected a number of notebooks such as 300, got {text!r}")
    return int(text)


def growth_row(shape: ClassShape, runs: list[Run], plan: list[Submission], lines: list, course: Path,
               clusters: list[Run]) -> dict:
    """One class's row (medians of `make grade`'s runs); ``clusters`` is empty when the cluster did not grade it."""
    queries = gradebook_queries(course)
    return {"size": len(plan), "students": shape.students, "wall": median_of(runs, "wall_per"),
            "cpu": median_of(runs, "cpu_per"),
            "memory": statistics.median((r.peak_memory or 0) for r in runs) / 2**20,
            "processes": statistics.median((r.peak_processes or 0) for r in runs) / 2**20,
            "export": queries["grades.csv (every submission)"],
            "queries": queries, "kinds": by_kind(plan, lines),
            "cluster": {w: (c.wall_per, c.cpu_per) for w, c in zip(CLUSTER_WORKERS, clusters, strict=False)}}


def grade_work(records: list[list]):
    """`make grade` as a contender: each run's progress lines are a new list in ``records``."""
    def work(where: Path) -> float:
        records.append([])
        return timed_grade(where, records[-1])
    return work


def alternate(contenders: dict, count: int, repeat: int, tmp: Path) -> dict[str, list[Run]]:
    """Every contender (label: (``prepare(where)`` or None, ``work(where)``)) measured ``repeat`` times in
    turn; ``prepare`` makes a run's folder before it, outside its measurement, and the folder is removed
    once the same contender has run again."""
    series: dict[str, list[Run]] = {label: [] for label in contenders}
    for k, label in in_turn(list(contenders), repeat):
        slug = re.sub(r"\W+", "-", label)
        prepare, work = contenders[label]
        if prepare is not None:
            prepare(tmp / f"{slug}-{k}")
        series[label].append(measured(label, count, work, tmp / f"{slug}-{k}"))
        shutil.rmtree(tmp / f"{slug}-{k - 1}", ignore_errors=True)
    return series


def first_class(shape: ClassShape, tmp: Path, jobs: int, repeat: int):
    """Every contender on the first class, in turn; returns (plan, series, make grade's progress lines)."""
    template = tmp / "class"
    plan = make_class(template, shape)
    records: list[list] = []
    stock, copy = functools.partial(stock_course, template), functools.partial(shutil.copytree, template)
    contenders = {
        "stock nbgrader, serial by assignment": (stock, stock_serial),
        f"stock nbgrader, {jobs} processes (one per submission)": (stock, lambda where: stock_parallel(where, jobs)),
        "make grade": (copy, grade_work(records)),
        f"execution only: {jobs} workers, the notebooks as handed in":
            (None, lambda _: execution_seconds(template, jobs)),
        f"floor: {jobs} workers, empty notebooks": (None, lambda _: floor_seconds(len(plan), jobs))}
    series = alternate(contenders, len(plan), repeat, tmp)
    for lines in records:
        check_scores(plan, lines)
    return plan, series, records[-1]


def other_class(shape: ClassShape, tmp: Path, jobs: int, repeat: int):
    """`make grade` and execution only on a class, in turn; returns (plan, series, the last run's lines)."""
    template = tmp / f"class-{shape.students}-{'all' if shape.assignments is None else 'same'}"
    plan = make_class(template, shape)
    records: list[list] = []
    contenders = {"make grade": (functools.partial(shutil.copytree, template), grade_work(records)),
                  f"execution only: {jobs} workers, the notebooks as handed in":
                      (None, lambda _: execution_seconds(template, jobs))}
    runs = tmp / f"{template.name}-runs"
    runs.mkdir()
    series = alternate(contenders, len(plan), repeat, runs)
    for lines in records:
        check_scores(plan, lines)
    return template, plan, series, records[-1]


def graded_course(tmp: Path, repeat: int) -> Path:
    """The course folder of make grade's last run (kept for the gradebook reads)."""
    return tmp / f"make-grade-{repeat - 1}"


def main() -> int:
    """Everything measured and printed; the status is 1 when a target of issue 38 is missed."""
    import rbtutor.course.grade as course_grade  # the pools of execution only and the floor fork from here

    for name in course_grade.WORKER_MODULES:  # imported before the first run, not in it
        importlib.import_module(name)
    shapes, jobs = class_shapes(), course_grade.default_jobs()
    try:
        repeat = repeat_count(os.environ.get("BENCH_REPEAT"))
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc
    print(f"date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}")
    print(code_state())
    print(f"each contender measured {repeat} times, in turn (BENCH_REPEAT)", flush=True)
    with tempfile.TemporaryDirectory(prefix="rbtutor-bench-grading-") as scratch:
        tmp = Path(scratch)
        shape = shapes[0]
        plan, series, lines = first_class(shape, tmp, jobs, repeat)
        labels = list(series)
        stock, ours, alone = [series[labels[0]], series[labels[1]]], series["make grade"], series[labels[3]]
        clusters, overhead = [], None
        if len(plan) <= cluster_limit():
            clusters = [cluster_run(tmp / "class", tmp, workers, len(plan)) for workers in CLUSTER_WORKERS]
            overhead = scheduler_overhead(tmp / "overhead")
        growth = [growth_row(shape, ours, plan, lines, graded_course(tmp, repeat), clusters)]
        profile = profile_one(tmp / "class", tmp, plan)
        fixed = fixed_costs(tmp / "class", tmp, plan, median_of(ours, "cpu"))
        report(shape, plan, jobs, series, clusters, overhead, profile, fixed)
        rows = [*stock_targets(stock, ours), own_cost_target(shape, ours, alone)]
        print_own_cost(series, labels)
        lower_bound(plan, series, labels[3], fixed)
        for other in shapes[1:]:
            template, big_plan, big, big_lines = other_class(other, tmp, jobs, repeat)
            print(f"\nclass: {other} ({len(big_plan)} notebooks)")
            print_table(big)
            rows.append(own_cost_target(other, big["make grade"], list(big.values())[1]))
            big_clusters = ([cluster_run(template, tmp, workers, len(big_plan)) for workers in CLUSTER_WORKERS]
                            if len(big_plan) <= cluster_limit() else [])
            growth.append(growth_row(other, big["make grade"], big_plan, big_lines,
                                     graded_course(tmp / f"{template.name}-runs", repeat), big_clusters))
            shutil.rmtree(template)
            shutil.rmtree(tmp / f"{template.name}-runs")
        print_growth_header()
        for row in growth:
            print_growth(row)
        if overhead is not None:
            projection(growth, stock, overhead)
        print(f"\n{'target (issue 38), on the medians':<80} {'value':>8} {'target':>9}")
        for name, value, target, ok in rows:
            print(f"{name:<80} {value:8.3f} {target:>9}  {'PASS' if ok else 'FAIL'}", flush=True)
    if len(growth) > 1:
        plot_growth(growth, OUTPUT / "grading-growth.png")
        first, last = growth[0], growth[-1]
        print(f"wall per notebook {last['size']} / {first['size']}: {last['wall'] / first['wall']:.2f}x; CPU per "
              f"notebook: {last['cpu'] / first['cpu']:.2f}x; plot: {OUTPUT / 'grading-growth.png'}")
    print(f"finished {datetime.now(UTC):%H:%M} UTC; load average now "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0 if all(ok for *_, ok in rows) else 1


def print_own_cost(series: dict[str, list[Run]], labels: list[str]) -> None:
    """make grade over execution only, and execution only over the floor (medians)."""
    ours, alone, floor = series["make grade"], series[labels[3]], series[labels[4]]

    def ratio(top: list[Run], bottom: list[Run], what: str) -> float:
        return median_of(top, what) / median_of(bottom, what)

    print(f"\nthe grader's own cost: make grade / execution only {ratio(ours, alone, 'cpu'):.2f}x CPU, "
          f"{ratio(ours, alone, 'wall'):.2f}x wall; the notebooks' own code: execution only / floor "
          f"{ratio(alone, floor, 'cpu'):.2f}x CPU, {ratio(alone, floor, 'wall'):.2f}x wall (medians)")


def report(shape, plan, jobs, series, clusters, overhead, profile, fixed) -> None:
    wrong = sum(s.kind == "wrong" for s in plan)
    print(f"\nclass: {shape} ({len(plan)} notebooks, own numbers and text; {wrong} with a wrong answer, written "
          f"parts, one slow notebook); make grade uses {jobs} workers")
    print(f"CPU and memory: {series['make grade'][0].source}")
    if LEFT_GROUPS:
        print(f"note: the runs left {len(LEFT_GROUPS)} empty cgroup(s) behind inside the benchmark's own "
              f"(removed by the benchmark), such as {LEFT_GROUPS[0].name}")
    print(f"stock nbgrader's kernel: python3 with {' '.join(f'{k}={v}' for k, v in SAME_KERNEL_ENV.items())}")
    if STOCK_RETRIES:
        print(f"stock nbgrader in parallel: {len(STOCK_RETRIES)} submission(s) graded again after "
              f"{KERNEL_START_RACE!r} (the time measured includes it): {', '.join(STOCK_RETRIES)}")
    print_table(series)
    print_round_ratios(series)
    if clusters:
        print("\nthe Dask cluster, once, per notebook (CPU less an idle cluster's start and stop):")
        for run in clusters:
            print(f"  {run.label:<56} {run.cpu_per:.2f} CPU s, {run.wall_per:.2f} s (load {run.load:.1f})")
        print(f"scheduler cost per trivial task, 2 workers: {overhead[0] * 1e3:.2f} ms all at once, "
              f"{overhead[1] * 1e3:.2f} ms one at a time")
    print("\none notebook's path (a right problem03, graded alone by one in-process worker; median of 3 "
          "after a warm-up), wall seconds:")
    for label, seconds in profile:
        print(f"  {label:<52} {seconds:6.2f}")
    whole = dict(profile)["whole grade run"]
    parts = sum(seconds for label, seconds in profile if not label.startswith(" ") and label != "whole grade run")
    # each line is a median of its own, so the rest can come out a little below zero
    print(f"  {'(the rest: outside the stages above; medians)':<52} {whole - parts:6.2f}")
    print("\nonce a run, whatever the class (CPU seconds, median of 3):")
    for label, seconds in fixed:
        print(f"  {label:<84} {seconds:6.2f}")


# --------------------------------------------------------------------------- fixed costs


def one_notebook_course(template: Path, where: Path, chosen: Submission) -> Path:
    """A copy of the class's course with only ``chosen``'s notebook handed in."""
    shutil.copytree(template, where, ignore=shutil.ignore_patterns("submitted"))
    shutil.copytree(template / "submitted" / chosen.student / chosen.assignment,
                    where / "submitted" / chosen.student / chosen.assignment)
    return where


def import_seconds(code: str, *flags: str, rounds: int = 3) -> float:
    """Median CPU seconds of a new Python process that runs ``code`` (its imports) and exits."""
    seconds = []
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, *flags, "-c", code], check=True, env=stock_env(same_kernel=False))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(seconds)


def fixed_costs(template: Path, tmp: Path, plan: list[Submission], class_cpu: float) -> list[tuple[str, float]]:
    """What a run pays once, the imports of the processes a run starts once (the grading process,
    the zygote) or once a notebook (the kernel's launcher), and the class's keys.

    A run's CPU is taken as a fixed cost F plus m a notebook: ``class_cpu`` (the class's median) is
    F + m N, and a run of one notebook of the class, measured here, is F + m."""
    from rbtutor.grading.sandbox import zygote

    chosen = next(s for s in plan if s.kind == "right" and s.assignment == plan[0].assignment)
    courses = [one_notebook_course(template, tmp / f"one-{k}", chosen) for k in range(3)]
    runs = [measured("make grade, one notebook", 1, timed_grade, course, []) for course in courses]
    whole = median_of(runs, "cpu")
    each = (class_cpu - whole) / (len(plan) - 1) if len(plan) > 1 else float("nan")
    sandbox = Path(zygote.__file__).parent
    launcher = ("import importlib.util, sys\n"
                "spec = importlib.util.spec_from_file_location('rbtutor.grading.sandbox', "
                f"{str(sandbox / '__init__.py')!r}, submodule_search_locations=[{str(sandbox)!r}])\n"
                "package = importlib.util.module_from_spec(spec)\nsys.modules[spec.name] = package\n"
                "spec.loader.exec_module(package)\n")
    return [("make grade on one notebook, the whole run (cgroup): F + m", whole),
            ("  m, a notebook's own CPU: (the class's median run - F - m) / (notebooks - 1)", each),
            ("  F, the fixed cost of a run", whole - each),
            ("  F spread over this class's notebooks, per notebook", (whole - each) / len(plan)),
            ("a new Python process, nothing imported", import_seconds("pass", "-I")),
            (IMPORTS_LABEL,
             import_seconds("import importlib, rbtutor.course.grade as g\nfor m in g.WORKER_MODULES: "
                            "importlib.import_module(m)")),
            ("the zygote's imports (numpy, scipy.integrate, sympy, ipykernel, ...)",
             import_seconds("import sys\nsys.modules['debugpy'] = None\n"
                            f"for m in {zygote.PRELOAD!r}: __import__(m)", "-s")),
            ("a kernel's launcher: a new Python loading the sandbox package (once a notebook)",
             import_seconds(launcher, "-I")),
            (KEYS_LABEL, class_keys_seconds(courses[0], plan))]


KEYS_LABEL = "the class's keys, worked out as `make grade` does before its workers start"
IMPORTS_LABEL = "the grading process's imports (rbtutor.course.grade and its workers' modules)"


def class_keys_seconds(course: Path, plan: list[Submission], rounds: int = 3) -> float:
    """Median CPU seconds (its pool's included) of ``store_class_keys`` for the students and assignments
    of ``plan``, in a new process each round, into an empty store: what a first `make grade` of the
    class pays for the students' own keys (each has their own numbers), imports left out."""
    code = ("import resource, shutil, sys\n"
            "from rbtutor.course import CourseLayout, api\n"
            "from rbtutor.course.grade import store_class_keys\n"
            "layout = CourseLayout(sys.argv[1])\n"
            "shutil.rmtree(layout.scratch, ignore_errors=True)\n"
            "grader = api(layout)\n"
            "def used():\n"
            "    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, "
            "(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))\n"
            "before = used()\n"
            "store_class_keys(layout, grader, sys.argv[2].split(','), sys.argv[3].split(','))\n"
            "print(used() - before)\n")
    students = ",".join(sorted({s.student for s in plan}))
    assignments = ",".join(sorted({s.assignment for s in plan}))
    seconds = []
    for _ in range(rounds):
        done = subprocess.run([sys.executable, "-c", code, str(course), students, assignments], check=True,
                              capture_output=True, text=True, env=stock_env(same_kernel=False))
        seconds.append(float(done.stdout.split()[-1]))
    return statistics.median(seconds)


def lower_bound(plan: list[Submission], series: dict[str, list[Run]], alone_label: str,
                fixed: list[tuple[str, float]]) -> tuple[float, float, float]:
    """What the own-cost target leaves for the grader's work a notebook, and what two of its parts that
    no cut of the pipeline touches take alone: the students' keys and the grading process's imports.
    Printed, and returned as CPU seconds a notebook ``(allowed, keys, imports)``."""
    parts = dict(fixed)
    allowed = (OWN_COST_TARGET - 1) * median_of(series[alone_label], "cpu_per")
    keys, imports = parts[KEYS_LABEL] / len(plan), parts[IMPORTS_LABEL] / len(plan)
    print(f"\nthe own-cost target ({OWN_COST_TARGET:g}x execution only) leaves {allowed * 1e3:.0f} CPU ms a notebook "
          f"of this class for all the grader adds; the students' keys take {keys * 1e3:.0f} of them and the "
          f"grading process's imports {imports * 1e3:.0f}, leaving {(allowed - keys - imports) * 1e3:.0f} for "
          "intake, nbgrader, judging, scores, feedback, the gradebook and the reports")
    return allowed, keys, imports


def projection(growth: list[dict], stock: list[Run], overhead: tuple[float, float]) -> None:
    """100 000 notebooks, from the largest class the cluster graded (its fastest worker count)."""
    measured_rows = [row for row in growth if row["cluster"]]
    row = measured_rows[-1]
    workers, (wall, cpu) = min(row["cluster"].items(), key=lambda item: item[1][0])
    faster = min(stock, key=lambda runs: median_of(runs, "wall"))
    hours = PROJECTED * wall / 3600
    print(f"\nprojection for {PROJECTED} notebooks like these, from the cluster's class of {row['size']} "
          f"({workers} worker(s), the fastest; {wall:.2f} s and {cpu:.2f} CPU s a notebook): {hours:.1f} h on "
          f"this machine, {PROJECTED * cpu / 3600:.1f} CPU hours; on M such machines about {hours:.1f}/M h "
          f"while the scheduler's {overhead[0] * 1e3:.1f} ms a task ({PROJECTED * overhead[0] / 60:.1f} min in "
          f"all) stays small; stock nbgrader ({faster[0].label}, class of {growth[0]['size']}, median): "
          f"{PROJECTED * median_of(faster, 'wall_per') / 3600:.1f} h on this machine")


def print_growth_header() -> None:
    print("\ngrowth of make grade with the class (medians; gradebook reads timed on the last graded copy):")
    print(f"{'students':>8} {'notebooks':>9} {'wall/nb':>8} {'CPU/nb':>8} {'peak MB: processes':>19} "
          f"{'with cache':>11} {'grades.csv':>11} {'students':>9} "
          f"{'1 submission':>13}   cluster wall/CPU per notebook by workers; worker seconds a notebook, "
          "median by kind")


def print_growth(row: dict) -> None:
    q = row["queries"]
    one = q["one submission's grades"]
    kinds = ", ".join(f"{k} {v:.2f}" for k, v in row["kinds"].items())
    cluster = "; ".join(f"{w}: {wall:.2f}/{cpu:.2f} s" for w, (wall, cpu) in row["cluster"].items()) or "not run"
    print(f"{row['students']:>8} {row['size']:>9} {row['wall']:7.2f}s {row['cpu']:7.2f}s {row['processes']:19.0f} "
          f"{row['memory']:11.0f} "
          f"{row['export']:9.1f}ms {q['list the students']:7.1f}ms {one:11.1f}ms   {cluster}; {kinds}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
