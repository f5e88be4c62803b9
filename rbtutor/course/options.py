"""``rbtutor config``: every grading option, its value in this course and where that value came from.

The options are declared in :mod:`rbtutor.grading.config`; a course sets them in ``course.toml``
(:mod:`rbtutor.course.settings`). This command reads that file and loads the course's
``nbgrader_config.py`` as the grading commands do (:func:`rbtutor.course.nbgrader.load_course_config`),
and prints for each option its effective value, default, unit, source (``default``,
``course.toml:LINE``, ``nbgrader_config.py:LINE``), the key that sets it in ``course.toml`` (``-`` for
a constant of the code) and its description; then the deployment paths read from the environment
(``$RBTUTOR_EXCHANGE``, ``$RBTUTOR_GRADEBOOK``, with a password in a URL hidden). A bad
``course.toml`` prints its one-line error and exits 2. Outside a course folder it prints the defaults
and says so. The course's LMS (``[lms]``, :mod:`rbtutor.course.lms_settings`) comes last.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import urlsplit, urlunsplit

from ..grading.config import format_table, option_rows
from .layout import CourseLayout
from .lms_settings import lms_rows
from .settings import SettingsError, effective, load_settings

#: the deployment variables a course still reads from the environment: (variable, what it names)
DEPLOYMENT = (("RBTUTOR_EXCHANGE", "the exchange folder"), ("RBTUTOR_GRADEBOOK", "the gradebook's database URL"))


def course_config(layout: CourseLayout):
    """The traitlets configuration the course's ``nbgrader_config.py`` builds, checked against ``course.toml``."""
    # deferred: it loads nbgrader_config.py, which imports nbgrader (3.1 s, python -X importtime 2026-12-06)
    from .nbgrader import load_course_config

    return load_course_config(layout)


def deployment_rows(layout: CourseLayout | None, environ=None) -> list[dict]:
    """The deployment paths: variable, value (a URL's password shown as ``***``), source, description."""
    environ = os.environ if environ is None else environ
    values = {"RBTUTOR_EXCHANGE": None if layout is None else str(layout.exchange),
              "RBTUTOR_GRADEBOOK": None if layout is None else layout.gradebook_url}
    rows = []
    for name, what in DEPLOYMENT:
        value = environ[name] if environ.get(name) else values[name]
        source = f"${name}" if environ.get(name) else "default"
        rows.append({"variable": name, "value": _without_password(value), "source": source, "description": what})
    return rows


def _without_password(value: str | None) -> str | None:
    if value is None or "://" not in value:
        return value
    parts = urlsplit(value)
    if parts.password is None:
        return value
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def run_config(layout: CourseLayout | None, as_json: bool = False, out=None, err=None) -> int:
    """Print every grading option (a table, or JSON with ``as_json``); ``layout`` None: the defaults.

    Returns 0, or 2 after printing the one-line :class:`~rbtutor.course.settings.SettingsError` to ``err``.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    environ = dict(os.environ)  # as the user left it: loading the course sets the sandbox's variables
    chosen, lms = {}, None
    if layout is not None:
        try:
            settings = load_settings(layout.root)
            config = course_config(layout)
        except SettingsError as exc:
            err.write(f"{exc}\n")
            return 2
        chosen, lms = effective(settings, config, layout.config), settings.lms
    rows = option_rows(chosen=chosen, environ=environ)
    deployment = deployment_rows(layout, environ)
    course = None if layout is None else str(layout.root)
    if as_json:
        json.dump({"course": course, "options": rows, "deployment": deployment,
                   "lms": lms.as_dict() if lms else None}, out, indent=1)
        out.write("\n")
        return 0
    if course is None:
        out.write("No course folder here (no nbgrader_config.py in this folder or above it): the defaults.\n\n")
    else:
        out.write(f"Grading options of the course at {course}; 'source' says where each value comes from, "
                  "'course.toml' the key that sets it there (-: a constant of the code).\n\n")
    out.write(format_table(rows) + "\n\nDeployment, from the environment:\n")
    for row in deployment:
        out.write(f"  {row['variable']:<18} {row['value'] or '-'}  ({row['source']}; {row['description']})\n")
    out.write("\n" + "\n".join(lms_rows(lms)) + "\n")
    for row in rows:
        if row["ignored_env"]:
            out.write(f"note: ${row['ignored_env']} is set here but a grading run replaces it by {row['key']} "
                      "of course.toml (or its default)\n")
    return 0
