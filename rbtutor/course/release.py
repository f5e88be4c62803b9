"""``rbtutor release ASSIGNMENT``: one assignment's student version into the exchange, for students to fetch.

``rbtutor assign`` writes the student versions into ``release/``; this verb hands one of them to
nbgrader's exchange (``nbgrader release_assignment``), after which students see it in their
Assignment List. It refuses, in one line and with status 2, an assignment the course does not have
or whose student version has not been written yet, and says so when the assignment is already
released (``--force`` releases it again: students who fetched it keep their copy). It says what it
starts before nbgrader's copy (a second or two) and how long that took when done.

:func:`release_grades` is the other release, of grades: ``rbtutor feedback`` calls it once the
feedback is back with the students, and a course connected to an LMS sends the scores there.
"""

from __future__ import annotations

import sys
import time

from traitlets.config import Config

from ..grading.report import terminal_text
from .export import plural
from .layout import CourseLayout
from .nbgrader import api


def release(layout: CourseLayout, assignment: str, force: bool = False, out=None, err=None) -> int:
    """Release ``assignment``; the exit status (0 released, 1 nbgrader refused, 2 bad input)."""
    out, err = out or sys.stdout, err or sys.stderr
    known = layout.assignments()
    if assignment not in known:
        print(f"rbtutor release: expected an assignment of the course ({', '.join(known) or 'none'}), "
              f"got {assignment!r}", file=err)
        return 2
    if not (layout.release / assignment).is_dir():
        print(f"rbtutor release: no release/{assignment} yet: run 'rbtutor assign' first", file=err)
        return 2
    files = [path for path in (layout.release / assignment).rglob("*") if path.is_file()]
    print(f"releasing {assignment}: {plural(len(files), 'file')} of release/{assignment} into the exchange...",
          file=out, flush=True)
    started = time.monotonic()
    grader = api(layout)
    if force:
        grader.update_config(Config({"ExchangeReleaseAssignment": {"force": True}}))
    result = grader.release_assignment(assignment)
    if not result["success"]:
        said = (result.get("log") or "") + (result.get("error") or "")
        if "already exists" in said:
            print(f"rbtutor release: {assignment} is already released; --force releases it again "
                  "(students who fetched it keep their copy)", file=err)
        else:
            lines = [line for line in said.splitlines() if line.strip()]
            print(f"rbtutor release: nbgrader refused {assignment}: "
                  f"{terminal_text(lines[-1] if lines else 'no reason given')}", file=err)
        return 1
    print(f"released {assignment} in {time.monotonic() - started:.1f} s: students can fetch it now", file=out)
    return 0


def release_grades(layout: CourseLayout, assignments=None, out=None, err=None) -> int:
    """After the feedback is returned (``rbtutor feedback``): each student's score into the LMS's
    gradebook through the outbox (:func:`rbtutor.course.lms_cli.grades_to_lms`), for a course whose
    ``course.toml`` has an ``[lms]`` section; 0 at once for one without. The exit status: 1 when
    a grade is left pending or failed (``rbtutor lms status`` lists them)."""
    # (python -X importtime 2026-12-06; a course without an LMS never needs them)
    # deferred: lms_cli brings in httpx, PyJWT and the LMS modules, 0.9 s more than this module's imports
    from .lms_cli import grades_to_lms

    return grades_to_lms(layout, assignments, out, err)
