"""Step: after grading. The class's grade rows: what grades.csv, the LMS files and the class report state.

:func:`class_rows` works out one :class:`GradeRow` per student and assignment from the
gradebook, once, for all three: ``rbtutor.course.grade.export_grades`` writes them as
grades.csv, ``rbtutor.course.export.class_grades`` gives them to the LMS files, and the class
report reads the same submissions (:func:`each_submission`). Hand grades that cannot count are
left out here, in one place (:func:`rbtutor.course.hand_grades.hand_grade_problem`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from nbgrader.api import Grade, SubmittedAssignment, SubmittedNotebook
from sqlalchemy.orm import joinedload, selectinload, undefer

from .hand_grades import counted_score, hand_grade_problem
from .late import own_due

NOT_GRADED_ROW = "not graded"  # written_parts of a submission that the last run could not grade


@dataclass(frozen=True)
class GradeRow:
    """One student's result in one assignment.

    ``score`` is None for a submission the last run could not grade (withdrawn: no points);
    ``pending`` counts the hand-graded parts still to grade, ``overridden`` the autograded parts a
    grader changed by hand (``grade_id auto->manual``), ``refused`` the hand grades not counted
    (``notebook/grade_id: why``); ``due`` is the student's own due date, naive UTC.
    """

    student: str
    assignment: str
    max_score: float
    score: float | None = None
    pending: int = 0
    overridden: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    late_penalty: float = 0.0
    due: dt.datetime | None = None

    @property
    def final_score(self) -> float | None:
        """The score less the late penalty (None when not graded)."""
        return None if self.score is None else self.score - self.late_penalty

    @property
    def written_parts(self) -> str:
        """``done``, ``to grade (N)`` or :data:`NOT_GRADED_ROW`."""
        if self.score is None:
            return NOT_GRADED_ROW
        return f"to grade ({self.pending})" if self.pending else "done"


def class_rows(gradebook, withdrawn=()) -> list[GradeRow]:
    """Every row of the class, the ``withdrawn`` ``(student, assignment)`` pairs first (no score),
    then every submission of the gradebook by assignment and student (:func:`each_submission`).

    A hand grade :func:`~rbtutor.course.hand_grades.hand_grade_problem` refuses is not counted: its
    part counts as still to grade (unless it has an autograded score, which then stands).
    """
    points = {a.name: a.max_score for a in gradebook.assignments}
    rows = [GradeRow(student, name, points.get(name, 0.0))
            for student, name in sorted(withdrawn, key=lambda pair: (pair[1], pair[0]))]
    for submission in each_submission(gradebook):
        grades = [g for nb in submission.notebooks for g in nb.grades]
        problems = {id(g): why for g in grades if (why := hand_grade_problem(g))}
        rows.append(GradeRow(
            student=submission.student.id, assignment=submission.assignment.name,
            max_score=submission.max_score,
            score=sum(counted_score(g) for g in grades) if problems else submission.score,
            pending=sum(1 for g in grades if g.needs_manual_grade or (id(g) in problems and g.auto_score is None)),
            overridden=tuple(f"{g.name} {g.auto_score:g}->{g.manual_score:g}" for g in grades
                             if g.auto_score is not None and g.manual_score is not None
                             and g.manual_score != g.auto_score and id(g) not in problems),
            refused=tuple(f"{nb.name}/{g.name}: {problems[id(g)]}"
                          for nb in submission.notebooks for g in nb.grades if id(g) in problems),
            late_penalty=submission.late_submission_penalty, due=own_due(submission)))
    return rows


def each_submission(gradebook):
    """Every submission of the gradebook, by assignment name and then student id (sorted here, not by
    the database, whose collation must not decide the order), with what
    :func:`rbtutor.course.grade.export_grades` and
    the class report read of it.

    One assignment is read at a time, in a fixed number of queries whatever its size: the scores
    as columns of the one query, the student, the assignment, the notebooks, their grades and each
    grade's cell loaded in bulk (nbgrader's defaults would cost several queries per submission).
    So the memory held is that of one assignment's submissions, not the class's: reading the whole
    class at once held about 34 kB a submission (10 MB for a class of 300, measured with tracemalloc).
    """

    session = gradebook.db
    for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
        submissions = session.query(SubmittedAssignment).filter(
            SubmittedAssignment.assignment_id == assignment.id).options(
            undefer(SubmittedAssignment.score), undefer(SubmittedAssignment.max_score),
            undefer(SubmittedAssignment.late_submission_penalty),
            joinedload(SubmittedAssignment.student), joinedload(SubmittedAssignment.assignment),
            selectinload(SubmittedAssignment.notebooks).selectinload(SubmittedNotebook.grades)
            .joinedload(Grade.cell)).all()
        yield from sorted(submissions, key=lambda s: s.student.id)
        del submissions  # before the next assignment is read (the session keeps no object alive)
