"""Sphinx extension: the table of grading limits is built from ``rbtutor.grading.config``.

A page that contains

.. code-block:: markdown

    ```{limits-table}
    :step: sandbox
    ```

gets, in its place, a table of the grading options that
:class:`rbtutor.grading.config.GradingConfig` declares: one row an option, with its default,
the value this course sets (when it sets one, with the file and line it is set in), its unit, the
key that sets it (``[section] key`` of the course's ``course.toml``, see
:mod:`rbtutor.course.settings`; ``checks.yaml`` for the instant checks' settings) and its
description. ``:step:`` (one of :data:`rbtutor.grading.config.STEPS`) keeps the options of that
step only; without it every option is shown, with a column naming its step. Nothing in the table
is written by hand, so an option added, removed or changed in ``GradingConfig`` shows at the next
build, and a step that does not exist is a build error.

The column "this course" reads the course folder that holds the book (this repository's root):
its ``course.toml`` and its ``nbgrader_config.py``, as ``rbtutor config`` does. The environment of
the machine that builds the book is not read, so the book shows the same values wherever it is
built.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from rbtutor.grading.config import GIB, KIB, MIB, STEPS, option_rows

#: where the check service's options are set in ``exercises/checks.yaml``, by the name they are read under
CHECKS_DEFAULTS = "rbtutor.course.checks.core:DEFAULTS["
CHECKS_YAML_CONSTANTS = {"rbtutor.course.checks.core:STUCK_AFTER": "stuck_after"}

#: the cell "set with" of an option that only an edit of the code changes
CONSTANT = "a constant of the code"
#: the cell "this course" of an option the course's configuration leaves at its default
NOT_SET = "default"

_BINARY = ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB"))


def format_value(value, unit: str) -> str:
    """An option's value as the table shows it: thousands separated, bytes also in KiB/MiB/GiB."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = f"{value:,}"
        if unit == "bytes":
            for size, name in _BINARY:
                if value >= size and value % size == 0:
                    return f"{text} ({value // size} {name})"
        return text
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def set_with(row: dict) -> list[str]:
    """How a course changes the option of ``row``: its ``[section] key`` of ``course.toml`` when a course
    can set it, the key of ``exercises/checks.yaml`` for the instant checks' settings; [] for a constant."""
    ways = []
    if row["settable"]:
        section, _, key = row["key"].partition(".")
        ways.append(f"[{section}] {key}")
    for reader in row["reads"]:
        if reader.startswith(CHECKS_DEFAULTS):
            ways.append(f"checks.yaml: {reader[len(CHECKS_DEFAULTS):-1]}")
        elif reader in CHECKS_YAML_CONSTANTS:
            ways.append(f"checks.yaml: {CHECKS_YAML_CONSTANTS[reader]}")
    return ways


def table_rows(step: str | None = None, chosen: dict | None = None) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the table: every option of ``step`` (all steps when None).

    ``chosen`` is what a course's files set, ``{option: (value, source)}`` as
    :func:`rbtutor.course.settings.effective` gives it; the column "this course" shows that value and
    its source, and :data:`NOT_SET` for an option the course leaves at its default.
    """
    if step is not None and step not in STEPS:
        raise ValueError(f"expected step to be one of {', '.join(STEPS)}, got {step!r}")
    header = ["option", "default", "this course", "unit", "set with", "description"]
    if step is None:
        header.insert(1, "step")
    rows = []
    for row in option_rows(chosen=chosen or {}, environ={}):
        if step is not None and row["step"] != step:
            continue
        course = NOT_SET if row["source"] == "default" else \
            f"{format_value(row['value'], row['unit'])} ({row['source']})"
        cells = [row["name"], format_value(row["default"], row["unit"]), course, row["unit"],
                 ", ".join(set_with(row)) or CONSTANT, row["description"]]
        if step is None:
            cells.insert(1, row["step"])
        rows.append(cells)
    return header, rows


#: columns shown as code
_CODE_COLUMNS = {"option", "set with"}


def table_node(header: list[str], rows: list[list[str]], title: str) -> nodes.table:
    """A docutils table with a title, a header row and ``rows`` (option names and settings as code)."""
    table = nodes.table(classes=["limits-table"])
    table += nodes.title(text=title)
    group = nodes.tgroup(cols=len(header))
    table += group
    for _ in header:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    head += _row(header, header, code=False)
    body = nodes.tbody()
    group += body
    for cells in rows:
        body += _row(header, cells, code=True)
    return table


def _row(header: list[str], cells: list[str], code: bool) -> nodes.row:
    row = nodes.row()
    for name, text in zip(header, cells, strict=True):
        entry = nodes.entry()
        paragraph = nodes.paragraph()
        if code and name in _CODE_COLUMNS and text != CONSTANT:
            for i, part in enumerate(text.split(", ")):
                if i:
                    paragraph += nodes.Text(", ")
                paragraph += nodes.literal(text=part)
        else:
            paragraph += nodes.Text(text)
        entry += paragraph
        row += entry
    return row


def course_choices(root: Path) -> dict:
    """What the course folder ``root`` sets, ``{option: (value, source)}``, read as ``rbtutor config`` reads it."""
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.options import course_config
    from rbtutor.course.settings import effective, load_settings

    layout = CourseLayout(root)
    return effective(load_settings(layout.root), course_config(layout), layout.config)


class LimitsTable(SphinxDirective):
    """``{limits-table}`` with an optional ``:step:``: the grading options as a table."""

    has_content = False
    option_spec: ClassVar[dict] = {"step": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        step = self.options.get("step")
        try:
            header, rows = table_rows(step, chosen=_course_choices(self.env.app))
        except ValueError as exc:
            raise self.error(str(exc)) from exc
        if not rows:
            raise self.error(f"no grading option has the step {step!r}")
        title = (f"Grading options of the step {step}" if step else "Every grading option") + \
            " (rbtutor.grading.config)"
        return [table_node(header, rows, title)]


def _course_choices(app: Sphinx) -> dict:
    """What the course folder holding the book sets (its root, or the nearest folder above the pages
    that has ``nbgrader_config.py``), read once a build."""
    if not hasattr(app, "_rbtutor_course_choices"):
        from rbtutor.course.layout import CourseError, CourseLayout
        from rbtutor.course.settings import SettingsError

        try:
            root = CourseLayout.find(app.srcdir).root
            app._rbtutor_course_choices = course_choices(root)
        except (CourseError, SettingsError) as exc:
            raise ExtensionError(f"limits_table: cannot read the course that holds the book: {exc}") from exc
    return app._rbtutor_course_choices


def setup(app: Sphinx) -> dict:
    app.add_directive("limits-table", LimitsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
