"""Generate: the student versions of every source assignment (nbgrader generate_assignment)."""

from __future__ import annotations

import sys

from ...grading.report import terminal_text
from ..late import set_due_dates
from ..layout import CourseLayout
from ..nbgrader import api


def generate(layout: CourseLayout) -> int:
    """Student versions of every source assignment into ``release/`` (nbgrader ``generate_assignment``)."""
    grader = api(layout)
    names = layout.assignments()
    for k, name in enumerate(names, 1):
        result = grader.generate_assignment(name, force=True)
        print(f"[{k}/{len(names)}] {terminal_text(name)}: {'generated' if result['success'] else 'FAILED'}",
              flush=True)
        if not result["success"]:
            print(result["log"], file=sys.stderr)
            return 1
    # due dates: exercises/due_dates.yaml, when there is one, into the gradebook

    try:
        for line in set_due_dates(layout, grader):
            print(line, flush=True)
    except ValueError as exc:  # refused in one line, as grade refuses it
        print(f"due dates: {terminal_text(exc)}", file=sys.stderr)
        return 2
    return 0
