"""Step after grading: the class report, ``report/index.html``, a picture of how the class did.

``python -m rbtutor.course report`` writes it; ``grade`` writes it after ``grades.csv`` and the
integrity report. For each assignment the page shows

* the distribution of final scores (a histogram; the final score is the ``final_score`` column
  of ``grades.csv``, read through :func:`rbtutor.course.export.class_grades`, so the page, the
  CSV and the LMS file agree);
* the pass rate of each graded part (a bar chart and a table): the share of the submissions
  graded on that part that earned its full points;
* the most common diagnoses of each failed autograded part (a table), read from the grader's
  verdict in the autograded notebook: the diagnosis code the judge (:mod:`rbtutor.grading.judge`)
  records in the test cell's metadata (``rbtutor.verdict``) when it is there; otherwise the
  ``AnswerNotAccepted`` error that replaces the cell's outputs, whose text is the feedback of the
  diagnosis, turned back into its code (text that matches no code is shown as it is; a test cell
  without a verdict is named by its error's name; a written answer nbgrader scored zero by itself
  was left as released);
* how many submissions are late, have written parts still to grade, or were not graded (with
  the reason when the run knows it);
* the integrity flags of ``integrity_report.json``, per student.

The page is one self-contained file: figures are SVG images (:mod:`.report_charts`) inside the
page as ``data:`` URIs, each with an alt text stating its numbers; it loads nothing, runs no script
and says so in a Content-Security-Policy, like the feedback pages. The markup is the template
``class_report.html`` of :mod:`rbtutor.grading.pages`, which escapes every value: everything a student
controls (ids, the text of a diagnosis, integrity messages) reaches the page as text.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ..grading.pages import render
from ..grading.report import REPORT_NAME, terminal_text
from . import report_charts as charts
from .export import class_grades
from .grade_rows import each_submission
from .hand_grades import hand_grade_problem, part_points
from .layout import CourseLayout
from .nbgrader import api

REPORT_FOLDER = "report"
REPORT_PAGE = "index.html"
#: diagnoses listed per part, the most common first
TOP_DIAGNOSES = 5
#: the longest diagnosis text shown (a student's exception or type name can be long)
DIAGNOSIS_CHARS = 200
NOT_IN_GRADEBOOK = "submitted, but no grade in the gradebook (not graded yet, or its grading failed)"


@dataclass
class PartResult:
    """One graded part (an nbgrader grade cell) of an assignment over the class."""

    grade_id: str
    max_score: float
    graded: int = 0  # submissions with a score for this part
    full: int = 0  # of those, how many earned the part's full points
    to_grade: int = 0  # submissions whose part still needs a manual grade
    diagnoses: Counter = field(default_factory=Counter)

    @property
    def pass_rate(self) -> float | None:
        return self.full / self.graded if self.graded else None


@dataclass
class AssignmentResult:
    """What the report shows of one assignment."""

    name: str
    max_score: float
    final_scores: dict[str, float] = field(default_factory=dict)  # student -> grades.csv's final_score
    pending: dict[str, int] = field(default_factory=dict)  # student -> written parts still to grade
    late: list[str] = field(default_factory=list)
    parts: dict[str, PartResult] = field(default_factory=dict)
    not_graded: dict[str, str] = field(default_factory=dict)  # student -> reason
    refused_hand_grades: list[str] = field(default_factory=list)  # "student notebook/part: why", not counted
    flags: list[dict] = field(default_factory=list)  # integrity_report.json entries with events


# --------------------------------------------------------------------------- the numbers


def diagnosis_label(cell: dict) -> str:
    """The diagnosis shown for a failed autograded part, from its test cell in the autograded notebook.

    >>> diagnosis_label({"outputs": [{"output_type": "error", "ename": "AnswerNotAccepted",
    ...     "evalue": "p3.b.K: The entries are right but transposed: rows and columns are swapped."}]})
    'transposed'
    """
    # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
    from ..grading.judge import MESSAGES

    meta = cell.get("metadata")
    verdict = ((meta.get("rbtutor") if isinstance(meta, dict) else None) or {})
    verdict = verdict.get("verdict") if isinstance(verdict, dict) else None
    if isinstance(verdict, dict) and isinstance(verdict.get("diagnosis"), str):
        return verdict["diagnosis"][:DIAGNOSIS_CHARS]
    grading = (meta.get("nbgrader") if isinstance(meta, dict) else None) or {}
    if isinstance(grading, dict) and grading.get("solution"):  # nbgrader scores an untouched answer 0
        return "unanswered (the answer cell as released)"
    outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
    errors = [o for o in outputs if isinstance(o, dict) and o.get("output_type") == "error"]
    verdicts = [o for o in errors if o.get("ename") == "AnswerNotAccepted"]
    if not verdicts:
        if errors:
            return f"error in the test cell: {str(errors[-1].get('ename'))[:DIAGNOSIS_CHARS]}"
        return "no verdict in the autograded notebook"
    text = str(verdicts[-1].get("evalue", ""))
    message = text.partition(": ")[2] or text
    codes = {feedback: code for code, feedback in MESSAGES.items()}
    if message in codes:
        return codes[message]
    if message.startswith("This is neither the key's value"):
        return "wrong_value"
    if message.startswith("no value reached the grader"):
        return "no value handed in"
    return message[:DIAGNOSIS_CHARS]


def _notebook_cells(path: Path) -> dict[str, dict]:
    """``{grade_id: cell}`` of the graded cells of a notebook ({} when unreadable)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = {}
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade") and meta.get("grade_id"):
            found[str(meta["grade_id"])] = cell
    return found


def _part_order(layout: CourseLayout, assignment: str) -> list[str]:
    """The grade ids of the source notebook in the order of its cells ([] without one)."""
    return list(_notebook_cells(layout.source_notebook(assignment)))


def _read_submissions(grader) -> list[dict]:
    """Every graded submission as plain data: student, assignment, lateness, each part's score."""
    rows = []
    with grader.gradebook as gradebook:
        for submission in each_submission(gradebook):
            parts = [_part(nb.name, g, hand_grade_problem(g)) for nb in submission.notebooks for g in nb.grades]
            rows.append({"student": submission.student.id, "assignment": submission.assignment.name,
                         "late": submission.total_seconds_late > 0, "parts": parts})
    return rows


def _part(notebook: str, grade, refused: str | None) -> dict:
    """One part of a submission as the report counts it. A refused hand grade (``refused``, from
    :func:`rbtutor.course.hand_grades.hand_grade_problem`: inf, NaN, outside the part's points) is not
    counted, as in grades.csv: the autograded score stands, and a written part is still to grade."""
    if refused is None:
        score, to_grade, by_hand = grade.score, bool(grade.needs_manual_grade), grade.manual_score is not None
    else:
        score, to_grade, by_hand = grade.auto_score, grade.needs_manual_grade or grade.auto_score is None, False
    return {"notebook": notebook, "grade_id": grade.name, "max_score": part_points(grade) or 0.0, "score": score,
            "to_grade": to_grade, "refused": refused, "autograded": grade.auto_score is not None and not by_hand}


def _integrity_entries(layout: CourseLayout) -> list[dict]:
    """The entries of ``integrity_report.json`` ([] before the first report is written)."""
    path = layout.root / f"{REPORT_NAME}.json"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ValueError(f"expected {path} to be the JSON integrity report, got {exc}") from None
    if not isinstance(entries, list):
        raise ValueError(f"expected a list of submissions in {path}, got {type(entries).__name__}")
    return [e for e in entries if isinstance(e, dict)]


def _submitted_folders(layout: CourseLayout) -> list[tuple[str, str]]:
    """``(assignment, student)`` of every folder ``submitted/<student>/<assignment>``."""
    folder = layout.submitted()
    if not folder.is_dir():
        return []
    return sorted((p.name, p.parent.name) for p in folder.glob("*/*") if p.is_dir() and not p.is_symlink())


def class_results(layout: CourseLayout, grader, failures=()) -> list[AssignmentResult]:
    """The numbers of the report, one :class:`AssignmentResult` per assignment of the gradebook.

    ``failures``: ``(assignment, student, reason)`` of the submissions the grading run could not
    grade (``grade`` passes its own); a folder of ``submitted/`` without a submission in the
    gradebook is counted as not graded as well.
    """

    points, grades = class_grades(grader)
    results = {name: AssignmentResult(name, float(points[name])) for name in points}
    for (student, assignment), grade in grades.items():
        result = results[assignment]
        result.final_scores[student] = float(grade.final_score)
        if grade.pending_parts:
            result.pending[student] = grade.pending_parts
    for row in _read_submissions(grader):
        result = results[row["assignment"]]
        if row["late"]:
            result.late.append(row["student"])
        cells: dict[str, dict[str, dict]] = {}  # this submission's notebooks, read when a part failed
        for part in row["parts"]:
            _count_part(layout, result, row["student"], part, cells)
            if part["refused"]:
                result.refused_hand_grades.append(f"{row['student']} {part['notebook']}/{part['grade_id']}: "
                                                  f"{part['refused']}")
    for name in results:
        order = {gid: k for k, gid in enumerate(_part_order(layout, name))}
        parts = results[name].parts
        results[name].parts = dict(sorted(parts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    withdrawn = [(assignment, student, reason) for (student, assignment), reason in layout.not_graded().items()]
    for assignment, student, reason in [*failures, *withdrawn]:
        results.setdefault(assignment, AssignmentResult(assignment, 0.0)).not_graded.setdefault(student, str(reason))
    for assignment, student in _submitted_folders(layout):
        result = results.setdefault(assignment, AssignmentResult(assignment, 0.0))
        if student not in result.final_scores:
            result.not_graded.setdefault(student, NOT_IN_GRADEBOOK)
    for entry in _integrity_entries(layout):
        if entry.get("events"):
            results.setdefault(str(entry.get("assignment")), AssignmentResult(str(entry.get("assignment")), 0.0))
            results[str(entry.get("assignment"))].flags.append(entry)
    # an assignment neither released nor handed in has nothing to report: no section of empty tables
    released = set(grader.get_released_assignments())
    return [results[name] for name in sorted(results)
            if name in released or results[name].final_scores or results[name].not_graded or results[name].flags]


#: parts named in the summary's list of the hardest
HARDEST = 5


def class_summary(results: list[AssignmentResult]) -> dict:
    """The numbers the page opens with, over every assignment shown: submissions graded, late,
    with written parts still to grade, not graded, flagged, and the parts with the lowest pass rate."""
    parts = [(part.pass_rate, result.name, part) for result in results for part in result.parts.values()
             if part.pass_rate is not None]
    hardest = sorted(parts, key=lambda item: (item[0], item[1], item[2].grade_id))[:HARDEST]
    return {
        "graded": sum(len(r.final_scores) for r in results),
        "late": sum(len(r.late) for r in results),
        "to_grade": sum(len(r.pending) for r in results),
        "not_graded": sum(len(r.not_graded) for r in results),
        "flagged": sum(len({str(f.get("student")) for f in r.flags}) for r in results),
        "hardest": [f"{name} {part.grade_id}: {part.full} of {part.graded} full marks ({rate:.0%})"
                    for rate, name, part in hardest],
    }


def _count_part(layout: CourseLayout, result: AssignmentResult, student: str, part: dict, cells: dict) -> None:
    """Add one student's score on one part to the part's counts (and its diagnosis when it failed)."""
    counted = result.parts.setdefault(part["grade_id"], PartResult(part["grade_id"], part["max_score"]))
    if part["to_grade"] or part["score"] is None:
        counted.to_grade += 1
        return
    counted.graded += 1
    if part["score"] >= part["max_score"]:
        counted.full += 1
        return
    if not part["autograded"]:
        return
    notebook = part["notebook"]
    if notebook not in cells:
        cells[notebook] = _notebook_cells(layout.autograded(student, result.name) / f"{notebook}.ipynb")
    counted.diagnoses[diagnosis_label(cells[notebook].get(part["grade_id"], {}))] += 1


# --------------------------------------------------------------------------- the figures


def _number(value: float) -> str:
    return f"{value:.4g}"


def histogram_alt(result: AssignmentResult) -> str:
    """The alt text of the score histogram: what it shows, in numbers."""
    scores = list(result.final_scores.values())
    if not scores:
        return f"Histogram of final scores for {result.name}: no graded submission."
    text = (f"Histogram of final scores for {result.name}: {len(scores)} students graded, median "
            f"{_number(statistics.median(scores))} of {_number(result.max_score)}, lowest {_number(min(scores))}, "
            f"highest {_number(max(scores))}, mean {_number(statistics.fmean(scores))}")
    if result.pending:
        text += f"; {len(result.pending)} of them with written parts still to grade (their score so far)"
    return text + "."


def pass_rate_alt(result: AssignmentResult) -> str:
    """The alt text of the pass-rate chart: each part's passes of the submissions graded on it."""
    shown = [p for p in result.parts.values() if p.graded]
    if not shown:
        return f"Bar chart of the pass rate of each part of {result.name}: no part graded yet."
    rates = "; ".join(f"{p.grade_id} {p.full} of {p.graded} ({100 * p.pass_rate:.0f} %)" for p in shown)
    return (f"Bar chart of the pass rate of each part of {result.name} (full points, of the submissions "
            f"graded on that part): {rates}.")


def _svg_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def histogram_svg(result: AssignmentResult) -> str:
    """Final scores of ``result``, stacked: final, and with written parts still to grade."""

    top = result.max_score or max(result.final_scores.values(), default=1.0) or 1.0
    count = int(top) if float(top).is_integer() and top <= 20 else 10
    edges = np.linspace(0.0, top, max(count, 1) + 1)
    done = [s for st, s in result.final_scores.items() if st not in result.pending]
    partial = [s for st, s in result.final_scores.items() if st in result.pending]
    counts = zip(np.histogram(done, edges)[0].tolist(), np.histogram(partial, edges)[0].tolist(), strict=True)
    return _svg_uri(charts.histogram_svg(list(counts), edges.tolist(), f"final score (of {_number(result.max_score)})",
                                         ("final", "written parts to grade") if partial else None))


def pass_rate_svg(result: AssignmentResult) -> str:
    """One horizontal bar per graded part: the percentage of full points."""

    shown = [p for p in result.parts.values() if p.graded]
    return _svg_uri(charts.bars_svg([p.grade_id for p in shown], [100 * p.pass_rate for p in shown],
                                    [f"{p.full}/{p.graded}" for p in shown], "submissions with full points (%)"))


# --------------------------------------------------------------------------- the page


def _table(caption: str, header: list[str], rows: list[list[object]]) -> dict:
    return {"caption": caption, "header": header, "rows": rows}


def _counts(result: AssignmentResult) -> list[str]:
    return [f"{len(result.final_scores)} graded", f"{len(result.late)} late",
            f"{len(result.pending)} with written parts to grade", f"{len(result.not_graded)} not graded",
            f"{len(result.flags)} with integrity flags"]


def _flag_rows(result: AssignmentResult) -> list[list[object]]:
    rows = []
    for entry in result.flags:
        events = [e for e in entry.get("events", []) if isinstance(e, dict)]
        kinds = Counter(str(e.get("kind")) for e in events)
        first = str(events[0].get("message", "")) if events else ""
        more = f" (and {len(events) - 1} more)" if len(events) > 1 else ""
        rows.append([entry.get("student"), ", ".join(f"{k} ({n})" if n > 1 else k for k, n in sorted(kinds.items())),
                     first[:400] + more])
    return rows


def _figures(result: AssignmentResult) -> list[dict]:
    figures = []
    if result.final_scores:
        figures.append({"src": histogram_svg(result), "alt": histogram_alt(result),
                        "caption": f"Final scores of {result.name} (after late penalties)."})
    if any(p.graded for p in result.parts.values()):
        figures.append({"src": pass_rate_svg(result), "alt": pass_rate_alt(result),
                        "caption": f"Pass rate of each part of {result.name}."})
    return figures


def _part_tables(result: AssignmentResult) -> list[dict]:
    tables = []
    if result.parts:
        rows = [[p.grade_id, _number(p.max_score), p.graded, p.full,
                 "" if p.pass_rate is None else f"{100 * p.pass_rate:.0f} %", p.to_grade]
                for p in result.parts.values()]
        tables.append(_table(f"Parts of {result.name}", ["part", "points", "graded", "full points", "pass rate",
                                                           "to grade"], rows))
    diagnosed = [[p.grade_id, label, n] for p in result.parts.values()
                 for label, n in sorted(p.diagnoses.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_DIAGNOSES]]
    if diagnosed:
        tables.append(_table(f"Most common diagnoses of the failed parts of {result.name}",
                             ["part", "diagnosis", "submissions"], diagnosed))
    if result.not_graded:
        tables.append(_table(f"Submissions of {result.name} not graded", ["student", "reason"],
                             [[s, r] for s, r in sorted(result.not_graded.items())]))
    return tables


def assignment_section(result: AssignmentResult) -> dict:
    """What the page shows of one assignment (counts, figures, tables, lists), as plain values."""
    flags = [_table(f"Integrity flags of {result.name} (integrity_report.md has every event)",
                    ["student", "kinds", "first event"], _flag_rows(result))] if result.flags else []
    return {"name": result.name, "counts": _counts(result), "figures": _figures(result),
            "tables_before": _part_tables(result), "tables_after": flags,
            "refused_hand_grades": "; ".join(result.refused_hand_grades), "late": ", ".join(sorted(result.late))}


def render_page(results: list[AssignmentResult], generated: str) -> str:
    """The whole page (template ``class_report.html``): one section per assignment, with a table of contents."""
    return render("class_report.html", title="Class report", generated=generated,
                  summary=class_summary(results), sections=[assignment_section(r) for r in results])


def write_class_report(layout: CourseLayout, grader=None, failures=()) -> Path:
    """Write ``report/index.html`` in the course folder (atomically); return its path."""

    results = class_results(layout, grader or api(layout), failures)
    page = render_page(results, datetime.now(UTC).isoformat(timespec="seconds"))
    folder = layout.root / REPORT_FOLDER
    folder.mkdir(exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(page)
    os.chmod(tmp, 0o644)
    path = folder / REPORT_PAGE
    os.replace(tmp, path)
    return path


def run_report(layout: CourseLayout) -> int:
    """The ``report`` command: write the page, print where; 2 when it could not be written."""


    try:
        path = write_class_report(layout)
    except (OSError, ValueError) as exc:
        print(f"rbtutor report: {terminal_text(exc)}", file=sys.stderr)
        return 2
    print(f"class report: {path}")
    return 0
