"""The instructor's loop over the whole class: ``python -m rbtutor.course generate|grade``.

``return-feedback`` puts the feedback into the exchange for the students to fetch.
``generate`` turns every source notebook in exercises/ into its student version
(nbgrader ``generate_assignment``). ``grade`` autogrades every submission in
submitted/, several at once (one worker process per core plus one, see
:func:`default_jobs`; ``--jobs`` to choose),
with one line of progress per student and assignment, generates the feedback,
and exports the grades to grades.csv; the gradebook is copied to
gradebook.db.bak first. Re-running ``grade`` re-grades from the submissions and
gives the same grades. A submission that cannot be graded is listed at the end
with the reason, and the command then exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def api(root: Path = ROOT):
    """An NbGraderAPI configured by the course's nbgrader_config.py in ``root``."""
    import warnings

    from nbgrader.apps import NbGraderAPI
    from sqlalchemy.exc import SAWarning
    from traitlets.config.loader import PyFileConfigLoader

    # nbgrader 0.9.6 trips SQLAlchemy's autoflush warnings on every submission; they say
    # nothing about the grades and would bury the progress lines
    warnings.filterwarnings("ignore", category=SAWarning, module=r"nbgrader\.")

    # a new gradebook runs `alembic`, which lives beside this interpreter
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    return NbGraderAPI(config=config)


def assignments(root: Path = ROOT) -> list[str]:
    return sorted(p.name for p in (root / "exercises").glob("problem[0-9][0-9]") if p.is_dir())


def generate(root: Path = ROOT) -> int:
    grader = api(root)
    names = assignments(root)
    for k, name in enumerate(names, 1):
        result = grader.generate_assignment(name, force=True)
        print(f"[{k}/{len(names)}] {name}: {'generated' if result['success'] else 'FAILED'}", flush=True)
        if not result["success"]:
            print(result["log"], file=sys.stderr)
            return 1
    return 0


def export_grades(grader, path: Path) -> None:
    """One row per student and assignment: score, maximum, and whether hand grading is pending."""
    import csv

    with grader.gradebook as gradebook, path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "assignment", "score", "max_score", "needs_manual_grade"])
        for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
            for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                writer.writerow([submission.student.id, assignment.name, f"{submission.score:g}",
                                 f"{submission.max_score:g}", submission.needs_manual_grade])


_WORKER_API = {}


def _autograde_one(job: tuple[str, str, str]) -> tuple[str, str, str, float, str | None]:
    """Autograde and make feedback for one submission; runs in a worker process."""
    root, assignment, student = job
    grader = _WORKER_API.get(root) or _WORKER_API.setdefault(root, api(Path(root)))
    start = time.perf_counter()
    result = grader.autograde(assignment, student, force=True)
    if not result["success"]:
        return assignment, student, "NOT GRADED", time.perf_counter() - start, result["log"][-800:]
    with grader.gradebook as gradebook:
        sub = gradebook.find_submission(assignment, student)
        summary = f"{sub.code_score:g}/{sub.max_code_score:g} autograded"
        summary += ", written parts to grade" if sub.needs_manual_grade else ""
    feedback = grader.generate_feedback(assignment, student, force=True)
    problem = None if feedback["success"] else "feedback: " + feedback["log"][-800:]
    return assignment, student, summary, time.perf_counter() - start, problem


def default_jobs() -> int:
    """Worker processes for ``grade``: one per usable core, plus one.

    A worker spends part of each notebook waiting (its kernel starting inside the
    sandbox, messages to and from it), so one spare worker keeps the cores busy:
    measured on 2 cores with 60 notebooks of the reference solutions, 0.60 s per
    notebook with 3 workers against 0.70 s with 2 (and 0.59 s with 4).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


def grade(root: Path = ROOT, jobs: int | None = None) -> int:
    """Autograde every submission, ``jobs`` at a time (:func:`default_jobs` by default)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    grader = api(root)
    database = root / "gradebook.db"
    if database.exists():
        shutil.copy2(database, root / "gradebook.db.bak")
    work = [(str(root), a, s.name) for a in assignments(root)
            for s in sorted((root / "submitted").glob("*")) if (s / a).is_dir()]
    with grader.gradebook as gradebook:  # create the students first: workers then never race to
        for student in sorted({s for _, _, s in work}):
            gradebook.update_or_create_student(student)
    jobs = jobs or default_jobs()
    failures = []
    start = time.perf_counter()
    if jobs == 1:
        results = map(_autograde_one, work)
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"))
        results = pool.map(_autograde_one, work)
    for k, (assignment, student, summary, seconds, problem) in enumerate(results, 1):
        print(f"[{k}/{len(work)}] {student} {assignment}: {summary} ({seconds:.1f} s)", flush=True)
        if problem:
            failures.append((assignment, student, problem))
    if jobs != 1:
        pool.shutdown()
    elapsed = time.perf_counter() - start
    export_grades(grader, root / "grades.csv")
    from .harness import write_integrity_report

    print(f"integrity report: {write_integrity_report(root)}")
    print(f"graded {len(work)} submissions in {elapsed:.1f} s with {jobs} worker(s); "
          f"grades: {root / 'grades.csv'}; feedback: {root / 'feedback'}")
    for assignment, student, reason in failures:
        print(f"could not grade {student} {assignment}: {reason}", file=sys.stderr)
    return 1 if failures else 0


def return_feedback(root: Path = ROOT) -> int:
    """Put every generated feedback file into the exchange, where students fetch it.

    Uses nbgrader's exchange class directly (NbGraderAPI.release_feedback of nbgrader
    0.9.6 misspells its ``authenticator`` argument), one student at a time, so that
    one failure is reported and the others still get their feedback.
    """
    grader = api(root)
    failures = 0
    for name in assignments(root):
        students = sorted(p.parent.name for p in (root / "feedback").glob(f"*/{name}"))
        for student in students:
            grader.coursedir.assignment_id, grader.coursedir.student_id = name, student
            release = grader.exchange.ReleaseFeedback(coursedir=grader.coursedir,
                                                      authenticator=grader.authenticator, parent=grader)
            try:
                release.start()
            except Exception as exc:  # nbgrader raises ExchangeError and plain OSError alike
                print(f"could not return {name} feedback to {student}: {exc}", file=sys.stderr)
                failures += 1
        if students:
            print(f"{name}: feedback returned to {len(students)} students", flush=True)
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rbtutor.course")
    parser.add_argument("command", choices=("generate", "grade", "return-feedback"))
    parser.add_argument("--root", default=str(ROOT), help="course folder (with nbgrader_config.py)")
    parser.add_argument("--jobs", type=int, default=None, help="grade this many submissions at once "
                        "(default: one per core, plus one)")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.command == "grade":
        return grade(Path(args.root), args.jobs)
    commands = {"generate": generate, "return-feedback": return_feedback}
    return commands[args.command](Path(args.root))


if __name__ == "__main__":
    sys.exit(main())
