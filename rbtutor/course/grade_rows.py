"""Step: after grading. The class's submissions as grades.csv, the LMS files and the class report read them."""

from __future__ import annotations

from nbgrader.api import Grade, SubmittedAssignment, SubmittedNotebook
from sqlalchemy.orm import joinedload, selectinload, undefer


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
