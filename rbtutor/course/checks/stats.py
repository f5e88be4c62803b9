"""Step: instant checks, the statistics. What the counts say about each answer id, for the instructors.

Read from the aggregated store (:class:`.store.CheckStore`, kept by :class:`.core.CheckCore`);
shown by the service's ``GET stats`` (:mod:`.service`) to members of the instructors' group
only: per answer id, the number of checks and of passes, the checks refused and who sent
them, the diagnoses counted, and who is stuck (at least ``stuck_after`` failed checks and no
pass); an HTML page, CSV with ``?format=csv``, and the refused checks per student, answer id
and hour with ``?format=refused``.

The work is proportional to the rows of the store (students times answer ids, and the hours
in which checks were refused), not to the number of requests: 300,000 refused checks of one
student in one hour are one row.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ...grading.pages import render
from .core import STUCK_AFTER, WINDOW
from .store import CheckStore


@dataclass
class PartStats:
    """The attempts on one answer id."""

    answer_id: str
    checks: int = 0
    passes: int = 0
    refused: int = 0
    diagnoses: dict = field(default_factory=dict)
    stuck: list = field(default_factory=list)
    #: refused checks per student, the most first
    refused_from: dict = field(default_factory=dict)


def statistics(source, stuck_after: int = STUCK_AFTER) -> list[PartStats]:
    """Per answer id: checks, passes, refusals and who sent them, diagnoses and stuck students, the most checked first.

    ``source`` is the course's :class:`.store.CheckStore`, or a list of attempt records
    (lines of ``attempts.jsonl``, refused ones included), which are counted the same way.
    """
    if not isinstance(source, CheckStore):
        store = CheckStore(":memory:", WINDOW)
        try:
            store.import_records(source)
            return statistics(store, stuck_after)
        finally:
            store.close()
    parts: dict[str, PartStats] = {}

    def part(answer_id: str) -> PartStats:
        return parts.setdefault(answer_id, PartStats(answer_id))

    for student, answer_id, checks, passes, failed in sorted(source.tallies()):
        p = part(answer_id)
        p.checks += checks
        p.passes += passes
        if failed >= stuck_after and not passes:
            p.stuck.append(student)
    for answer_id, code, n in source.diagnosis_counts():
        part(answer_id).diagnoses[code] = n
    for answer_id, student, n in sorted(source.refusals(), key=lambda row: (row[0], -row[2], row[1])):
        p = part(answer_id)
        p.refused += n
        p.refused_from[student] = n
    return sorted(parts.values(), key=lambda p: (-p.checks, p.answer_id))


def _diagnoses_text(part: PartStats) -> str:
    return "; ".join(f"{code}: {n}" for code, n in sorted(part.diagnoses.items(), key=lambda kv: (-kv[1], kv[0])))


def _refused_text(part: PartStats) -> str:
    return "; ".join(f"{student}: {n}" for student, n in part.refused_from.items())


def statistics_csv(parts: list[PartStats]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "checks", "passes", "refused", "diagnoses", "stuck", "refused_from"])
    for p in parts:
        writer.writerow([p.answer_id, p.checks, p.passes, p.refused, _diagnoses_text(p), " ".join(p.stuck),
                         _refused_text(p)])
    return out.getvalue()


def refused_csv(store: CheckStore) -> str:
    """The refused checks per student, answer id, hour (UTC, its start) and reason, the newest hour first."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "id", "hour", "reason", "refused"])
    for student, answer_id, hour, reason, n in store.refusals_by_hour():
        writer.writerow([student, answer_id, datetime.fromtimestamp(hour, UTC).isoformat(timespec="minutes"),
                         reason, n])
    return out.getvalue()


def statistics_html(parts: list[PartStats], stuck_after: int) -> str:
    """The statistics page: one row per answer id, every value escaped by the template (``stats.html``)."""
    rows = [(p.answer_id, p.checks, p.passes, p.refused, _refused_text(p), _diagnoses_text(p), ", ".join(p.stuck))
            for p in parts]
    return render("stats.html", title="Answer checks: statistics", rows=rows, stuck_after=stuck_after)
