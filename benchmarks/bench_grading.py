"""Grading speed, in one run, on one generated class graded by every contender: stock nbgrader
(serially by assignment, and per student in as many processes as `make grade` uses), `make grade`,
the floor, and `grade --scheduler` on a local Dask cluster of 1, 2 and 3 workers; then how
`make grade`'s cost grows with the class, and where one notebook's time goes.

The same work on both sides: the class (:mod:`grading_class`: every student's own numbers and
text, wrong answers, written parts, one slow notebook) is copied for each run; stock nbgrader's
kernel (``python3``, no sandbox, a minimal ``nbgrader_config.py``) gets the course's grading switch
``RBTUTOR_AUTOGRADING=1`` (no plots) and the grading kernel's thread settings (one BLAS/OpenMP
thread), and both sides write feedback. CPU time and peak memory are those of a cgroup made for
each run (:mod:`run_cgroup`; the output says where none could be made); the peak memory is shown
twice: the run's processes' own (sampled) and the group's, which adds the page cache of the files
the run writes.

Contenders, per notebook (wall and CPU):

* stock nbgrader, serial: ``nbgrader autograde A`` and ``nbgrader generate_feedback A``, one
  assignment after another (nbgrader's own way);
* stock nbgrader, N processes: ``nbgrader autograde A --student S`` and ``generate_feedback`` for
  each submission, N at once (as GNU parallel would), N being `make grade`'s worker count;
* make grade: ``rbtutor.course.grade`` with its default workers;
* floor: the same worker pool running one empty notebook per submission in the confined kernel;
* execution only: the same pool and kernel running each handed-in notebook as it is, and nothing
  else (what the students' own code costs; no grader can do less and still run it);
* cluster, 1/2/3 workers: ``grade --scheduler`` through a local ``dask scheduler`` and workers
  (the CPU of starting and stopping them, measured by an idle run right after, left out).

Targets on the course machine (2 cores), issue 23: CPU per notebook at most a sixth of stock
nbgrader's (the stock run of the lower CPU); wall at least 6 times faster than the faster stock
run; within 1.3 times the floor. A missed target makes the script exit with status 1 (after
printing everything). Below the targets the script prints how far execution alone is from the
floor, and make grade from execution alone (the grader's own cost): when execution alone is
already over 1.3 times the floor, no grader that runs the notebooks can meet that target.

Class sizes: ``BENCH_CLASS`` (default ``30``, about 10 minutes on 2 cores; ``make bench
BENCH_CLASS=30,300`` or ``30,300,3000`` for the growth): every contender grades a class of the first
size; `make grade` grades the others, and so does the cluster with 1, 2 and 3 workers up to
``BENCH_CLUSTER_UP_TO`` notebooks (default 300), for the growth table and the plot
(``_build/bench/grading-growth.png``, not in git). The projection to 100 000 notebooks is made
from the largest class the cluster graded.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import os
import platform
import re
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
from grading_class import Submission, make_class
from run_cgroup import RunGroup

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
OUTPUT = ROOT / "_build" / "bench"
CPU_SHARE_TARGET, STOCK_TARGET, FLOOR_TARGET = 1 / 6, 6.0, 1.3
CLUSTER_WORKERS = (1, 2, 3)
PROJECTED = 100_000
STOCK_CONFIG = """c = get_config()
c.CourseDirectory.course_id = "rbtutor"
c.CourseDirectory.source_directory = "exercises"
"""
# what the grading kernel gets (rbtutor.grading.sandbox), given to stock nbgrader's kernel too
SAME_KERNEL_ENV = {"RBTUTOR_AUTOGRADING": "1", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1",
                   "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
PROGRESS = re.compile(r"^\[\d+/\d+\] (\S+) (\S+): (\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) autograded.* \((\d+\.\d) s\)$")


@dataclass
class Run:
    label: str
    wall: float  # seconds, the whole class
    cpu: float  # CPU seconds, the whole class
    peak_memory: int | None  # bytes charged to the run's cgroup at most (processes and page cache)
    count: int
    source: str = ""
    peak_processes: int | None = None  # the run's processes' own memory at most (sampled), bytes

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
    stopped at the end of each run, so that each run starts and pays for its own, as a fresh
    `make grade` does. `make grade`'s workers are otherwise forked from this process, once it has
    imported the grading code: the first run (`make grade` on the first class) pays for that
    import, 1.75 CPU s; the runs after it, the floor's included, find it done.
    """
    with RunGroup(re.sub(r"\W+", "-", label)) as group:
        try:
            wall = work(*args)
        finally:
            stop_multiprocessing_helpers()
    LEFT_GROUPS.extend(group.left_groups)
    run = Run(label, wall, group.usage.cpu, group.usage.peak_memory, count, group.usage.source,
              group.usage.peak_processes)
    print(f"measured {datetime.now(UTC):%H:%M}: {label}: {run.wall_per:.2f} s, {run.cpu_per:.2f} CPU s a notebook",
          flush=True)
    return run


def stop_multiprocessing_helpers() -> None:
    from multiprocessing import forkserver, resource_tracker

    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        if not hasattr(helper, "_stop"):
            raise RuntimeError(f"expected {type(helper).__name__} to have _stop (Python {sys.version}), it has not")
        helper._stop()


# --------------------------------------------------------------------------- stock nbgrader


def stock_env() -> dict[str, str]:
    """Stock nbgrader's environment: the kernel's switch and threads, and no machine-wide Jupyter
    configuration (such as a hub's /etc/jupyter/nbgrader_config.py): only the course's own file."""
    return {**os.environ, **SAME_KERNEL_ENV, "JUPYTER_NO_CONFIG": "1",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def nbgrader(where: Path, *args: str) -> None:
    result = subprocess.run([str(VENV_BIN / "nbgrader"), *args], cwd=where, env=stock_env(),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed in {where}:\n{result.stderr[-2000:]}")


def stock_course(template: Path, where: Path) -> list[tuple[str, str]]:
    """A copy of the class for stock nbgrader (its own config and gradebook); returns the submissions."""
    from nbgrader.api import Gradebook

    shutil.copytree(template, where, ignore=shutil.ignore_patterns("nbgrader_config.py", "gradebook.db*"))
    (where / "nbgrader_config.py").write_text(STOCK_CONFIG)
    assignments = sorted(p.name for p in (where / "exercises").glob("problem[0-9][0-9]"))
    for name in assignments:  # the gradebook needs the assignments first (not timed)
        nbgrader(where, "generate_assignment", name, "--force")
    subs = [(a, s.name) for a in assignments for s in sorted((where / "submitted").iterdir()) if (s / a).is_dir()]
    with Gradebook(f"sqlite:///{where / 'gradebook.db'}") as gradebook:  # no race to create a student
        for student in sorted({s for _, s in subs}):
            gradebook.update_or_create_student(student)
    return subs


def stock_serial(template: Path, where: Path) -> float:
    subs = stock_course(template, where)
    start = time.perf_counter()
    for name in sorted({a for a, _ in subs}):
        nbgrader(where, "autograde", name, "--force")
        nbgrader(where, "generate_feedback", name, "--force")
    return time.perf_counter() - start


def stock_parallel(template: Path, where: Path, processes: int) -> float:
    subs = stock_course(template, where)

    def one(sub: tuple[str, str]) -> None:
        nbgrader(where, "autograde", sub[0], "--student", sub[1], "--force")
        nbgrader(where, "generate_feedback", sub[0], "--student", sub[1], "--force")

    start = time.perf_counter()
    with ThreadPoolExecutor(processes) as pool:
        list(pool.map(one, subs))
    return time.perf_counter() - start


# --------------------------------------------------------------------------- make grade, floor


def timed_grade(template: Path, where: Path, record: list) -> float:
    """`make grade` on a copy of the class; its progress lines go to ``record``."""
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import grade

    shutil.copytree(template, where)
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        status = grade(CourseLayout(where))
    seconds = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"make grade failed on the benchmark class:\n{out.getvalue()[-3000:]}")
    record += [(m[1], m[2], float(m[3]), float(m[4]), float(m[5]))
               for m in map(PROGRESS.match, out.getvalue().splitlines()) if m]
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

    import rbtutor.course.grade as course_grade
    import rbtutor.course.hand_grades as hand_grades
    from rbtutor.grading.execute import BoundedExecute
    from rbtutor.grading.sandbox import zygote_client  # zygote_starting looks the names up there

    clock = StageClock()
    for owner, attr, label in (
            (course_grade, "start_run", "run: gradebook backup, students listed"),
            (zygote_client, "_await_zygote", "run: zygote awaited (started with the run)"),
            (course_grade, "api", "run: nbgrader API objects made"),
            (course_grade, "take_in_submission", "intake (checks, copy)"),
            (hand_grades, "hand_grades_before_regrade", "gradebook: hand grades read"),
            (NbGraderAPI, "autograde", "nbgrader autograde, whole"),
            (Autograde, "init_assignment", "  gradebook: submission rows"),
            (FilesWriter, "write", "  notebook files written"),
            (Preprocessor, "__call__", lambda self, *_: f"  preprocessor {type(self).__name__}"),
            (BoundedExecute, "start_new_kernel", "    kernel copy started (zygote fork, sandbox)"),
            (nbclient.NotebookClient, "start_new_kernel_client", "    kernel ready (client connected)"),
            (nbclient.NotebookClient, "execute_cell", "    cells executed"),
            (nbclient.NotebookClient, "_cleanup_kernel", "    kernel stopped"),
            (hand_grades, "keep_hand_grades", "gradebook: hand grades kept"),
            (course_grade, "write_feedback_pages", "feedback pages"),
            (course_grade, "finish_run", "run: grades.csv, integrity report"),
            (zygote_client, "_stop_zygote", "run: zygote stopped")):
        clock.wrap(owner, attr, label)
    return clock


def profile_one(template: Path, tmp: Path, plan: list[Submission], rounds: int = 3) -> list[tuple[str, float]]:
    """Where one right notebook's time goes, graded alone in this process (one worker): the
    median over ``rounds`` runs after a first one that warms the caches."""
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import grade

    chosen = next(s for s in plan if s.kind == "right" and s.assignment == "problem03")
    course = tmp / "profile"
    shutil.copytree(template, course, ignore=shutil.ignore_patterns("submitted"))
    shutil.copytree(template / "submitted" / chosen.student / chosen.assignment,
                    course / "submitted" / chosen.student / chosen.assignment)
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


def print_table(runs: list[Run]) -> None:
    print(f"{'per notebook':<56} {'wall':>8} {'CPU':>8} {'peak memory: processes':>23} {'with page cache':>16}")
    for run in runs:
        print(f"{run.label:<56} {run.wall_per:7.2f}s {run.cpu_per:7.2f}s {megabytes(run.peak_processes):>23} "
              f"{megabytes(run.peak_memory):>16}")


def targets(stock: list[Run], ours: Run, floor: Run) -> list[tuple[str, float, str, bool]]:
    faster = min(stock, key=lambda r: r.wall)
    thrifty = min(stock, key=lambda r: r.cpu)
    share = ours.cpu / thrifty.cpu
    return [(f"CPU per notebook: make grade / {thrifty.label}", share, f"<= {CPU_SHARE_TARGET:.3f}",
             share <= CPU_SHARE_TARGET),
            (f"wall: {faster.label} / make grade", faster.wall / ours.wall, f">= {STOCK_TARGET:g}",
             faster.wall / ours.wall >= STOCK_TARGET),
            ("wall: make grade / floor", ours.wall / floor.wall, f"<= {FLOOR_TARGET:g}",
             ours.wall / floor.wall <= FLOOR_TARGET)]


def class_sizes() -> list[int]:
    text = os.environ.get("BENCH_CLASS", "30")
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise SystemExit(f"BENCH_CLASS: expected sizes separated by commas such as 30,300, got {text!r}") from exc
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"BENCH_CLASS: expected positive sizes, got {text!r}")
    return sizes


def cluster_limit() -> int:
    """The largest class the Dask cluster also grades, for its growth (``BENCH_CLUSTER_UP_TO``, default 300:
    grading a class of 3 000 three more times would add about an hour on 2 cores)."""
    text = os.environ.get("BENCH_CLUSTER_UP_TO", "300")
    if not text.isdigit():
        raise SystemExit(f"BENCH_CLUSTER_UP_TO: expected a number of notebooks such as 300, got {text!r}")
    return int(text)


def growth_row(size: int, run: Run, plan: list[Submission], lines: list, course: Path,
               clusters: list[Run]) -> dict:
    """One size's row; ``clusters`` is empty for a class above ``BENCH_CLUSTER_UP_TO``."""
    queries = gradebook_queries(course)
    return {"size": size, "wall": run.wall_per, "cpu": run.cpu_per,
            "memory": (run.peak_memory or 0) / 2**20, "processes": (run.peak_processes or 0) / 2**20,
            "export": queries["grades.csv (every submission)"],
            "queries": queries, "kinds": by_kind(plan, lines),
            "cluster": {w: (c.wall_per, c.cpu_per) for w, c in zip(CLUSTER_WORKERS, clusters, strict=False)}}


def main() -> int:
    """Everything measured and printed; the status is 1 when a target of issue 23 is missed."""
    from rbtutor.course.grade import default_jobs

    sizes, jobs = class_sizes(), default_jobs()
    started = datetime.now(UTC)
    print(f"date {started:%Y-%m-%d %H:%M} UTC; {machine()}")
    print(code_state())
    with tempfile.TemporaryDirectory(prefix="rbtutor-bench-grading-") as scratch:
        tmp = Path(scratch)
        size = sizes[0]
        plan = make_class(tmp / "class", size)
        lines: list = []
        ours = measured("make grade", size, timed_grade, tmp / "class", tmp / "grade", lines)
        check_scores(plan, lines)
        stock = [measured("stock nbgrader, serial by assignment", size, stock_serial, tmp / "class", tmp / "stock1"),
                 measured(f"stock nbgrader, {jobs} processes (one per submission)", size, stock_parallel,
                          tmp / "class", tmp / "stockN", jobs)]
        floor = measured(f"floor: {jobs} workers, empty notebooks", size, floor_seconds, size, jobs)
        alone = measured(f"execution only: {jobs} workers, the notebooks as handed in", size, execution_seconds,
                         tmp / "class", jobs)
        clusters = [cluster_run(tmp / "class", tmp, workers, size) for workers in CLUSTER_WORKERS]
        growth = [growth_row(size, ours, plan, lines, tmp / "grade", clusters)]
        batch, serial = scheduler_overhead(tmp / "overhead")
        profile = profile_one(tmp / "class", tmp, plan)
        report(size, jobs, ours, stock, [floor, alone], clusters, (batch, serial), profile)  # projection: after growth
        rows = targets(stock, ours, floor)
        print(f"\n{'target (issue 23)':<72} {'value':>8} {'target':>9}")
        for name, value, target, ok in rows:
            print(f"{name:<72} {value:8.3f} {target:>9}  {'PASS' if ok else 'FAIL'}", flush=True)
        print_floor_parts(ours, floor, alone)
        print_growth_header()
        print_growth(growth[0])
        for other in sizes[1:]:
            shutil.rmtree(tmp / "big", ignore_errors=True)
            shutil.rmtree(tmp / "big-grade", ignore_errors=True)
            big_plan, big_lines = make_class(tmp / "big", other), []
            big = measured(f"make grade, {other} notebooks", other, timed_grade, tmp / "big", tmp / "big-grade",
                           big_lines)
            check_scores(big_plan, big_lines)
            big_clusters = ([cluster_run(tmp / "big", tmp, workers, other) for workers in CLUSTER_WORKERS]
                            if other <= cluster_limit() else [])
            growth.append(growth_row(other, big, big_plan, big_lines, tmp / "big-grade", big_clusters))
            print_growth(growth[-1])
        projection(growth, stock, (batch, serial))
    if len(growth) > 1:
        plot_growth(growth, OUTPUT / "grading-growth.png")
        first, last = growth[0], growth[-1]
        print(f"wall per notebook {last['size']} / {first['size']}: {last['wall'] / first['wall']:.2f}x; CPU per "
              f"notebook: {last['cpu'] / first['cpu']:.2f}x; plot: {OUTPUT / 'grading-growth.png'}")
    print(f"finished {datetime.now(UTC):%H:%M} UTC; load average now "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0 if all(ok for *_, ok in rows) else 1


def print_floor_parts(ours: Run, floor: Run, alone: Run) -> None:
    """The floor's ratio in two factors: the class's own code, and the grader's own cost."""
    print(f"  of which, wall: execution only / floor {alone.wall / floor.wall:.2f}x (the notebooks' own code), "
          f"make grade / execution only {ours.wall / alone.wall:.2f}x (the grader's own cost); "
          f"CPU: {alone.cpu / floor.cpu:.2f}x and {ours.cpu / alone.cpu:.2f}x")
    if alone.wall / floor.wall > FLOOR_TARGET:
        print(f"  execution alone is over {FLOOR_TARGET:g} times the floor: no grader that runs these notebooks "
              "meets that target on this class")


def report(size, jobs, ours, stock, bounds, clusters, overhead, profile) -> None:
    students = -(-size // 11)  # grading_class.plan: eleven assignments a student
    print(f"\nclass: {size} notebooks from {students} students (own numbers and text; every "
          f"4th with a wrong answer, written parts, one slow notebook); make grade uses {jobs} workers")
    print(f"CPU and memory: {ours.source}")
    if LEFT_GROUPS:
        print(f"note: the runs left {len(LEFT_GROUPS)} empty cgroup(s) behind inside the benchmark's own "
              f"(removed by the benchmark), such as {LEFT_GROUPS[0].name}")
    print(f"stock nbgrader's kernel: python3 with {' '.join(f'{k}={v}' for k, v in SAME_KERNEL_ENV.items())}")
    print_table([*stock, ours, *bounds, *clusters])
    batch, serial = overhead
    print(f"scheduler cost per trivial task, 2 workers: {batch * 1e3:.2f} ms all at once, {serial * 1e3:.2f} ms "
          "one at a time")
    print("\nratios (same class, same run):")
    for run in stock:
        print(f"  {run.label} / make grade: wall {run.wall / ours.wall:.2f}x, CPU {run.cpu / ours.cpu:.2f}x")
    for run in clusters:
        print(f"  {run.label}: wall {run.wall / ours.wall:.2f}x make grade's, CPU {run.cpu / ours.cpu:.2f}x")
    print("\none notebook's path (a right problem03, graded alone by one in-process worker; median of 3 "
          "after a warm-up), wall seconds:")
    for label, seconds in profile:
        print(f"  {label:<52} {seconds:6.2f}")
    whole = dict(profile)["whole grade run"]
    parts = sum(seconds for label, seconds in profile if not label.startswith(" ") and label != "whole grade run")
    # each line is a median of its own, so the rest can come out a little below zero
    print(f"  {'(the rest: outside the stages above; medians)':<52} {whole - parts:6.2f}")


def projection(growth: list[dict], stock: list[Run], overhead: tuple[float, float]) -> None:
    """100 000 notebooks, from the largest class the cluster graded (its fastest worker count)."""
    measured_rows = [row for row in growth if row["cluster"]]
    row = measured_rows[-1]
    workers, (wall, cpu) = min(row["cluster"].items(), key=lambda item: item[1][0])
    faster = min(stock, key=lambda r: r.wall)
    hours = PROJECTED * wall / 3600
    print(f"\nprojection for {PROJECTED} notebooks like these, from the cluster's class of {row['size']} "
          f"({workers} worker(s), the fastest; {wall:.2f} s and {cpu:.2f} CPU s a notebook): {hours:.1f} h on "
          f"this machine, {PROJECTED * cpu / 3600:.1f} CPU hours; on M such machines about {hours:.1f}/M h "
          f"while the scheduler's {overhead[0] * 1e3:.1f} ms a task ({PROJECTED * overhead[0] / 60:.1f} min in "
          f"all) stays small; stock nbgrader ({faster.label}, class of {growth[0]['size']}): "
          f"{PROJECTED * faster.wall_per / 3600:.1f} h on this machine")


def print_growth_header() -> None:
    print("\ngrowth of make grade with the class (gradebook reads timed on the graded class):")
    print(f"{'notebooks':>9} {'wall/nb':>8} {'CPU/nb':>8} {'peak MB: processes':>19} {'with cache':>11} "
          f"{'grades.csv':>11} {'students':>9} "
          f"{'1 submission':>13}   cluster wall/CPU per notebook by workers; worker seconds a notebook, "
          "median by kind")


def print_growth(row: dict) -> None:
    q = row["queries"]
    one = q["one submission's grades"]
    kinds = ", ".join(f"{k} {v:.2f}" for k, v in row["kinds"].items())
    cluster = "; ".join(f"{w}: {wall:.2f}/{cpu:.2f} s" for w, (wall, cpu) in row["cluster"].items()) or "not run"
    print(f"{row['size']:>9} {row['wall']:7.2f}s {row['cpu']:7.2f}s {row['processes']:19.0f} {row['memory']:11.0f} "
          f"{row['export']:9.1f}ms {q['list the students']:7.1f}ms {one:11.1f}ms   {cluster}; {kinds}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
