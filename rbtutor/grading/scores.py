"""Step: scores. Where a grade is decided: points from the judge's verdicts, into the gradebook.

Order in ``Autograde.autograde_preprocessors`` (declared in :mod:`rbtutor.course.nbgrader`):
the kernel has run the notebook (:mod:`rbtutor.grading.execute`), the judge has recorded a
:class:`~rbtutor.grading.judge.Verdict` on each test cell that hands in an answer
(:class:`~rbtutor.grading.judge.JudgeAnswers`), and then :class:`SaveScores`, which takes
the place of nbgrader's ``SaveAutoGrades``, writes each graded cell's automatic score:

* a test cell with a verdict: :func:`points_earned`, the one rule of this course;
* every other graded cell, nbgrader's own rule (``nbgrader.utils.determine_grade``), as before:
  a written answer left as released scores 0 and is otherwise left for a human grader (no
  automatic score); a test cell that hands nothing in (none of the course's notebooks has one)
  is scored on its outputs.

The student's feedback still shows the verdict's message (a stdout line for a pass, an
``AnswerNotAccepted`` error otherwise), but those outputs no longer decide anything here.
The late penalty and the final score are one step later: ``AssignLatePenalties`` with
:class:`rbtutor.course.late.PercentPerDay`, and :mod:`rbtutor.course.grade` (the run, the
grade table and its overrides).
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from nbgrader.api import BaseCell, Comment, Grade, Gradebook, MissingEntry
from nbgrader.preprocessors import SaveAutoGrades
from nbgrader.utils import compute_checksum, determine_grade, is_task

from .judge import Verdict, recorded_verdict


def points_earned(verdict: Verdict) -> float:
    """The points a judged answer earns: all its points when it passed, 0 otherwise.

    There is no partial credit: a verdict that did not pass (a wrong value, a recognised
    mistake, a value of the wrong shape, nothing handed in) earns 0.

    Examples
    --------
    >>> points_earned(Verdict(True, "Accepted.", answer_id="p3.b.K", max_points=2.0))
    2.0
    >>> points_earned(Verdict(False, "Not accepted.", "sign", answer_id="p3.b.K", max_points=2.0))
    0.0
    """
    if verdict.max_points is None:
        raise ValueError(f"expected a verdict with the points at stake, got max_points=None for "
                         f"{verdict.answer_id!r}")
    return verdict.max_points if verdict.passed else 0.0


def cell_score(cell, log=None) -> tuple[float | None, float]:
    """``(automatic score, maximum)`` of one graded cell; a score of None leaves it to a human.

    A cell with a verdict earns :func:`points_earned`; any other graded cell is scored by
    nbgrader's ``determine_grade``, unchanged.
    """
    verdict = recorded_verdict(cell)
    if verdict is None:
        return determine_grade(cell, log)
    return points_earned(verdict), verdict.max_points


class SaveScores(SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades`` with the automatic score of each graded cell from :func:`cell_score`.

    Refuses to run on a notebook the judge has not seen (``JudgeAnswers`` must come before it
    in the pipeline), since without verdicts every answer would be scored 0 or on outputs the
    kernel wrote.

    The notebook's grade and comment rows are read in three queries and written in one
    transaction. nbgrader's step looks each row up with a query of its own and commits it on
    its own, so a failure half-way left half the notebook's scores written.
    """

    def preprocess(self, nb, resources):
        if not (resources.get("rbtutor") or {}).get("judged"):
            raise RuntimeError("expected JudgeAnswers to run before SaveScores in "
                               "Autograde.autograde_preprocessors, got a notebook without verdicts")
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id = info["notebook"], info["assignment"]
        self.student_id, self.db_url = info["student"], info["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            submitted = self.gradebook.find_submission_notebook(self.notebook_id, self.assignment_id,
                                                                self.student_id)
            self._grades = _rows_by_cell(self.gradebook.db, Grade, submitted)
            self._comments = _rows_by_cell(self.gradebook.db, Comment, submitted)
            nb, resources = Preprocessor.preprocess(self, nb, resources)  # _add_score, _add_comment per cell
            self.gradebook.db.commit()
        return nb, resources

    def _add_score(self, cell, resources) -> None:
        """The cell's automatic score; a manual score already there is kept."""
        grade = self._row(self._grades, cell, "grade")
        grade.auto_score, _ = cell_score(cell, self.log)
        # as nbgrader: a manual score, or no automatic one, asks for a human look
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None

    def _add_comment(self, cell, resources) -> None:
        """As nbgrader: "No response." on a solution cell left as released, no comment otherwise."""
        comment = self._row(self._comments, cell, "comment")
        untouched = cell.metadata["nbgrader"].get("checksum") == compute_checksum(cell) and not is_task(cell)
        comment.auto_comment = "No response." if untouched else None

    def _row(self, rows: dict, cell, kind: str):
        name = cell.metadata["nbgrader"]["grade_id"]
        if name not in rows:
            raise MissingEntry(f"No such {kind}: {self.assignment_id}/{self.notebook_id}/{name} for {self.student_id}")
        return rows[name]


def _rows_by_cell(db, model, submitted) -> dict:
    """The ``Grade`` or ``Comment`` rows of one submitted notebook, by the name of their cell (one query)."""
    query = db.query(model, BaseCell.name).join(BaseCell, BaseCell.id == model.cell_id)
    return {name: row for row, name in query.filter(model.notebook_id == submitted.id)}
