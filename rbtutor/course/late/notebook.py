"""Late: the due date shown in the student's notebook (a line under its first heading)."""

from __future__ import annotations

import datetime as dt

#: how the opening cell of a student's fetched notebook starts its due-date line
DUE_LINE = "**Due:**"


def due_line(when: dt.datetime, extended: bool) -> str:
    """The line of the opening cell that gives the student their own due date."""
    stamp = when.strftime("%A %d %B %Y, %H:%M") + f" ({when.strftime('%z')[:3]}:{when.strftime('%z')[3:]})"
    return f"{DUE_LINE} {stamp}" + (", your extended due date." if extended else ".")


def show_due_date(nb, when: dt.datetime | None, extended: bool = False) -> bool:
    """Put ``when`` into the opening markdown cell of ``nb`` (after its heading), in place.

    A due-date line already there is replaced (or removed when ``when`` is None). Returns whether
    the cell changed. The cell is the notebook's first markdown cell; it carries no nbgrader
    checksum, so Validate is unaffected.
    """
    cell = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if cell is None:
        return False
    lines = cell.source.split("\n")
    for k, line in enumerate(lines):
        if line.startswith(DUE_LINE):  # an earlier due-date line goes, with the blank line after it
            del lines[k:k + (2 if lines[k + 1:k + 2] == [""] else 1)]
            break
    if when is not None:
        heading = lines[0].startswith("#")
        at = (2 if lines[1:2] == [""] else 1) if heading else 0
        lines[at:at] = [due_line(when, extended), ""]
    source = "\n".join(lines)
    changed = source != cell.source
    cell.source = source
    return changed
