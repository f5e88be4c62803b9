"""The fetch hook: each student's fetched notebooks carry that student's own numbers.

nbgrader releases one notebook for the whole class. :class:`PersonalFetchAssignment`
is nbgrader's default fetch (``ExchangeFetchAssignment``) followed by one step: in
every notebook the fetch has just copied, the locked ``problem_data`` cell is
rewritten with the fetching student's variant (:func:`rbtutor.problems.variants.variant`),
rendered by :func:`rbtutor.course.render.data_source` as the instructor's cell is, and the
markdown cells that quote the numbers are filled in with the same variant
(:func:`rbtutor.course.render.fill_markdown`).
The cell keeps its metadata (grade id, locked flag); only its checksum is recomputed
for the new source, so that nbgrader's Validate, which compares a locked cell's
stored checksum with its source, still sees an untouched cell. The grader puts the
same source back (:class:`rbtutor.grading.restore.RestoreCells`), whatever the
student did to the cell.

Configured for students (e.g. in the hub's system-wide nbgrader config)::

    c.ExchangeFactory.fetch_assignment = "rbtutor.course.personal.PersonalFetchAssignment"
    c.PersonalFetchAssignment.data_file = "/srv/course/exercises/problem_data.yaml"

``data_file`` is the course data (readable by students); variants apply only when it
switches them on (``variants: {per_student: true}``), otherwise the hook changes
nothing. The student is ``CourseDirectory.student_id`` when one is given, else the
name nbgrader's own ``submit`` files the submission under (``nbgrader.utils.get_username``:
the Unix user name, or ``JUPYTERHUB_USER`` in a ``jovyan`` container), so the numbers
fetched and the key graded belong to the same id. The variant is deterministic, so a
re-fetch, a restart or another machine give the same numbers. Notebooks that were
already there before the fetch (``replace_missing_files``) are left alone.

With ``due_dates_file`` (the course's ``exercises/due_dates.yaml``) the opening cell of each
fetched notebook also gives the student their own due date, their extension when they have
one (:func:`rbtutor.course.late.show_due_date`); the file names every extended student, so
it is for a fetch that runs with the instructor's rights (the hub's fetch service), not for
a file every student can read.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import nbformat
from nbgrader.exchange.default import ExchangeFetchAssignment
from nbgrader.utils import compute_checksum, get_username
from traitlets import Unicode

from ..grading.protocol import DATA_ID
from ..problems.variants import load_course_data, per_student, variant
from .late import own_due_date, show_due_date
from .render import data_source, fill_markdown

_HEADER = re.compile(r"#\s*Problem\s+(\d+)\s+data\b")


def student_id_of(coursedir) -> str:
    """The id the fetching student's submissions are filed under (see the module docstring)."""

    given = getattr(coursedir, "student_id", "*") or "*"
    return given if given != "*" else get_username()


def personalise_notebook(nb, data: dict | None, student_id: str, name: str = "the notebook",
                         due: tuple[dt.datetime | None, bool] | None = None) -> bool:
    """Rewrite the ``problem_data`` cells of the notebook node ``nb`` with ``student_id``'s variant, in place.

    ``data`` None leaves the numbers alone. ``due``, ``(own due date, whether extended)``,
    puts that date into the opening cell (:func:`rbtutor.course.late.show_due_date`).

    Returns whether the notebook had such a cell (and was rewritten). The problem number
    comes from the cell's own first line (``# Problem N data ...``, as rendered); ``name``
    names the notebook in the error message.

    Raises
    ------
    ValueError
        If the data cell does not say which problem it belongs to.
    """


    done = False
    own = variant(data, student_id) if data is not None else {}
    for cell in nb.cells if data is not None else ():
        meta = cell.get("metadata", {}).get("nbgrader")
        if not isinstance(meta, dict) or meta.get("grade_id") != DATA_ID:
            continue
        match = _HEADER.match(cell.source)
        if match is None:
            raise ValueError(f"{name}: the {DATA_ID} cell does not start with '# Problem N data'")
        cell.source = data_source(int(match.group(1)), own)
        if "checksum" in meta:
            meta["checksum"] = compute_checksum(cell)
        done = True
    if done:
        fill_markdown(nb, own)  # the text that quotes the numbers quotes the student's own
    if due is not None and due[0] is not None:
        done = show_due_date(nb, *due) or done
    return done


def personalise(path: Path, data: dict | None, student_id: str,
                due: tuple[dt.datetime | None, bool] | None = None) -> bool:
    """:func:`personalise_notebook` on the notebook file ``path``, written back when it changed."""

    nb = nbformat.read(path, as_version=4)
    done = personalise_notebook(nb, data, student_id, name=str(path), due=due)
    if done:
        nbformat.write(nb, path)
    return done


class PersonalFetchAssignment(ExchangeFetchAssignment):
    """nbgrader's fetch, then the data cells rewritten with the student's own variant."""

    data_file = Unicode("", help="the course's problem data (YAML merged over the reference data, with "
                        "'variants: {per_student: true}' to switch variants on); empty: the reference data, "
                        "without variants").tag(config=True)
    due_dates_file = Unicode("", help="the course's exercises/due_dates.yaml: the opening cell then gives the "
                             "student their own due date; empty: no due date shown").tag(config=True)

    def copy_files(self):
        before = set(self._notebooks()) if os.path.isdir(self.dest_path) else set()
        super().copy_files()

        data = load_course_data(self.data_file or None)
        data = data if per_student(data) else None
        if data is None and not self.due_dates_file:
            return
        student = student_id_of(self.coursedir)
        due = own_due_date(Path(self.due_dates_file), self.coursedir.assignment_id, student) \
            if self.due_dates_file else None
        for path in sorted(set(self._notebooks()) - before):
            if personalise(path, data, student, due=due):
                self.log.info("Data cell and due date of %s: those of %s", path.name, student)

    def _notebooks(self):
        return [p for p in Path(self.dest_path).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
