"""The instructor's loop over the class: generate, grade, return feedback.

``grade`` autogrades every submission in ``submitted/``, several at once (one
worker process per core plus one, see :func:`default_jobs`), with one line of
progress per student and assignment; it writes the feedback, exports the grades
to ``grades.csv`` and the integrity report; the gradebook is copied to
``gradebook.db.bak`` first. Re-running ``grade`` re-grades from the submissions and
gives the same grades. A submission that cannot be graded is listed at the end
with the reason, and the command then exits with status 1.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from .layout import CourseLayout
from .nbgrader import api, share_gradebook_engines


def generate(layout: CourseLayout) -> int:
    """Student versions of every source assignment into ``release/`` (nbgrader ``generate_assignment``)."""
    grader = api(layout)
    names = layout.assignments()
    for k, name in enumerate(names, 1):
        result = grader.generate_assignment(name, force=True)
        print(f"[{k}/{len(names)}] {name}: {'generated' if result['success'] else 'FAILED'}", flush=True)
        if not result["success"]:
            print(result["log"], file=sys.stderr)
            return 1
    # due dates: exercises/due_dates.yaml, when there is one, into the gradebook
    from .late import set_due_dates

    try:
        for line in set_due_dates(layout, grader):
            print(line, flush=True)
    except ValueError as exc:
        print(f"due dates: {exc}", file=sys.stderr)
        return 1
    return 0


def export_grades(grader, path: Path) -> list[str]:
    """One row per student and assignment: the score, its maximum, and the state of the hand grading.

    ``written_parts``: ``done`` when every hand-graded part has a grade, else ``to grade (N)``.
    ``overridden``: autograded parts whose score a grader changed by hand (the Formgrader allows it),
    as ``grade_id auto->manual``, so that no override goes unseen. Returns those overrides, one
    ``student assignment grade_id auto->manual`` each.
    """
    changed = []
    import csv

    with grader.gradebook as gradebook, path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        # late_penalty, final_score: points taken off for lateness (rbtutor.course.late), score less them
        writer.writerow(["student", "assignment", "score", "max_score", "written_parts", "overridden",
                         "late_penalty", "final_score"])
        for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
            for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                grades = [g for nb in submission.notebooks for g in nb.grades]
                pending = sum(1 for g in grades if g.needs_manual_grade)
                overridden = [f"{g.name} {g.auto_score:g}->{g.manual_score:g}" for g in grades
                              if g.auto_score is not None and g.manual_score is not None
                              and g.manual_score != g.auto_score]
                changed += [f"{submission.student.id} {assignment.name} {text}" for text in overridden]
                writer.writerow([submission.student.id, assignment.name, f"{submission.score:g}",
                                 f"{submission.max_score:g}", f"to grade ({pending})" if pending else "done",
                                 "; ".join(overridden), f"{submission.late_submission_penalty:g}",
                                 f"{submission.score - submission.late_submission_penalty:g}"])
    return changed


def _hand_grades(grader, assignment: str, student: str) -> tuple[object, dict[tuple[str, str], float]]:
    """The submission's timestamp and the parts a grader has graded by hand: {(notebook, grade id): score}."""
    from nbgrader.api import MissingEntry

    with grader.gradebook as gradebook:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return None, {}
        return submission.timestamp, {(nb.name, g.name): g.manual_score for nb in submission.notebooks
                                      for g in nb.grades if g.manual_score is not None}


def _keep_hand_grades(grader, assignment: str, student: str, before) -> None:
    """After a re-grade of the same submission, hand-graded parts stay graded (nbgrader marks them
    "needs manual grade" again although it keeps their scores)."""
    timestamp, graded = before
    if not graded:
        return
    with grader.gradebook as gradebook:
        submission = gradebook.find_submission(assignment, student)
        if submission.timestamp != timestamp:  # a new submission: its written parts need a new look
            return
        for nb in submission.notebooks:
            for grade in nb.grades:
                if (nb.name, grade.name) in graded and grade.needs_manual_grade:
                    grade.manual_score = graded[(nb.name, grade.name)]
                    grade.needs_manual_grade = False
        gradebook.db.commit()


_WORKER_API = {}
INTAKE = "intake"  # under CourseLayout.scratch: the checked copies nbgrader grades from


def _sources(layout: CourseLayout, assignment: str) -> dict[str, dict]:
    """The instructor's source notebooks of ``assignment`` (for the intake's source-copy check)."""
    import nbformat

    return {path.stem: nbformat.read(path, as_version=4)
            for path in sorted((layout.exercises / assignment).glob("*.ipynb"))}


def take_in_submission(layout: CourseLayout, assignment: str, student: str):
    """Check and copy ``submitted/<student>/<assignment>`` into the grader's own intake folder.

    nbgrader then grades from that copy (``CourseDirectory.submitted_directory``), never from
    the folder the student filled. The intake's events go to the integrity report.
    """
    from ..grading.execute import remove_tree
    from ..grading.intake import take_in
    from ..grading.report import record_events

    stage = layout.scratch / INTAKE / student / assignment
    if stage.exists() or stage.is_symlink():
        remove_tree(stage)
    stage.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.scratch, 0o700)
    sources = _sources(layout, assignment)
    result = take_in(layout.submitted(student, assignment), stage, sources=sources)
    # A notebook the intake refused (a link, a copy of the source, unreadable) earns nothing: the
    # blank released version stands in for it, so the submission is graded (zero) and not lost.
    for name in sources:
        blank = layout.release / assignment / f"{name}.ipynb"
        if not (stage / f"{name}.ipynb").exists() and blank.is_file():
            shutil.copyfile(blank, stage / f"{name}.ipynb")
            os.chmod(stage / f"{name}.ipynb", 0o644)
    record_events(layout.integrity / student / assignment / "_files.json", student, assignment,
                  "(submission files)", "intake", result.events, fresh=True)
    return result


def _autograde_one(job: tuple[str, str, str]) -> tuple[str, str, str, float, str | None]:
    """Take in, autograde and make feedback for one submission; runs in a worker process."""
    from ..grading.sandbox import start_zygote

    root, assignment, student = job
    layout = CourseLayout(Path(root))
    start_zygote()  # kernels start as copies of one prepared process: the run's, or this worker's own
    share_gradebook_engines()
    grader = _WORKER_API.get(root) or _WORKER_API.setdefault(root, api(layout))
    start = time.perf_counter()
    try:
        take_in_submission(layout, assignment, student)
    except (OSError, ValueError) as exc:
        return assignment, student, "NOT GRADED", time.perf_counter() - start, f"intake: {exc}"
    grader.coursedir.submitted_directory = str((layout.scratch / INTAKE).relative_to(layout.root))
    before = _hand_grades(grader, assignment, student)
    result = grader.autograde(assignment, student, force=True)
    if not result["success"]:
        return assignment, student, "NOT GRADED", time.perf_counter() - start, result["log"][-800:]
    _keep_hand_grades(grader, assignment, student, before)
    with grader.gradebook as gradebook:
        sub = gradebook.find_submission(assignment, student)
        summary = f"{sub.code_score:g}/{sub.max_code_score:g} autograded"
        summary += ", written parts to grade" if sub.needs_manual_grade else ""
    try:
        write_feedback_pages(layout, grader, assignment, student)
        problem = None
    except (OSError, ValueError) as exc:
        problem = f"feedback: {exc}"
    return assignment, student, summary, time.perf_counter() - start, problem


def _submission_secret(path: Path) -> str | None:
    """The token nbgrader's submit wrote, if ``path`` is a small regular file holding one; else None."""
    import re

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        text = handle.read(257).decode("ascii", "replace").strip()
    return text if re.fullmatch(r"[A-Za-z0-9+/=_.-]{1,256}", text) else None


def write_feedback_pages(layout: CourseLayout, grader, assignment: str, student: str) -> list[Path]:
    """``feedback/<student>/<assignment>/<notebook>.html`` for each autograded notebook.

    The folder is made afresh and holds only the pages written here (nbgrader's own
    feedback would copy every other file of the autograded folder, include hidden tests
    and load MathJax from a CDN). Pages are rendered by :func:`rbtutor.grading.feedback.render_feedback`.
    """
    import nbformat

    from ..grading.execute import remove_tree
    from ..grading.feedback import render_feedback, write_feedback

    scores: dict[str, dict] = {}
    with grader.gradebook as gradebook:
        submission = gradebook.find_submission(assignment, student)
        timestamp = submission.timestamp
        for notebook in submission.notebooks:
            comments = {c.name: c.comment for c in notebook.comments}
            scores[notebook.name] = {g.name: (g.score if not g.needs_manual_grade else None, g.max_score,
                                              comments.get(g.name)) for g in notebook.grades}
    folder = layout.feedback(student, assignment)
    if folder.exists() or folder.is_symlink():
        remove_tree(folder)
    folder.mkdir(parents=True)
    # what nbgrader's release_feedback and fetch_feedback match a student's pages by, written
    # here by the grader (the secret is checked to be a short token before it is copied)
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp.strftime("%Y-%m-%d %H:%M:%S.%f %Z").strip())
    secret = _submission_secret(layout.autograded(student, assignment) / "submission_secret.txt")
    if secret:
        (folder / "submission_secret.txt").write_text(secret)
    written = []
    for name, notebook_scores in sorted(scores.items()):
        source = layout.autograded(student, assignment) / f"{name}.ipynb"
        nb = nbformat.read(source, as_version=4)
        page = render_feedback(nb, notebook_scores, title=f"{assignment}: feedback for {student}")
        write_feedback(folder / f"{name}.html", page)
        written.append(folder / f"{name}.html")
    return written


#: What a grading worker imports, once in the process the workers are forked from.
WORKER_MODULES = ("rbtutor.course.grade", "nbgrader.apps", "nbgrader.converters.autograde", "nbclient",
                  "rbtutor.grading.execute", "rbtutor.grading.feedback", "rbtutor.grading.judge",
                  "rbtutor.grading.restore", "rbtutor.grading.intake", "rbtutor.grading.report")


def worker_pool(jobs: int):
    """A pool of ``jobs`` grading workers (a ``ProcessPoolExecutor``).

    The workers are forked from one process that has imported the grading code once (each
    would spend 1.3 CPU s on it otherwise), and each then takes this process's environment and
    working folder as they are now.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    context = get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_MODULES))
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_adopt,
                               initargs=(dict(os.environ), os.getcwd()))


def _adopt(environ: dict[str, str], folder: str) -> None:
    """A new worker's start: the grading process's environment and working folder."""
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(folder)


def default_jobs() -> int:
    """Worker processes for ``grade``: one per usable core, plus one.

    A worker spends part of each notebook waiting (its kernel starting inside the
    sandbox, messages to and from it), so one spare worker keeps the cores busy:
    measured on 2 cores with 66 notebooks of the reference solutions (2026-12-03), 0.47 s
    per notebook with 3 workers, 0.45 s with 4 or 5, which cost 8 and 14 % more CPU.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


def start_run(layout: CourseLayout):
    """Before a grading run: back up the gradebook, list the submissions as jobs
    ``(course root, assignment, student)`` and create their students (so that workers never race
    to create one). Returns ``(grader, jobs)``."""
    root = layout.root
    grader = api(layout)
    if layout.gradebook_file.exists():
        shutil.copy2(layout.gradebook_file, root / "gradebook.db.bak")
    work = [(str(root), a, s.name) for a in layout.assignments()
            for s in sorted(layout.submitted().glob("*")) if (s / a).is_dir()]
    with grader.gradebook as gradebook:
        for student in sorted({s for _, _, s in work}):
            gradebook.update_or_create_student(student)
    return grader, work


def finish_run(layout: CourseLayout, grader, count: int, failures: list, elapsed: float, where: str) -> int:
    """After a grading run: grades.csv, the integrity report, the summary line and every submission
    not graded with its reason. Returns the exit status (1 when some submission was not graded)."""
    from ..grading.report import write_integrity_report

    changed = export_grades(grader, layout.grades_csv)
    if changed:
        print(f"{len(changed)} autograded score(s) changed by hand in the Formgrader (the overridden "
              "column of grades.csv):")
        for line in changed:
            print(f"  {line}")
    print(f"integrity report: {write_integrity_report(layout.root)}")
    print(f"graded {count} submissions in {elapsed:.1f} s {where}; "
          f"grades: {layout.grades_csv}; feedback: {layout.root / 'feedback'}")
    for assignment, student, reason in failures:
        print(f"could not grade {student} {assignment}: {reason}", file=sys.stderr)
    return 1 if failures else 0


def grade(layout: CourseLayout, jobs: int | None = None) -> int:
    """Autograde every submission, ``jobs`` at a time (:func:`default_jobs` by default)."""
    from ..grading.sandbox import zygote_running

    grader, work = start_run(layout)
    jobs = jobs or default_jobs()
    failures = []
    start = time.perf_counter()
    # one zygote for the run (the workers inherit its name): every kernel starts as a copy of it
    with zygote_running():
        if jobs == 1:
            results = map(_autograde_one, work)
        else:
            pool = worker_pool(jobs)
            results = pool.map(_autograde_one, work)
        for k, (assignment, student, summary, seconds, problem) in enumerate(results, 1):
            print(f"[{k}/{len(work)}] {student} {assignment}: {summary} ({seconds:.1f} s)", flush=True)
            if problem:
                failures.append((assignment, student, problem))
        if jobs != 1:
            pool.shutdown()
    return finish_run(layout, grader, len(work), failures, time.perf_counter() - start, f"with {jobs} worker(s)")


def return_feedback(layout: CourseLayout) -> int:
    """Put every generated feedback file into the exchange, where students fetch it.

    Uses nbgrader's exchange class directly (NbGraderAPI.release_feedback of nbgrader
    0.9.6 misspells its ``authenticator`` argument), one student at a time, so that
    one failure is reported and the others still get their feedback.
    """
    grader = api(layout)
    failures = 0
    for name in layout.assignments():
        students = sorted(p.parent.name for p in layout.feedback().glob(f"*/{name}"))
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


def collect(layout: CourseLayout, assignment: str) -> int:
    """Take every student's newest submission of ``assignment`` from the exchange into ``submitted/``.

    Replaces ``nbgrader collect``, which copies with ``shutil.copytree`` from folders students can
    write and so follows their links: here every file goes through :func:`rbtutor.grading.intake.collect`.
    """
    from ..grading.intake import collect as take

    if assignment not in layout.assignments():
        print(f"no assignment {assignment!r} in {layout.exercises}", file=sys.stderr)
        return 2
    inbound = layout.exchange / "rbtutor" / "inbound"
    if not inbound.is_dir():
        print(f"nothing to collect: {inbound} does not exist", file=sys.stderr)
        return 1
    from ..grading.report import record_events

    results = take(inbound, layout.submitted(), assignment, sources=_sources(layout, assignment))
    for student, intake in results:
        # what was refused in the exchange is in the integrity report until the next collect
        record_events(layout.integrity / student / assignment / "_collect.json", student, assignment,
                      "(exchange entry)", "collect", intake.events, fresh=True)
        refused = [e for e in intake.events]
        print(f"{student} {assignment}: {len(intake.taken)} file(s) taken"
              + (f", {len(refused)} problem(s): " + "; ".join(e["message"] for e in refused) if refused else ""))
    print(f"collected {assignment} from {len(results)} student(s) into {layout.submitted()}")
    return 0
