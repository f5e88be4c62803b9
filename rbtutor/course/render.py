"""The course's renderer: the locked cells of the assignment notebooks that come from the course.

Two locked cells of every source notebook in ``exercises/problemNN/`` are written
here, never by hand:

* ``course_helpers`` defines ``check_form`` (shape, finiteness and structure of an
  answer, in the student's kernel, for Validate) and ``hand_in`` (passes the value
  to the grader as a ``application/vnd.rbtutor.answer+json`` output; nothing is
  judged in the student's kernel), and the ``AUTOGRADING`` flag;
  The helper cell also carries ``ANSWER_FORMS``, the form of each answer of its problem
  (:func:`answer_forms`), so that ``check()`` refuses a value of the wrong form in the
  student's kernel without spending a check;
* ``problem_data`` holds the numbers of the problem, from :mod:`rbtutor.problems`.

Markdown cells that quote the numbers (the situation of each problem) are written from
a template too: the cell's metadata ``rbtutor.text`` holds the text with placeholders
``[[path|format]]`` (:func:`fill_text`), and the cell's source is that text filled in from
the course data. To write or change such a cell, put the placeholders in its source and
run ``render``: a source with placeholders becomes the cell's template.

``python -m rbtutor.course render [--data FILE]`` rewrites both cells in
every notebook, so that the notebooks and the grader's reference values come
from the same data. With ``--data`` the merged data is also saved to
``exercises/problem_data.yaml``, which the grader reads; without it that file is
removed and the reference data applies.
"""

from __future__ import annotations

import functools
import json
import re
from importlib.resources import files
from pathlib import Path

import numpy as np
import yaml

from ..grading.protocol import DATA_ID, HELPERS_ID
from ..problems import answer_key
from ..problems.data_cells import DATA_CELLS, data_source, lookup
from ..problems.question_bank import STATEMENTS, statement_template
from ..problems.variants import load_course_data, problem_data

CELL_MARKER = "# --- notebook cell ---\n"


FORMS_LINE = "ANSWER_FORMS = {}  # the form of each answer of this notebook; written by `rbtutor render`\n"


def answer_forms(key: dict) -> dict:
    """``{answer id: form}`` of an answer key, for :data:`ANSWER_FORMS` and the check service.

    A form is ``"text"``, ``"quaternion"`` (4 numbers of norm 1), ``"rotation"`` (a 3 x 3 matrix,
    orthonormal with determinant +1) or the squeezed shape as a list (``[]`` for one number).
    """
    forms = {}
    for answer_id, answer in key.items():
        if answer.kind == "text":
            forms[answer_id] = "text"
            continue
        value = np.squeeze(np.asarray(answer.value, dtype=float))
        if answer.quaternion:
            forms[answer_id] = "quaternion"
        elif value.shape == (3, 3) and np.allclose(value.T @ value, np.eye(3)) and np.linalg.det(value) > 0:
            forms[answer_id] = "rotation"
        else:
            forms[answer_id] = list(value.shape)
    return forms


def helpers_source(problem: int | None = None) -> str:
    """Source of the locked ``course_helpers`` cell: :mod:`rbtutor.grading.student` below its marker,
    with ``ANSWER_FORMS`` filled in for the answers of ``problem`` (of every problem when None)."""

    text = files("rbtutor.grading").joinpath("student.py").read_text(encoding="utf-8")
    cell = text.split(CELL_MARKER, 1)[1].rstrip("\n")
    forms = _forms()
    if problem is not None:
        forms = {i: f for i, f in forms.items() if i.startswith(f"p{problem}.")}
    lines = "".join(f"    {json.dumps(i)}: {json.dumps(f)},\n" for i, f in forms.items())
    if FORMS_LINE not in cell:
        raise ValueError(f"rbtutor/grading/student.py: expected the line {FORMS_LINE.strip()!r} below its marker")
    return cell.replace(FORMS_LINE, FORMS_LINE.replace("{}", "{\n" + lines + "}"))


@functools.lru_cache(maxsize=1)
def _forms() -> dict:
    # the forms do not depend on the numbers of the data, so the reference key gives them for every variant
    return answer_forms(answer_key())


#: a number of the course data in a markdown cell's template: [[dotted.path|format]]
PLACEHOLDER = re.compile(r"\[\[([A-Za-z_][\w.]*)\|([^\]|]+)\]\]")
TEMPLATE_KEY = "rbtutor"  # the cell metadata that holds the template, as {"text": ...}


def format_number(value: float, spec: str) -> str:
    r"""``value`` as a template's ``spec`` asks, for text inside or outside LaTeX math.

    ``3s``: three significant figures, trailing zeros kept (``0.050``); ``tex2``: two
    significant figures as LaTeX scientific notation (``2.5\times10^{7}``); any other spec
    is a Python format spec (``.1f``, ``g``).

    >>> format_number(0.05, "2s"), format_number(-1.8e5, "tex3"), format_number(21.0, ".1f")
    ('0.050', '-1.80\\times10^{5}', '21.0')
    """
    value = float(value)
    if spec.endswith("s") and spec[:-1].isdigit():
        figures = int(spec[:-1])
        if value == 0:
            return "0"
        _, exponent = f"{value:.{figures - 1}e}".split("e")
        decimals = max(figures - 1 - int(exponent), 0)
        return f"{value:.{decimals}f}"
    if spec.startswith("tex") and spec[3:].isdigit():
        mantissa, exponent = f"{value:.{int(spec[3:]) - 1}e}".split("e")
        return f"{mantissa}\\times10^{{{int(exponent)}}}"
    return format(value, spec)


def fill_text(template: str, data: dict) -> str:
    """A template's text with every ``[[path|format]]`` replaced by that number of ``data``.

    Raises
    ------
    ValueError
        If a placeholder names no number of the data.
    """
    def number(match: re.Match) -> str:
        try:
            return format_number(lookup(data, match.group(1)), match.group(2))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"placeholder {match.group(0)}: {exc!r}") from None

    return PLACEHOLDER.sub(number, template)


def question_template(number: int, data: dict) -> str:
    """The template of a quiz cell that asks question ``number`` of the bank: its label and statement."""
    if number not in STATEMENTS:
        raise ValueError(f"expected a question of the quiz ({sorted(STATEMENTS)}), got {number}")
    return f"**Q{number}.** " + statement_template(number, data["quiz"])


def fill_markdown(nb, data: dict, adopt: bool = False) -> bool:
    """Fill the templated markdown cells of ``nb`` from ``data``; return whether a cell changed.

    With ``adopt``, a markdown cell whose source has placeholders first becomes a template.
    A cell whose metadata names a question of the question bank (``rbtutor.question``, the
    quiz's) takes its template from :func:`rbtutor.problems.question_bank.statement_template`,
    so that the quiz and the book's bank show one text.
    """
    changed = False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        question = cell.metadata.get(TEMPLATE_KEY, {}).get("question")
        if question is not None:
            template = question_template(int(question), data)
            changed = changed or cell.metadata[TEMPLATE_KEY].get("text") != template
            cell.metadata[TEMPLATE_KEY]["text"] = template
        elif adopt and PLACEHOLDER.search(cell.source):
            cell.metadata[TEMPLATE_KEY] = {"text": cell.source}
            changed = True
        template = cell.metadata.get(TEMPLATE_KEY, {}).get("text")
        if template is not None:
            text = fill_text(template, data)
            if cell.source != text:
                cell.source, changed = text, True
    return changed


def notebook_path(problem: int, exercises: Path) -> Path:
    return exercises / f"problem{problem:02d}" / f"problem{problem:02d}.ipynb"


def render(data: dict, exercises: Path) -> list[Path]:
    """Rewrite the helper and data cells of every source notebook; return the notebooks changed."""
    # deferred: nbformat takes 1743 ms to import (-X importtime, 2026-12-06); only rendering needs it
    import nbformat

    changed = []
    for problem in DATA_CELLS:
        path = notebook_path(problem, exercises)
        if not path.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        wanted = {HELPERS_ID: helpers_source(problem), DATA_ID: data_source(problem, data)}
        found = set()
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in wanted:
                found.add(grade_id)
                if cell.source != wanted[grade_id]:
                    cell.source = wanted[grade_id]
                    changed.append(path)
                if grade_id == HELPERS_ID and not cell.metadata.get("jupyter", {}).get("source_hidden"):
                    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True  # shown collapsed
                    changed.append(path)
        missing = set(wanted) - found
        if missing:
            raise ValueError(f"{path}: expected locked cells with grade_id {sorted(missing)}")
        try:
            if fill_markdown(nb, data, adopt=True):
                changed.append(path)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if path in changed:
            nbformat.write(nb, path)
    return sorted(set(changed))


def render_course(layout, data_path: str | None = None) -> list[Path]:
    """Render the course's notebooks from the reference data, or from ``data_path`` merged over it.

    With ``data_path`` the merged data is saved to ``layout.data_file``, which the grader then
    reads; without it that file is removed and the reference data applies.
    """

    # a data file may carry a `variants` section (per-student switch, salt): it is kept
    # in the saved course data, and the source notebooks show the course's own numbers

    data = load_course_data(data_path)
    if data_path:
        layout.data_file.write_text(f"# Generated by `python -m rbtutor.course render --data {data_path}`.\n"
                                    + yaml.safe_dump(data, sort_keys=False))
    elif layout.data_file.exists():
        layout.data_file.unlink()
    return render(problem_data(data), layout.exercises)
