"""Grade, one submission: take it in from the exchange, autograde it in a worker, or withdraw it."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import shutil
import time
from pathlib import Path

from nbgrader.api import MissingEntry

from ...grading.config import GRADING
from ...grading.execute import remove_tree
from ...grading.intake import format_time, read_receipt, take_in
from ...grading.report import event, record_events
from ...grading.sandbox import start_zygote
from ...grading.sources import source_notebook
from ...grading.student_ids import check_id
from ...grading.time_bound import time_bound
from ..hand_grades import hand_grades_before_regrade, keep_hand_grades
from ..layout import CourseLayout
from ..nbgrader import api, gradebooks_set_up_once, share_gradebook_engines
from .feedback_return import write_feedback_pages

_WORKER_API = {}


INTAKE = "intake"  # under CourseLayout.scratch: the checked copies nbgrader grades from


def source_notebooks(layout: CourseLayout, assignment: str) -> dict[str, dict]:
    """The instructor's source notebooks of ``assignment`` (for the intake's source-copy check), read
    once per process while unchanged (:func:`~rbtutor.grading.sources.source_notebook`): read only."""

    return {path.stem: source_notebook(path) for path in sorted((layout.exercises / assignment).glob("*.ipynb"))}


def take_in_submission(layout: CourseLayout, assignment: str, student: str):
    """Check and copy ``submitted/<student>/<assignment>`` into the grader's own intake folder.

    nbgrader then grades from that copy (``CourseDirectory.submitted_directory``), never from
    the folder the student filled. The intake's events go to the integrity report. The copy's
    ``timestamp.txt``, which nbgrader's late penalty reads, is written here with the trusted
    submission time (:func:`submission_time`), replacing the student's claim.
    """

    stage = layout.scratch / INTAKE / student / assignment
    if stage.exists() or stage.is_symlink():
        remove_tree(stage)
    stage.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.scratch, 0o700)
    sources = source_notebooks(layout, assignment)
    result = take_in(layout.submitted(student, assignment), stage, sources=sources)
    # A notebook the intake refused (a link, a copy of the source, unreadable) earns nothing: the
    # blank released version stands in for it, so the submission is graded (zero) and not lost.
    for name in sources:
        blank = layout.release / assignment / f"{name}.ipynb"
        if not (stage / f"{name}.ipynb").exists() and blank.is_file():
            shutil.copyfile(blank, stage / f"{name}.ipynb")
            os.chmod(stage / f"{name}.ipynb", 0o644)
    received, note = submission_time(layout, assignment, student)
    if note:
        result.events.append(note)
    _write_time(stage, received)
    record_events(layout.integrity / student / assignment / "_files.json", student, assignment,
                  "(submission files)", "intake", result.events, fresh=True)
    return result


def submission_time(layout: CourseLayout, assignment: str, student: str) -> tuple[str, dict | None]:
    """The time ``student`` handed ``assignment`` in, as nbgrader writes times, and an event or None.

    The receipt of :func:`rbtutor.grading.intake.collect` when there is one. A submission put into
    ``submitted/`` another way (``nbgrader collect``, by hand) has none: its time is then when its
    files reached ``submitted/`` (their newest ctime), never the student's claim, and a
    ``no_receipt`` event says so.
    """


    receipt = read_receipt(layout.submitted(), student, assignment)
    if receipt is not None:
        return receipt["received"], None
    folder = layout.submitted(student, assignment)
    newest = os.lstat(folder).st_ctime
    for base, folders, files in os.walk(folder):
        for name in folders + files:
            newest = max(newest, os.lstat(os.path.join(base, name)).st_ctime)
    received = format_time(dt.datetime.fromtimestamp(newest, dt.UTC))
    return received, event("no_receipt", f"{assignment} of {student} was not collected by `python -m rbtutor.course "
                           f"collect` (no receipt); its time is when its files reached submitted/, {received}, not "
                           "the time its timestamp.txt claims.", received=received)


def _write_time(stage: Path, received: str) -> None:
    """Put the trusted time into the grader's copy as ``timestamp.txt`` (whatever was there is gone)."""

    path = stage / "timestamp.txt"
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.write_text(received)
    os.chmod(path, 0o644)


#: the longest one submission may take in a grading worker, every step together: the
#: notebook's own limit (``BoundedExecute.notebook_timeout``, 300 s) and the feedback's (30 s)
#: with room for intake, judging and gradebook writes. Past it the submission is NOT GRADED
#: and the run goes on.
SUBMISSION_SECONDS = GRADING.run_submission_seconds


class SubmissionTimeout(Exception):
    """One submission's grading went past its time bound (:data:`SUBMISSION_SECONDS`)."""


def autograde_one(job: tuple[str, str, str], seconds: float = SUBMISSION_SECONDS
                   ) -> tuple[str, str, str, float, str | None]:
    """Take in, autograde and make feedback for one submission; runs in a worker process.

    Whatever one submission raises (nbgrader's ``MissingEntry``, a broken gradebook row, a
    failed feedback page) is its own result, ``NOT GRADED`` with the reason: it never ends the
    run. So is a submission that takes longer than ``seconds`` in all
    (:func:`rbtutor.grading.time_bound.time_bound`; in the main thread only).
    """
    root, assignment, student = job
    start = time.perf_counter()
    try:
        with time_bound(seconds, SubmissionTimeout(f"grading it took longer than {seconds:g} s, "
                                                   "all steps together")), gradebooks_set_up_once():
            summary, problem = _grade_submission(CourseLayout(Path(root)), assignment, student)
    except Exception as exc:  # noqa: BLE001 - one submission never ends the run: whatever it raised is its reason
        summary, problem = "NOT GRADED", f"{type(exc).__name__}: {exc}"
    if problem:  # any step that failed leaves the whole submission ungraded (finish_run withdraws its points)
        summary = "NOT GRADED"
    return assignment, student, summary, time.perf_counter() - start, problem


def _grade_submission(layout: CourseLayout, assignment: str, student: str) -> tuple[str, str | None]:
    """``(summary, problem or None)`` of grading one submission."""

    check_id(student)  # nbgrader globs the id: only an id without glob characters reaches it
    start_zygote()  # kernels start as copies of one prepared process: the run's, or this worker's own
    share_gradebook_engines()
    root = str(layout.root)
    grader = _WORKER_API.get(root) or _WORKER_API.setdefault(root, api(layout))
    try:
        take_in_submission(layout, assignment, student)
    except (OSError, ValueError) as exc:
        return "NOT GRADED", f"intake: {exc}"
    grader.coursedir.submitted_directory = str((layout.scratch / INTAKE).relative_to(layout.root))
    before = hand_grades_before_regrade(grader, layout, assignment, student)
    result = grader.autograde(assignment, student, force=True)
    if not result["success"]:
        return "NOT GRADED", result["log"][-800:]
    reset = keep_hand_grades(grader, layout, assignment, student, before)
    with grader.gradebook as gradebook:
        sub = gradebook.find_submission(assignment, student)
        summary = f"{sub.code_score:g}/{sub.max_code_score:g} autograded"
        summary += ", written parts to grade" if sub.needs_manual_grade else ""
    if reset:
        summary += f", {len(reset)} hand grade(s) reset (answer changed)"
    try:
        write_feedback_pages(layout, grader, assignment, student)
    except (OSError, ValueError) as exc:
        return summary, f"feedback: {exc}"
    layout.not_graded_mark(student, assignment).unlink(missing_ok=True)  # graded now: the mark goes
    return summary, None


def withdraw_submission(layout: CourseLayout, grader, assignment: str, student: str, reason: str) -> None:
    """Leave a submission that a step could not grade with no points anywhere, and say so.

    Its rows go from the gradebook (whatever a step wrote before the failure, scores included),
    its ``autograded/`` notebook and its ``feedback/`` pages are removed, and the event
    ``not_graded`` with the reason is kept in ``integrity/<student>/<assignment>/_not_graded.json``
    until a run grades it: :func:`export_grades`, the class report and the integrity report
    read that file, so all three say "not graded". Hand grades are not lost: their scores,
    comments and the hashes of the answers they graded stay in the hand-grade record, and
    the next run that grades the submission gives them back while the answers are unchanged
    (:func:`.hand_grades.hand_grades_before_regrade`). Safe to call twice.
    """
    with grader.gradebook as gradebook, contextlib.suppress(MissingEntry):
        gradebook.remove_submission(assignment, student)
    for folder in (layout.autograded(student, assignment), layout.feedback(student, assignment)):
        if folder.exists() or folder.is_symlink():
            remove_tree(folder)
    record_events(layout.not_graded_mark(student, assignment), student, assignment, "(grading)", "grade",
                  [event("not_graded", f"{assignment} of {student} could not be graded: {reason}. It holds no "
                         "points until a run grades it; the next `grade` tries again.", reason=reason)],
                  fresh=True)


REFUSED = "_refused"  # under integrity/: events of ids that are not acceptable (no id starts with '_')


def record_refused_id(layout: CourseLayout, assignment: str, student: str, stage: str, events: list[dict]) -> None:
    """Put the events of a refused student id into the report, in a file not named by the id."""
    name = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    record_events(layout.integrity / REFUSED / assignment / f"{stage}-{name}.json", student, assignment,
                  "(student id)", stage, events, fresh=True)
