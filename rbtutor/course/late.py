"""Due dates and the late policy of a course.

Due dates. ``exercises/due_dates.yaml`` (optional) maps an assignment to the moment it is
due, an ISO 8601 date and time with its time zone::

    problem03: 2025-10-06T23:59:00+02:00
    problem04: 2025-10-13T23:59:00+02:00

``python -m rbtutor.course generate`` (``make assignments``) writes them into the gradebook
(:func:`set_due_dates`). When the file exists it is the whole truth: an assignment it does not
list has no due date. When there is no file, the gradebook's due dates are left as they are (for
example set with ``nbgrader db assignment add problem03 --duedate=...``).

The late policy. A submission is late when its submission time is after the due date. That
time is the one the student cannot set: when the exchange entry appeared (the newest ctime of
the entry and of everything in it), never earlier than the time in the entry's name, kept in
the receipt ``collect`` writes (:func:`rbtutor.grading.intake.collect`) and put by ``grade``
into the grader's own copy as the ``timestamp.txt`` nbgrader reads
(:func:`rbtutor.course.grade.submission_time`). The ``timestamp.txt`` nbgrader's ``submit``
wrote is only the student's claim: it is kept, compared (``timestamp_mismatch`` in the
integrity report when it is more than a minute off) and never used. nbgrader then marks a
late submission late in the gradebook and asks
the late-penalty plugin, :class:`PercentPerDay`, for each notebook's penalty: a fixed share
(``PercentPerDay.percent_per_day``, 10 % by default) of the notebook's score for every day
or part of a day after the due date, never more than the score itself, so a late score is never
below zero. A course changes the share in its ``nbgrader_config.py``, after ``configure``::

    c.PercentPerDay.percent_per_day = 20.0   # 0 marks late submissions without a penalty
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

from .layout import CourseLayout

DAY = 86400.0  # seconds

DUE_DATES = "due_dates.yaml"  # in the course's exercises/ folder


class PercentPerDay(LateSubmissionPlugin):
    """Late penalty: ``percent_per_day`` % of the score for every started day late, at most the score.

    Examples
    --------
    >>> PercentPerDay(percent_per_day=10).late_submission_penalty("s1", 8.0, 1.5 * 86400)
    1.6
    """

    percent_per_day = Float(10.0, help="Share of the notebook's score taken off for every day, or part "
                            "of a day, that the submission is late, in percent (0 to 100).").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        """The points taken off a notebook scored ``score`` and submitted ``total_seconds_late`` late."""
        if not 0.0 <= self.percent_per_day <= 100.0:
            raise ValueError(f"expected PercentPerDay.percent_per_day between 0 and 100, got {self.percent_per_day}")
        if total_seconds_late <= 0 or score is None or score <= 0:
            return None
        days = math.ceil(total_seconds_late / DAY)
        share = min(1.0, days * self.percent_per_day / 100.0)
        penalty = round(score * share, 6)
        self.log.info("%s is %.0f s late (%d started day(s)): %.4g of %.4g points off",
                      student_id, total_seconds_late, days, penalty, score)
        return penalty


def read_due_dates(layout: CourseLayout) -> dict[str, dt.datetime] | None:
    """The due dates of ``exercises/due_dates.yaml`` as timezone-aware datetimes; None without the file.

    Raises
    ------
    ValueError
        The file names an assignment the course does not have, or a date that is not a date
        and time with its time zone.
    """
    import yaml

    path = Path(layout.exercises) / DUE_DATES
    if not path.is_file():
        return None
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of assignment to due date, got {type(raw).__name__}")
    known = set(layout.assignments())
    due = {}
    for name, when in raw.items():
        if name not in known:
            raise ValueError(f"{path}: no assignment {name!r} in {layout.exercises}")
        if isinstance(when, str):
            try:
                when = dt.datetime.fromisoformat(when)
            except ValueError:
                when = None
        if not isinstance(when, dt.datetime) or when.tzinfo is None:
            raise ValueError(f"{path}: expected {name}'s due date as a date and time with its time zone, "
                             f"such as 2025-10-06T23:59:00+02:00, got {raw[name]!r}")
        due[name] = when
    return due


def set_due_dates(layout: CourseLayout, grader) -> list[str]:
    """Write the due dates of ``exercises/due_dates.yaml`` into the gradebook; one line per assignment.

    ``grader`` is the course's ``NbGraderAPI``. Nothing is changed when there is no file.
    Assignments not yet in the gradebook are created there (as ``generate`` would).
    """
    due = read_due_dates(layout)
    if due is None:
        return []
    lines = []
    with grader.gradebook as gradebook:
        for name in layout.assignments():
            when = due.get(name)
            # the gradebook stores naive UTC (nbgrader compares it with the submission's UTC time)
            utc = when.astimezone(dt.UTC).replace(tzinfo=None) if when else None
            gradebook.update_or_create_assignment(name, duedate=utc)
            lines.append(f"{name}: due {when.isoformat()}" if when else f"{name}: no due date")
    return lines
