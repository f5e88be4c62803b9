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
split, and still is; those of :mod:`.service` are loaded on first use, so importing the
package (or :mod:`.core`) loads no web server.
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
from .stats import PartStats, statistics, statistics_csv, statistics_html

# the names of .service, imported on first use by __getattr__ below
_LAZY_NAMES = ("main", "make_app", "service_entry")

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


def __getattr__(name: str):
    """``main``, ``make_app`` and ``service_entry``, imported from :mod:`.service` when first asked for.

    :mod:`.service` imports tornado and ``jupyterhub.services.auth`` (2.3 to 3.3 s measured
    with ``python -X importtime`` on the course machine); the core's users (tests, the oracle)
    import this package without paying for them.
    """
    if name in _LAZY_NAMES:
        # deferred on purpose: .service brings in tornado and jupyterhub, which the core must not
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
