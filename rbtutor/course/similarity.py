"""Step: after collection, beside grading. Which students handed in the same code for one assignment.

``python -m rbtutor.course similarity problem03`` compares the code answers of every
pair of students and writes ``similarity/problem03.csv`` (``student_a,student_b,score``,
most similar first) and ``similarity/problem03.html`` (the pairs, and the most similar
ones side by side with the shared regions marked).

How code is compared
--------------------
* **What is read.** For each folder ``submitted/<student>/<assignment>/`` whose name is
  a valid student id, the submission is first copied by the intake
  (:func:`rbtutor.grading.intake.take_in`: no link is followed, sizes and cells are
  capped, malformed notebooks are dropped), and only that copy is read. From each
  notebook, the code cells whose ``grade_id`` is a solution cell of the instructor's
  source notebook are kept, in notebook order, notebooks in name order.
* **Normalising.** The code is split into Python tokens (Pygments). Every name becomes
  ``V``, every number ``N``, every string ``S`` (the fields of an f-string stay names);
  comments, blank space and line breaks are dropped; built-in names, keywords,
  operators and brackets stay. Renaming variables, changing numbers or re-indenting
  therefore changes nothing.
* **Fingerprints.** The normalised text is cut into overlapping pieces of
  :data:`NOISE` characters, each piece hashed, and the hashes thinned by winnowing
  (the method of MOSS: Schleimer, Wilkerson and Aiken, SIGMOD 2003): any shared run
  of at least :data:`GUARANTEE` characters shares a fingerprint. The winnowing and
  the matching are those of the ``copydetect`` package (MIT licence). The hashing is
  done here, with BLAKE2b, so that a class gets the same scores on every run; so is
  the tokenising, because ``copydetect`` keeps numbers and maps matches back to the
  source only roughly.
* **Given code.** Every piece that also occurs in the code the students were given
  (the source notebook's code cells with their solution regions removed, and the
  stub nbgrader puts in their place) is left out before comparing.
* **Score.** For a pair, the share of each student's fingerprinted code that the other
  student's code also holds; the pair's score is the larger of the two shares, so a
  student who copied a classmate's whole answer and added code of their own is still
  found. Pairs at or above :data:`THRESHOLD` are flagged.

Per-student numbers make equal values impossible, so this finds shared *code*; a
short answer that every student writes the same way (one formula) scores high for
everyone and says nothing. The report is evidence for a person to read, never a verdict.
"""

from __future__ import annotations

import csv
import hashlib
import html
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
from pygments import token
from pygments.lexers import PythonLexer

from rbtutor.grading.intake import take_in
from rbtutor.grading.student_ids import id_problem

from .layout import CourseError, CourseLayout

#: Length of one fingerprinted piece of normalised code, in characters.
NOISE = 12
#: Shared runs of normalised code at least this long always share a fingerprint.
GUARANTEE = 16
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


# --------------------------------------------------------------------------- normalising


@dataclass
class Normalised:
    """Code reduced to its shape, with each character traced back to the original.

    Attributes
    ----------
    text : str
        The normalised code (names ``V``, numbers ``N``, strings ``S``, no layout).
    starts, ends : ndarray of int, shape (len(text),)
        For each character of ``text``, the slice of the original code it stands for.
    """

    text: str
    starts: np.ndarray
    ends: np.ndarray


def normalise(code: str) -> Normalised:
    """Replace names, numbers and strings by one letter each and drop comments and layout.

    Examples
    --------
    >>> normalise("speed = 3.5  # knots\\nprint(f'{speed}')").text
    'V=Nprint(SVS)'
    """
    out, starts, ends = [], [], []
    last = None
    for index, kind, value in PythonLexer().get_tokens_unprocessed(code):
        letter = _letter(kind, value)
        if letter is None:
            continue
        end = index + len(value)
        if letter == "S" and last == "S" and kind in token.Literal.String:  # one string, many tokens
            ends[-1] = end
            continue
        last = letter if kind in token.Literal.String else None
        for char in letter:
            out.append(char)
            starts.append(index)
            ends.append(end)
    return Normalised("".join(out), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))


def _letter(kind, value: str) -> str | None:
    """What one token becomes in the normalised text (None: it is dropped)."""
    if kind in token.Comment or kind in token.Text or kind in token.Whitespace:
        return None
    if kind in token.Literal.String:
        return "S"
    if kind in token.Literal.Number:
        return "N"
    if kind in token.Name and kind not in token.Name.Builtin:
        return "V"
    stripped = "".join(value.split())
    return stripped or None


# --------------------------------------------------------------------------- fingerprints


@dataclass
class Fingerprints:
    """The winnowed fingerprints of one student's normalised code."""

    norm: Normalised
    hashes: set
    where: dict
    coverage: float


def hashed_pieces(text: str) -> np.ndarray:
    """The hash of every piece of :data:`NOISE` characters of ``text``, in order.

    BLAKE2b, not Python's ``hash()`` (which copydetect uses): ``hash()`` of a string is
    salted afresh in each process, so winnowing kept other pieces on every run and the
    same class got other scores each time the report was made.
    """
    pieces = (text[i:i + NOISE].encode() for i in range(len(text) - NOISE + 1))
    return np.fromiter((int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "little", signed=True)
                        for piece in pieces), dtype=np.int64)


def fingerprint(norm: Normalised, given: np.ndarray) -> Fingerprints:
    """Winnowed fingerprints of ``norm`` (copydetect's winnowing), leaving out those in ``given``."""
    # deferred: copydetect takes about 0.8 s to import, and only this step needs it
    from copydetect.utils import get_token_coverage, winnow

    if len(norm.text) < NOISE:
        return Fingerprints(norm, set(), {}, 0.0)
    hashes, at = winnow(hashed_pieces(norm.text), GUARANTEE - NOISE + 1, remove_duplicates=False)
    kept = ~np.isin(hashes, given)
    where: dict = {}
    for value, index in zip(hashes[kept], at[kept], strict=True):
        where.setdefault(value, []).append(index)
    return Fingerprints(norm, set(where), where, float(get_token_coverage(where, NOISE, len(norm.text))))


def given_hashes(given_code: str) -> np.ndarray:
    """Every piece's hash of the code all students were given (not winnowed: none may slip through)."""
    return np.unique(hashed_pieces(normalise(given_code).text))


@dataclass
class Match:
    """How much of two students' code is shared, and where."""

    share_a: float
    share_b: float
    regions_a: list[tuple[int, int]]
    regions_b: list[tuple[int, int]]

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


def compare(a: Fingerprints, b: Fingerprints) -> Match:
    """The shares of ``a`` and ``b`` found in the other, and the shared regions of the original code."""
    # deferred: copydetect takes about 0.8 s to import, and only this step needs it
    from copydetect.utils import find_fingerprint_overlap, get_copied_slices

    at_a, at_b = find_fingerprint_overlap(a.hashes, b.hashes, a.where, b.where)
    if len(at_a) == 0:
        return Match(0.0, 0.0, [], [])
    slices_a, slices_b = get_copied_slices(at_a, NOISE), get_copied_slices(at_b, NOISE)
    share_a = float(np.sum(slices_a[1] - slices_a[0])) / a.coverage
    share_b = float(np.sum(slices_b[1] - slices_b[0])) / b.coverage
    return Match(min(share_a, 1.0), min(share_b, 1.0), _regions(slices_a, a.norm), _regions(slices_b, b.norm))


def _regions(slices: np.ndarray, norm: Normalised) -> list[tuple[int, int]]:
    """Slices of normalised text as merged, sorted slices of the original code."""
    spans = sorted((int(norm.starts[s]), int(norm.ends[e - 1])) for s, e in zip(slices[0], slices[1], strict=True))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


# --------------------------------------------------------------------------- reading the course


@dataclass
class Submissions:
    """The code answers of one assignment, and what could not be read."""

    code: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


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
    """Each student's solution code, read from an intake copy of their submission."""
    found = Submissions()
    root = layout.submitted()
    if not root.is_dir():
        return found
    with tempfile.TemporaryDirectory(prefix="rbtutor-similarity-") as scratch:
        for student in _students(root, found.notes):
            code = _student_code(root / student / assignment, Path(scratch) / student, solution_ids, found.notes,
                                 student)
            if code is not None:
                found.code[student] = code
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


def _student_code(folder: Path, copy: Path, solution_ids: set[str], notes: list[str], student: str) -> str | None:
    """The student's solution code from the intake's copy of ``folder``, or None (with a note)."""
    try:
        os.lstat(folder)
    except FileNotFoundError:
        return None  # no submission of this assignment
    try:
        intake = take_in(folder, copy)
    except ValueError as exc:
        notes.append(f"{student}: the submission could not be read ({exc}).")
        return None
    for kind in sorted(set(intake.kinds())):
        notes.append(f"{student}: the intake noted {kind} (see the grader's integrity report).")
    parts = []
    for rel in sorted(name for name in intake.taken if name.endswith(".ipynb")):
        nb = json.loads((copy / rel).read_text(encoding="utf-8", errors="replace"))
        parts.extend(_cell_source(cell) for cell in nb["cells"]
                     if cell.get("cell_type") == "code" and _grade(cell).get("grade_id") in solution_ids)
    code = "\n".join(parts)
    if not code.strip():
        notes.append(f"{student}: no code in the solution cells.")
        return None
    if len(code) > MAX_CODE_CHARS:
        notes.append(f"{student}: {len(code)} characters of code; only the first {MAX_CODE_CHARS} compared.")
        code = code[:MAX_CODE_CHARS]
    return code


# --------------------------------------------------------------------------- the report


@dataclass
class Pair:
    student_a: str
    student_b: str
    match: Match


def rank_pairs(code: dict[str, str], given_code: str) -> list[Pair]:
    """Every pair of students, most similar first (ties by name)."""
    given = given_hashes(given_code)
    prints = {student: fingerprint(normalise(text), given) for student, text in code.items()}
    pairs = [Pair(a, b, compare(prints[a], prints[b])) for a, b in itertools.combinations(sorted(prints), 2)]
    pairs.sort(key=lambda p: (-p.match.score, p.student_a, p.student_b))
    return pairs


def similarity_report(layout: CourseLayout, assignment: str, threshold: float = THRESHOLD) -> tuple[Path, Path]:
    """Write ``similarity/<assignment>.csv`` and ``.html``; return their paths."""
    if assignment not in layout.assignments():
        raise CourseError(f"expected one of the course's assignments {layout.assignments()}, got {assignment!r}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"expected a threshold in (0, 1], got {threshold}")
    solution_ids, given_code = read_sources(layout, assignment)
    found = read_submissions(layout, assignment, solution_ids)
    pairs = rank_pairs(found.code, given_code)
    out = layout.root / "similarity"
    out.mkdir(exist_ok=True)
    csv_path, html_path = out / f"{assignment}.csv", out / f"{assignment}.html"
    _write(csv_path, _csv_text(pairs))
    _write(html_path, render_html(assignment, pairs, found, threshold))
    return csv_path, html_path


def _write(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def _csv_text(pairs: list[Pair]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "score"])
    for pair in pairs:
        writer.writerow([pair.student_a, pair.student_b, f"{pair.match.score:.3f}"])
    return buffer.getvalue()


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #888; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
td.code { width: 50%; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0; font-size: 0.9rem; }
mark { background: #ffe08a; color: #000; outline: 1px solid #b58900; }
.flag { font-weight: bold; }
"""


def render_html(assignment: str, pairs: list[Pair], found: Submissions, threshold: float) -> str:
    """The report page: one self-contained HTML document, all student text escaped."""
    e = html.escape
    flagged = sum(p.match.score >= threshold for p in pairs)
    shown = pairs[:min(max(flagged, SHOWN_PAIRS), MAX_SHOWN_PAIRS)]
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>Code similarity: {e(assignment)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        "<main>", f"<h1>Code similarity: {e(assignment)}</h1>",
        f"<p>{len(found.code)} students with code, {len(pairs)} pairs; {flagged} at or above the threshold "
        f"{threshold:.2f}. A score is the larger of the two shares of fingerprinted code that the other "
        "student's code also holds, after names, numbers, strings and layout were made uniform and the code "
        "every student was given was left out. A high score is a reason to look, not a finding. "
        f"The {len(shown)} most similar pairs are shown side by side below the table.</p>",
        _pair_table(pairs, threshold), *(_side_by_side(rank, pair, found.code, threshold)
                                         for rank, pair in enumerate(shown, start=1)),
        _notes(found.notes), "</main>", "</body>", "</html>", "",
    ]
    return "\n".join(parts)


def _pair_table(pairs: list[Pair], threshold: float) -> str:
    flagged = sum(p.match.score >= threshold for p in pairs)
    listed = pairs[:max(flagged, TABLE_PAIRS)]
    rows = []
    for rank, pair in enumerate(listed, start=1):
        m = pair.match
        flag = '<span class="flag">flagged</span>' if m.score >= threshold else ""
        rows.append(f"<tr><td>{rank}</td><td>{html.escape(pair.student_a)}</td><td>{html.escape(pair.student_b)}</td>"
                    f"<td>{m.score:.3f}</td><td>{m.share_a:.0%}</td><td>{m.share_b:.0%}</td><td>{flag}</td></tr>")
    head = ("<tr><th scope=\"col\">Rank</th><th scope=\"col\">Student A</th><th scope=\"col\">Student B</th>"
            "<th scope=\"col\">Score</th><th scope=\"col\">Share of A found in B</th>"
            "<th scope=\"col\">Share of B found in A</th><th scope=\"col\">Flag</th></tr>")
    return (f"<h2>The {len(listed)} most similar pairs</h2><p>All {len(pairs)} pairs are in the CSV file "
            "beside this page.</p><table><caption>Pairs of students by code similarity, most similar first"
            f"</caption><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>")


def _side_by_side(rank: int, pair: Pair, code: dict[str, str], threshold: float) -> str:
    a, b, m = pair.student_a, pair.student_b, pair.match
    e = html.escape
    status = "flagged" if m.score >= threshold else "below the threshold"
    return (f"<section><h2>Pair {rank}: {e(a)} and {e(b)} (score {m.score:.3f}, {status})</h2>"
            "<p>Marked text (between the labels “shared from here” and “to here” for screen readers) is code "
            "that the other student's answer also holds.</p>"
            f"<table><caption>Solution code of {e(a)} and {e(b)}, side by side</caption><thead><tr>"
            f'<th scope="col">{e(a)}</th><th scope="col">{e(b)}</th></tr></thead><tbody><tr>'
            f'<td class="code">{_marked(code[a], m.regions_a)}</td><td class="code">{_marked(code[b], m.regions_b)}'
            "</td></tr></tbody></table></section>")


_HIDDEN = 'style="position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)"'


def _marked(text: str, regions: list[tuple[int, int]]) -> str:
    """``text`` escaped in a ``<pre>``, the regions in ``<mark>``, cut at :data:`SHOWN_CHARS`."""
    shown = text[:SHOWN_CHARS]
    out, at = [], 0
    for start, end in regions:
        start, end = min(start, len(shown)), min(end, len(shown))
        if start >= end:
            continue
        out.append(html.escape(shown[at:start]))
        out.append(f'<mark><span {_HIDDEN}>[shared from here]</span>{html.escape(shown[start:end])}'
                   f'<span {_HIDDEN}>[to here]</span></mark>')
        at = end
    out.append(html.escape(shown[at:]))
    cut = "" if len(text) <= SHOWN_CHARS else \
        f"<p>Only the first {SHOWN_CHARS} of {len(text)} characters are shown.</p>"
    return f"<pre>{''.join(out)}</pre>{cut}"


def _notes(notes: list[str]) -> str:
    if not notes:
        return "<h2>Notes</h2><p>Every submission was read.</p>"
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return f"<h2>Notes</h2><ul>{items}</ul>"
