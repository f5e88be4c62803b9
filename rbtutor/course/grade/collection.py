"""Collect: take the class's submissions in from the exchange, and record entries planted under others' names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...grading.intake import collect as take
from ...grading.report import event, record_events, terminal_text
from ...grading.student_ids import id_problem
from ..layout import CourseLayout
from ..nbgrader import api, owner_check
from .submission import record_refused_id, source_notebooks

PLANTED = "_planted.json"  # in integrity/<owner>/<assignment>/: entries the owner made under other names


def record_planted(layout: CourseLayout, assignment: str, results) -> None:
    """Name the owner of every refused ``wrong_owner`` entry in the owner's own part of the report.

    The student an entry named gets the ``wrong_owner`` event; the account that made it gets a
    ``planted_entry`` event (when its name is an acceptable id), so that the report points at
    who did it. That evidence is kept: an entry named once stays in the owner's part of every
    later report, whatever the students hand in afterwards and even once the entry is gone
    from the exchange or no longer checked (then marked ``found_by_last_collect: false``), until
    the instructor clears it
    (:func:`clear_planted`).
    """
    planted: dict[str, list[dict]] = {}
    for student, intake in results:
        for found in intake.events:
            if found["kind"] != "wrong_owner":
                continue
            for owner in found.get("owner", []):
                planted.setdefault(owner, []).append(event(
                    "planted_entry", f"This account owns the exchange entry {found['path']} (or something in "
                    f"it), which names another student ({student}); it was not collected.",
                    path=found["path"], named=student, found_by_last_collect=True))
    for old in layout.integrity.glob(f"*/{assignment}/{PLANTED}"):
        planted.setdefault(old.parent.parent.name, [])
    for owner, events in planted.items():
        if id_problem(owner):
            record_refused_id(layout, assignment, owner, "planted", events)
            continue
        path = layout.integrity / owner / assignment / PLANTED
        seen = {(e["path"], e["named"]) for e in events}
        for earlier in _planted_events(path):
            if (earlier.get("path"), earlier.get("named")) not in seen:
                events.append({**earlier, "found_by_last_collect": False})
        record_events(path, owner, assignment, "(exchange entry)", "collect", events, fresh=True)


def _planted_events(path: Path) -> list[dict]:
    """The ``planted_entry`` events kept in ``path`` by earlier collects ([] when there are none)."""
    try:
        events = json.loads(path.read_text())["stages"]["collect"]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"expected the evidence file {path} to be a report record, got {exc}") from None
    return [e for e in events if isinstance(e, dict) and e.get("kind") == "planted_entry"]


def clear_planted(layout: CourseLayout, assignment: str, owner: str) -> bool:
    """Drop the kept evidence of the entries ``owner`` planted in ``assignment``; True if there was some.

    For the instructor, once the case is dealt with (and the entries removed from the exchange:
    an entry still there is found, and named, again by the next collect).
    """
    path = layout.integrity / owner / assignment / PLANTED if not id_problem(owner) else None
    if path is None or not path.exists():
        return False
    path.unlink()
    return True


def collect(layout: CourseLayout, assignment: str, clear: tuple[str, ...] = ()) -> int:
    """Take every student's newest submission of ``assignment`` from the exchange into ``submitted/``.

    Replaces ``nbgrader collect``, which copies with ``shutil.copytree`` from folders students can
    write and so follows their links: here every file goes through :func:`rbtutor.grading.intake.collect`.
    """

    if assignment not in layout.assignments():
        print(f"no assignment {assignment!r} in {layout.exercises}", file=sys.stderr)
        return 2
    inbound = layout.exchange / "rbtutor" / "inbound"
    if not inbound.is_dir():
        print(f"nothing to collect: {inbound} does not exist", file=sys.stderr)
        return 1
    try:
        check_owner = owner_check(api(layout).config)
    except ValueError as exc:
        print(f"rbtutor collect: {exc}", file=sys.stderr)
        return 2
    for owner in clear:
        cleared = clear_planted(layout, assignment, owner)
        print(f"{terminal_text(owner)} {assignment}: evidence of planted entries "
              + ("cleared" if cleared else "not found, nothing cleared"))
    results = take(inbound, layout.submitted(), assignment, sources=source_notebooks(layout, assignment),
                   check_owner=check_owner)
    record_planted(layout, assignment, results)
    taken = 0
    for student, intake in results:
        # what was refused in the exchange is in the integrity report until the next collect
        if id_problem(student):
            record_refused_id(layout, assignment, student, "collect", intake.events)
        else:
            record_events(layout.integrity / student / assignment / "_collect.json", student, assignment,
                          "(exchange entry)", "collect", intake.events, fresh=True)
        taken += bool(intake.taken)
        problems = "; ".join(e["message"] for e in intake.events)
        print(terminal_text(f"{student} {assignment}: {len(intake.taken)} file(s) taken"
                            + (f", {len(intake.events)} problem(s): {problems}" if problems else "")))
    owners = "checked" if check_owner else "not checked (c.ExchangeCollect.check_owner = False)"
    print(f"collected {assignment} from {taken} student(s) into {layout.submitted()}; entry owners {owners}")
    return 0
