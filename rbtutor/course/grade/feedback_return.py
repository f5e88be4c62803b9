"""Return feedback: write each student's feedback pages and hand them back through the exchange."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat

from ...grading.execute import remove_tree
from ...grading.feedback import render_bounded, write_feedback
from ...grading.report import event, record_events, terminal_text
from ...grading.student_ids import id_problem
from ..export import plural
from ..layout import CourseLayout
from ..nbgrader import api


def _submission_secret(path: Path) -> str | None:
    """The token nbgrader's submit wrote, if ``path`` is a small regular file holding one; else None."""

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        text = handle.read(257).decode("ascii", "replace").strip()
    return text if re.fullmatch(r"[A-Za-z0-9+/=_.-]{1,256}", text) else None


def _submission_with_grades(gradebook, assignment: str, student: str):
    """The submission, with its notebooks, their grades and comments and each one's cell loaded in
    four queries: read one by one, as nbgrader's objects do, they took a query a grade and a
    comment (17 CPU ms of a notebook's 35 for its feedback page, 2026-12-06)."""
    # deferred: nbgrader takes 3.1 s to import (python -X importtime, 2026-12-06); only this step needs it
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    # deferred: sqlalchemy takes 0.24 s to import (python -X importtime, 2026-12-06); only this step needs it
    from sqlalchemy.orm import joinedload, selectinload, undefer

    found = gradebook.find_submission(assignment, student)
    notebooks = selectinload(type(found).notebooks)
    return gradebook.db.query(type(found)).filter_by(id=found.id).options(
        notebooks.selectinload(SubmittedNotebook.grades).options(
            joinedload(Grade.cell), undefer(Grade.score), undefer(Grade.max_score)),
        notebooks.selectinload(SubmittedNotebook.comments).joinedload(Comment.cell)).populate_existing().one()


def write_feedback_pages(layout: CourseLayout, grader, assignment: str, student: str) -> list[Path]:
    """``feedback/<student>/<assignment>/<notebook>.html`` for each autograded notebook.

    The folder is made afresh and holds only the pages written here (nbgrader's own
    feedback would copy every other file of the autograded folder, include hidden tests
    and load MathJax from a CDN). Pages are rendered by :func:`rbtutor.grading.feedback.render_feedback`.
    """


    scores: dict[str, dict] = {}
    with grader.gradebook as gradebook:
        submission = _submission_with_grades(gradebook, assignment, student)
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
        # bounded in time and size (rendering one hostile notebook once took 55 s); a cut is named
        page, cuts = render_bounded(nb, notebook_scores, title=f"{assignment}: feedback for {student}")
        write_feedback(folder / f"{name}.html", page)
        written.append(folder / f"{name}.html")
        events = layout.integrity / student / assignment / f"_feedback_{name}.json"
        if cuts:
            record_events(events, student, assignment, name, "feedback",
                          [event("feedback_cut", f"feedback page {name}: {c}") for c in cuts], fresh=True)
        else:
            events.unlink(missing_ok=True)
    return written


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
        returned = 0
        for student in students:
            if id_problem(student):  # nbgrader's release_feedback globs the id: only checked ids reach it
                print(f"not returning {name} feedback to {terminal_text(student)}: the student id "
                      f"{id_problem(student)}", file=sys.stderr)
                failures += 1
                continue
            grader.coursedir.assignment_id, grader.coursedir.student_id = name, student
            release = grader.exchange.ReleaseFeedback(coursedir=grader.coursedir,
                                                      authenticator=grader.authenticator, parent=grader)
            try:
                release.start()
            except Exception as exc:  # noqa: BLE001 - nbgrader raises ExchangeError and plain OSError alike
                print(f"could not return {name} feedback to {student}: {_why(exc, layout)}", file=sys.stderr)
                failures += 1
                continue
            returned += 1
        if students:
            print(f"{name}: feedback returned to {plural(returned, 'student')}"
                  + (f" of {len(students)}" if returned != len(students) else ""), flush=True)
    return 1 if failures else 0


def _why(exc: Exception, layout: CourseLayout) -> str:
    """What went wrong, in words: a missing or unreadable file by its path in the course (a submission
    put into submitted/ by hand, not through the exchange, has no timestamp.txt), else the message."""
    if isinstance(exc, OSError) and exc.filename:
        path = Path(exc.filename)
        shown = path.relative_to(layout.root) if path.is_relative_to(layout.root) else path
        what = "is missing" if isinstance(exc, FileNotFoundError) else f"cannot be used ({exc.strerror})"
        hint = (" (a submission put into submitted/ by hand has no submission time; give it one, or "
                "collect it from the exchange)") if path.name == "timestamp.txt" else ""
        return terminal_text(f"{shown} {what}{hint}")
    return terminal_text(str(exc))
