"""Step: feedback, for the grader only. The model answer and rubric beside each part graded by hand.

:class:`GraderNotes` runs in the grading process after :class:`~.sanitize.SanitizeNotebook`
and puts, after each part graded by hand, a cell from the instructor's source notebook with
what lies between its solution markers (:func:`solution_text`, :func:`grader_note`), so the
Formgrader shows it. :class:`DueDateNote` puts the student's own due date (an extension
included) and their submission time at the top, since the Formgrader itself shows only the
assignment's due date. :func:`is_grader_note` tells such a cell; :func:`~.feedback.render_feedback`
and :class:`DropGraderNotes` (for nbgrader's own feedback) leave it out of every page a
student sees.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from nbformat.v4 import new_markdown_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from .mathml import cell_source, prerender_math
from .sources import source_notebook

__all__ = ["GRADER_NOTE", "DropGraderNotes", "DueDateNote", "GraderNotes", "due_date_note", "grader_note",
           "is_grader_note", "solution_text"]

#: ``cell.metadata.rbtutor.grader_note``: a cell for the grader only (model answer and rubric), never
#: on a feedback page
GRADER_NOTE = "grader_note"
# The note's frame: an inline style, which the sanitiser removes from anything a student wrote, so
# that a student's cell cannot pass itself off as the grader's note.
_NOTE_FRAME = ('<div class="rbtutor-grader-note" role="note" aria-label="For the grader" style="border-left: '
               '6px solid #9a4d00; background: #fff3e0; padding: 0.3em 1em; margin: 0.4em 0 1em">{}</div>')


def solution_text(source: str) -> str:
    """What the instructor wrote between ``BEGIN SOLUTION`` and ``END SOLUTION`` (the whole cell
    when it has no such markers, as nbgrader then hides the whole cell from students)."""
    kept, inside, marked = [], False, False
    for line in source.splitlines():
        if "BEGIN SOLUTION" in line:
            inside = marked = True
        elif "END SOLUTION" in line:
            inside = False
        elif inside:
            kept.append(line)
    return "\n".join(kept).strip() if marked else source.strip()


def grader_note(cell, grade_id: str, language: str = "python"):
    """A cell that shows the grader the source ``cell``'s solution region (for a written part: the
    model answer and the rubric): sanitised HTML with MathML in an inline-styled frame, marked
    ``metadata.rbtutor.grader_note`` so that feedback pages leave it out."""

    html_source = _note_html(cell_source(cell), cell.get("cell_type"), grade_id, language)
    return new_markdown_cell(html_source, metadata={"rbtutor": {GRADER_NOTE: True}})


@lru_cache(maxsize=512)
def _note_html(source: str, kind: str, grade_id: str, language: str) -> str:
    """The note's HTML, made once per source cell (every student's notebook gets the same)."""

    text = solution_text(source)
    if kind == "code":
        text = f"```{language}\n{text}\n```"
    # <strong>, not **: the first line is inside the frame's HTML block, where Markdown is not read
    note = new_markdown_cell(f"<strong>For the grader, {grade_id}</strong> (from the source notebook; students do not "
                             f"see this):\n\n{text}")
    prerender_math(new_notebook(cells=[note]))
    return _NOTE_FRAME.format(note.source)


def is_grader_note(cell) -> bool:
    meta = cell.get("metadata", {}).get("rbtutor")
    return isinstance(meta, dict) and meta.get(GRADER_NOTE) is True


class GraderNotes(NbGraderPreprocessor):
    """The model answer and rubric in view where a part is graded by hand (the Formgrader).

    Placed after :class:`SanitizeNotebook`: after each part graded by hand (a cell nbgrader marks
    both solution and graded, such as a written answer), a cell from the instructor's source
    notebook ``<source_directory>/<assignment>/<notebook>.ipynb`` with what lies between its
    solution markers (:func:`grader_note`). A marker a student put on a cell of theirs is removed
    first, so only these notes carry it. The notebook stored in ``autograded/`` holds them;
    :func:`render_feedback` leaves them out of every feedback page.
    """

    source_directory = Unicode("", help="the instructor's source folder (CourseDirectory's "
                               "source_directory under its root); empty: no notes").tag(config=True)

    def preprocess(self, nb, resources):
        for cell in nb.cells:  # the submission's own cells: never notes, whatever their metadata says
            meta = cell.get("metadata", {}).get("rbtutor")
            if isinstance(meta, dict):
                meta.pop(GRADER_NOTE, None)
        if not self.source_directory:
            return nb, resources
        info = resources.get("nbgrader", {})
        path = Path(self.source_directory) / str(info.get("assignment")) / f"{info.get('notebook')}.ipynb"
        if not path.is_file():
            return nb, resources
        source = {nbgrader_metadata(c).get("grade_id"): c for c in source_notebook(path).cells
                  if nbgrader_metadata(c).get("grade_id")}
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            meta = nbgrader_metadata(cell)
            original = source.get(meta.get("grade_id"))
            if meta.get("grade") and meta.get("solution") and original is not None:
                cells.append(grader_note(original, meta["grade_id"]))
        nb.cells = cells
        return nb, resources


def _utc_text(when) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _duration_text(span) -> str:
    """A timedelta as a person writes it, to the minute: ``3 days``, ``1 day 2 h 5 min``, ``40 min``."""
    minutes = int(span.total_seconds() // 60)
    if minutes < 1:
        return "less than a minute"
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days} day{'s' if days != 1 else ''}"] if days else []
    parts += [f"{hours} h"] if hours else []
    parts += [f"{minutes} min"] if minutes else []
    return " ".join(parts)


def due_date_note(due, extension, submitted):
    """The grader's note of one submission's own due date: ``due`` (the class's date plus
    ``extension``, a timedelta or None) and the submission time ``submitted``, all naive UTC as
    the gradebook keeps them; on time, or late by how long."""

    text = f"<strong>For the grader</strong>: due for this student {_utc_text(due)}"
    if extension:
        text += f", an extension of {_duration_text(extension)} on the class's {_utc_text(due - extension)}"
    if submitted is not None:
        late = submitted - due
        when = f"late by {_duration_text(late)}" if late.total_seconds() > 0 else "on time"
        text += f"; submitted {_utc_text(submitted)}, {when}"
    return new_markdown_cell(_NOTE_FRAME.format(text + "."), metadata={"rbtutor": {GRADER_NOTE: True}})


class DueDateNote(NbGraderPreprocessor):
    """The student's own due date and submission time, as a grader's note atop the notebook.

    Read from the gradebook (the assignment's due date plus the submission's ``extension``,
    written there from ``exercises/due_dates.yaml`` by :func:`rbtutor.course.late.set_due_dates`
    before each grading run), so every run shows the dates in force. Nothing is added when the
    assignment has no due date.
    """

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        with Gradebook(info["db_url"]) as gradebook:
            submission = gradebook.find_submission(info["assignment"], info["student"])
            due, extension, submitted = submission.duedate, submission.extension, submission.timestamp
        if due is not None:
            nb.cells.insert(0, due_date_note(due, extension, submitted))
        return nb, resources

class DropGraderNotes(NbGraderPreprocessor):
    """The grader's notes taken out: for nbgrader's own ``generate_feedback`` (the Formgrader's
    "Generate Feedback" button), so that not even that path shows them to students."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not is_grader_note(cell)]
        return nb, resources


def nbgrader_metadata(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}
