"""Step: beside grading, the similarity report. Submissions read, every pair ranked, the CSV and the page."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rbtutor.grading.intake import take_in
from rbtutor.grading.pages import render
from rbtutor.grading.student_ids import id_problem

from ..layout import CourseError, CourseLayout
from .compare import Fingerprints, Match, compare, fingerprint
from .normalise import normalise_cells, read_given

#: Pairs with a score at or above this are flagged in the report.
THRESHOLD = 0.6
#: Pairs shown side by side in the HTML report: the flagged pairs, at least this many ...
SHOWN_PAIRS = 10
#: ... and at most this many (the page stays small enough to open).
MAX_SHOWN_PAIRS = 50
#: Rows of the HTML report's table of pairs: all flagged pairs, and at least this many (the CSV has all).
TABLE_PAIRS = 100
#: Characters of one student's code shown in the report; the rest is left out (and said so).
SHOWN_CHARS = 20_000
#: Characters of one student's code that are compared (the intake already caps each cell).
MAX_CODE_CHARS = 400_000
#: The code nbgrader puts in place of a solution region in the released notebook.
RELEASE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()\n"

_SOLUTION_REGION = re.compile(r"^[ \t]*#+[ \t]*BEGIN SOLUTION[^\n]*\n.*?^[ \t]*#+[ \t]*END SOLUTION[^\n]*$",
                              re.M | re.S)



@dataclass(frozen=True)
class Cell:
    """One code cell of a student's notebook."""

    source: str
    solution: bool
    where: str = ""


@dataclass
class Submissions:
    """The code cells of one assignment's submissions, and what could not be read."""

    cells: dict[str, list[Cell]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def code(self) -> dict[str, str]:
        """Each student's code cells joined by line breaks (the text the report's offsets refer to)."""
        return {student: _joined_code(cells) for student, cells in self.cells.items()}


def _joined_code(cells: list[Cell]) -> str:
    return "\n".join(cell.source for cell in cells)


def _cell_source(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _grade(cell) -> dict:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    grade = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return grade if isinstance(grade, dict) else {}


def read_sources(layout: CourseLayout, assignment: str) -> tuple[set[str], str]:
    """The grade ids of the solution code cells, and the code every student was given."""
    folder = layout.exercises / assignment
    names = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if not names:
        raise CourseError(f"expected the source notebooks of {assignment} in {folder}, found none")
    solution_ids, given = set(), []
    for path in names:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            source, grade = _cell_source(cell), _grade(cell)
            if grade.get("solution") and isinstance(grade.get("grade_id"), str):
                solution_ids.add(grade["grade_id"])
                source = _SOLUTION_REGION.sub(RELEASE_STUB, source) if _SOLUTION_REGION.search(source) \
                    else RELEASE_STUB
            given.append(source)
    if not solution_ids:
        raise CourseError(f"expected solution code cells in the source notebooks of {assignment}, found none")
    return solution_ids, "\n".join(given)


def read_submissions(layout: CourseLayout, assignment: str, solution_ids: set[str]) -> Submissions:
    """Each student's code cells, read from an intake copy of their submission."""
    found = Submissions()
    root = layout.submitted()
    if not root.is_dir():
        return found
    with tempfile.TemporaryDirectory(prefix="rbtutor-similarity-") as scratch:
        for student in _students(root, found.notes):
            cells = _student_cells(root / student / assignment, Path(scratch) / student, solution_ids, found.notes,
                                   student)
            if cells is not None:
                found.cells[student] = cells
    return found


def _students(root: Path, notes: list[str]) -> list[str]:
    """Folder names of ``submitted/`` that are valid student ids (links and others are noted)."""
    students = []
    with os.scandir(root) as entries:
        for entry in entries:
            if not stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode):
                notes.append(f"{_shown(entry.name)}: not a folder (or a link); not read.")
                continue
            problem = id_problem(entry.name)
            if problem:
                notes.append(f"{_shown(entry.name)}: not a student id ({problem}); not read.")
                continue
            students.append(entry.name)
    return sorted(students)


def _shown(name: str) -> str:
    return ascii(name)[1:-1][:80]


def _student_cells(folder: Path, copy_to: Path, solution_ids: set[str], notes: list[str],
                   student: str) -> list[Cell] | None:
    """Every code cell of the intake's copy of ``folder``, in notebook order, or None (with a note)."""
    try:
        os.lstat(folder)
    except FileNotFoundError:
        return None  # no submission of this assignment
    try:
        intake = take_in(folder, copy_to)
    except ValueError as exc:
        notes.append(f"{student}: the submission could not be read ({exc}).")
        return None
    for kind in sorted(set(intake.kinds())):
        notes.append(f"{student}: the intake noted {kind} (see the grader's integrity report).")
    cells, size = [], 0
    for rel in sorted(name for name in intake.taken if name.endswith(".ipynb")):
        nb = json.loads((copy_to / rel).read_text(encoding="utf-8", errors="replace"))
        for number, cell in enumerate(nb["cells"], start=1):
            if cell.get("cell_type") != "code":
                continue
            grade_id = _grade(cell).get("grade_id")
            solution = isinstance(grade_id, str) and grade_id in solution_ids
            where = f"{rel}, cell {number}" + (f" (solution cell {grade_id})" if solution else
                                               f" ({grade_id})" if isinstance(grade_id, str) else " (own cell)")
            source = _cell_source(cell)
            if size + len(source) > MAX_CODE_CHARS:
                notes.append(f"{student}: more than {MAX_CODE_CHARS} characters of code; only the first "
                             f"{MAX_CODE_CHARS} compared.")
                source = source[:max(MAX_CODE_CHARS - size, 0)]
            cells.append(Cell(source, solution, _shown(where)[:200]))
            size += len(source) + 1
            if size >= MAX_CODE_CHARS:
                break
        if size >= MAX_CODE_CHARS:
            break
    if not any(cell.source.strip() for cell in cells):
        notes.append(f"{student}: no code in any code cell.")
        return None
    return cells




@dataclass
class Pair:
    """Two students, how much code they share, and how much of it lies outside each one's solution cells."""

    student_a: str
    student_b: str
    match: Match
    outside_a: float = 0.0
    outside_b: float = 0.0


@dataclass
class _Student:
    cells: list[Cell]
    prints: Fingerprints
    solution_spans: list[tuple[int, int]]


def _prepare(code: dict[str, str | list[Cell]], given_code: str) -> dict[str, _Student]:
    """Each student's cells normalised and fingerprinted, the given code left out."""
    given = read_given(given_code)
    prepared = {}
    for student, cells in code.items():
        cells = [Cell(cells, True)] if isinstance(cells, str) else list(cells)
        spans, at = [], 0
        for cell in cells:
            if cell.solution:
                spans.append((at, at + len(cell.source)))
            at += len(cell.source) + 1
        norm = normalise_cells([cell.source for cell in cells], given)
        prepared[student] = _Student(cells, fingerprint(norm, given.hashes), spans)
    return prepared


def _outside(regions: list[tuple[int, int]], solution_spans: list[tuple[int, int]]) -> float:
    """The share of the marked characters that lie outside the solution cells."""
    marked = sum(end - start for start, end in regions)
    if marked == 0:
        return 0.0
    inside = sum(max(0, min(end, b) - max(start, a)) for start, end in regions for a, b in solution_spans)
    return (marked - inside) / marked


def _ranked(students: dict[str, _Student]) -> list[Pair]:
    pairs = []
    for a, b in itertools.combinations(sorted(students), 2):
        match = compare(students[a].prints, students[b].prints)
        pairs.append(Pair(a, b, match, _outside(match.regions_a, students[a].solution_spans),
                          _outside(match.regions_b, students[b].solution_spans)))
    pairs.sort(key=lambda p: (-p.match.score, p.student_a, p.student_b))
    return pairs


def rank_pairs(code: dict[str, str | list[Cell]], given_code: str) -> list[Pair]:
    """Every pair of students, most similar first (ties by name).

    ``code`` maps each student to their code cells, or to one text taken as one solution cell.
    """
    return _ranked(_prepare(code, given_code))


def similarity_report(layout: CourseLayout, assignment: str, threshold: float = THRESHOLD) -> tuple[Path, Path]:
    """Write ``similarity/<assignment>.csv`` and ``.html``; return their paths."""
    if assignment not in layout.assignments():
        raise CourseError(f"expected one of the course's assignments {layout.assignments()}, got {assignment!r}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"expected a threshold in (0, 1], got {threshold}")
    solution_ids, given_code = read_sources(layout, assignment)
    found = read_submissions(layout, assignment, solution_ids)
    students = _prepare(found.cells, given_code)
    for student, prepared in students.items():
        if prepared.prints.norm.text and not _in_solution_cells(prepared):
            found.notes.append(f"{student}: the solution cells hold no code of their own; "
                               "the code in the other cells was compared.")
    pairs = _ranked(students)
    out = layout.root / "similarity"
    out.mkdir(exist_ok=True)
    csv_path, html_path = out / f"{assignment}.csv", out / f"{assignment}.html"
    _write(csv_path, _csv_text(pairs))
    _write(html_path, render_html(assignment, pairs, found, threshold, students))
    return csv_path, html_path


def _in_solution_cells(student: _Student) -> bool:
    """Whether any of the student's normalised code comes from a solution cell."""
    starts = student.prints.norm.starts
    return any(bool(np.any((starts >= a) & (starts < b))) for a, b in student.solution_spans)


def _write(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def _csv_text(pairs: list[Pair]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "score", "outside_solution_a", "outside_solution_b"])
    for pair in pairs:
        writer.writerow([pair.student_a, pair.student_b, f"{pair.match.score:.3f}", f"{pair.outside_a:.3f}",
                         f"{pair.outside_b:.3f}"])
    return buffer.getvalue()


def render_html(assignment: str, pairs: list[Pair], found: Submissions, threshold: float,
                students: dict[str, _Student]) -> str:
    """The report page (template ``similarity.html``): one self-contained HTML document, all student text escaped."""
    flagged = sum(p.match.score >= threshold for p in pairs)
    shown = pairs[:min(max(flagged, SHOWN_PAIRS), MAX_SHOWN_PAIRS)]
    listed = pairs[:max(flagged, TABLE_PAIRS)]
    return render("similarity.html", title=f"Code similarity: {assignment}", assignment=assignment,
                  students=len(found.cells), pairs=len(pairs), flagged=flagged, threshold=threshold,
                  rows=[_pair_row(rank, pair, threshold) for rank, pair in enumerate(listed, start=1)],
                  side_by_side=[_side_by_side(rank, pair, students, threshold)
                                for rank, pair in enumerate(shown, start=1)],
                  notes=found.notes)


def _outside_text(pair: Pair) -> str:
    """Who has shared code outside their solution cells, and how much of it (empty: nobody)."""
    return "; ".join(f"{name}: {share}" for name, share in _outside_shares(pair))


def _outside_shares(pair: Pair) -> list[tuple[str, str]]:
    """``(student, share as a percentage)`` of each student with shared code outside their solution cells."""
    return [(name, f"{share:.0%}") for name, share in ((pair.student_a, pair.outside_a),
                                                       (pair.student_b, pair.outside_b)) if share > 0]


def _pair_row(rank: int, pair: Pair, threshold: float) -> dict:
    """One row of the table of pairs."""
    m = pair.match
    return {"rank": rank, "a": pair.student_a, "b": pair.student_b, "score": f"{m.score:.3f}",
            "share_a": f"{m.share_a:.0%}", "share_b": f"{m.share_b:.0%}", "flagged": m.score >= threshold,
            "outside": _outside_text(pair)}


def _side_by_side(rank: int, pair: Pair, students: dict[str, _Student], threshold: float) -> dict:
    """One pair shown side by side: the two students' cells, the shared code marked."""
    a, b, m = pair.student_a, pair.student_b, pair.match
    return {"rank": rank, "a": a, "b": b, "score": f"{m.score:.3f}",
            "status": "flagged" if m.score >= threshold else "below the threshold",
            "outside": _outside_shares(pair),
            "cells_a": _cells_marked(students[a], m.regions_a), "cells_b": _cells_marked(students[b], m.regions_b)}


def _cells_marked(student: _Student, regions: list[tuple[int, int]]) -> dict:
    """The student's cells with code of their own, each under its label, cut into marked and unmarked pieces;
    cut at :data:`SHOWN_CHARS`."""
    starts = student.prints.norm.starts
    shown_cells, hidden, at, budget, cut = [], [], 0, SHOWN_CHARS, False
    for cell in student.cells:
        end = at + len(cell.source)
        if not np.any((starts >= at) & (starts < end)):
            hidden.append(cell.where)
        elif budget > 0:
            shown = cell.source[:budget]
            local = [(max(s, at) - at, min(t, end) - at) for s, t in regions if s < end and t > at]
            shown_cells.append({"where": cell.where, "pieces": _pieces(shown, local)})
            budget -= len(shown)
            cut = cut or len(shown) < len(cell.source)
        else:
            cut = True
        at = end + 1
    return {"shown": shown_cells, "cut": cut, "shown_chars": SHOWN_CHARS, "hidden": ", ".join(hidden)}


def _pieces(shown: str, regions: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """``shown`` cut at the regions' ends: ``(text, shared)`` in order, ``shared`` true inside a region."""
    out, at = [], 0
    for start, end in regions:
        start, end = min(start, len(shown)), min(end, len(shown))
        if start >= end:
            continue
        out.extend([(shown[at:start], False), (shown[start:end], True)])
        at = end
    out.append((shown[at:], False))
    return out
