"""The graded quiz (Problem 12): the question bank's questions, from the same definitions, through the grader.

* One home: the bank page (``book/questions.md``) and the quiz take their numbers, statements and
  answers from :mod:`rbtutor.problems.question_bank`; a change there changes both (the page's own
  checks then fail, the quiz's key and rendered text change).
* The quiz spans the book: a question from every section of the bank, numeric and spot-the-error,
  and the bank's folded answers name the lines the quiz's key holds.
* Through real nbgrader with per-student numbers (variants on): ``alice`` answers honestly, ``bob``
  honestly in other valid forms (lists, the Euler parameters with the other sign), ``copier`` with
  bob's numbers, ``wrong`` with each answer a little off, the wrong line, the Euler parameters scalar
  last. The honest get full marks, copied numbers earn nothing on the numeric parts, wrong answers
  nothing at all; instant checks judge the quiz's ids against the student's own numbers.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import myst_nb
import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell

from rbtutor.course import api
from rbtutor.course.checks.core import CheckCore
from rbtutor.course.render import data_source, fill_markdown, fill_text
from rbtutor.inertia import check_inertia, inertia_from_gyration, parallel_axis
from rbtutor.problems import answer_key, load_data, question_bank
from rbtutor.problems.variants import load_course_data, variant

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_assignments import ROOT, grade_of, in_other_forms, run_course
from test_questions import BANK, DROPDOWN, questions, with_glued_lines
from test_variants import data_cell, fetch, submit

from rbtutor.course.trial import answered

NAME = "problem12"
SOURCE = ROOT / "exercises" / NAME / f"{NAME}.ipynb"
QUIZ_QUESTIONS = [n for _, numbers in question_bank.QUIZ for n in numbers]
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


# --------------------------------------------------------------------------- one home


def page_cells() -> list[str]:
    """The bank page's code cells, without their option lines."""
    return ["\n".join(line for line in m.group("body").splitlines() if not line.startswith(":"))
            for m in CODE_CELL.finditer(BANK.read_text(encoding="utf-8"))]


def run_page(cells: list[str], monkeypatch) -> dict:
    """Run the page's set-up and the given cells in one namespace; returns what was glued."""
    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value.data))
    namespace: dict = {}
    for code in page_cells()[:2] + cells:
        exec(compile(code, str(BANK), "exec"), namespace)
    return glued


def worked_answer(number: int) -> str:
    """The code of the page's folded worked answer to question ``number``."""
    source = BANK.read_text(encoding="utf-8")
    match = re.search(rf'code_prompt_show: "Worked answer to Q{number}"\n:[^\n]*\n(?P<code>.*?)^```',
                      source, re.MULTILINE | re.DOTALL)
    return match.group("code")


def quiz_cell_text(data: dict, number: int) -> str:
    """The source the renderer writes into the quiz's cell that asks question ``number``."""
    nb = nbformat.read(SOURCE, as_version=4)
    fill_markdown(nb, data)
    return next(c.source for c in nb.cells if c.metadata.get("rbtutor", {}).get("question") == number)


def test_a_changed_answer_reaches_the_quiz_key_and_fails_the_page(monkeypatch):
    """Q7's answer is computed in one place: a wrong formula there changes the quiz's key, and the
    bank page's own second computation refuses it."""
    data = load_data()
    before = answer_key(data, [12])["p12.a.q7_a_P"].value
    run_page([worked_answer(7)], monkeypatch)  # the page as it is: its check passes
    monkeypatch.setattr(question_bank, "point_acceleration", lambda r, nu, nu_dot: np.zeros(3) + 1.0)
    assert not np.allclose(answer_key(data, [12])["p12.a.q7_a_P"].value, before)
    with pytest.raises(AssertionError):
        run_page([worked_answer(7)], monkeypatch)


def test_a_changed_statement_reaches_the_page_and_the_quiz(monkeypatch):
    """Q14's words are written once: the page glues them, the renderer writes them into the quiz."""
    data = load_data()
    glued = run_page([], monkeypatch)
    assert glued["q14_statement"] == question_bank.statement(14, glued_numbers())
    changed = question_bank.STATEMENTS[14].replace("Find", "Work out")
    monkeypatch.setitem(question_bank.STATEMENTS, 14, changed)
    assert "Work out $I_x^O$" in run_page([], monkeypatch)["q14_statement"]
    assert "Work out $I_x^O$" in quiz_cell_text(data, 14)
    assert "Find $I_x^O$" not in quiz_cell_text(data, 14)


def glued_numbers() -> dict:
    """The numbers of the page's default seed (the SEED of its first cell)."""
    seed = int(re.fullmatch(r"SEED = (\d+)\b.*", page_cells()[0].strip()).group(1))
    return question_bank.draw(np.random.default_rng(seed))


def test_the_page_shows_the_shared_statements_and_no_copy_of_them():
    """Each question of the quiz appears on the page only through its glued statement."""
    source = BANK.read_text(encoding="utf-8")
    for number in QUIZ_QUESTIONS:
        assert f"{{glue:md}}`q{number}_statement:myst`" in source, number
        words = question_bank.STATEMENTS[number].split("<<")[0].split("\n")[0][:30]
        assert len(words) >= 10, words
        assert words not in source, f"Q{number}: its words are written on the page as well"


def test_the_quiz_notebook_asks_the_quiz_questions_in_order():
    cells = nbformat.read(SOURCE, as_version=4).cells
    asked = [c.metadata["rbtutor"]["question"] for c in cells if "question" in c.metadata.get("rbtutor", {})]
    assert asked == QUIZ_QUESTIONS
    data = load_data()
    for number in QUIZ_QUESTIONS:
        text = quiz_cell_text(data, number)
        template = "**Q" + f"{number}.** " + question_bank.statement_template(number, data["quiz"])
        assert text == fill_text(template, data)
        assert "<<" not in text, text
        assert "[[" not in text, text


# --------------------------------------------------------------------------- what the quiz asks


def test_the_quiz_spans_the_bank_and_its_kinds():
    """At least eight questions, numeric and spot-the-error, one or more from every section of the bank."""
    bank = with_glued_lines(BANK.read_text(encoding="utf-8"))
    kinds = {q.number: q.kind for q in questions(bank)}
    assert len(QUIZ_QUESTIONS) >= 8
    assert {kinds[n] for n in QUIZ_QUESTIONS} == {"numeric", "spot the error"}
    sections = [s for s in re.split(r"^## ", bank, flags=re.M)[1:]]
    for section in sections:
        numbers = {int(n) for n in re.findall(r"^\*\*Q(\d+) ", section, re.M)}
        assert numbers & set(QUIZ_QUESTIONS), f"no quiz question from {section.splitlines()[0]!r}"
    key = answer_key(problems=[12])
    assert all(re.fullmatch(r"p12\.[a-e]\.q\d+_\w+", i) for i in key)
    assert {int(re.search(r"\.q(\d+)_", i).group(1)) for i in key} == set(QUIZ_QUESTIONS)


def test_the_bank_answers_name_the_lines_of_the_quiz_key():
    """The page's folded explanation and the quiz's key agree on the wrong line of each derivation."""
    bank = with_glued_lines(BANK.read_text(encoding="utf-8"))
    key = answer_key(problems=[12])
    for q in questions(bank):
        if q.number in question_bank.WRONG_LINES:
            named = re.search(r"\bLine (\d+)\b", next(m.group("body") for m in DROPDOWN.finditer(q.chunk)))
            line_id = next(i for i in key if i.endswith(f".q{q.number}_line"))
            assert int(named.group(1)) == question_bank.WRONG_LINES[q.number] == key[line_id].value


def test_the_course_numbers_are_a_draw_of_the_bank():
    """The quiz section of the reference data is the bank's own draw (seed 2027, as its comment says)."""
    assert load_data()["quiz"] == question_bank.quiz_numbers(question_bank.draw(np.random.default_rng(2027)))


def test_every_student_gets_fresh_numbers_that_make_a_body():
    """Each student's quiz numbers are the bank's: all different, rounded as printed, and possible bodies."""
    data = load_data()
    seen = set()
    for k in range(60):
        quiz = variant(data, f"student{k:03d}")["quiz"]
        assert set(quiz) == set(data["quiz"])
        assert {s: set(f) for s, f in quiz.items()} == {s: set(f) for s, f in data["quiz"].items()}
        seen.add(json.dumps(quiz, sort_keys=True))
        for hull, i_xz in ((quiz["q14"], quiz["q14"]["i_xz"]), (quiz["q21"], 0.0)):
            inertia_g = check_inertia("I_G", inertia_from_gyration(hull["mass"], hull["radii"], i_xz=i_xz))
            check_inertia("I_O", parallel_axis(inertia_g, hull["mass"], hull["r_g"]))
        key = answer_key(variant(data, f"student{k:03d}"), [12])
        assert 0.0 <= key["p12.d.q35_turn_deg"].value <= 180.0
        assert key["p12.e.q41_lambda"].value > 0.0
    assert len(seen) == 60


# --------------------------------------------------------------------------- through the grader


def make_course(tmp: Path) -> Path:
    course = tmp / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (course / "exercises" / "problem_data.yaml").write_text(
        "# the course data: the reference data, variants on\n"
        "variants: {per_student: true, salt: quiz-test-course-salt}\n")
    return course


def answer_cell(nb, question: int):
    return next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith(f"_q{question}_answer"))


def all_a_little_wrong(nb):
    """Every answer off: numbers by 1 %, each line number by one, the Euler parameters scalar last."""
    for number in QUIZ_QUESTIONS:
        cell = answer_cell(nb, number)
        if number in question_bank.WRONG_LINES:
            cell.source += f"\nq{number}_line = q{number}_line + 1"
        elif number == 35:
            cell.source += "\ntheta_q35 = np.roll(theta_q35, -1)  # scalar last\nturn_deg = turn_deg * 1.01"
        else:
            names = re.findall(r'^hand_in\("[\w.]+", (\w+)\)', "\n".join(
                c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")), re.M)
            assigned = [n for n in names if re.search(rf"^{n} = ", cell.source, re.M)]
            cell.source += "".join(f"\n{n} = np.asarray({n}) * 1.01" for n in assigned)
    return nb


def other_forms(nb):
    """The honest answers as plain lists, and the Euler parameters with the other sign (the same rotation)."""
    answer_cell(nb, 35).source += "\ntheta_q35 = -theta_q35  # -theta is the same attitude"
    return in_other_forms(nb)


@pytest.fixture(scope="module")
def graded_quiz(tmp_path_factory):
    """The quiz released with per-student numbers, fetched by four students, submitted, collected, graded."""
    course = make_course(tmp_path_factory.mktemp("quiz"))
    data = load_course_data(course / "exercises" / "problem_data.yaml")
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert api(course).release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    fetched = {s: fetch(course, s, NAME) for s in ("alice", "bob", "copier", "wrong")}
    work = {s: answered(nbformat.read(p, as_version=4), source) for s, p in fetched.items()}
    other_forms(work["bob"])
    nb = work["copier"]
    nb.cells.insert(nb.cells.index(data_cell(nb)) + 1,
                    new_code_cell("\n".join(data_source(12, variant(data, "bob")).splitlines()[2:])))
    all_a_little_wrong(work["wrong"])
    for student, nb in work.items():
        submit(course, student, nb, NAME)
    collected = run_course(course, "collect", NAME)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    returned = run_course(course, "return-feedback")
    assert returned.returncode == 0, returned.stdout + returned.stderr
    return course, data, fetched


def autograded_ids() -> dict:
    """{grade_id: answer id} of the quiz's test cells."""
    found = {}
    for cell in nbformat.read(SOURCE, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        match = re.search(r'^hand_in\("([\w.]+)"', cell.source, re.M)
        if meta.get("grade") and match:
            found[meta["grade_id"]] = match.group(1)
    return found


def test_each_student_fetches_their_own_numbers(graded_quiz):
    _, data, fetched = graded_quiz
    cells = {s: data_cell(nbformat.read(p, as_version=4)).source for s, p in fetched.items()}
    assert len(set(cells.values())) == len(cells)
    for student, text in cells.items():
        assert text == data_source(12, variant(data, student))
    q7 = variant(data, "alice")["quiz"]["q7"]
    shown = next(c.source for c in nbformat.read(fetched["alice"], as_version=4).cells
                 if c.metadata.get("rbtutor", {}).get("question") == 7)
    assert f"{q7['r_p'][2]:.3g}" in shown


def test_honest_answers_in_any_valid_form_score_full(graded_quiz):
    course = graded_quiz[0]
    ids = autograded_ids()
    assert len(ids) == len(answer_key(problems=[12]))
    for grade_id in ids:
        for student in ("alice", "bob"):
            score, full = grade_of(course, NAME, student, grade_id)
            assert score == full > 0, f"{student} {grade_id}: {score}/{full}"


def test_copied_numbers_and_wrong_answers_earn_nothing(graded_quiz):
    """The copier's lines are right (they are the same for everyone); every number computed with
    bob's data, and every answer of ``wrong``, earns zero."""
    course = graded_quiz[0]
    for grade_id, answer_id in autograded_ids().items():
        score, full = grade_of(course, NAME, "wrong", grade_id)
        assert score == 0, f"wrong {grade_id}: {score}/{full}"
        score, full = grade_of(course, NAME, "copier", grade_id)
        assert score == (full if answer_id.endswith("_line") else 0), f"copier {grade_id}: {score}/{full}"


def test_feedback_names_a_known_mistake_and_gives_no_value(graded_quiz):
    course, data, _ = graded_quiz
    page = (course / "feedback" / "wrong" / NAME / f"{NAME}.html").read_text()
    assert "Not accepted" in page
    assert "wrong order" in page  # the scalar-last diagnosis of Q35, as the problems give it
    key = answer_key(variant(data, "wrong"), [12])
    for answer_id, answer in key.items():
        if answer_id.endswith("_line"):
            continue
        for x in np.ravel(answer.value):
            assert f"{x:.4g}" not in page, (answer_id, x)


def test_instant_checks_judge_the_quiz_against_own_numbers(graded_quiz):
    """The check service's core takes the quiz's ids like any problem's: right for alice's numbers passes,
    the same computation with bob's numbers does not."""
    course, data, _ = graded_quiz
    core = CheckCore(course)

    def a_p(student):
        q7 = variant(data, student)["quiz"]["q7"]
        r, nu, nu_dot = (np.asarray(q7[k]) for k in ("r_p", "nu", "nu_dot"))
        w = nu[3:]
        return (nu_dot[:3] + np.cross(w, nu[:3]) + np.cross(nu_dot[3:], r) + np.cross(w, np.cross(w, r))).tolist()

    def check(value):
        return core.check("alice", json.dumps({"id": "p12.a.q7_a_P", "value": value}).encode())

    assert check(a_p("alice"))["passed"]
    assert not check(a_p("bob"))["passed"]
