"""Late: the penalty of a grading run. The plugin nbgrader asks for each late notebook's penalty,
and the deadlines and penalties settled around a run (the state before it, what changed after it)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os

from nbgrader.api import SubmittedAssignment, SubmittedNotebook
from nbgrader.plugins import LateSubmissionPlugin
from sqlalchemy.orm import joinedload, selectinload, undefer
from traitlets import Float
from traitlets.utils.importstring import import_item

from ...grading.config import GRADING
from ..layout import CourseLayout
from .due_dates import DAY, read_due_dates, set_due_dates

#: under the course's scratch folder: each submission's penalty and deadline before a grading run
BEFORE_RUN = "late_before_run.json"


class PercentPerDay(LateSubmissionPlugin):
    """Late penalty: ``percent_per_day`` % of the score for every started day late, at most the score.

    Examples
    --------
    >>> PercentPerDay(percent_per_day=10).late_submission_penalty("s1", 8.0, 1.5 * 86400)
    1.6
    """

    percent_per_day = Float(GRADING.late_percent_per_day, help="Share of the notebook's score taken off for "
                            "every day, or part of a day, that the submission is late, in percent (0 to 100)."
                            ).tag(config=True)

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


def own_due(submission) -> dt.datetime | None:
    """A submission's own due date, naive UTC (nbgrader's ``duedate``); None when its assignment has none,
    even if an extension was left behind (nbgrader's ``duedate`` would fail on it)."""
    return submission.duedate if submission.assignment.duedate is not None else None


def seconds_late(submission) -> float:
    """How late a submission was handed in after its own due date, in seconds (0 when on time or undated)."""
    due = own_due(submission)
    if due is None or submission.timestamp is None:
        return 0.0
    return max(0.0, (submission.timestamp - due).total_seconds())


def _submissions(gradebook) -> list:
    """Every submission with what :func:`_state` and :func:`settle_penalties` read, in a few queries
    whatever the class size (nbgrader's defaults would cost several per submission)."""

    return gradebook.db.query(SubmittedAssignment).options(
        undefer(SubmittedAssignment.score), undefer(SubmittedAssignment.late_submission_penalty),
        joinedload(SubmittedAssignment.student), joinedload(SubmittedAssignment.assignment),
        selectinload(SubmittedAssignment.notebooks).undefer(SubmittedNotebook.score)).all()


def _state(submission, penalty: float | None = None) -> dict:
    """What a submission's penalty depends on, and the penalty itself (``penalty`` when given, else the
    one loaded), as JSON-ready text and numbers."""
    def text(when):
        return when.isoformat(sep=" ") + " UTC" if when else None

    penalty = submission.late_submission_penalty if penalty is None else penalty
    return {"penalty": float(penalty or 0.0), "score": float(submission.score or 0.0),
            "due": text(submission.assignment.duedate), "own_due": text(own_due(submission)),
            "extension": submission.extension is not None, "submitted": text(submission.timestamp)}


def _states(grader) -> dict[str, dict]:
    """:func:`_state` of every submission of the gradebook, keyed ``student/assignment``."""
    with grader.gradebook as gradebook:
        return {f"{s.student.id}/{s.assignment.name}": _state(s) for s in _submissions(gradebook)}


def prepare_deadlines(layout: CourseLayout, grader, handing_in: list[tuple[str, str]]) -> list[str]:
    """Before a grading run: keep every submission's penalty and deadline (for :func:`settle_penalties`),
    then write the current due dates and extensions into the gradebook (:func:`set_due_dates`).

    Raises
    ------
    ValueError
        The due-dates file is not valid: nothing is graded until it is.
    """
    deadlines = read_due_dates(layout)  # checked before anything changes
    layout.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    before = layout.scratch / BEFORE_RUN
    before.write_text(json.dumps(_states(grader), indent=1))
    os.chmod(before, 0o600)
    return set_due_dates(layout, grader, handing_in) if deadlines is not None else []


def late_plugin(grader) -> LateSubmissionPlugin:
    """The course's late-penalty plugin (``c.AssignLatePenalties.plugin_class``), configured as nbgrader would."""

    section = grader.config.AssignLatePenalties
    cls = section.plugin_class if "plugin_class" in section else PercentPerDay
    cls = import_item(cls) if isinstance(cls, str) else cls
    return cls(config=grader.config)


def _notebook_penalty(plugin, student: str, notebook, seconds_late: float) -> float | None:
    """One notebook's penalty as nbgrader's ``AssignLatePenalties`` gives it: the plugin's, kept in [0, score]."""
    if seconds_late <= 0:
        return None
    penalty = plugin.late_submission_penalty(student, notebook.score, seconds_late)
    return None if penalty is None else min(max(penalty, 0.0), notebook.score)


def _why(old: dict, new: dict) -> str:
    """Why a penalty changed, from what it depended on before and after."""
    reasons = []
    if old["due"] != new["due"]:
        reasons.append(f"due date moved from {old['due']} to {new['due']}")
    if old["own_due"] != new["own_due"] and new["extension"]:
        reasons.append(f"extension to {new['own_due']}")
    elif old["extension"] and not new["extension"]:
        reasons.append("extension removed")
    if old["submitted"] != new["submitted"]:
        reasons.append(f"submitted at {new['submitted']} (was {old['submitted']})")
    if old["score"] != new["score"]:
        reasons.append(f"score {old['score']:g} -> {new['score']:g}")
    return "; ".join(reasons) or "late policy changed"


def settle_penalties(layout: CourseLayout, grader) -> dict[tuple[str, str], str]:
    """After a grading run: every submission's late penalty worked out again, and those that changed.

    Each notebook's penalty comes from the course's plugin (:func:`late_plugin`), the
    submission's trusted time and the student's own due date (nbgrader's ``duedate``, the
    assignment's plus the extension), and the notebook's score as it is now. Returns
    ``{(student, assignment): "old -> new: why"}`` for every penalty that differs from the one
    the gradebook held before the run (:func:`prepare_deadlines`); a submission graded for the
    first time is not a change.
    """
    plugin = late_plugin(grader)
    now = {}
    with grader.gradebook as gradebook:
        for submission in _submissions(gradebook):
            late = seconds_late(submission)
            for notebook in submission.notebooks:
                notebook.late_submission_penalty = _notebook_penalty(plugin, submission.student.id, notebook, late)
            penalty = sum(nb.late_submission_penalty or 0.0 for nb in submission.notebooks)
            now[f"{submission.student.id}/{submission.assignment.name}"] = _state(submission, penalty)
        gradebook.db.commit()
    path = layout.scratch / BEFORE_RUN
    try:
        before = json.loads(path.read_text())
    except FileNotFoundError:
        before = {}
    except ValueError as exc:
        raise ValueError(f"expected {path} to be JSON, got {exc}") from None
    changes = {}
    for key, new in now.items():
        old = before.get(key)
        if old is not None and not math.isclose(old["penalty"], new["penalty"], abs_tol=1e-9):
            student, assignment = key.split("/", 1)
            changes[(student, assignment)] = f"{old['penalty']:g} -> {new['penalty']:g}: {_why(old, new)}"
    path.unlink(missing_ok=True)
    return changes
