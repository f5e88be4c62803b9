"""The similarity report (rbtutor.course.similarity): copies are found, honest work is not, hostile input is inert.

The test course has one assignment, ``problem03``: a given data cell, and one solution
cell that wraps the student's answer in given code (a checking helper before it and a
call after it). The task: the heel angle of a turning ship at each of five speeds, then
the speed with the largest heel and that heel in degrees.

The twenty honest students are built from three independent choices, each made in
genuinely different ways (not only under other names):

* how the heels are computed: a ``for`` loop appending to a list, a list comprehension,
  numpy arrays, a helper function passed to ``map``, or a ``while`` loop over indices;
* how the largest heel is found: ``max`` over indices with a key, a hand-written
  search, sorting (absolute heel, index) pairs, or ``np.argmax``;
* how the result is written out: ``math.degrees``, multiplying by ``180 / pi``,
  ``np.rad2deg`` with ``float``, a dictionary, or a list of all heels in degrees.

Student ``n`` takes method ``n % 5`` and search ``n // 5`` (so the twenty are every
pairing of the two) and write-out ``(method + search) % 5``, so two students share at
most one of the three choices. The formula itself is arranged in one of five ways
(``(search - method) % 5``), so two students who share a method or a search still
write the physics differently. Each also has their own variable names, comments and blank lines. The
copier takes one honest student's answer, renames every variable, changes the numbers
(``2.0`` for ``2``), the strings, the layout and the comments: the same code under
other names and numbers. Some honest students also work in cells of their own (part of
the answer in a cell before the solution cell, or a ``print`` after it), since every
code cell is compared.

The mechanical edits (``EDITS``) are what a copier does to hide a copy without
understanding it: renaming, every name and call in redundant parentheses, a statement
that does nothing after every statement, independent statements swapped, other comments
and strings, numbers written another way, and the copy moved into cells of one's own.
Each is checked to compute the same answer as the original, and a copy under each (and
under all at once) must score with its source exactly as a verbatim copy does.
"""

from __future__ import annotations

import ast
import csv
import io
import itertools
import json
import os
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from rbtutor.course.cli import main
from rbtutor.course.layout import CourseLayout
from rbtutor.course.similarity import (
    RELEASE_STUB,
    TABLE_PAIRS,
    THRESHOLD,
    Cell,
    normalise,
    normalise_cells,
    rank_pairs,
    read_given,
    read_sources,
    read_submissions,
)

ASSIGNMENT = "problem03"
GRADE_ID = "p3_worst_heel"

DATA_CELL = """import math
import numpy as np
g = 9.81
zg = -2.0
gm = 1.5
radius = 400.0
speeds = [4.0, 6.0, 8.0, 10.0, 12.0]
"""

GIVEN_BEFORE = '''def check_answer(worst_heel, worst_speed):
    """Shape checks only: a heel in degrees, one of the given speeds."""
    assert -90.0 < worst_heel < 90.0, "expected the heel in degrees"
    assert worst_speed in speeds, "expected one of the given speeds"
    return True

'''
GIVEN_AFTER = "\ncheck_answer(worst_heel, worst_speed)\n"

FORMULAS = [  # the same physics, arranged five ways; X is the speed
    "{X} ** 2 / (g * radius) * zg / gm",
    "zg * {X} * {X} / (gm * g * radius)",
    "{X} ** 2 * zg / (g * radius * gm)",
    "{X} ** 2 / radius / g * zg / gm",
    "zg / gm * {X} ** 2 / (radius * g)",
]

HEEL_METHODS = [
    """{H} = []
for {u} in speeds:
    {c} = math.atan({F_u})
    {H}.append({c})
""",
    """{H} = [math.atan({F_u}) for {u} in speeds]
""",
    """{v} = np.asarray(speeds)
{H} = np.arctan({F_v})
""",
    '''def {f}({u}):
    """Heel angle at one speed."""
    return math.atan({F_u})

{H} = list(map({f}, speeds))
''',
    """{H} = [0.0] * len(speeds)
{i} = 0
while {i} < len(speeds):
    {H}[{i}] = math.atan({F_i})
    {i} += 1
""",
]

SEARCHES = [
    """{k} = max(range(len({H})), key=lambda {j}: abs({H}[{j}]))
""",
    """{k} = 0
for {j}, {a} in enumerate({H}):
    if abs({a}) > abs({H}[{k}]):
        {k} = {j}
""",
    """{o} = sorted(zip(map(abs, {H}), range(len(speeds))))
{k} = {o}[-1][1]
""",
    """{k} = int(np.argmax(np.abs({H})))
""",
]

WRITE_OUTS = [
    """worst_speed = speeds[{k}]
worst_heel = math.degrees({H}[{k}])
""",
    """worst_heel, worst_speed = {H}[{k}] * 180 / math.pi, speeds[{k}]
""",
    """worst_heel = float(np.rad2deg({H}[{k}]))
worst_speed = float(speeds[{k}])
""",
    """{r} = {{"heel": {H}[{k}], "speed": speeds[{k}]}}
worst_heel = np.degrees({r}["heel"])
worst_speed = {r}["speed"]
""",
    """{r} = [math.degrees({a}) for {a} in {H}]
worst_heel = {r}[{k}]
worst_speed = speeds[{k}]
""",
]

NAME_SETS = [
    dict(H="heels", u="speed", c="factor", v="u_arr", f="heel_at", i="idx", k="best", j="n", a="angle",
         o="ranked", r="out"),
    dict(H="phi", u="U", c="ratio", v="U_all", f="phi_of", i="m", k="imax", j="q", a="p", o="pairs", r="res"),
    dict(H="angles", u="s", c="acc", v="sv", f="angle_for", i="count", k="top", j="t", a="val", o="order",
         r="summary"),
    dict(H="heel_list", u="vel", c="centripetal", v="vel_np", f="compute_heel", i="step", k="where", j="w",
         a="h", o="srt", r="d"),
]

COMMENTS = ["", "# heel angles first\n", "\n# step one: the heels\n\n", "# --- my answer ---\n"]


def honest_answer(n: int) -> str:
    """Student ``n``'s own answer (see the module docstring)."""
    names = dict(NAME_SETS[n % len(NAME_SETS)])
    method, search = n % 5, n // 5
    write_out = (method + search) % 5  # two students share at most one of method, search, write-out
    formula = FORMULAS[(search - method) % 5]  # sharing a method or a search, not a formula
    names.update(F_u=formula.format(X=names["u"]), F_v=formula.format(X=names["v"]),
                 F_i=formula.format(X=f"speeds[{names['i']}]"))
    parts = [COMMENTS[n % 4], HEEL_METHODS[method].format(**names), "\n" * (n % 3),
             SEARCHES[search].format(**names), WRITE_OUTS[write_out].format(**names)]
    return "".join(parts)


COPIED = 13  # heels through a helper and map, a sorted search, a dictionary write-out
COPY = '''# I worked this out myself
def   HeelFn(  x ):
    \"\"\"heel\"\"\"
    return math.atan( zg/gm * x**2.0/( radius*g ) )   # lateral acceleration



results = list( map( HeelFn , speeds ) )
by_size = sorted( zip( map( abs, results ), range( len( speeds ) ) ) )
pos = by_size[ -1 ][ 1 ]
worst_speed = speeds[ pos ]
worst_heel = math.degrees( results[ pos ] )
'''


# --------------------------------------------------------------------------- mechanical edits
#
# Each edit below changes how an answer is written and never what it computes
# (test_each_edit_keeps_what_the_answer_computes runs them all): the kinds of edit a
# copier makes to hide a copy without understanding it.

KEPT = {"worst_heel", "worst_speed"}  # the names the given code reads: a copy must keep them


def _offsets(code: str) -> list[int]:
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _at(code: str, line: int, column: int) -> int:
    assert code.isascii(), "the answers are ASCII, so syntax-tree columns are characters"
    return _offsets(code)[line - 1] + column


def _insert(code: str, insertions: list[tuple[int, int, str]]) -> str:
    """``code`` with each ``(offset, order, text)`` inserted; at one offset, lower ``order`` first."""
    out, at = [], 0
    for offset, _, text in sorted(insertions):
        out.append(code[at:offset])
        out.append(text)
        at = offset
    out.append(code[at:])
    return "".join(out)


def _edit_tokens(code: str, change) -> str:
    """``code`` with each token ``t`` replaced by ``change(t, previous_token)`` (None: kept)."""
    lines = code.splitlines(keepends=True)
    edits, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        new = change(tok, previous)
        if new is not None:
            assert tok.start[0] == tok.end[0], "the answers have no token over several lines"
            edits.append((tok.start, tok.end, new))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok
    for (row, start), (_, end), new in reversed(edits):
        lines[row - 1] = lines[row - 1][:start] + new + lines[row - 1][end:]
    return "".join(lines)


def renamed(answer: str) -> str:
    """Every name the answer binds (variables, functions, parameters) under another name."""
    bound = set()
    for node in ast.walk(ast.parse(answer)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.arg)):
            bound.add(getattr(node, "name", None) or node.arg)
    new = {name: f"my_{index}_{name[::-1]}" for index, name in enumerate(sorted(bound - KEPT))}
    return _edit_tokens(answer, lambda tok, prev: new.get(tok.string) if tok.type == tokenize.NAME
                        and (prev is None or prev.string != ".") else None)


def parenthesised(answer: str) -> str:
    """Every name, call, arithmetic and subscript that is read written in parentheses: ``(x)``."""
    insertions = []
    for node in ast.walk(ast.parse(answer)):
        read = not isinstance(getattr(node, "ctx", None), ast.Store)
        if isinstance(node, ast.Name) or (isinstance(node, (ast.Call, ast.BinOp, ast.Subscript)) and read):
            insertions.append((_at(answer, node.lineno, node.col_offset), 1, "("))
            insertions.append((_at(answer, node.end_lineno, node.end_col_offset), 0, ")"))
    return _insert(answer, insertions)


def with_junk(answer: str) -> str:
    """A statement that does nothing after every simple statement, at the same indentation."""
    simple = [s for s in ast.walk(ast.parse(answer)) if isinstance(s, ast.stmt) and not hasattr(s, "body")]
    insertions = []
    for index, stmt in enumerate(sorted(simple, key=lambda s: (s.lineno, s.col_offset))):
        targets = [t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)]
        junk = ["pass", "0", f"{targets[0]} = {targets[0]}" if targets else "...", '"""Nothing to see."""',
                f"unused_{index} = {index}", "(None)"][index % 6]
        line_end = _offsets(answer)[stmt.end_lineno]
        insertions.append((line_end, 0, " " * stmt.col_offset + junk + "\n"))
    return _insert(answer, insertions)


def restrung(answer: str) -> str:
    """Other comments and other string literals (the same literal always becomes the same new one)."""
    def change(tok, _):
        if tok.type == tokenize.COMMENT:
            return "# " + tok.string[::-1].strip("# ")
        if tok.type == tokenize.STRING:
            return repr(f"{ast.literal_eval(tok.string)} (my words)")
        return None
    return "# all my own work\n" + _edit_tokens(answer, change)


def renumbered(answer: str) -> str:
    """Every number written another way with the same value (``0x2`` for ``2``, ``2.`` for ``2.0``)."""
    def change(tok, _):
        if tok.type != tokenize.NUMBER:
            return None
        if "." not in tok.string:
            return hex(int(tok.string))
        return tok.string[:-1] if tok.string.endswith(".0") else tok.string + "0"
    return _edit_tokens(answer, change)


def _top_statements(answer: str) -> list[str]:
    """The answer's top-level statements as text, each with the comments and blank lines before it."""
    tree = ast.parse(answer)
    lines = answer.splitlines(keepends=True)
    cuts = [0] + [stmt.end_lineno for stmt in tree.body[:-1]] + [len(lines)]
    return ["".join(lines[a:b]) for a, b in itertools.pairwise(cuts)]


def final_state(code: str) -> dict | None:
    """What running the data cell and ``code`` leaves behind (values by name), or None if it fails."""
    space: dict = {}
    try:
        exec(DATA_CELL + code, space)  # the test's own answers, never a student's
    except Exception:  # noqa: BLE001 - any error: this order of statements breaks the answer
        return None
    return {name: repr(value) for name, value in space.items()
            if not name.startswith("__") and not callable(value) and not hasattr(value, "__file__")}


def reordered(answer: str) -> str:
    """Neighbouring top-level statements swapped wherever running the answer leaves the same values."""
    statements, expected = _top_statements(answer), final_state(answer)
    index = 0
    while index + 1 < len(statements):
        trial = statements[:index] + [statements[index + 1], statements[index]] + statements[index + 2:]
        if final_state("".join(trial)) == expected:
            statements, index = trial, index + 2
        else:
            index += 1
    return "".join(statements)


def everything(answer: str) -> str:
    """All the edits above, one after another."""
    return parenthesised(renumbered(restrung(renamed(with_junk(reordered(answer))))))


EDITS = {"renamed": renamed, "parenthesised": parenthesised, "with_junk": with_junk, "reordered": reordered,
         "restrung": restrung, "renumbered": renumbered, "everything": everything}


def given_code() -> str:
    """The code every student was given, as :func:`read_sources` reads it from the source notebook."""
    return "\n".join([DATA_CELL, solution_cell(RELEASE_STUB + "\n")])  # the region's last line break stays


def cells_of(answer: str) -> list[Cell]:
    """A student's code cells: the given data cell, and the solution cell holding ``answer``."""
    return [Cell(DATA_CELL, False), Cell(solution_cell(answer), True)]


def moved_to_own_cells(answer: str) -> list[Cell]:
    """The answer moved out of the solution cell (left with nbgrader's stub) into two cells of one's own."""
    statements = _top_statements(answer)
    half = len(statements) // 2
    return [Cell(DATA_CELL, False), Cell(solution_cell(RELEASE_STUB), True),
            Cell("".join(statements[:half]), False), Cell("".join(statements[half:]), False)]


def solution_cell(answer: str) -> str:
    return GIVEN_BEFORE + answer + GIVEN_AFTER


@dataclass
class Written:
    """Where a student wrote their code: the solution cell, and cells of their own before and after it."""

    answer: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


def notebook(answer: str | Written, *, source: bool = False) -> nbformat.NotebookNode:
    written = answer if isinstance(answer, Written) else Written(answer)
    answer = written.answer
    nb = nbformat.v4.new_notebook()
    data = nbformat.v4.new_code_cell(DATA_CELL, metadata={"nbgrader": {
        "grade": False, "solution": False, "locked": True, "grade_id": "p3_data", "schema_version": 3}})
    body = solution_cell(f"### BEGIN SOLUTION\n{answer}### END SOLUTION\n" if source else answer)
    answer_cell = nbformat.v4.new_code_cell(body, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": GRADE_ID, "schema_version": 3}})
    words = nbformat.v4.new_markdown_cell("Which way does it heel?", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": "p3_words", "points": 1,
        "schema_version": 3}})
    own = [nbformat.v4.new_code_cell(code) for code in (*written.before, *written.after)]
    nb.cells = [data, *own[:len(written.before)], answer_cell, *own[len(written.before):], words]
    return nb


def make_course(root: Path, answers: dict[str, str | Written]) -> CourseLayout:
    (root / "nbgrader_config.py").write_text("")
    (root / "exercises" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(notebook(honest_answer(0), source=True), root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    for student, answer in answers.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebook(answer), folder / f"{ASSIGNMENT}.ipynb")
    return CourseLayout(root)


HONEST = {f"s{n:02d}": honest_answer(n) for n in range(20)}


def honest_notebook(n: int) -> Written:
    """Student ``n``'s notebook: some worked part of the answer out in a cell of their own first, some print."""
    answer = honest_answer(n)
    if n % 4 == 3:
        statements = _top_statements(answer)
        return Written("".join(statements[2:]), before=("".join(statements[:2]),))
    if n % 4 == 1:
        return Written(answer, after=(f"print({sorted(KEPT)[n % 2]})\n",))
    return Written(answer)


@pytest.fixture(scope="module")
def class_report(tmp_path_factory):
    """The course with the twenty honest students and one copier, and its report."""
    root = tmp_path_factory.mktemp("course")
    layout = make_course(root, {**{f"s{n:02d}": honest_notebook(n) for n in range(20)}, "copier": COPY})
    assert main(["similarity", ASSIGNMENT, "--root", str(root)]) == 0
    with open(root / "similarity" / f"{ASSIGNMENT}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return layout, rows, (root / "similarity" / f"{ASSIGNMENT}.html").read_text()


def test_the_honest_students_really_differ():
    """No two honest answers are the same code: their normalised texts all differ."""
    shapes = {normalise(answer).text for answer in HONEST.values()}
    assert len(shapes) == len(HONEST)
    assert normalise(COPY).text == normalise(HONEST[f"s{COPIED:02d}"]).text, "the copy must be the same code"


def test_copy_under_other_names_and_numbers_is_the_top_pair(class_report):
    """The copier and the student copied from lead the CSV, above the threshold."""
    _, rows, _ = class_report
    assert len(rows) == 21 * 20 // 2
    top = rows[0]
    assert {top["student_a"], top["student_b"]} == {"copier", f"s{COPIED:02d}"}
    assert float(top["score"]) >= THRESHOLD
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True)


def test_twenty_honest_students_stay_below_the_threshold(class_report):
    """Every pair of honest students scores below the threshold the report flags at."""
    _, rows, _ = class_report
    honest = [r for r in rows if "copier" not in (r["student_a"], r["student_b"])]
    assert len(honest) == 190
    worst = max(honest, key=lambda r: float(r["score"]))
    assert float(worst["score"]) < THRESHOLD, f"honest pair flagged: {worst}"


def test_the_same_class_gets_the_same_scores_in_every_process(class_report, tmp_path):
    """The report is made again in two processes whose string hashes are salted differently: same CSV.

    Python salts ``hash()`` of a string afresh in each process; fingerprints made with it
    kept other pieces on every run, and an honest pair once scored 0.600, at the threshold.
    """
    layout, _, _ = class_report
    made = []
    for salt in ("1", "2"):
        out = tmp_path / salt
        subprocess.run([sys.executable, "-m", "rbtutor.course", "similarity", ASSIGNMENT, "--root", str(layout.root)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": salt})
        (layout.root / "similarity").rename(out)
        made.append((out / f"{ASSIGNMENT}.csv").read_text())
    assert made[0] == made[1]
    assert made[0] == _first_report(layout), "a new process must agree with the one that made the fixture"


def _first_report(layout: CourseLayout) -> str:
    main(["similarity", ASSIGNMENT, "--root", str(layout.root)])
    return (layout.root / "similarity" / f"{ASSIGNMENT}.csv").read_text()


def test_given_code_is_left_out(class_report):
    """Without leaving out the given code, honest pairs score higher: the given code is what is removed."""
    layout, _, _ = class_report
    solution_ids, given = read_sources(layout, ASSIGNMENT)
    assert solution_ids == {GRADE_ID}
    cells = read_submissions(layout, ASSIGNMENT, solution_ids).cells
    honest = {s: c for s, c in cells.items() if s != "copier"}
    with_given = max(p.match.score for p in rank_pairs(honest, ""))
    without_given = max(p.match.score for p in rank_pairs(honest, given))
    assert with_given > without_given
    assert with_given >= THRESHOLD, "the given code alone would flag honest students"


def test_report_page_lists_pairs_and_marks_shared_code(class_report):
    """The HTML has a headed table of pairs and the top pair side by side with marked regions."""
    _, rows, page = class_report
    assert '<th scope="col">Score</th>' in page
    assert "<caption>" in page
    assert page.count("<tr><td>") == TABLE_PAIRS < len(rows)
    assert f"All {len(rows)} pairs are in the CSV file" in page
    first = page.index("<section>")
    top_pair = page[first:page.index("</section>", first)]
    assert "copier" in top_pair
    assert "<mark>" in top_pair
    assert "HeelFn" in top_pair
    assert "http://" not in page
    assert "https://" not in page
    assert "<script" not in page
    assert "<link" not in page


HOSTILE_CODE = ('x = "</pre><script>alert(1)</script>"\n'
                "# <img src=x onerror=alert(2)> </td></table>\n"
                "y = [1, 2, 3]  # <iframe src=javascript:alert(3)>\n")


def test_hostile_notebooks_do_not_break_the_report(tmp_path):
    """Markup in code, a huge cell, links and a malformed notebook: the report is written, all of it inert."""
    huge = "total = 0\n" + "total = total + 1\n" * 20_000  # 360 kB: the intake cuts it to 100 kB
    layout = make_course(tmp_path, {"alice": honest_answer(1), "bob": honest_answer(8),
                                    "mallory": HOSTILE_CODE + COPY, "hugo": huge, "trent": COPY})
    root = layout.root
    (root / "submitted" / "mallory" / ASSIGNMENT / "secret.ipynb").symlink_to("/etc/passwd")
    (root / "submitted" / "linker").mkdir()
    (root / "submitted" / "linker" / ASSIGNMENT).symlink_to(root / "submitted" / "alice" / ASSIGNMENT)
    broken = root / "submitted" / "broken" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / f"{ASSIGNMENT}.ipynb").write_text('{"cells": [' * 50)
    nameless = root / "submitted" / "<b>x" / ASSIGNMENT
    nameless.mkdir(parents=True)
    nbformat.write(notebook(COPY), nameless / f"{ASSIGNMENT}.ipynb")
    os.symlink("/etc", root / "submitted" / "etc")

    assert main(["similarity", ASSIGNMENT, "--root", str(root)]) == 0
    page = (root / "similarity" / f"{ASSIGNMENT}.html").read_text()
    with open(root / "similarity" / f"{ASSIGNMENT}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    students = {r["student_a"] for r in rows} | {r["student_b"] for r in rows}
    assert students == {"alice", "bob", "mallory", "hugo", "trent"}
    assert {rows[0]["student_a"], rows[0]["student_b"]} == {"mallory", "trent"}
    for tag in ("<script", "<img", "<iframe", "<b>"):
        assert tag not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "root:" not in page
    assert "linker: the intake noted link_refused" in page
    assert "mallory: the intake noted link_refused" in page
    assert "broken: the intake noted notebook_unreadable" in page
    assert "hugo: the intake noted cell_cut" in page
    assert "&lt;b&gt;x: not a student id" in page
    assert "etc: not a folder (or a link)" in page
    assert page.count("<pre>") == page.count("</pre>")
    assert page.count("<table>") == page.count("</table>")
    assert len(page) < 1_000_000


def test_unknown_assignment_is_refused(tmp_path, capsys):
    """An assignment the course does not have is an error naming the ones it has."""
    make_course(tmp_path, {"alice": honest_answer(1)})
    assert main(["similarity", "problem99", "--root", str(tmp_path)]) == 2
    assert "expected one of the course's assignments ['problem03'], got 'problem99'" in capsys.readouterr().err


def test_source_notebook_json_is_read_not_trusted(tmp_path):
    """A source notebook is the instructor's: it is read with json, and solution ids come from it alone."""
    layout = make_course(tmp_path, {})
    nb = json.loads(layout.source_notebook(ASSIGNMENT).read_text())
    assert [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]] == ["p3_data", GRADE_ID, "p3_words"]
    assert read_sources(layout, ASSIGNMENT)[0] == {GRADE_ID}


# --------------------------------------------------------------------------- mechanical edits, found


def test_each_edit_keeps_what_the_answer_computes():
    """Every edit of every honest answer computes the same answer: the edits are mechanical, not rewrites."""
    changed_order = 0
    for student, answer in HONEST.items():
        expected = final_state(answer)
        assert expected is not None, student
        for name, edit in EDITS.items():
            edited = edit(answer)
            state = final_state(edited)
            assert state is not None, (student, name)
            assert {k: state[k] for k in KEPT} == {k: expected[k] for k in KEPT}, (student, name)
            if name == "reordered":
                changed_order += edited != answer
            elif name != "renumbered" or any(tok.type == tokenize.NUMBER for tok in
                                             tokenize.generate_tokens(io.StringIO(answer).readline)):
                assert edited != answer, (student, name)
        moved = moved_to_own_cells(answer)
        assert final_state("".join(cell.source for cell in moved[2:])) == expected, student
    assert changed_order >= 15, "most answers must have statements that can be swapped"


def test_the_given_code_helper_is_what_read_sources_reads(class_report):
    """The tests below leave out the same given code as the report does."""
    layout, _, _ = class_report
    assert read_sources(layout, ASSIGNMENT)[1] == given_code()


@pytest.mark.parametrize("edit", [*EDITS, "moved_to_own_cells"])
def test_a_copy_under_a_mechanical_edit_scores_as_a_verbatim_copy(edit):
    """Twenty copies, each of one honest answer under one edit: each copy scores with its source as a
    verbatim copy does, and every other pair (copies of others included) stays below the threshold."""
    given = given_code()
    verbatim = {s: rank_pairs({s: cells_of(a), "twin": cells_of(a)}, given)[0].match.score for s, a in HONEST.items()}
    assert min(verbatim.values()) >= THRESHOLD
    copies = {f"copy_{s}": moved_to_own_cells(a) if edit == "moved_to_own_cells" else cells_of(EDITS[edit](a))
              for s, a in HONEST.items()}
    pairs = rank_pairs({**{s: cells_of(a) for s, a in HONEST.items()}, **copies}, given)
    for pair in pairs:
        a, b = pair.student_a, pair.student_b
        source = next((x for x, y in ((a, b), (b, a)) if y == f"copy_{x}"), None)
        if source is not None:
            assert pair.match.score == pytest.approx(verbatim[source]), (edit, a, b)
        else:
            assert pair.match.score < THRESHOLD, (edit, a, b, pair.match.score)


def test_a_cell_that_is_not_python_is_read_token_by_token():
    """IPython magic lines are passed over; a cell that does not parse even then is still compared, by tokens."""
    answer = HONEST["s07"]
    assert normalise("%matplotlib inline\n!ls\n" + parenthesised(answer)).text == normalise(answer).text
    broken = "worst_heel = = (heel)\n"
    both = normalise_cells([answer, broken])
    tail = both.text[len(normalise(answer).text):]
    assert both.text.startswith(normalise(answer).text)
    assert tail, "the cell that is not Python is compared too"
    assert normalise_cells([answer, broken.replace("heel", "angle")]).text == both.text, "its names abstracted"
    at = len(answer) + 1  # where the second cell starts in the joined code
    spans = set(zip((both.starts[-len(tail):] - at).tolist(), (both.ends[-len(tail):] - at).tolist(), strict=True))
    assert all(0 <= start < end <= len(broken) for start, end in spans)
    assert (broken.index("heel)"), broken.index("heel)") + len("heel")) in spans, "each token traced to its place"


@pytest.mark.parametrize("depth", [400, 20000])
def test_code_nested_too_deeply_is_read_token_by_token(depth):
    """A statement too deep to walk (400 terms) is compared by its tokens, the rest of its cell as usual;
    a cell too deep to parse (20000) is compared by its tokens."""
    deep = "x = " + "+".join(["a"] * depth) + "\n"
    answer = normalise(HONEST["s07"]).text
    norm = normalise_cells([deep + parenthesised(HONEST["s07"])] if depth < 1000 else [deep, HONEST["s07"]])
    assert norm.text.endswith(answer)
    assert norm.text.count("+") >= depth - 1


def test_statements_that_do_nothing_are_dropped_and_others_kept():
    """Only statements without effect go: a constant stored in a name that is read, or a call, stays."""
    kept = ["a = 1\n", "print(a)\n", "b = f()\n", "c = [1] * 3\n", "c.append(2)\n"]
    junk = ["pass\n", "0\n", "a = a\n", "z = 4\n", "a += 0\n", "...\n", "c[0]\n", '"""Words."""\n']
    shape = normalise("".join(kept)).text
    assert normalise("".join(kept) + "".join(junk)).text == shape
    for line in kept:
        assert normalise("".join(kept).replace(line, "")).text != shape, f"{line!r} must count"


def test_independent_statements_are_put_in_one_order_dependent_ones_are_not():
    """Two independent assignments compare equal in either order; a statement never moves before what it reads."""
    assert normalise("x = f(a)\ny = g(b) + 1\n").text == normalise("y = g(b) + 1\nx = f(a)\n").text
    assert normalise("x = f(a) + 1\ny = x\n").text != normalise("y = x\nx = f(a) + 1\n").text
    loop = "for i in r:\n    s.append(i)\n    t.extend([i, 1])\n"
    swapped = "for i in r:\n    t.extend([i, 1])\n    s.append(i)\n"
    assert normalise(loop).text == normalise(swapped).text
    assert normalise(loop).text != normalise(swapped.replace("t.", "s.")).text, "two changes of one list keep order"


def test_given_statements_are_left_out_and_statements_of_the_same_shape_kept():
    """A given statement, however laid out, is left out; a student's own statement of the same shape is not."""
    given = read_given(given_code())
    alone = normalise_cells(["print(g)\n"], given).text
    assert normalise_cells(["g=9.810   # gravity\nprint(g)\n"], given).text == alone
    assert normalise_cells(["g = 9.7\nprint(g)\n"], given).text != alone
    assert normalise_cells(["speeds = [4.0, 6.0]\nprint(g)\n"], given).text != alone

def test_a_built_in_name_the_student_binds_is_a_name_like_any_other():
    """``sum`` as a variable renamed ``total`` is the same code; ``sum`` the built-in is kept."""
    def summing(name):
        return f"{name} = 0\nfor v in x:\n    {name} += v\nprint({name})\n"
    assert normalise(summing("sum")).text == normalise(summing("total")).text
    assert normalise("t = sum(x)\n").text != normalise("t = f(x)\n").text

@pytest.fixture(scope="module")
def mover_report(tmp_path_factory):
    """A course where one copier moved a copy, re-parenthesised, into cells of their own."""
    root = tmp_path_factory.mktemp("movers")
    answers = {f"s{n:02d}": honest_notebook(n) for n in range(8)}
    half = len(_top_statements(COPY)) // 2
    moved = [parenthesised("".join(_top_statements(COPY)[:half])), "".join(_top_statements(COPY)[half:])]
    answers["mover"] = Written(RELEASE_STUB, after=tuple(moved))
    answers["s13"] = HONEST["s13"]
    layout = make_course(root, answers)
    assert main(["similarity", ASSIGNMENT, "--root", str(root)]) == 0
    with open(root / "similarity" / f"{ASSIGNMENT}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return layout, rows, (root / "similarity" / f"{ASSIGNMENT}.html").read_text()


def test_a_copy_moved_out_of_the_solution_cells_is_found_and_said_so(mover_report):
    """The copy in cells of one's own leads the report, and the CSV and page say where the shared code is."""
    _, rows, page = mover_report
    top = rows[0]
    assert {top["student_a"], top["student_b"]} == {"mover", "s13"}
    assert float(top["score"]) >= THRESHOLD
    outside = {top["student_a"]: float(top["outside_solution_a"]), top["student_b"]: float(top["outside_solution_b"])}
    assert outside == {"mover": 1.0, "s13": 0.0}
    first = page.index("<section>")
    top_pair = page[first:page.index("</section>", first)]
    assert "100% of the code mover shares lies outside the solution cells of mover" in top_pair
    assert "(own cell)" in top_pair
    assert "<mark><span" in top_pair
    assert "(HeelFn)" in top_pair
    assert "mover: the solution cells hold no code of their own" in page
    assert "mover: 100%" in page[:first], "the table of pairs says it too"


def test_underscores_stay_visible_under_the_highlight():
    """Seen on the hub: under the page's highlight, z_G read "z G" (the next line's highlight and the
    outline covered the underscores). Rendered with the page's own CSS in Chromium, highlighted code
    with underscores must look different from the same code with spaces in their place."""
    import io
    import re

    from conftest import CHROMIUM, chromium_available
    from PIL import Image, ImageChops

    if not chromium_available():
        pytest.skip(f"no usable Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    template = (Path(__file__).resolve().parents[1] / "rbtutor" / "grading" / "pages" / "templates"
                / "similarity.html").read_text()
    css = re.search(r"\{% block style %\}(.*?)\{% endblock %\}", template, re.S).group(1)
    code = "z_G = m * a_b\nx_y = r_g + z_G\nw_w = 1"

    def shot(text: str) -> Image.Image:
        page.set_content(f"<html><head><style>{css}</style></head><body><pre><mark>{text}</mark></pre></body></html>")
        box = page.locator("pre").bounding_box()
        return Image.open(io.BytesIO(page.screenshot(clip=box))).convert("RGB")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(device_scale_factor=1)
        with_underscores, with_spaces = shot(code), shot(code.replace("_", " "))
        browser.close()
    difference = ImageChops.difference(with_underscores, with_spaces)
    dark = sum(1 for pixel in difference.get_flattened_data() if max(pixel) > 100)
    assert dark >= 5 * code.count("_"), f"the underscores under the highlight show as {dark} changed pixels"
