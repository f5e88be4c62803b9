"""Grades into the LMS: the last step after grading, from the gradebook to the file an LMS imports.

``rbtutor export --to canvas|moodle|blackboard --roster roster.csv --out FILE [--assignments A,B]
[--columns columns.csv]``

A course whose LMS launches it through LTI gets its grades there without a file
(:mod:`rbtutor.lms.outbox`); these files are for the courses without it.

The scores are the final scores of ``grades.csv`` (the submission score less the late
penalty), from the same rows (:func:`rbtutor.course.grade_rows.class_rows`), so the LMS file
and ``grades.csv`` can never disagree. The roster maps the course's student ids to
the identifiers each LMS matches on; it is checked at the boundary (:func:`read_roster`).

What each format follows (the LMS's own documentation; summarised in our words):

Canvas
    the Gradebook's CSV import, which reads the layout of its own CSV export: the columns
    ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment, and a
    second row whose first cell says ``Points Possible`` with the maximum of each assignment.
    Canvas matches a student by ``ID`` or one of the SIS columns (Ohio State's help page "Import
    CSV File for Carmen Grades"). Canvas's own importer (``GradebookImporter`` in canvas-lms)
    wants ``Student`` and ``ID`` first and ``Section`` as
    the last student column, takes a row whose first cell contains ``Points Possible`` as the
    maxima, matches an assignment column by title (or ``title (id)``) and creates one otherwise;
    an empty cell changes nothing where Canvas has no score, and removes a score Canvas has.
    A bare title that differs from Canvas's by one character makes a new assignment, so when the
    column map gives the Canvas assignment id, the column is headed ``Title (id)`` and matched by id.
    Canvas's ``ID`` column is its numeric user id: the roster's ``canvas_user_id``.
Moodle
    Grade administration > Import > CSV file: a header row, a column that identifies the user
    and one column per grade item; the import page maps the identifier column ("Map from") to a
    user field ("Map to": email address or ID number) and each column to a grade item (MoodleDocs
    "Grade import"). In Moodle's importer (``grade/import/csv/classes/load_data.php``) an empty
    cell, like ``-``, is imported as "no grade".
Blackboard
    Grade Center > Work Offline > Upload: a header row, the student's ``Username`` as the key,
    one column per Grade Center column; tab-delimited files are the recommended kind and need no
    quoting ("Uploading or Downloading Grade Center Items for Working Offline", Blackboard Help).
    A column without a Column ID in its header becomes a new column on upload, so every upload
    after a regrade would add new 0-point columns: when the column map gives the Column ID, the
    header is written as Blackboard's download writes it, ``Title [Total Pts: P Score] |ColumnID``.
    ``Username`` is the roster's ``blackboard_username``, a column of its own (an older roster's one
    ``lms_id`` column served Canvas's user id and Blackboard's user name, so it fitted only one).

Written parts still to grade are shown as an empty cell, never as a zero: an empty cell is "no
score" to Canvas and "no grade" to Moodle (both importers' code says so, above). Neither help
page we could read says what Blackboard makes of one, so the summary asks the instructor to check
its upload preview. Every cell goes through :func:`rbtutor.grading.report.csv_cell`, so no
spreadsheet runs one as a formula.
"""

from __future__ import annotations

import csv
import math
import os
import re
import sys
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ..grading.report import csv_cell, terminal_text
from ..grading.student_ids import id_problem
from .nbgrader import api

#: the roster's header as ``rbtutor lms roster`` writes it, the course's id first
ROSTER_COLUMNS = ("student_id", "name", "email", "canvas_user_id", "blackboard_username", "sis_user_id",
                  "sis_login_id", "section", "lms_user_id")
#: the columns every roster must have; the others may be absent (then empty on every line)
REQUIRED_COLUMNS = ("student_id", "name", "email")
#: the one identifier column of older rosters, which served both Canvas's numeric user id and
#: Blackboard's user name (so one roster could not serve both); read as the one of the LMS written
OLD_ID_COLUMN = "lms_id"
OLD_ID_MEANS = {"canvas": "canvas_user_id", "blackboard": "blackboard_username"}
#: the LMSs written, each with the roster columns of which one must be filled to find a student
IDENTIFIED_BY = {
    "canvas": ("canvas_user_id", "sis_user_id", "sis_login_id"),
    "moodle": ("email", "sis_user_id"),
    "blackboard": ("blackboard_username",),
}
#: what each identifier column holds, for the messages
COLUMN_MEANS = {"canvas_user_id": "Canvas's numeric user id", "blackboard_username": "Blackboard's user name",
                "sis_user_id": "the SIS user id (Moodle's ID number)", "sis_login_id": "the SIS login id",
                "email": "the e-mail address"}
#: how an ungraded cell reads in each LMS, for the summary
EMPTY_CELL_MEANS = {
    "canvas": "an empty cell leaves an ungraded assignment ungraded, but removes a score typed in "
              "Canvas; the import preview lists every change",
    "moodle": "an empty cell is imported as 'no grade' (shown '-'); it clears a grade typed in Moodle",
    "blackboard": "an empty cell carries no grade; check the upload preview (it lists the columns "
                  "that change) before submitting",
}


class RosterError(ValueError):
    """The roster cannot be used: says which line and what was expected."""


@dataclass(frozen=True)
class RosterEntry:
    """One roster line: the course's id and the identifiers the LMSs know the student by."""

    student_id: str
    name: str
    email: str
    canvas_user_id: str
    blackboard_username: str
    sis_user_id: str
    sis_login_id: str
    section: str
    lms_user_id: str
    line: int
    lms_id: str = ""  # an older roster's shared identifier column, read per LMS (OLD_ID_MEANS)

    def identifier(self, column: str) -> str:
        """The entry's ``column``, an older roster's ``lms_id`` standing in for an absent LMS column."""
        return getattr(self, column) or (self.lms_id if column in OLD_ID_MEANS.values() else "")


@dataclass(frozen=True)
class Roster:
    """The roster's entries and the optional columns its header lacks."""

    entries: list[RosterEntry]
    absent: tuple[str, ...]

    def notes(self, lms: str) -> list[str]:
        """What the reader of an export to ``lms`` should know about this roster's columns."""
        column = OLD_ID_MEANS.get(lms)
        if column in self.absent and OLD_ID_COLUMN not in self.absent:
            return [f"the roster has the older column {OLD_ID_COLUMN} and no {column}: its {OLD_ID_COLUMN} is "
                    f"read as {COLUMN_MEANS[column]}; rename the column to {column} (each LMS has its own "
                    "column now, so one roster serves Canvas and Blackboard)"]
        return []


def _check_text(value: str, column: str, line: int) -> str:
    """``value`` stripped; ``RosterError`` for a control character or line separator (a tab or line
    break would split a row). Other characters, a no-break space or a zero-width non-joiner in a
    name included, are kept."""
    bad = [char for char in value if unicodedata.category(char) in ("Cc", "Zl", "Zp")]
    if bad:
        raise RosterError(f"roster line {line}: expected printable text in {column}, got {value!r} "
                          f"(it contains {bad[0]!a})")
    return value.strip()


def read_roster(path: str | Path) -> list[RosterEntry]:
    """The roster's entries, in file order (:func:`load_roster`)."""
    return load_roster(path).entries


def load_roster(path: str | Path) -> Roster:
    """The roster, checked; ``RosterError`` for anything an import would trip on.

    Checked: the header holds :data:`REQUIRED_COLUMNS` (the other columns of :data:`ROSTER_COLUMNS`
    may be absent, and an older roster's ``lms_id`` is kept; others are ignored), each
    line has as many cells as the header, each ``student_id`` is accepted by
    :func:`rbtutor.grading.student_ids.id_problem` and appears once, and no cell holds a control
    character (a tab or line break would split a Blackboard row).
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise RosterError(f"expected a header row {','.join(ROSTER_COLUMNS)} in {path}, got an empty file")
    header = [cell.strip() for cell in rows[0]]
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        raise RosterError(f"expected the roster header to hold {','.join(REQUIRED_COLUMNS)} and the LMS's "
                          f"identifier columns, got {','.join(header)} (missing: {', '.join(missing)})")
    present = [column for column in (*ROSTER_COLUMNS, OLD_ID_COLUMN) if column in header]
    entries, seen = [], {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise RosterError(f"roster line {line}: expected {len(header)} cells, got {len(row)}")
        cells = dict.fromkeys(ROSTER_COLUMNS, "")
        cells.update({column: _check_text(row[header.index(column)], column, line) for column in present})
        problem = id_problem(cells["student_id"])
        if problem:
            raise RosterError(f"roster line {line}: expected a student id, got {cells['student_id']!r}: "
                              f"it {problem}")
        if cells["student_id"] in seen:
            raise RosterError(f"roster line {line}: student id {cells['student_id']!r} is already on line "
                              f"{seen[cells['student_id']]}; expected each student once")
        seen[cells["student_id"]] = line
        entries.append(RosterEntry(line=line, **cells))
    absent = tuple(column for column in (*ROSTER_COLUMNS, OLD_ID_COLUMN) if column not in header)
    return Roster(entries, absent)


def check_identifiers(entries: list[RosterEntry], lms: str) -> None:
    """``RosterError`` naming every entry the LMS could not match (none of its id columns filled)
    or would match twice (two entries with the same value in one of them)."""
    columns = IDENTIFIED_BY[lms]
    for column in columns:
        first = {}
        for entry in entries:
            value = entry.identifier(column)
            if value and value in first:
                raise RosterError(f"roster line {entry.line}: {column} {value!r} is also on line {first[value]}; "
                                  f"expected each {column} once, or {lms} gives both grades to one student")
            first.setdefault(value, entry.line)
    if lms == "moodle":  # one mapping for the whole file: every line needs the same column
        usable = [c for c in columns if all(getattr(e, c) for e in entries)]
        if entries and not usable:
            raise RosterError("expected every roster line to have an email (or every line an "
                              "sis_user_id, Moodle's ID number) for Moodle to map, got some without either")
        return
    lacking = [f"{e.student_id} (line {e.line})" for e in entries if not any(e.identifier(c) for c in columns)]
    if lacking:
        means = "; ".join(f"{c}: {COLUMN_MEANS[c]}" for c in columns)
        raise RosterError(f"expected one of {', '.join(columns)} for {lms} on every roster line ({means}), "
                          f"got none for: {', '.join(lacking)}")


@dataclass(frozen=True)
class Grade:
    """One student's result in one assignment, as grades.csv states it."""

    final_score: str
    pending_parts: int  # hand-graded parts still to grade; the score is then not final


def class_grades(grader, refused: list[str] | None = None,
                 ) -> tuple[dict[str, str], dict[tuple[str, str], Grade]]:
    """The assignments with their points possible, and every graded submission's :class:`Grade`.

    The rows are those grades.csv states (:func:`rbtutor.course.grade_rows.class_rows`, its final
    score and the written parts still to grade), not a second computation of them; ``refused``
    receives its hand grades that are not counted (not a finite number from 0 to the part's points).
    """
    # deferred: rbtutor.course.grade_rows takes 3061 ms to import (-X importtime, 2026-12-06); only class_grades uses it
    from .grade_rows import class_rows

    with grader.gradebook as gradebook:
        points = {a.name: f"{a.max_score:g}" for a in sorted(gradebook.assignments, key=lambda a: a.name)}
        rows = class_rows(gradebook)
    grades = {}
    for row in rows:
        if refused is not None:
            refused += [f"{row.student} {row.assignment} {why}" for why in row.refused]
        if not math.isfinite(row.final_score):  # never passed on to an LMS
            raise ValueError(f"expected a finite final score for {row.student} {row.assignment}, "
                             f"got {row.final_score!r}")
        grades[row.student, row.assignment] = Grade(f"{row.final_score:g}", row.pending)
    return points, grades


def exported_assignments(grader, points: dict[str, str], grades: dict[tuple[str, str], Grade],
                         named: list[str] | None = None) -> list[str]:
    """The assignments the file carries, in gradebook order.

    ``named`` (from the command line): exactly those, each one of the gradebook's (``ValueError``
    otherwise). Else every assignment released to the students (nbgrader's exchange) or with a
    graded submission: an assignment not yet released has no column, because an LMS makes a new
    gradebook column (Canvas: a new assignment) of every column it cannot match.
    """
    if named:
        unknown = [a for a in named if a not in points]
        if unknown:
            raise ValueError(f"expected assignments of the gradebook ({', '.join(points) or 'none'}), "
                             f"got {', '.join(unknown)}")
        return [a for a in points if a in named]
    carried = set(grader.get_released_assignments()) | {assignment for _, assignment in grades}
    return [a for a in points if a in carried]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 cell``, ``3 cells`` (``many`` for an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def _first(items: list[str], shown: int = 5) -> str:
    """The first ``shown`` items, and how many more there are."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


@dataclass
class ExportSummary:
    """What went into the LMS file and what did not, for the terminal and the tests."""

    lms: str
    out: Path
    students: int = 0
    assignments: list[str] = field(default_factory=list)
    not_in_roster: list[str] = field(default_factory=list)  # graded, but not written (no roster line)
    without_grades: list[str] = field(default_factory=list)  # on the roster, no submission graded
    pending: list[str] = field(default_factory=list)  # "student assignment (N written parts to grade)", left empty
    not_submitted: list[str] = field(default_factory=list)  # "student assignment", left empty
    refused_hand_grades: list[str] = field(default_factory=list)  # "student assignment part: why", not counted
    notes: list[str] = field(default_factory=list)  # about the roster's columns and the column ids

    def problems(self) -> list[str]:
        """Lines for standard error: every student whose grades are not all in the file."""
        lines = [f"not in the roster, grades NOT exported: {s}" for s in self.not_in_roster]
        lines += [f"on the roster but no graded submission: {s}" for s in self.without_grades]
        lines += [f"hand grade not counted (the part needs a grade): {s}" for s in self.refused_hand_grades]
        return lines

    def lines(self) -> list[str]:
        """The summary for standard output."""
        lines = [f"wrote {self.out} for {self.lms}: {plural(self.students, 'student')}, "
                 f"{plural(len(self.assignments), 'assignment')} ({', '.join(self.assignments) or 'none'})"]
        if self.pending or self.not_submitted:
            empty = []
            if self.not_submitted:
                empty.append(f"{len(self.not_submitted)} with no submission ({_first(self.not_submitted)})")
            if self.pending:
                empty.append(f"{len(self.pending)} with written parts still to grade ({_first(self.pending)})")
            lines.append(f"left empty: {plural(len(self.pending) + len(self.not_submitted), 'cell')}, "
                         + "; ".join(empty) + f". {EMPTY_CELL_MEANS[self.lms]}")
        lines.append(f"students not in the roster (grades not exported): {len(self.not_in_roster)}; "
                     f"roster entries without grades: {len(self.without_grades)}")
        return lines + [f"note: {note}" for note in self.notes]


def _split_name(name: str) -> tuple[str, str]:
    """(last, first) from "Last, First" or "First Last" (Blackboard ignores name changes on upload)."""
    if "," in name:
        last, first = name.split(",", 1)
        return last.strip(), first.strip()
    first, _, last = name.rpartition(" ")
    return last, first


def _identity(entry: RosterEntry, lms: str) -> list[str]:
    if lms == "canvas":
        return [entry.name, entry.identifier("canvas_user_id"), entry.sis_user_id, entry.sis_login_id, entry.section]
    if lms == "moodle":
        return [entry.name, entry.sis_user_id, entry.email]
    return [*_split_name(entry.name), entry.identifier("blackboard_username"), entry.sis_user_id]


#: the header of the file that gives each assignment its id in the LMS (``export --columns FILE``)
COLUMN_MAP_COLUMNS = ("assignment", "canvas_assignment_id", "blackboard_column_id")
#: what an LMS's own id of an assignment column looks like
COLUMN_ID_FORMS = {"canvas_assignment_id": (re.compile(r"[0-9]{1,20}"), "digits (the number in the "
                                            "assignment's Canvas address)"),
                   "blackboard_column_id": (re.compile(r"_?[0-9]{1,20}(_[0-9]{1,6})?"), "Blackboard's Column ID "
                                            "(digits, as after the | of a downloaded Grade Center header)")}


@dataclass(frozen=True)
class ColumnIds:
    """An assignment's column in the LMSs: the title Canvas knows it by and each LMS's own id."""

    title: str = ""
    canvas_assignment_id: str = ""
    blackboard_column_id: str = ""


def read_column_map(path: str | Path, known: list[str]) -> dict[str, ColumnIds]:
    """``{assignment: ColumnIds}`` from the column map (CSV: ``assignment,canvas_assignment_id,
    blackboard_column_id`` and optionally ``title``, Canvas's name of the assignment when it differs);
    ``RosterError`` naming the line for an unknown assignment, an id of the wrong form or one given twice."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle))
    header = [cell.strip() for cell in rows[0]] if rows else []
    missing = [column for column in COLUMN_MAP_COLUMNS if column not in header]
    if missing:
        raise RosterError(f"expected the column map's header to hold {','.join(COLUMN_MAP_COLUMNS)}[,title], got "
                          f"{','.join(header) or 'an empty file'} (missing: {', '.join(missing)})")
    found, seen = {}, {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise RosterError(f"column map line {line}: expected {len(header)} cells, got {len(row)}")
        cells = {column: _check_text(row[i], column, line) for i, column in enumerate(header)}
        name = cells["assignment"]
        if name not in known or name in found:
            why = "appears twice" if name in found else f"is not one of the gradebook's ({', '.join(known)})"
            raise RosterError(f"column map line {line}: assignment {name!r} {why}")
        for column, (form, means) in COLUMN_ID_FORMS.items():
            value = cells[column]
            if value and not form.fullmatch(value):
                raise RosterError(f"column map line {line}: expected {column} to be {means}, got {value!r}")
            if value and (column, value) in seen:
                raise RosterError(f"column map line {line}: {column} {value} is also on line "
                                  f"{seen[column, value]}; expected each once")
            seen[column, value] = line
        found[name] = ColumnIds(cells.get("title", ""), cells["canvas_assignment_id"], cells["blackboard_column_id"])
    return found


def column_title(lms: str, assignment: str, points: str, ids: ColumnIds | None) -> str:
    """The header of ``assignment``'s column: ``Title (id)`` for Canvas and ``Title [Total Pts: P Score]
    |ColumnID`` for Blackboard when the LMS's id is known (each importer then matches the column by
    its id, not its title), else the assignment's name."""
    title = (ids and ids.title) or assignment
    if lms == "canvas" and ids and ids.canvas_assignment_id:
        return f"{title} ({ids.canvas_assignment_id})"
    if lms == "blackboard" and ids and ids.blackboard_column_id:
        return f"{title} [Total Pts: {points} Score] |{ids.blackboard_column_id}"
    return assignment


#: the identity columns of each format, before one column per assignment
IDENTITY_HEADER = {
    "canvas": ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"],
    "moodle": ["Full name", "ID number", "Email address"],
    "blackboard": ["Last Name", "First Name", "Username", "Student ID"],
}


def lms_rows(lms: str, entries: list[RosterEntry], points: dict[str, str],
             grades: dict[tuple[str, str], Grade], summary: ExportSummary,
             column_ids: dict[str, ColumnIds] | None = None) -> list[list[str]]:
    """The rows of the LMS file (header first), one column per assignment of ``points`` (in its
    order, headed by :func:`column_title`), filling ``summary`` with what is left empty."""
    assignments = list(points)
    column_ids = column_ids or {}
    rows = [IDENTITY_HEADER[lms] + [column_title(lms, a, points[a], column_ids.get(a)) for a in assignments]]
    if lms == "canvas":
        rows.append(["Points Possible"] + [""] * 4 + [points[a] for a in assignments])
    for entry in entries:
        cells = []
        for assignment in assignments:
            grade = grades.get((entry.student_id, assignment))
            if grade is None:
                summary.not_submitted.append(f"{entry.student_id} {assignment}")
                cells.append("")
            elif grade.pending_parts:
                summary.pending.append(f"{entry.student_id} {assignment} "
                                       f"({plural(grade.pending_parts, 'written part')} to grade)")
                cells.append("")
            else:
                cells.append(grade.final_score)
        rows.append(_identity(entry, lms) + cells)
    return [[csv_cell(cell) for cell in row] for row in rows]


def export_lms(grader, lms: str, roster: str | Path, out: str | Path,
               assignments: list[str] | None = None, columns: str | Path | None = None) -> ExportSummary:
    """Write ``out``, the file ``lms`` imports, for the students of ``roster``; return the summary.

    ``columns`` is the column map (:func:`read_column_map`) giving assignments their LMS ids.
    Raises ``RosterError`` for a roster or column map that cannot be used and ``ValueError`` for an
    unknown LMS, before anything is written.
    """
    if lms not in IDENTIFIED_BY:
        raise ValueError(f"expected an LMS among {', '.join(IDENTIFIED_BY)}, got {lms!r}")
    loaded = load_roster(roster)
    entries = loaded.entries
    check_identifiers(entries, lms)
    refused: list[str] = []
    points, grades = class_grades(grader, refused)
    column_ids = read_column_map(columns, list(points)) if columns else {}
    carried = exported_assignments(grader, points, grades, assignments)
    points = {a: points[a] for a in carried}
    grades = {key: grade for key, grade in grades.items() if key[1] in points}
    refused = [line for line in refused if line.split()[1] in points]
    summary = ExportSummary(lms=lms, out=Path(out), students=len(entries), assignments=carried,
                            refused_hand_grades=refused, notes=loaded.notes(lms) + _unmatched(lms, carried, column_ids))
    rows = lms_rows(lms, entries, points, grades, summary, column_ids)
    on_roster = {e.student_id for e in entries}
    graded = {student for student, _ in grades}
    summary.not_in_roster = sorted(graded - on_roster)
    summary.without_grades = [e.student_id for e in entries if e.student_id not in graded]
    _write(Path(out), rows, lms)
    return summary


def _unmatched(lms: str, assignments: list[str], column_ids: dict[str, ColumnIds]) -> list[str]:
    """A note naming the columns the LMS can match only by title (no id known for them)."""
    column = {"canvas": "canvas_assignment_id", "blackboard": "blackboard_column_id"}.get(lms)
    bare = [a for a in assignments if not (column and getattr(column_ids.get(a, ColumnIds()), column))]
    if not column or not bare:
        return []
    if lms == "canvas":
        effect = "Canvas matches them by title, and makes a new assignment of a title that differs by a character"
    else:
        effect = "Blackboard makes a new 0-point column of each of them on every upload"
    return [f"no {column} known for {', '.join(bare)}: {effect}; give the ids in a column map (--columns FILE)"]


def _write(path: Path, rows: list[list[str]], lms: str) -> None:
    """CSV for Canvas and Moodle; for Blackboard tab-separated without quote characters, which its
    help says a tab-delimited file does not use (the roster holds no tab, so none is needed)."""
    if lms == "blackboard":
        tabs = [cell for row in rows for cell in row if "\t" in cell or "\n" in cell or "\r" in cell]
        if tabs:
            raise ValueError(f"expected no tab or line break in a Blackboard cell, got {tabs[0]!r}")
        options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE, "quotechar": None}
    else:
        options = {"delimiter": ","}
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:  # written beside the target and renamed over it: a failed export leaves the old file as it was
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as out:
            csv.writer(out, lineterminator="\r\n", **options).writerows(rows)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def run_export(layout, lms: str, roster: str | Path, out: str | Path, assignments: list[str] | None = None,
               columns: str | Path | None = None) -> int:
    """The ``export`` command: write the file, print the summary; the exit status.

    0 when every graded student is in the file; 1 when some are not, or a hand grade was not
    counted (they are listed on standard error, the file is still written for the others); 2 when
    nothing was written (bad roster, unreadable gradebook, unwritable file).
    """


    try:
        summary = export_lms(api(layout), lms, roster, out, assignments, columns)
    except (OSError, ValueError) as exc:
        print(f"rbtutor export: {terminal_text(exc)}", file=sys.stderr)
        return 2
    for line in summary.problems():
        print(terminal_text(line), file=sys.stderr)
    for line in summary.lines():
        print(terminal_text(line))
    return 1 if summary.not_in_roster or summary.refused_hand_grades else 0
