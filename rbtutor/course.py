"""The instructor's loop over the whole class: ``python -m rbtutor.course generate|grade``.

``return-feedback`` puts the feedback into the exchange for the students to fetch.
``generate`` turns every source notebook in exercises/ into its student version
(nbgrader ``generate_assignment``). ``grade`` autogrades every submission in
submitted/, with one line of progress per student and assignment, generates the
feedback, and exports the grades to grades.csv; the gradebook is copied to
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
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

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


def grade(root: Path = ROOT) -> int:
    grader = api(root)
    database = root / "gradebook.db"
    if database.exists():
        shutil.copy2(database, root / "gradebook.db.bak")
    jobs = [(a, s.name) for a in assignments(root)
            for s in sorted((root / "submitted").glob("*")) if (s / a).is_dir()]
    failures = []
    for k, (assignment, student) in enumerate(jobs, 1):
        start = time.perf_counter()
        result = grader.autograde(assignment, student, force=True)
        seconds = time.perf_counter() - start
        if result["success"]:
            with grader.gradebook as gradebook:
                sub = gradebook.find_submission(assignment, student)
                summary = f"{sub.code_score:g}/{sub.max_code_score:g} autograded"
                summary += ", written parts to grade" if sub.needs_manual_grade else ""
            feedback = grader.generate_feedback(assignment, student, force=True)
            if not feedback["success"]:
                failures.append((assignment, student, "feedback: " + feedback["log"][-500:]))
        else:
            summary = "NOT GRADED"
            failures.append((assignment, student, result["log"][-500:]))
        print(f"[{k}/{len(jobs)}] {student} {assignment}: {summary} ({seconds:.1f} s)", flush=True)
    export_grades(grader, root / "grades.csv")
    print(f"grades: {root / 'grades.csv'}; feedback: {root / 'feedback'}")
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
    args = parser.parse_args(argv)
    commands = {"generate": generate, "grade": grade, "return-feedback": return_feedback}
    return commands[args.command](Path(args.root))


if __name__ == "__main__":
    sys.exit(main())
