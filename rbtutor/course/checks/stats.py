"""Step: instant checks, the statistics. What the attempt log says about each answer id, for the instructors.

Read from the records of :class:`.core.AttemptLog`; shown by the service's ``GET stats``
(:mod:`.service`) to members of the instructors' group only: per answer id, the number of
checks and of passes, the checks refused, the diagnoses counted, and who is stuck (at least
``stuck_after`` failed checks and no pass); an HTML page, or CSV with ``?format=csv``.
"""

from __future__ import annotations

import csv
import html
import io
from collections import defaultdict
from dataclasses import dataclass

from .core import STUCK_AFTER


@dataclass
class PartStats:
    """The attempts on one answer id."""

    answer_id: str
    checks: int = 0
    passes: int = 0
    refused: int = 0
    diagnoses: dict | None = None
    stuck: list | None = None


def statistics(records: list[dict], stuck_after: int = STUCK_AFTER) -> list[PartStats]:
    """Per answer id: checks, passes, diagnoses counted and stuck students, the most checked first."""
    parts: dict[str, PartStats] = {}
    failed: dict[tuple[str, str], int] = defaultdict(int)
    passed: set[tuple[str, str]] = set()
    for record in records:
        part = parts.setdefault(record["id"], PartStats(record["id"], diagnoses={}, stuck=[]))
        if record.get("refused") in ("limit", "disabled"):
            part.refused += 1
            continue
        part.checks += 1
        if record.get("passed"):
            part.passes += 1
            passed.add((record["student"], record["id"]))
        else:
            failed[(record["student"], record["id"])] += 1
            code = record.get("diagnosis") or "wrong_value"
            part.diagnoses[code] = part.diagnoses.get(code, 0) + 1
    for (student, answer_id), count in sorted(failed.items()):
        if count >= stuck_after and (student, answer_id) not in passed:
            parts[answer_id].stuck.append(student)
    return sorted(parts.values(), key=lambda p: (-p.checks, p.answer_id))


def _diagnoses_text(part: PartStats) -> str:
    return "; ".join(f"{code}: {n}" for code, n in sorted(part.diagnoses.items(), key=lambda kv: (-kv[1], kv[0])))


def statistics_csv(parts: list[PartStats]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "checks", "passes", "refused", "diagnoses", "stuck"])
    for p in parts:
        writer.writerow([p.answer_id, p.checks, p.passes, p.refused, _diagnoses_text(p), " ".join(p.stuck)])
    return out.getvalue()


def statistics_html(parts: list[PartStats], stuck_after: int) -> str:
    rows = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in
                         (p.answer_id, p.checks, p.passes, p.refused, _diagnoses_text(p), ", ".join(p.stuck)))
        + "</tr>" for p in parts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Answer checks: statistics</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:.3em .6em;text-align:left}}</style></head>
<body><main><h1>Answer checks</h1>
<p>Per part, the most checked first: checks judged, passes, checks refused (limit or switched off),
the mistakes diagnosed, and the students stuck there ({stuck_after} or more failed checks and no pass).
<a href="?format=csv">CSV</a></p>
<table><thead><tr><th scope="col">part</th><th scope="col">checks</th><th scope="col">passes</th>
<th scope="col">refused</th><th scope="col">diagnoses</th><th scope="col">stuck</th></tr></thead>
<tbody>
{rows}
</tbody></table></main></body></html>
"""
