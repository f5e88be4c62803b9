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
other names and numbers.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rbtutor.course.cli import main
from rbtutor.course.layout import CourseLayout
from rbtutor.course.similarity import TABLE_PAIRS, THRESHOLD, normalise, rank_pairs, read_sources, read_submissions

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


def solution_cell(answer: str) -> str:
    return GIVEN_BEFORE + answer + GIVEN_AFTER


def notebook(answer: str, *, source: bool = False) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    data = nbformat.v4.new_code_cell(DATA_CELL, metadata={"nbgrader": {
        "grade": False, "solution": False, "locked": True, "grade_id": "p3_data", "schema_version": 3}})
    body = solution_cell(f"### BEGIN SOLUTION\n{answer}### END SOLUTION\n" if source else answer)
    answer_cell = nbformat.v4.new_code_cell(body, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": GRADE_ID, "schema_version": 3}})
    words = nbformat.v4.new_markdown_cell("Which way does it heel?", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": "p3_words", "points": 1,
        "schema_version": 3}})
    nb.cells = [data, answer_cell, words]
    return nb


def make_course(root: Path, answers: dict[str, str]) -> CourseLayout:
    (root / "nbgrader_config.py").write_text("")
    (root / "exercises" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(notebook(honest_answer(0), source=True), root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    for student, answer in answers.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebook(answer), folder / f"{ASSIGNMENT}.ipynb")
    return CourseLayout(root)


HONEST = {f"s{n:02d}": honest_answer(n) for n in range(20)}


@pytest.fixture(scope="module")
def class_report(tmp_path_factory):
    """The course with the twenty honest students and one copier, and its report."""
    root = tmp_path_factory.mktemp("course")
    layout = make_course(root, {**HONEST, "copier": COPY})
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
    code = read_submissions(layout, ASSIGNMENT, solution_ids).code
    honest = {s: c for s, c in code.items() if s != "copier"}
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
