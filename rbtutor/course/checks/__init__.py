"""Step: instant checks. A JupyterHub service that judges one answer while the student works.

The package, in the order a request meets it:

1. :mod:`.core`: the settings of ``exercises/checks.yaml``, the request body parsed,
   the limit of checks an hour, the attempt log ``checks/attempts.jsonl`` (judged checks,
   rotated under a size cap), the verdict of :func:`rbtutor.grading.judge.judge` against
   the student's own key (:class:`Judge`), and the guard that refuses a reply quoting the
   reference value. No web server: :class:`CheckCore` is what tests and the oracle drive
   directly.
2. :mod:`.store`: the counts in ``checks/summary.sqlite``: the limit window, the tallies,
   the refused checks per student, answer id and hour.
3. :mod:`.pool`: the worker processes that judge, so that the event loop never does.
4. :mod:`.service`: the tornado application the hub starts (``python -m
   rbtutor.course.checks``, see :mod:`.__main__`), its hub entry
   (:func:`service_entry`), the hub's authentication, the HTTP statuses of refusals, and
   the bounds on connections (timeouts, caps per user and in all).
5. :mod:`.stats`: per answer id, the checks, passes, refusals and who sent them,
   diagnoses and stuck students, read from the store, as the instructors' HTML page or CSV.

Every name below was importable from ``rbtutor.course.checks`` before the package was
split, and still is; those of :mod:`.service` are loaded on first use, so importing the
package (or :mod:`.core`) loads no web server.
"""

from .attempt_log import LOG_KEEP, LOG_MAX_BYTES, AttemptLog
from .core import (
    DEFAULTS,
    DRAIN_LIMIT,
    INSTRUCTOR_GROUP,
    KEY_CACHE,
    LOG_FILE,
    MAX_BODY,
    SERVICE_NAME,
    SETTINGS_FILE,
    STORE_FILE,
    STUCK_AFTER,
    WINDOW,
    CheckCore,
    CheckRefused,
    Judge,
    assignment_of,
    parse_request,
    printed_forms,
    read_settings,
    reveals,
)
from .stats import PartStats, refused_csv, statistics, statistics_csv, statistics_html
from .store import CheckStore

# the names of .service, imported on first use by __getattr__ below
_LAZY_NAMES = ("main", "make_app", "service_entry")

__all__ = [
    "DEFAULTS",
    "DRAIN_LIMIT",
    "INSTRUCTOR_GROUP",
    "KEY_CACHE",
    "LOG_FILE",
    "LOG_KEEP",
    "LOG_MAX_BYTES",
    "MAX_BODY",
    "SERVICE_NAME",
    "SETTINGS_FILE",
    "STORE_FILE",
    "STUCK_AFTER",
    "WINDOW",
    "AttemptLog",
    "CheckCore",
    "CheckRefused",
    "CheckStore",
    "Judge",
    "PartStats",
    "assignment_of",
    "main",
    "make_app",
    "parse_request",
    "printed_forms",
    "read_settings",
    "refused_csv",
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
        # deferred: .service takes 723 ms to import (-X importtime, 2026-12-06); the core must not load tornado
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
