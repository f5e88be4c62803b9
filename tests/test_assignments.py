"""The twelve assignments (eleven problems and the quiz) through real nbgrader: release, fetch, submit,
collect, grade, feedback.

Everything runs in a scratch copy of the course (nbgrader_config.py and exercises/)
with its own exchange and gradebook. Students:

* ``alice`` answers with the reference solution through the exchange: full marks on
  every autograded part, Validate passes, feedback comes back, grades are exported;
* ``blank`` submits the released notebooks untouched: zero on every autograded part;
* ``forms`` gives every answer as a plain list (another valid form): full marks;
* ``hostile`` (Problem 3) patches numpy and the builtins and answers wrongly, or
  hands in an object that compares equal to anything: zero.

No reference value may appear in a released notebook or in any feedback file.
Set RBTUTOR_ONLY=problem03 (names separated by anything) to run it on some assignments only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from rbtutor.course.trial import answered, student_exchange
from rbtutor.grading.protocol import HAND_IN
from rbtutor.problems import PUBLISHED_KEY, answer_key, read_yaml
from rbtutor.problems.printed import printed_value

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = sorted(p.name for p in (ROOT / "exercises").glob("problem[0-9][0-9]")
                  if p.name in os.environ.get("RBTUTOR_ONLY", p.name))
PUBLISHED = read_yaml(PUBLISHED_KEY.read_text())  # the published key (package data), Problem 11 included


def submit_as(course: Path, student: str, name: str, answer) -> None:
    """A student fetches ``name`` through the exchange, answers with ``answer(nb)``, and submits."""
    home = course.parent / "students" / student
    home.mkdir(parents=True, exist_ok=True)
    student_exchange("fetch", course, home, name, student)
    path = home / name / f"{name}.ipynb"
    nbformat.write(answer(nbformat.read(path, as_version=4)), path)
    student_exchange("submit", course, home, name, student)


def cells(path):
    return nbformat.read(path, as_version=4).cells


def grade_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def autograded_cells(path):
    """Test cells that hand in a value: {grade_id: (answer id, variable)}."""
    found = {}
    for cell in cells(path):
        meta = grade_meta(cell)
        match = re.search(r"""^hand_in\(\s*["']([\w.]+)["']\s*,\s*(\w+)\s*\)""", cell.source, re.M)
        if meta.get("grade") and not meta.get("solution") and match:
            found[meta["grade_id"]] = match.groups()
    return found


def run_course(course: Path, command: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rbtutor.course", "--root", str(course), command, *args],
                          capture_output=True, text=True, timeout=1800)


def new_course(tmp: Path) -> Path:
    course = tmp / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    for name in PROBLEMS:
        shutil.copytree(ROOT / "exercises" / name, course / "exercises" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return course


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One class graded end to end; returns the course folder, the student home and the log."""
    from nbgrader.apps import NbGraderAPI  # noqa: F401 - fail early if nbgrader is missing

    from rbtutor.course import api

    tmp = tmp_path_factory.mktemp("class")
    course = new_course(tmp)
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    grader = api(course)
    for name in PROBLEMS:
        assert grader.release_assignment(name)["success"]
        source = course / "exercises" / name / f"{name}.ipynb"
        submit_as(course, "alice", name, lambda nb, s=source: answered(nb, s))
        submit_as(course, "blank", name, lambda nb: nb)
        submit_as(course, "forms", name, lambda nb, s=source: in_other_forms(answered(nb, s)))
        submit_as(course, "wrong", name, lambda nb, s=source: all_wrong(nb, s))
        if name == "problem03":
            for student, code in HOSTILE.items():
                submit_as(course, student, name, lambda nb, s=source, c=code: hostile(answered(nb, s), c))
        assert grader.collect(name)["success"]
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    returned = run_course(course, "return-feedback")
    assert returned.returncode == 0, returned.stdout + returned.stderr
    home = course.parent / "students" / "alice"
    for name in PROBLEMS:
        student_exchange("feedback", course, home, name, "alice")
    return course, home, result.stdout


def in_other_forms(nb):
    """Each numeric answer handed in as a nested list (another valid form), kept as it was elsewhere."""
    out = []
    for cell in nb.cells:
        match = re.search(r"""^hand_in\(\s*["'][\w.]+["']\s*,\s*(\w+)\s*\)""", cell.source, re.M)
        if match and grade_meta(cell).get("grade"):
            var = match.group(1)
            out.append(nbformat.v4.new_code_cell(
                f"_kept = {var}\nif not isinstance({var}, str):\n    {var} = np.asarray({var}).tolist()"))
            out.append(cell)
            out.append(nbformat.v4.new_code_cell(f"{var} = _kept"))
        else:
            out.append(cell)
    nb.cells = out
    return nb


def all_wrong(nb, source: Path):
    """Every handed-in variable set to a value of the right shape that is wrong for every part."""
    key = answer_key()
    lines = []
    for answer_id, var in autograded_cells(source).values():
        value = key[answer_id].value
        lines.append(f'{var} = "no idea"' if isinstance(value, str) else
                     f"{var} = np.full({np.shape(value)!r}, 1.2345)")
    first = next(c for c in nb.cells if grade_meta(c).get("solution") and c.cell_type == "code")
    first.source = "\n".join(lines)
    return nb


HOSTILE = {
    "patched": """
import builtins, math
np.isclose = lambda *a, **k: True
np.allclose = lambda *a, **k: True
math.isclose = lambda *a, **k: True
builtins.abs = lambda x: 0
K = 1.0
""",
    "always_equal": """
class AlwaysEqual(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __array__(self, *a, **k): return np.asarray(2.16e6)
K = AlwaysEqual(1.0)
""",
}


def hostile(nb, code):
    """Problem 3 with the answer cell of part (b) replaced by ``code``."""
    for cell in nb.cells:
        if grade_meta(cell).get("grade_id") == "p3_b_K_answer":
            cell.source = code
    return nb


def grade_of(course, assignment, student, grade_id):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade(grade_id, assignment, assignment, student)
        return grade.score, grade.max_score


@pytest.mark.parametrize("name", PROBLEMS)
def test_reference_solution_validates(name):
    from nbgrader.validator import Validator

    result = Validator().validate(str(ROOT / "exercises" / name / f"{name}.ipynb"))
    assert not result.get("failed"), result
    assert not result.get("changed"), result
    assert not result.get("type_changed"), result


@pytest.mark.parametrize("name", PROBLEMS)
def test_every_autograded_cell_hands_in_a_known_id(name):
    found = autograded_cells(ROOT / "exercises" / name / f"{name}.ipynb")
    number = int(name[-2:])
    ids = {answer_id for answer_id, _ in found.values()}
    assert ids == set(answer_key(problems=[number])), "every id of the key is autograded, and only those"
    assert all(HAND_IN.search(f'hand_in("{i}", x)') for i in ids)


@pytest.mark.parametrize("name", PROBLEMS)
def test_alice_full_marks_through_the_exchange(graded, name):
    course, home, _ = graded
    for grade_id in autograded_cells(course / "exercises" / name / f"{name}.ipynb"):
        score, max_score = grade_of(course, name, "alice", grade_id)
        assert score == max_score > 0, f"{name} {grade_id}: {score}/{max_score}"
    assert list((home / name / "feedback").rglob("*.html")), "feedback fetched"


@pytest.mark.parametrize("name", PROBLEMS)
@pytest.mark.parametrize(("student", "full"), [("blank", False), ("wrong", False), ("forms", True)])
def test_blank_scores_zero_and_lists_score_full(graded, name, student, full):
    course, _, _ = graded
    for grade_id in autograded_cells(course / "exercises" / name / f"{name}.ipynb"):
        score, max_score = grade_of(course, name, student, grade_id)
        assert score == (max_score if full else 0), f"{student} {name} {grade_id}: {score}/{max_score}"


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_hostile_answers_score_zero(graded, student):
    course, _, _ = graded
    if "problem03" not in PROBLEMS:
        pytest.skip("Problem 3 is not among the assignments")
    assert grade_of(course, "problem03", student, "p3_b_K") == (0.0, 2.0)
    feedback = (course / "feedback" / student / "problem03" / "problem03.html").read_text()
    # the verdict reads as a sentence, not as an exception name
    assert "<strong>Not accepted:</strong>" in feedback
    assert "AnswerNotAccepted" not in feedback


def test_progress_and_export(graded):
    course, _, log = graded
    assert re.search(r"\[\d+/\d+\] alice problem\d\d: [\d.]+/[\d.]+ autograded", log)
    rows = (course / "grades.csv").read_text().splitlines()
    assert rows[0].startswith("student,assignment,score")
    assert len(rows) > len(PROBLEMS)


def data_numbers(value) -> set[float]:
    """Every number of the problem data (they are given to students, so they are no leak)."""
    if isinstance(value, dict):
        return set().union(*(data_numbers(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(data_numbers(v) for v in value))
    return {abs(float(value))}


def reference_strings() -> set[str]:
    """Every reference value that is not a data echo, in the formats it could be printed with."""
    from rbtutor.problems import load_data

    given = data_numbers(load_data())
    strings = set()
    for answer_id, answer in answer_key().items():
        entry = PUBLISHED.get(answer_id, {})
        if answer.kind in ("roundoff", "text"):
            continue
        for x in np.ravel(answer.value):
            if abs(x) < 1e-12 or any(abs(abs(x) - d) <= 1e-12 * d for d in given):
                continue
            for fmt in ("{:.3g}", "{:.4g}", "{:.5g}", "{:.6g}", "{:.3e}", "{:.4e}", "{!r}"):
                strings.add(fmt.format(float(x)))
        printed = entry.get("printed")
        for text in np.ravel(np.array(printed, dtype=object)) if printed is not None else []:
            try:
                if any(abs(abs(printed_value(str(text))) - d) <= 1e-12 * d for d in given):
                    continue
            except ValueError:
                pass
            strings.add(str(text))
    # decimals with at least three significant digits; shorter ones ("0.36", "1.5") or
    # integers ("128") are too common in any page to be evidence of a leak
    def significant(s):
        return len(re.sub(r"[^0-9]", "", s.split("e")[0]).lstrip("0"))

    return {s for s in strings if re.search(r"[.e]", s) and significant(s) >= 3}


def reference_hits(secrets, text: str) -> list[str]:
    """The reference strings that stand in ``text`` as numbers of their own (no digit around them); the
    plain substring test first, which rules out nearly all of them fast, the pattern then decides."""
    return sorted(s for s in secrets if s in text and re.search(r"(?<![\d.])" + re.escape(s) + r"(?!\d)", text))


def test_no_reference_value_leaks(graded):
    """Released notebooks, and the feedback of submissions that fail every check."""
    course, _home, _ = graded
    # students who computed nothing right: whatever of the key shows up came from the grader
    files = list((course / "release").rglob("*.ipynb"))
    files += [p for student in ("blank", "wrong") for p in (course / "feedback" / student).rglob("*.html")]
    assert len(files) == 3 * len(PROBLEMS)
    secrets = reference_strings()
    leaks = {}
    for path in files:
        text = re.sub(r"<(style|script)\b.*?</\1>", "", path.read_text(), flags=re.S)
        if path.suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells)
        hits = reference_hits(secrets, text)
        if hits:
            leaks[str(path.relative_to(course.parent))] = hits[:5]
    assert not leaks, json.dumps(leaks, indent=1)


def test_variant_for_another_ship(tmp_path):
    """`make assignments DATA=...`: notebooks and grader follow the new ship together."""
    from rbtutor.course import api

    name = "problem03"
    if name not in PROBLEMS:
        pytest.skip("Problem 3 is not among the assignments")
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / name, course / "exercises" / name)
    variant = tmp_path / "other_ship.yaml"
    variant.write_text("vessel:\n  mass: 8.0e6\n  r_g: [-1.0, 0.0, -0.5]\nturn:\n  gm: 2.0\n")
    rendered = subprocess.run([sys.executable, "-m", "rbtutor.course", "--root", str(course), "render",
                               "--data", str(variant)], capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    assert (course / "exercises" / "problem_data.yaml").exists()
    assert run_course(course, "generate").returncode == 0
    released = (course / "release" / name / f"{name}.ipynb").read_text()
    assert "m = 8000000.0" in released
    assert "m = 6000000.0" not in released
    assert "$GM = 2.00$ m" in released
    assert "$GM = 1.80$ m" not in released  # the instructions follow
    grader = api(course)
    assert grader.release_assignment(name)["success"]
    source = course / "exercises" / name / f"{name}.ipynb"
    course_ship_k = answer_key(problems=[3])["p3.b.K"].value
    submit_as(course, "solver", name, lambda nb: answered(nb, source))
    submit_as(course, "copier", name, lambda nb: hostile(answered(nb, source), f"K = {course_ship_k!r}"))
    assert grader.collect(name)["success"]
    assert run_course(course, "grade").returncode == 0
    for grade_id in autograded_cells(source):
        score, max_score = grade_of(course, name, "solver", grade_id)
        assert score == max_score, grade_id
    assert grade_of(course, name, "copier", "p3_b_K") == (0.0, 2.0)


@pytest.mark.parametrize("name", PROBLEMS)
def test_blank_release_fails_validate_with_hints(graded, name):
    """Validate on the notebook as released: it fails, and says what to do, for every graded cell."""
    from nbgrader.validator import Validator

    course, _, _ = graded
    result = Validator().validate(str(course / "release" / name / f"{name}.ipynb"))
    failed = result.get("failed", [])
    assert len(failed) >= len(autograded_cells(course / "exercises" / name / f"{name}.ipynb"))
    texts = [re.sub(r"<[^>]+>|\x1b\[[0-9;]*m", "", f.get("error", "")) for f in failed]
    hints = [t for t in texts if "Hint:" in t or "assign your answer" in t or "did not provide a response" in t]
    assert len(hints) == len(texts), [t[-300:] for t in texts if t not in hints][:2]


def test_grader_sees_model_answer_and_rubric_students_do_not(graded):
    """In the notebook the Formgrader shows, each written part is followed by the grader's note (model
    answer and rubric from the source); no feedback page, in the course or fetched, has one."""
    from rbtutor.grading.grader_notes import is_grader_note

    course, home, _ = graded
    notes = 0
    for name in PROBLEMS:
        source = nbformat.read(course / "exercises" / name / f"{name}.ipynb", as_version=4)
        written = [grade_meta(c)["grade_id"] for c in source.cells
                   if grade_meta(c).get("grade") and grade_meta(c).get("solution")]
        shown = nbformat.read(course / "autograded" / "alice" / name / f"{name}.ipynb", as_version=4)
        for k, cell in enumerate(shown.cells):
            if grade_meta(cell).get("grade_id") in written:
                note = shown.cells[k + 1]
                assert is_grader_note(note), (name, grade_meta(cell)["grade_id"])
                assert f"For the grader, {grade_meta(cell)['grade_id']}" in note.source
                assert "Rubric" in note.source, note.source[:300]
                assert "Model answer" in note.source, note.source[:300]
                notes += 1
        assert notes >= len(written)
        assert sum(map(is_grader_note, shown.cells)) == len(written)
        pages = [course / "feedback" / "alice" / name / f"{name}.html", *home.rglob(f"{name}/**/*.html")]
        assert len(pages) >= 2, pages
        for page in pages:
            text = page.read_text()
            assert "For the grader" not in text, page
            assert "rbtutor-grader-note" not in text, page
    assert notes >= 20  # the course's written parts, all of them


def test_nbgrader_own_feedback_leaves_the_notes_out_too(graded, tmp_path):
    """The Formgrader's "Generate Feedback" button (nbgrader generate_feedback) is not the course's
    way, but even that path shows no grader's note."""
    from rbtutor.course import api

    course, _, _ = graded
    copy = tmp_path / "course"
    shutil.copytree(course, copy, symlinks=True, ignore=shutil.ignore_patterns("exchange"))
    assert api(copy).generate_feedback("problem03", "alice")["success"]
    page = (copy / "feedback" / "alice" / "problem03" / "problem03.html").read_text()
    assert "problem03" in page
    assert "For the grader" not in page
    assert "rbtutor-grader-note" not in page
    # the control: the notebook it was made from has the notes
    assert "For the grader" in (copy / "autograded" / "alice" / "problem03" / "problem03.ipynb").read_text()


def test_an_override_of_an_autograded_score_is_shown_and_logged(graded, tmp_path, capsys):
    """The Formgrader lets a grader change an autograded score; grades.csv and the run's log say so."""
    from rbtutor.course import CourseLayout, api
    from rbtutor.course.grade import finish_run

    course, _, _ = graded
    copy = tmp_path / "course"
    shutil.copytree(course, copy, symlinks=True, ignore=shutil.ignore_patterns("exchange"))
    grader = api(copy)
    part = next(iter(autograded_cells(copy / "exercises" / "problem03" / "problem03.ipynb")))
    with grader.gradebook as gradebook:  # what the Formgrader's score box does
        grade = gradebook.find_grade(part, "problem03", "problem03", "alice")
        auto = grade.auto_score
        assert auto
        assert auto > 0
        grade.manual_score = 0.0
        gradebook.db.commit()
    assert finish_run(CourseLayout(copy), grader, 0, [], 0.0, "(test)") == 0
    rows = {(r.split(",")[0], r.split(",")[1]): r for r in (copy / "grades.csv").read_text().splitlines()}
    assert f"{part} {auto:g}->0" in rows[("alice", "problem03")]
    assert f"alice problem03 {part} {auto:g}->0" in capsys.readouterr().out
    assert all(f"{part} " not in row for key, row in rows.items() if key != ("alice", "problem03"))
