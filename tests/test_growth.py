"""Costs that must not grow with the class: the classmates' keys (judge) and the export of grades.

* The keys of the whole class are worked out once per run (``start_run`` ->
  :func:`rbtutor.grading.judge.write_class_keys`) and read by every judge from the grader's
  scratch folder; a judge that finds them derives no classmate's key itself, and still names the
  classmate whose numbers a wrong answer fits.
* ``export_grades`` reads the gradebook in a fixed number of queries, whatever the number of
  submissions, and writes the same rows nbgrader's own relationships give.
* The instructor's source notebooks are read once per process (:mod:`rbtutor.grading.sources`),
  and the steps that share them leave them as read.
"""

from __future__ import annotations

import csv
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import rbtutor.problems.variants as variants
from rbtutor.grading.judge import JudgeAnswers, stored_class_keys, stored_variant, write_class_keys
from rbtutor.grading.judge import class_keys as keys_module
from rbtutor.grading.judge import preprocessor as preprocessor_module
from rbtutor.problems.variants import load_course_data, student_key

CLASS = [f"student{k:02d}" for k in range(6)]


@pytest.fixture
def course_data():
    data = load_course_data(None)
    return {**data, "variants": {"per_student": True, "salt": "growth-test-course-salt"}}


def _counting(monkeypatch):
    calls = []
    real = variants.student_key

    def counted(data, student_id, problems=None, salt=None):
        calls.append((student_id, None if problems is None else tuple(problems)))
        return real(data, student_id, problems, salt)

    # the judge imports the name, so count it where the judge looks it up (its key store and its preprocessor)
    monkeypatch.setattr(keys_module, "student_key", counted)
    monkeypatch.setattr(preprocessor_module, "student_key", counted)
    return calls


def _judge_for(student: str, store: Path | str) -> JudgeAnswers:
    judge = JudgeAnswers(class_keys=str(store))
    judge._student = student
    judge._classmates = [s for s in CLASS if s != student]  # what the gradebook would list
    return judge


def test_the_stored_keys_are_the_students_own(course_data, tmp_path):
    folder = write_class_keys(tmp_path / "keys", course_data, CLASS)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    for problem in (1, 8, 11):
        stored = stored_class_keys(tmp_path / "keys", course_data, problem)
        assert sorted(stored) == CLASS
        for student in CLASS[:2]:
            own = student_key(course_data, student, [problem])
            assert sorted(stored[student]) == sorted(own)
            for answer_id, answer in own.items():
                back = stored[student][answer_id]
                assert (back.unit, back.kind, back.periodic, back.quaternion, back.bound) == \
                    (answer.unit, answer.kind, answer.periodic, answer.quaternion, answer.bound)
                if answer.kind != "text":
                    np.testing.assert_array_equal(np.asarray(back.value, dtype=float),
                                                  np.asarray(answer.value, dtype=float))
                assert [c for c, _ in back.mistakes] == [c for c, _ in answer.mistakes]


def test_class_keys_are_computed_once_per_run_not_per_notebook(course_data, tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    write_class_keys(tmp_path / "keys", course_data, CLASS)
    assert sorted(s for s, _ in calls) == CLASS, "one key per student of the class, all problems at once"
    calls.clear()
    # a later run with one more student works out only the new student's key
    write_class_keys(tmp_path / "keys", course_data, [*CLASS, "latecomer"])
    assert [s for s, _ in calls] == ["latecomer"]
    calls.clear()
    # a worker process that has never seen the class: nothing cached in memory
    variants._cached_key.cache_clear()
    keys_module._stored_keys.cache_clear()
    wrong = student_key(course_data, "student03", [8])["p8.a.I_x"].value  # student03's number
    for notebook in range(5):  # five notebooks of student00, each with the same wrong answer
        found = _judge_for("student00", tmp_path / "keys")._fits_others("p8.a.I_x", wrong, course_data)
        assert [(e["kind"], e["whose"]) for e in found] == [("fits_other_student", "student03")], notebook
    assert calls == [], "a judge with the stored keys derives no classmate's key"


def test_only_the_problems_asked_for_are_worked_out_and_the_rest_later(course_data, tmp_path, monkeypatch):
    """A run grading problem03 and problem10 stores those keys only; a later run that grades
    problem08 adds its keys and works out nothing stored before."""
    calls = _counting(monkeypatch)
    folder = write_class_keys(tmp_path / "keys", course_data, CLASS, [3, 10])
    assert sorted(p.name for p in folder.glob("p*.json")) == ["p10.json", "p3.json"]
    assert sorted(calls) == [(s, (3, 10)) for s in CLASS]
    for problem in (3, 10):
        stored = stored_class_keys(tmp_path / "keys", course_data, problem)
        assert sorted(stored[CLASS[1]]) == sorted(student_key(course_data, CLASS[1], [problem]))
    calls.clear()
    write_class_keys(tmp_path / "keys", course_data, CLASS, [3, 8])
    assert sorted(calls) == [(s, (8,)) for s in CLASS]
    assert sorted(stored_class_keys(tmp_path / "keys", course_data, 8)) == CLASS
    assert sorted(stored_class_keys(tmp_path / "keys", course_data, 10)) == CLASS  # kept
    calls.clear()
    write_class_keys(tmp_path / "keys", course_data, CLASS, [3, 8, 10])
    assert calls == []


def test_a_worker_keeps_the_decoded_keys_not_the_files_they_came_from(course_data, tmp_path):
    """Every worker keeps each problem's stored keys of the whole class; the files' JSON kept as
    well held twice as much again (45.5 MB against 15.2 MB for 273 students)."""
    write_class_keys(tmp_path / "keys", course_data, CLASS)
    keys_module._stored_keys.cache_clear()
    keys_module._stored_json.cache_clear()
    for problem in (1, 8, 11):
        assert sorted(stored_class_keys(tmp_path / "keys", course_data, problem)) == CLASS
    assert keys_module._stored_keys.cache_info().currsize == 3
    assert keys_module._stored_json.cache_info().currsize == 0  # no key file's JSON left in memory


def test_the_stored_data_are_the_students_own(course_data, tmp_path):
    write_class_keys(tmp_path / "keys", course_data, CLASS)
    for student in CLASS:
        assert stored_variant(tmp_path / "keys", course_data, student) == variants.variant(course_data, student)
    assert stored_variant(tmp_path / "keys", course_data, "stranger") is None
    mine = stored_variant(tmp_path / "keys", course_data, CLASS[0])
    mine["vessel"]["mass"] = -1.0  # a caller's change does not reach the next reader
    assert stored_variant(tmp_path / "keys", course_data, CLASS[0]) == variants.variant(course_data, CLASS[0])


def test_with_a_store_a_notebook_derives_neither_own_key_nor_own_data(course_data, tmp_path, monkeypatch):
    """The grading of one notebook reads the student's key (judge) and data (restore) from the store."""
    from traitlets.config import Config

    from rbtutor.grading import restore as restore_module
    from rbtutor.grading.restore import RestoreCells

    write_class_keys(tmp_path / "keys", course_data, CLASS)
    calls = _counting(monkeypatch)
    derived = []
    monkeypatch.setattr(restore_module, "variant", lambda data, student: derived.append(student))
    judge = _judge_for("student02", tmp_path / "keys")
    monkeypatch.setattr(preprocessor_module, "course_reference", lambda _: (course_data, None))
    for answer_id in ("p1.a.I_O", "p8.a.I_x", "p11.d.position_P"):
        _, key = judge._key_for(answer_id)
        own = variants.student_key(course_data, "student02", [variants.problem_of(answer_id)])
        np.testing.assert_array_equal(np.asarray(key[answer_id].value, dtype=float),
                                      np.asarray(own[answer_id].value, dtype=float))
    assert calls == [], "the judge read the student's own key from the store"
    config = Config()
    config.JudgeAnswers.class_keys = str(tmp_path / "keys")
    restorer = RestoreCells(config=config)
    assert restorer._variant(course_data, "student02") == variants.variant(course_data, "student02")
    assert restorer._variant(course_data, "latecomer") is None  # not stored: worked out (here, the stand-in)
    assert derived == ["latecomer"]


def test_the_course_and_book_keys_are_worked_out_once_per_process(course_data, tmp_path, monkeypatch):
    """A failed answer is also checked against the course's and the book's key: each problem's key
    of each is worked out once, not per failed answer."""
    write_class_keys(tmp_path / "keys", course_data, CLASS)
    keys_module._PROBLEM_KEYS.clear()
    calls = []
    real = keys_module.answer_key

    def counted(data, problems=None):
        calls.append(tuple(problems or ()))
        return real(data, problems)

    monkeypatch.setattr(keys_module, "answer_key", counted)
    course = {**course_data, "module": {**course_data["module"], "mass": course_data["module"]["mass"] * 1.1}}
    right_for_book = keys_module.cached_reference(None)[1]["p8.a.I_x"].value
    for _notebook in range(5):
        found = _judge_for("student00", tmp_path / "keys")._fits_others("p8.a.I_x", right_for_book, course)
        assert ("fits_reference", "the reference data of the book") in [(e["kind"], e["whose"]) for e in found]
    assert calls == [(8,), (8,)], "the course's and the book's key of problem 8, once each"


def test_without_a_store_the_judge_still_names_the_classmate(course_data, tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    variants._cached_key.cache_clear()
    answer_id = "p11.d.position_P"
    wrong = student_key(course_data, "student04", [11])[answer_id].value
    calls.clear()
    found = _judge_for("student00", tmp_path / "absent")._fits_others(answer_id, wrong, course_data)
    assert ("fits_other_student", "student04") in [(e["kind"], e["whose"]) for e in found]
    assert len(calls) == len(CLASS) - 1, "no store: each classmate's key is worked out here"


def test_a_store_of_other_data_is_not_used(course_data, tmp_path):
    write_class_keys(tmp_path / "keys", course_data, CLASS)
    other = {**course_data, "variants": {"per_student": True, "salt": "another year, another salt"}}
    assert stored_class_keys(tmp_path / "keys", other, 8) == {}
    wrong = student_key(other, "student02", [8])["p8.a.I_x"].value
    found = _judge_for("student00", tmp_path / "keys")._fits_others("p8.a.I_x", wrong, other)
    assert ("fits_other_student", "student02") in [(e["kind"], e["whose"]) for e in found]


def test_a_classmate_missing_from_the_store_is_still_checked(course_data, tmp_path):
    write_class_keys(tmp_path / "keys", course_data, CLASS[:3])
    wrong = student_key(course_data, "student05", [8])["p8.a.I_x"].value
    found = _judge_for("student00", tmp_path / "keys")._fits_others("p8.a.I_x", wrong, course_data)
    assert ("fits_other_student", "student05") in [(e["kind"], e["whose"]) for e in found]


def test_a_broken_store_fails_loudly(course_data, tmp_path):
    folder = write_class_keys(tmp_path / "keys", course_data, CLASS[:2])
    (folder / "p8.json").write_text('{"student01": {"p8.a.I_x": {"value": {"code": "x"}}}}')
    keys_module._stored_keys.cache_clear()
    with pytest.raises((ValueError, KeyError)):
        stored_class_keys(tmp_path / "keys", course_data, 8)


# --------------------------------------------------------------------------- export_grades

def _gradebook(url: str, students: int) -> None:
    """Two assignments of one notebook, graded: some parts to grade by hand, overrides, late penalties."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gradebook:
        for name in ("a1", "a2"):
            gradebook.add_assignment(name)
            gradebook.add_notebook("nb", name)
            for c in range(4):
                gradebook.add_grade_cell(f"c{c}", "nb", name, max_score=2, cell_type="code" if c else "markdown")
                gradebook.add_solution_cell(f"c{c}", "nb", name)
        for k in range(students):
            gradebook.add_student(f"s{k:03d}")
        for name in ("a1", "a2"):
            for k in range(students):
                submission = gradebook.add_submission(name, f"s{k:03d}")
                for notebook in submission.notebooks:
                    for j, grade in enumerate(notebook.grades):
                        if j:
                            grade.auto_score, grade.needs_manual_grade = float((k + j) % 3), False
                        if j == 1 and k % 3 == 0:
                            grade.manual_score = 2.0  # an override in the Formgrader
                        if j == 0 and k % 2:
                            grade.manual_score, grade.needs_manual_grade = 1.0, False
                    notebook.late_submission_penalty = 1.0 if k % 4 == 0 else None
        gradebook.db.commit()


def _rows_by_relationships(url: str) -> list[list[str]]:
    """The rows the way the former export read them: nbgrader's relationships, one submission at a time."""
    from nbgrader.api import Gradebook

    rows = []
    with Gradebook(url) as gradebook:
        for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
            for sub in sorted(assignment.submissions, key=lambda s: s.student.id):
                grades = [g for nb in sub.notebooks for g in nb.grades]
                pending = sum(1 for g in grades if g.needs_manual_grade)
                overridden = [f"{g.name} {g.auto_score:g}->{g.manual_score:g}" for g in grades
                              if g.auto_score is not None and g.manual_score is not None
                              and g.manual_score != g.auto_score]
                rows.append([sub.student.id, assignment.name, f"{sub.score:g}", f"{sub.max_score:g}",
                             f"to grade ({pending})" if pending else "done", "; ".join(overridden),
                             f"{sub.late_submission_penalty:g}",
                             f"{sub.score - sub.late_submission_penalty:g}",
                             f"{sub.duedate:%Y-%m-%d %H:%M:%S} UTC" if sub.duedate else "", ""])
    return rows


def _export(url: str, path: Path) -> tuple[list[list[str]], int]:
    """Rows of grades.csv written by export_grades, and the number of SQL statements it ran."""
    from nbgrader.api import Gradebook
    from sqlalchemy import event

    from rbtutor.course.grade import export_grades

    gradebook = Gradebook(url)
    statements = []
    event.listen(gradebook.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    export_grades(SimpleNamespace(gradebook=gradebook), path)
    with path.open(newline="") as handle:
        return list(csv.reader(handle))[1:], len(statements)


@pytest.fixture
def venv_on_path(monkeypatch):
    # a new gradebook runs `alembic`, which lives beside this interpreter
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def test_export_grades_writes_what_the_relationships_give(tmp_path, venv_on_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    _gradebook(url, 12)
    rows, _ = _export(url, tmp_path / "grades.csv")
    expected = _rows_by_relationships(url)
    assert len(rows) == 24
    assert any(r[5] for r in rows)
    assert any(r[4] != "done" for r in rows)
    assert any(r[6] != "0" for r in rows)
    assert rows == expected


def test_export_grades_runs_as_many_queries_for_a_large_class_as_for_a_small_one(tmp_path, venv_on_path):
    counts = {}
    for students in (3, 30):
        url = f"sqlite:///{tmp_path / f'gradebook{students}.db'}"
        _gradebook(url, students)
        rows, counts[students] = _export(url, tmp_path / f"grades{students}.csv")
        assert len(rows) == 2 * students
    assert counts[3] == counts[30], f"expected the same number of queries, got {counts}"


def test_the_class_report_reads_the_gradebook_in_as_many_queries_for_a_large_class(tmp_path, venv_on_path):
    """The class report's reading of every submission and part (``_read_submissions``) costs the same
    number of queries for 30 students as for 3, and gives each part the points nbgrader's own
    ``Grade.max_score`` gives (a deferred column: read per grade, it was a query a part)."""
    from nbgrader.api import Gradebook
    from sqlalchemy import event

    from rbtutor.course.class_report import _read_submissions

    counts = {}
    for students in (3, 30):
        url = f"sqlite:///{tmp_path / f'gradebook{students}.db'}"
        _gradebook(url, students)
        gradebook, statements = Gradebook(url), []
        event.listen(gradebook.engine, "before_cursor_execute", lambda *args, seen=statements: seen.append(args))
        rows = _read_submissions(SimpleNamespace(gradebook=gradebook))
        counts[students] = len(statements)
        assert len(rows) == 2 * students
        with Gradebook(url) as fresh:
            expected = {(sub.student.id, sub.assignment.name, nb.name, g.name): g.max_score
                        for a in fresh.assignments for sub in a.submissions for nb in sub.notebooks for g in nb.grades}
        assert {(r["student"], r["assignment"], p["notebook"], p["grade_id"]): p["max_score"]
                for r in rows for p in r["parts"]} == expected
    assert counts[3] == counts[30], f"expected the same number of queries, got {counts}"


def test_the_gradebook_is_read_one_assignment_at_a_time(tmp_path, venv_on_path):
    """grades.csv and the class report read every submission with its grades; the memory held
    while they do is one assignment's submissions, not the whole class's."""
    from nbgrader.api import Gradebook, SubmittedAssignment

    from rbtutor.course.grade_rows import each_submission

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    _gradebook(url, 12)
    seen, held = [], []
    with Gradebook(url) as gradebook:
        for submission in each_submission(gradebook):
            seen.append((submission.assignment.name, submission.student.id))
            held.append(sum(isinstance(o, SubmittedAssignment) for o in gradebook.db.identity_map.values()))
    assert seen == sorted(seen)  # by assignment, then student
    assert len(seen) == 24  # all of them
    assert max(held) == 12  # one assignment's submissions in the session at a time, never the class's 24


def test_a_pool_stores_the_same_keys_as_one_process(course_data, tmp_path):
    from rbtutor.course.grade import worker_pool

    serial = write_class_keys(tmp_path / "one", course_data, CLASS)
    pooled = write_class_keys(tmp_path / "pool", course_data, CLASS, new_pool=lambda _: worker_pool(2))
    assert sorted(p.name for p in serial.iterdir()) == sorted(p.name for p in pooled.iterdir())
    for path in serial.iterdir():
        assert (pooled / path.name).read_text() == path.read_text(), path.name


def test_start_run_stores_the_class_keys_where_the_judge_reads_them(course_data, tmp_path, venv_on_path):
    from rbtutor.course.grade import store_class_keys
    from rbtutor.course.layout import CourseLayout

    layout = CourseLayout(tmp_path / "course")
    (tmp_path / "course").mkdir()
    data_file = tmp_path / "problem_data.yaml"
    data_file.write_text(variants.to_yaml(course_data))
    store = layout.scratch / "class_keys"
    config = SimpleNamespace(JudgeAnswers={"class_keys": str(store), "data_file": str(data_file)})
    config.JudgeAnswers = _Section(config.JudgeAnswers)
    folder = store_class_keys(layout, SimpleNamespace(config=config), CLASS[:3])
    assert folder is not None
    assert folder.parent == store
    assert stat.S_IMODE(layout.scratch.stat().st_mode) == 0o700
    assert sorted(stored_class_keys(store, load_course_data(data_file), 8)) == CLASS[:3]


def test_start_run_stores_the_keys_of_the_graded_assignments_problems(course_data, tmp_path, venv_on_path):
    """The problems come from the answer cells of the assignments' source notebooks."""
    import shutil

    from rbtutor.course.grade import store_class_keys
    from rbtutor.course.layout import CourseLayout

    layout = CourseLayout(tmp_path / "course")
    for name in ("problem03", "problem10"):
        shutil.copytree(Path(__file__).resolve().parents[1] / "exercises" / name, layout.exercises / name)
    data_file = tmp_path / "problem_data.yaml"
    data_file.write_text(variants.to_yaml(course_data))
    store = layout.scratch / "class_keys"
    config = SimpleNamespace(JudgeAnswers=_Section({"class_keys": str(store), "data_file": str(data_file)}))
    folder = store_class_keys(layout, SimpleNamespace(config=config), CLASS[:3], ["problem03", "problem10"])
    assert sorted(p.name for p in folder.glob("p*.json")) == ["p10.json", "p3.json"]
    assert sorted(stored_class_keys(store, load_course_data(data_file), 10)) == CLASS[:3]


class _Section(dict):
    def __getattr__(self, name):
        return self[name]


def test_each_notebook_s_row_lookups_use_an_index_not_a_scan(tmp_path, venv_on_path):
    """nbgrader's gradebook has no index starting with these columns, so finding one submitted
    notebook's grades scanned every grade of the class; index_gradebook adds them (twice: no error)."""
    from sqlalchemy import create_engine, text

    from rbtutor.course.nbgrader import GRADEBOOK_INDEXES, index_gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    _gradebook(url, 5)
    engine = create_engine(url)

    def plans() -> list[str]:
        with engine.connect() as connection:
            return [" ".join(str(row[-1]) for row in connection.execute(
                text(f"EXPLAIN QUERY PLAN SELECT * FROM {table} WHERE {column} = 'x'")))
                for table, column in GRADEBOOK_INDEXES]

    assert all(plan.startswith("SCAN") for plan in plans()), plans()
    index_gradebook(engine)
    index_gradebook(engine)
    assert all("USING INDEX rbtutor_" in plan for plan in plans()), plans()
    engine.dispose()


@pytest.mark.parametrize("parts", [3, 15])
def test_restore_reads_a_notebook_s_cells_in_one_query_whatever_their_number(tmp_path, venv_on_path, parts):
    """RestoreCells takes each part's points and kind from the gradebook in one query, and gets what
    nbgrader's own lists give (which load each grade cell's points with a query of its own)."""
    from nbgrader.api import Gradebook
    from sqlalchemy import event

    from rbtutor.grading.restore import _cells_by_kind

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("a1")
        gradebook.add_notebook("nb", "a1")
        for k in range(parts):
            gradebook.add_grade_cell(f"p{k}", "nb", "a1", max_score=k + 0.5, cell_type="code" if k else "markdown")
            if k % 2:
                gradebook.add_solution_cell(f"p{k}", "nb", "a1")
        gradebook.add_task_cell("task", "nb", "a1", max_score=3, cell_type="markdown")
    with Gradebook(url) as gradebook:
        notebook = gradebook.find_notebook("nb", "a1")
        statements = []
        event.listen(gradebook.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        points, solutions, tasks = _cells_by_kind(gradebook, notebook)
        assert len(statements) == 1
        assert points == {c.name: float(c.max_score) for c in notebook.grade_cells}
        assert points == {f"p{k}": k + 0.5 for k in range(parts)}
        assert solutions == {c.name for c in notebook.solution_cells} == {f"p{k}" for k in range(1, parts, 2)}
        assert tasks == {c.name for c in notebook.task_cells} == {"task"}


# --------------------------------------------------------------------------- the instructor's source notebooks


def test_a_source_notebook_is_read_once_per_process_until_it_changes(tmp_path, monkeypatch):
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    from rbtutor.grading import sources

    path = tmp_path / "problem03.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("first")]), path)
    reads, real = [], nbformat.read
    monkeypatch.setattr(sources.nbformat, "read", lambda *args, **kw: reads.append(args[0]) or real(*args, **kw))
    shared = sources.source_notebook(path)
    assert sources.source_notebook(path) is shared
    assert sources.source_notebook(str(path)) is shared
    assert len(reads) == 1
    nbformat.write(new_notebook(cells=[new_markdown_cell("other")]), path)  # the same size: the times tell
    assert sources.source_notebook(path).cells[0].source == "other"
    assert len(reads) == 2


def test_the_steps_that_share_a_source_notebook_leave_it_as_read(tmp_path, monkeypatch):
    """The intake (its source-copy check) and the grader's notes both read the shared notebook;
    neither may change it, or the next submission would be judged against another source."""
    import copy
    import shutil

    import nbformat

    from rbtutor.course import CourseLayout
    from rbtutor.course.grade.submission import source_notebooks
    from rbtutor.grading import sources
    from rbtutor.grading.grader_notes import GraderNotes
    from rbtutor.grading.intake import take_in
    from rbtutor.grading.sources import source_notebook

    exercises = tmp_path / "exercises"
    shutil.copytree(Path(__file__).resolve().parents[1] / "exercises" / "problem03", exercises / "problem03",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    path = exercises / "problem03" / "problem03.ipynb"
    shared = source_notebook(path)
    before = copy.deepcopy(shared)
    handed_in = tmp_path / "submitted"
    handed_in.mkdir()
    shutil.copyfile(path, handed_in / "problem03.ipynb")  # the source itself, handed in: refused as a copy
    result = take_in(handed_in, tmp_path / "intake", sources={"problem03": shared})
    assert "source_copy" in result.kinds()
    nb, _ = GraderNotes(source_directory=str(exercises)).preprocess(
        nbformat.read(path, as_version=4), {"nbgrader": {"assignment": "problem03", "notebook": "problem03"}})
    assert any(cell.get("metadata", {}).get("rbtutor", {}).get("grader_note") for cell in nb.cells)
    assert source_notebook(path) is shared
    assert shared == before == nbformat.read(path, as_version=4)

    def no_second_read(*args, **kw):
        raise AssertionError(f"{args[0]} read again")

    monkeypatch.setattr(sources.nbformat, "read", no_second_read)  # the next submission: from memory
    assert source_notebooks(CourseLayout(tmp_path), "problem03") == {"problem03": shared}
    GraderNotes(source_directory=str(exercises)).preprocess(
        copy.deepcopy(before), {"nbgrader": {"assignment": "problem03", "notebook": "problem03"}})
