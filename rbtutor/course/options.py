"""``python -m rbtutor.course config``: the grading options, with the values a course sets.

The options are declared in :mod:`rbtutor.grading.config`. This command loads the course's
``nbgrader_config.py`` as the grading commands do (the same loader as
:func:`rbtutor.course.nbgrader.api`), so an option the course sets there (for example
``c.BoundedExecute.notebook_timeout = 300``) shows its value and where it was set. Outside a
course folder it prints the defaults and says so.
"""

from __future__ import annotations

import json
import sys

from traitlets.config.loader import PyFileConfigLoader

from ..grading.config import format_table, option_rows
from .layout import CourseLayout


def course_config(layout: CourseLayout):
    """The traitlets configuration the course's ``nbgrader_config.py`` builds."""
    return PyFileConfigLoader(layout.config.name, path=str(layout.root)).load_config()


def run_config(layout: CourseLayout | None, as_json: bool = False, out=None) -> int:
    """Print every grading option (a table, or JSON with ``as_json``); ``layout`` None: the defaults."""
    out = sys.stdout if out is None else out
    config = None if layout is None else course_config(layout)
    rows = option_rows(config)
    course = None if layout is None else str(layout.root)
    if as_json:
        json.dump({"course": course, "options": rows}, out, indent=1)
        out.write("\n")
        return 0
    if course is None:
        out.write("No course folder here (no nbgrader_config.py in this folder or above it): "
                  "the defaults, and the values set in the environment.\n\n")
    else:
        out.write(f"Grading options of the course at {course}; 'set in' names what its "
                  "nbgrader_config.py or the environment sets.\n\n")
    out.write(format_table(rows) + "\n")
    return 0
