"""Due dates, extensions and the late policy of a course (the grading run's deadline step).

Due dates. ``exercises/due_dates.yaml`` (optional) maps an assignment to the moment it is
due, an ISO 8601 date and time with its time zone, or to that moment and the students who
were given more time::

    problem03: 2025-10-06T23:59:00+02:00
    problem04:
      due: 2025-10-13T23:59:00+02:00
      extensions:
        student1: 2025-10-16T12:00:00+02:00   # a later due date of their own
        student2: 3d                          # or time added: Nd days, Nh hours

:func:`read_due_dates` checks the whole file and refuses, naming the place and what it
expected: an assignment the course does not have, a time without its zone, a key other than
``due`` and ``extensions``, a duration that is not a positive ``Nd`` or ``Nh``, a student id
:func:`rbtutor.grading.student_ids.check_id` refuses, an extension that ends before the
assignment's due date, a time that is not between the years 1 and 9999 in UTC (or an extension
that takes it past them), and a key written twice. Every refusal is one short
:class:`ValueError` (values are quoted cut short).

Keys are read as written: an unquoted ``20231234: 3d`` (a matriculation number) is the student
id ``20231234``, and ``0123`` is ``0123``, never the number YAML 1.1 would make of it (83). The
file is read with a bounded loader (:func:`load_due_dates_text`), since the personalising
service reads it as well: at most :data:`MAX_FILE_BYTES` bytes and :data:`MAX_TOKENS` YAML
items, nested at most :data:`MAX_NESTING` deep, and no anchors, aliases or tags (``&a``,
``*a``, ``!!str``), so a few lines cannot expand into millions of items. Times are kept as
text by the loader and read by :func:`datetime.datetime.fromisoformat` (or as YAML's
timestamps, ``2030-03-01 12:00:00 +1``), so that a bad one is refused with its entry's name.

``python -m rbtutor.course generate`` (``make assignments``) and every grading run
(``make grade``, :func:`prepare_deadlines`) write the file into the gradebook: the
assignment's due date, and each submission's ``extension`` (nbgrader's, the time between the
assignment's due date and the student's own), so nbgrader's ``SubmittedAssignment.duedate``
is the student's own due date. When the file exists it is the whole truth: an assignment it
does not list has no due date and a student it does not name has no extension. When there is
no file, the gradebook's due dates and extensions are left as they are (for example set with
``nbgrader db assignment add problem03 --duedate=...``). An extension for a student the
gradebook does not know yet is reported (it takes effect when that student's work is first
graded), never dropped without a word.

The late policy. A submission is late when its submission time is after the student's own
due date. That time is the one the student cannot set: when the exchange entry appeared (the
newest ctime of the entry and of everything in it), never earlier than the time in the entry's
name, kept in the receipt ``collect`` writes (:func:`rbtutor.grading.intake.collect`) and put
by ``grade`` into the grader's own copy as the ``timestamp.txt`` nbgrader reads
(:func:`rbtutor.course.grade.submission_time`), from which nbgrader sets the submission's
``timestamp``. The ``timestamp.txt`` nbgrader's ``submit`` wrote is only the student's claim: it
is kept, compared (``timestamp_mismatch`` in the integrity report when it is more than a minute
off) and never used. The late-penalty plugin, :class:`PercentPerDay`, gives each notebook's
penalty: a fixed share (``PercentPerDay.percent_per_day``, 10 % by default) of the notebook's
score for every day or part of a day after the due date, never more than the score itself, so
a late score is never below zero. A course changes the share in its ``nbgrader_config.py``,
after ``configure``::

    c.PercentPerDay.percent_per_day = 20.0   # 0 marks late submissions without a penalty

Moved deadlines. nbgrader works a penalty out only while it autogrades a notebook, from the
score of that moment. At the end of every grading run :func:`settle_penalties` works every
submission's penalties out again from the gradebook as it is then (the due dates and
extensions of the current file, the trusted submission time, the final scores, hand grades
included), and compares them with the penalties the gradebook held before the run
(:func:`prepare_deadlines` keeps those in the course's scratch folder). Each penalty that
changed is listed with its reason (a moved due date, a new or changed extension, a new
submission time, a changed score), printed and written to the ``late_change`` column of
``grades.csv``.

The code is in three modules: :mod:`.due_dates` (the file: parse, check, publish, set in the
gradebook), :mod:`.penalty` (the nbgrader plugin and the penalties settled around a grading run)
and :mod:`.notebook` (the due-date line in the student's notebook); this package re-exports them.
"""

from .due_dates import (
    DAY,
    DUE_DATES,
    EXAMPLE_TIME,
    MAX_FILE_BYTES,
    MAX_NESTING,
    MAX_TOKENS,
    Deadline,
    due_dates_table,
    load_due_dates_text,
    own_due_date,
    parse_due_dates,
    publish_due_dates,
    read_due_dates,
    set_due_dates,
)
from .notebook import DUE_LINE, due_line, show_due_date
from .penalty import (
    BEFORE_RUN,
    PercentPerDay,
    late_plugin,
    own_due,
    prepare_deadlines,
    seconds_late,
    settle_penalties,
)

__all__ = [
    "BEFORE_RUN", "DAY", "DUE_DATES", "DUE_LINE", "EXAMPLE_TIME", "MAX_FILE_BYTES",
    "MAX_NESTING", "MAX_TOKENS", "Deadline", "PercentPerDay", "due_dates_table",
    "due_line", "late_plugin", "load_due_dates_text", "own_due", "own_due_date", "parse_due_dates",
    "prepare_deadlines", "publish_due_dates", "read_due_dates", "seconds_late", "set_due_dates", "settle_penalties",
    "show_due_date",
]
