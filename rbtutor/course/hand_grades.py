"""Hand grades: which count, and which belong to the answer a grader saw.

A score a grader enters in the Formgrader is checked twice: where it is entered
(:func:`guard_hand_grades`) and wherever the gradebook is read (:func:`hand_grade_problem`); a
score that is not a finite number from 0 to the part's points is never counted. And it belongs
to the answer it graded: the SHA-256 of that answer (:func:`answer_hashes`) is kept with the score
in ``integrity/<student>/<assignment>/_hand_grades.json``, and a re-grade keeps the score only
while the hash is the same (:func:`hand_grades_before_regrade`, :func:`keep_hand_grades`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

import nbformat
from nbgrader.api import Grade, MissingEntry
from sqlalchemy import event as sql_event

from ..grading.report import event
from .layout import CourseLayout


def hand_grade_problem(grade) -> str | None:
    """Why the score a grader entered for ``grade`` (an nbgrader ``Grade``) cannot be counted; None if it can.

    Counted: a ``manual_score`` that is a finite number from 0 to the part's points, and a finite
    ``extra_credit``. The Formgrader stores whatever number its page sends, ``Infinity`` included,
    and SQLite keeps a NaN as no score at all on a part marked graded; so those, a negative score
    and one above the part's points are refused here, and every reader of the gradebook
    (:func:`rbtutor.course.grade.export_grades`, hence the LMS files, and the class report) treats such a part as still
    needing a grade: its hand grade is not counted, and is named, never written as ``inf`` or ``nan``.
    """
    manual, extra, top = grade.manual_score, grade.extra_credit, part_points(grade)
    if manual is not None and not math.isfinite(manual):
        return f"hand grade {manual} is not a finite number"
    if manual is not None and top is not None and not 0 <= manual <= top:
        return f"hand grade {manual:g} is not between 0 and the part's {top:g} points"
    if extra is not None and not math.isfinite(extra):
        return f"extra credit {extra} is not a finite number"
    if manual is None and grade.auto_score is None and not grade.needs_manual_grade:
        return "marked graded without a score (a NaN hand grade is stored as no score)"
    return None


def part_points(grade) -> float | None:
    """The part's points (what nbgrader's ``Grade.max_score`` gives), from its cell (loaded with the grade by
    :func:`rbtutor.course.grade_rows.each_submission`; nbgrader's ``Grade.max_score`` is a deferred
    column that would cost a query per grade)."""
    cell = grade.cell
    return cell.max_score if cell is not None else grade.max_score


def refuse_entered(target, value, _old, initiator):
    """SQLAlchemy ``set`` listener of ``Grade.manual_score`` and ``Grade.extra_credit``: ``ValueError``
    for a value :func:`hand_grade_problem` would refuse, before it reaches the gradebook."""
    if value is None:
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number for the {initiator.key} of {target.name}, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number for the {initiator.key} of {target.name}, got {value!r}")
    top = part_points(target)
    if initiator.key == "manual_score" and top is not None and not 0 <= number <= top:
        raise ValueError(f"expected a {initiator.key} from 0 to {top:g} for {target.name}, got {value!r}")
    return value


def guard_hand_grades() -> None:
    """Refuse, where a grade is entered, a hand grade the grader would not count.

    Registers :func:`refuse_entered` on nbgrader's ``Grade.manual_score`` and ``Grade.extra_credit``
    in this process (once): the Formgrader's grade handler then fails with that ``ValueError`` when
    its page sends ``Infinity``, ``-Infinity``, ``NaN`` or a score outside the part's points, and
    the gradebook keeps the grade it had. Meant for the processes that serve the Formgrader (its
    configuration calls it); the readers of the gradebook refuse such grades in any case
    (:func:`hand_grade_problem`).
    """

    for column in (Grade.manual_score, Grade.extra_credit):
        if not sql_event.contains(column, "set", refuse_entered):
            sql_event.listen(column, "set", refuse_entered, retval=True)


def counted_score(grade) -> float:
    """The part's score with only what :func:`hand_grade_problem` accepts: a refused hand grade gives
    way to the autograded score (0 for a written part), refused extra credit counts nothing."""
    manual, extra = grade.manual_score, grade.extra_credit
    extra = extra if extra is not None and math.isfinite(extra) else 0.0
    if manual is not None and math.isfinite(manual) and 0 <= manual <= (part_points(grade) or 0):
        return manual + extra
    return grade.auto_score + extra if grade.auto_score is not None else 0.0


HAND_GRADES = "_hand_grades.json"  # in integrity/<student>/<assignment>/: the answers hand grades are for


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def answer_hashes(nb) -> dict[str, str]:
    """``{grade_id: SHA-256}`` of the answer each graded part of an autograded notebook grades.

    A part that is its own answer (a written answer: solution and graded) is hashed alone. An
    autograded part (a test cell) is hashed with the solution cells between the previous graded
    cell and it, the answer it checks: an override of its score belongs to that answer.
    """
    hashes, answers = {}, []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not isinstance(meta, dict):
            continue
        source = cell.get("source", "")
        if meta.get("solution") and not (meta.get("grade") or meta.get("task")):
            answers.append(source)
        elif (meta.get("grade") or meta.get("task")) and meta.get("grade_id"):
            parts = [source] if meta.get("solution") else [*answers, source]
            hashes[str(meta["grade_id"])] = _sha256("\0".join(parts))
            answers = []
    return hashes


def _notebook_hashes(layout: CourseLayout, assignment: str, student: str, notebook: str) -> dict[str, str]:
    """:func:`answer_hashes` of the autograded notebook as it is now ({} when there is none)."""

    path = layout.autograded(student, assignment) / f"{notebook}.ipynb"
    if not path.is_file():
        return {}
    return answer_hashes(nbformat.read(path, as_version=4))


def _record_path(layout: CourseLayout, assignment: str, student: str) -> Path:
    return layout.integrity / student / assignment / HAND_GRADES


def _read_record(layout: CourseLayout, assignment: str, student: str) -> dict:
    path = _record_path(layout, assignment, student)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        record = {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"expected the hand-grade record {path} to be JSON, got {exc}") from None
    record.setdefault("graded", {})
    record.setdefault("stages", {}).setdefault("hand_grades", [])
    return record


def _write_record(layout: CourseLayout, assignment: str, student: str, record: dict) -> None:
    path = _record_path(layout, assignment, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    record.update(student=student, assignment=assignment, notebook="(hand grades)")
    handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        json.dump(record, out, indent=1)
    os.replace(tmp, path)


def hand_grades_before_regrade(grader, layout: CourseLayout, assignment: str,
                               student: str) -> dict[tuple[str, str], dict]:
    """Before a re-grade: each part a grader has scored by hand, with the hash of the answer it is for.

    ``{(notebook, grade id): {"score", "comment", "hash"}}``. A score the record already holds
    keeps the record's hash (the grader has not touched it since); a new or changed score is
    for the answer the Formgrader shows now, the autograded notebook of the last run.
    """

    record = _read_record(layout, assignment, student)
    with grader.gradebook as gradebook:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:  # new, or withdrawn by a run that could not grade it: the record's grades
            return {tuple(key.split("/", 1)): {"score": part["score"], "comment": part.get("comment"),
                                               "hash": part.get("hash")}
                    for key, part in record["graded"].items() if "/" in key and part.get("score") is not None}
        scored = {}
        for nb in submission.notebooks:
            comments = {c.name: c.manual_comment for c in nb.comments}
            for g in nb.grades:
                if g.manual_score is not None and hand_grade_problem(g) is None:  # a refused one is not kept
                    scored[(nb.name, g.name)] = {"score": g.manual_score, "comment": comments.get(g.name)}
    shown: dict[str, dict[str, str]] = {}
    for (notebook, grade_id), part in scored.items():
        known = record["graded"].get(f"{notebook}/{grade_id}")
        if known and known.get("score") == part["score"]:
            part["hash"] = known.get("hash")
        else:
            if notebook not in shown:
                shown[notebook] = _notebook_hashes(layout, assignment, student, notebook)
            part["hash"] = shown[notebook].get(grade_id)
    record["graded"] = {f"{nb}/{gid}": {"score": p["score"], "hash": p["hash"], "comment": p["comment"]}
                        for (nb, gid), p in scored.items()}
    _write_record(layout, assignment, student, record)
    return scored


def keep_hand_grades(grader, layout: CourseLayout, assignment: str, student: str, before: dict) -> list[dict]:
    """After a re-grade: keep each hand grade whose answer is unchanged; reset the others.

    nbgrader keeps manual scores across a re-grade but marks them "needs manual grade" again.
    Here a score stays (and the part counts as graded) only while the SHA-256 of its answer
    equals the one recorded; otherwise the score is removed (not counted), the part needs a
    manual grade again (a written one; an override gives way to the autograded score), the old
    score and comment are put into the grader's comment, and a ``hand_grade_reset`` event is
    recorded. Returns the new events.
    """
    if not before:
        return []
    record = _read_record(layout, assignment, student)
    events, now = [], {}
    with grader.gradebook as gradebook:
        submission = gradebook.find_submission(assignment, student)
        for nb in submission.notebooks:
            comments = {c.name: c for c in nb.comments}
            for grade in nb.grades:
                part = before.get((nb.name, grade.name))
                if part is None:
                    continue
                if nb.name not in now:
                    now[nb.name] = _notebook_hashes(layout, assignment, student, nb.name)
                if part["hash"] is not None and now[nb.name].get(grade.name) == part["hash"]:
                    grade.manual_score = part["score"]
                    grade.needs_manual_grade = False
                    comment = comments.get(grade.name)
                    if comment is not None and comment.manual_comment is None and part.get("comment"):
                        comment.manual_comment = part["comment"]  # a withdrawn submission's comment, back
                    continue
                events.append(_reset(grade, comments.get(grade.name), part, nb.name))
                record["graded"].pop(f"{nb.name}/{grade.name}", None)
        gradebook.db.commit()
    record["stages"]["hand_grades"].extend(events)
    _write_record(layout, assignment, student, record)
    return events


def _reset(grade, comment, part: dict, notebook: str) -> dict:
    """Take a hand grade off a part whose answer changed; the grader sees the old score in the comment."""
    old = f"{part['score']:g}/{grade.max_score:g}"
    note = f"Previous grade {old} was for an earlier answer and is not counted; grade this answer again."
    if part.get("comment"):
        note += f" Its comment: {part['comment']}"
    grade.manual_score = None
    grade.needs_manual_grade = grade.auto_score is None
    if comment is not None:
        comment.manual_comment = note
    return event("hand_grade_reset", f"The answer graded {old} by hand changed (resubmitted); the grade is not "
                 "counted and the part "
                 + ("needs a manual grade again." if grade.needs_manual_grade else "keeps its autograded score."),
                 grade_id=grade.name, notebook_name=notebook, previous_score=part["score"],
                 previous_hash=part["hash"])
