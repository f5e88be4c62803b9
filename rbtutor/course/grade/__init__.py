"""The instructor's loop over the class: generate, collect, grade, return feedback, one verb a module.

* :mod:`.generation`: ``generate``, the student versions of the assignments;
* :mod:`.collection`: ``collect``, the submissions from the exchange;
* :mod:`.run`: ``grade``, the run over the class (start, the pool of workers, finish);
* :mod:`.submission`: one submission, taken in and autograded in a worker;
* :mod:`.grades_export`: ``export_grades``, the gradebook into the LMS files;
* :mod:`.feedback_return`: ``return_feedback``, the feedback pages back to the students.

This package re-exports their public names, so ``from rbtutor.course.grade import grade`` keeps working.

``grade`` autogrades every submission in ``submitted/``, several at once (one
worker process per core plus one, see :func:`default_jobs`), with one line of
progress per student and assignment; it writes the feedback, exports the grades
to ``grades.csv`` and the integrity report; the gradebook is copied to
``gradebook.db.bak`` first. Re-running ``grade`` re-grades from the submissions and
gives the same grades. A submission that cannot be graded (whatever it raised, or a
student id that is not acceptable) is listed at the end with the reason, every other
submission is still graded, grades.csv and the integrity report are still written, and
the command then exits with status 1.

The record a grade is defended with:

* the submission time nbgrader's late penalty sees is the receipt's (the time the exchange
  entry appeared, :func:`rbtutor.grading.intake.collect`), written by the grader into its
  own intake copy; the student's ``timestamp.txt`` is never used for it;
* student ids are checked (:mod:`rbtutor.grading.student_ids`) before any of them reaches
  nbgrader, which uses ids in file globs;
* a hand grade belongs to the answer it graded: its score is kept on a re-grade only while
  the SHA-256 of that answer is unchanged (:func:`answer_hashes`, kept in
  ``integrity/<student>/<assignment>/_hand_grades.json``); otherwise the part needs a manual
  grade again, the old score is not counted and is shown to the grader in the comment, and
  the report names it (``hand_grade_reset``).
"""

from .collection import PLANTED, clear_planted, collect, record_planted
from .feedback_return import return_feedback, write_feedback_pages
from .generation import generate
from .grades_export import export_grades
from .run import (
    WORKER_MODULES,
    default_jobs,
    duration_text,
    finish_run,
    grade,
    progress_line,
    record_result,
    start_run,
    stop_when_interrupted,
    store_class_keys,
    worker_pool,
)
from .submission import (
    INTAKE,
    REFUSED,
    SUBMISSION_SECONDS,
    SubmissionTimeout,
    autograde_one,
    record_refused_id,
    submission_time,
    take_in_submission,
    withdraw_submission,
)

__all__ = [
    "INTAKE", "PLANTED", "REFUSED", "SUBMISSION_SECONDS", "WORKER_MODULES", "SubmissionTimeout", "autograde_one",
    "clear_planted", "collect", "default_jobs", "duration_text", "export_grades", "finish_run", "generate", "grade",
    "progress_line", "record_planted", "record_result", "record_refused_id", "return_feedback", "start_run",
    "stop_when_interrupted", "store_class_keys",
    "submission_time", "take_in_submission", "withdraw_submission", "worker_pool", "write_feedback_pages",
]
