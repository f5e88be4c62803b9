"""Step: instant checks. A JupyterHub service that judges one answer while the student works.

The package, in the order a request meets it:

1. :mod:`.core`: the settings of ``exercises/checks.yaml``, the request body parsed,
   the limit of checks an hour, the attempt log ``checks/attempts.jsonl``, the verdict of
   :func:`rbtutor.grading.judge.judge` against the student's own key, and the guard that
   refuses a reply quoting the reference value. No web server: :class:`CheckCore` is
   what tests and the oracle drive directly.
2. :mod:`.service`: the tornado application the hub starts (``python -m
   rbtutor.course.checks``, see :mod:`.__main__`), its hub entry
   (:func:`service_entry`), the hub's authentication and the HTTP statuses of refusals.
3. :mod:`.stats`: per answer id, the checks, passes, diagnoses and stuck students read
   from the log, as the instructors' HTML page or CSV.

Every name below was importable from ``rbtutor.course.checks`` before the package was
split, and still is.
"""

from .core import (
    DEFAULTS,
    DRAIN_LIMIT,
    INSTRUCTOR_GROUP,
    KEY_CACHE,
    LOG_FILE,
    MAX_BODY,
    SERVICE_NAME,
    SETTINGS_FILE,
    STUCK_AFTER,
    WINDOW,
    AttemptLog,
    CheckCore,
    CheckRefused,
    assignment_of,
    parse_request,
    printed_forms,
    read_settings,
    reveals,
)
from .service import main, make_app, service_entry
from .stats import PartStats, statistics, statistics_csv, statistics_html

__all__ = [
    "DEFAULTS",
    "DRAIN_LIMIT",
    "INSTRUCTOR_GROUP",
    "KEY_CACHE",
    "LOG_FILE",
    "MAX_BODY",
    "SERVICE_NAME",
    "SETTINGS_FILE",
    "STUCK_AFTER",
    "WINDOW",
    "AttemptLog",
    "CheckCore",
    "CheckRefused",
    "PartStats",
    "assignment_of",
    "main",
    "make_app",
    "parse_request",
    "printed_forms",
    "read_settings",
    "reveals",
    "service_entry",
    "statistics",
    "statistics_csv",
    "statistics_html",
]
