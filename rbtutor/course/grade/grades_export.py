"""Export: the class's grades from the gradebook into the LMS files."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

from ...grading.report import csv_cell
from ..grade_rows import class_rows


def export_grades(grader, path: Path, late_changes: dict[tuple[str, str], str] | None = None,
                  refused: list[str] | None = None,
                  withdrawn: dict[tuple[str, str], str] | None = None) -> list[str]:
    """grades.csv: one row per student and assignment (:func:`.grade_rows.class_rows`), written in place
    of the old file only once it is whole.

    ``written_parts``: ``done`` when every hand-graded part has a grade, else ``to grade (N)``;
    a submission that the last run could not grade (``withdrawn``, :meth:`CourseLayout.not_graded`,
    written by :func:`withdraw_submission`) comes first, with no score and ``not graded``.
    ``overridden``: autograded parts whose score a grader changed by hand (the Formgrader allows it),
    as ``grade_id auto->manual``, so that no override goes unseen. Returns those overrides, one
    ``student assignment grade_id auto->manual`` each. Every cell goes through
    :func:`rbtutor.grading.report.csv_cell`, so no cell is read as a formula.
    ``due``: the student's own due date (with their extension), UTC. ``late_change``: how this
    run changed the late penalty and why (``late_changes``, :func:`rbtutor.course.late.settle_penalties`).
    ``refused`` receives ``student assignment notebook/grade_id: why`` for each hand grade not counted.
    """
    with grader.gradebook as gradebook:
        rows = class_rows(gradebook, withdrawn or ())
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", newline="") as out:
            writer = csv.writer(out)
            # late_penalty, final_score: points taken off for lateness (rbtutor.course.late), score less them
            writer.writerow(["student", "assignment", "score", "max_score", "written_parts", "overridden",
                             "late_penalty", "final_score", "due", "late_change"])
            for row in rows:
                graded = row.score is not None
                writer.writerow([csv_cell(cell) for cell in (
                    row.student, row.assignment, f"{row.score:g}" if graded else "", f"{row.max_score:g}",
                    row.written_parts, "; ".join(row.overridden), f"{row.late_penalty:g}" if graded else "",
                    f"{row.final_score:g}" if graded else "", f"{row.due:%Y-%m-%d %H:%M:%S} UTC" if row.due else "",
                    (late_changes or {}).get((row.student, row.assignment), ""))])
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    if refused is not None:
        refused += [f"{row.student} {row.assignment} {why}" for row in rows for why in row.refused]
    return [f"{row.student} {row.assignment} {text}" for row in rows for text in row.overridden]
