"""The gradebook on a PostgreSQL server: two graders at once, the same grades as SQLite, nothing lost.

A small class of Problem 3 (``ann`` answers with the key's computations, ``ben`` hands in
wrong values of the right shape, ``cat`` hands in the blank notebook) is collected once,
then graded twice:

* with the default SQLite gradebook, in one ``python -m rbtutor.course grade`` run;
* with ``RBTUTOR_GRADEBOOK`` naming a database on a real PostgreSQL server (tests/postgres.py),
  by two graders started together, each in its own copy of the course folder holding one
  half of the class (``ann`` and ``ben``; ``cat``), as two teaching assistants would.

Every grade of every student must be the same in both gradebooks, and the PostgreSQL
gradebook must hold each student, submission, notebook and grade exactly once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from postgres import postgres_server  # noqa: F401 - the fixture
from test_assignments import ROOT, all_wrong, answered, run_course, submit_as

from rbtutor.course import api

NAME = "problem03"
HALVES = (("ann", "ben"), ("cat",))


def grades(url: str) -> dict[tuple[str, str], tuple]:
    """{(student, grade id): (score, max score, needs manual grade)} of every grade in the gradebook."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(url, course_id="rbtutor") as gradebook:
        for submission in gradebook.find_assignment(NAME).submissions:
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    key = (submission.student.id, grade.name)
                    assert key not in found, f"{key} twice"
                    found[key] = (grade.score, grade.max_score, grade.needs_manual_grade)
    return found


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """A course folder with Problem 3 only, released and collected from three students."""
    if not (ROOT / "exercises" / NAME).is_dir():
        pytest.skip("Problem 3 is not among the assignments")
    course = tmp_path_factory.mktemp("pg") / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert api(course).release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    submit_as(course, "ann", NAME, lambda nb: answered(nb, source))
    submit_as(course, "ben", NAME, lambda nb: all_wrong(nb, source))
    submit_as(course, "cat", NAME, lambda nb: nb)
    taken = run_course(course, "collect", NAME)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["ann", "ben", "cat"]
    return course


def test_two_graders_on_postgresql_give_the_sqlite_grades(collected, postgres_server, tmp_path):  # noqa: F811
    # the reference: SQLite, one grader
    reference_course = tmp_path / "sqlite"
    shutil.copytree(collected, reference_course)
    result = run_course(reference_course, "grade")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    reference = grades(f"sqlite:///{reference_course / 'gradebook.db'}")

    url = postgres_server.create_database("two_graders")
    env = {**os.environ, "RBTUTOR_GRADEBOOK": url}
    folders = []
    for k, half in enumerate(HALVES):
        folder = tmp_path / f"grader{k}"
        shutil.copytree(collected, folder, ignore=shutil.ignore_patterns("gradebook.db*"))
        for student in {"ann", "ben", "cat"} - set(half):
            shutil.rmtree(folder / "submitted" / student)
        folders.append(folder)
    # the instructor generates once into the new gradebook (the assignment and its cells)
    generated = subprocess.run([sys.executable, "-m", "rbtutor.course", "--root", str(folders[0]), "generate"],
                               env=env, capture_output=True, text=True, timeout=600)
    assert generated.returncode == 0, generated.stdout + generated.stderr

    graders = [subprocess.Popen([sys.executable, "-m", "rbtutor.course", "--root", str(folder), "grade",
                                 "--jobs", "2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for folder in folders]
    outputs = [grader.communicate(timeout=900) for grader in graders]  # a safety net, not a wait
    for grader, (out, err), half, folder in zip(graders, outputs, HALVES, folders, strict=True):
        assert grader.returncode == 0, out[-2000:] + err[-2000:]
        assert f"graded {len(half)} submissions" in out, out
        assert not (folder / "gradebook.db").exists(), "graded into SQLite, not PostgreSQL"

    on_postgres = grades(url)
    assert on_postgres == reference, sorted(set(on_postgres.items()) ^ set(reference.items()))
    # the grades differ from student to student, so a mix-up could not pass unseen
    ann = sum(v[0] for (s, _), v in reference.items() if s == "ann")
    ben = sum(v[0] for (s, _), v in reference.items() if s == "ben")
    assert ann > ben
    assert {s for s, _ in reference} == {"ann", "ben", "cat"}

    # consistent: one row per student, submission, notebook and grade; totals agree with the grades
    counts = postgres_server.psql(
        "SELECT (SELECT count(*) FROM student), (SELECT count(*) FROM submitted_assignment),"
        " (SELECT count(*) FROM submitted_notebook), (SELECT count(*) FROM grade),"
        " (SELECT count(*) FROM (SELECT notebook_id, cell_id FROM grade GROUP BY notebook_id, cell_id"
        "  HAVING count(*) > 1) AS twice)", "two_graders").strip().split("|")
    assert [int(n) for n in counts] == [3, 3, 3, len(reference), 0]
    # both graders asked for the lookup indexes at once; they are there, once each
    indexes = postgres_server.psql("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'rbtutor_%' "
                                   "ORDER BY indexname", "two_graders").split()
    from rbtutor.course.nbgrader import GRADEBOOK_INDEXES
    assert indexes == sorted(f"rbtutor_{table}_{column}" for table, column in GRADEBOOK_INDEXES)
    from nbgrader.api import Gradebook

    with Gradebook(url, course_id="rbtutor") as gradebook:
        for student in ("ann", "ben", "cat"):
            submission = gradebook.find_submission(NAME, student)
            assert submission.score == pytest.approx(sum(v[0] for (s, _), v in reference.items() if s == student))


def _shared_engines(backend: str, request, tmp_path, monkeypatch, database: str) -> str:
    """A new gradebook database's URL (SQLite in ``tmp_path``, or ``database`` on the test's PostgreSQL
    server), with nbgrader's gradebooks sharing engines (:func:`share_gradebook_engines`) until the
    test ends."""
    import nbgrader.api

    from rbtutor.course.nbgrader import share_gradebook_engines

    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database(database)
    monkeypatch.setattr(nbgrader.api, "create_engine", nbgrader.api.create_engine)  # undone after the test
    monkeypatch.setattr(nbgrader.api.Gradebook, "__init__", nbgrader.api.Gradebook.__init__)
    monkeypatch.setattr(nbgrader.api.Gradebook, "close", nbgrader.api.Gradebook.close)
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")  # alembic
    share_gradebook_engines()
    return url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_gradebooks_share_one_engine_per_database(backend, request, tmp_path, monkeypatch):
    """share_gradebook_engines: one engine (and its compiled statements) per database URL; a closed
    Gradebook gives its connections back and the next one works as before."""
    from nbgrader.api import Gradebook

    from rbtutor.course.nbgrader import share_gradebook_engines

    url = _shared_engines(backend, request, tmp_path, monkeypatch, "shared_engine")
    share_gradebook_engines()  # once is enough: a second call changes nothing
    with Gradebook(url, course_id="rbtutor") as first:
        first.add_student("ann")
        engine = first.engine
    assert engine.pool.checkedout() == 0  # closed: nothing held
    with Gradebook(url, course_id="rbtutor") as second, Gradebook(url, course_id="rbtutor") as third:
        assert second.engine is engine
        assert third.engine is engine
        second.add_student("ben")
        assert sorted(s.id for s in third.students) == ["ann", "ben"]
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with Gradebook(other, course_id="rbtutor") as elsewhere:
        assert elsewhere.engine is not engine
        assert elsewhere.students == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_in_one_submission_a_gradebook_is_set_up_once(backend, request, tmp_path, monkeypatch):
    """gradebooks_set_up_once: inside the block only the first Gradebook checks the tables and the
    course's row, and a closed one leaves its connection in the pool; the block's end closes them.
    Outside the block every Gradebook does nbgrader's checks and closes its connection."""
    import nbgrader.api
    from nbgrader.api import Gradebook

    from rbtutor.course.nbgrader import gradebooks_set_up_once

    url = _shared_engines(backend, request, tmp_path, monkeypatch, "set_up_once")
    checks = []
    real_check = nbgrader.api.Gradebook.check_course
    monkeypatch.setattr(nbgrader.api.Gradebook, "check_course",
                        lambda self, *a, **k: checks.append(1) or real_check(self, *a, **k))
    with gradebooks_set_up_once():
        with Gradebook(url, course_id="rbtutor") as first:
            first.add_student("ann")
            engine = first.engine
        for name in ("ben", "cat"):
            with Gradebook(url, course_id="rbtutor") as later:
                later.add_student(name)
                assert later.engine is engine
            assert engine.pool.checkedout() == 0
        assert engine.pool.checkedin() >= 1  # kept for the next gradebook of the submission
        with Gradebook(url, course_id="other") as other_course:  # another course: its own checks
            assert other_course.db.query(nbgrader.api.Course).filter_by(id="other").one()
        assert len(checks) == 2
    assert engine.pool.checkedin() == 0  # the block's end closed them
    with Gradebook(url, course_id="rbtutor") as outside:
        assert sorted(s.id for s in outside.students) == ["ann", "ben", "cat"]
    assert len(checks) == 3
    assert engine.pool.checkedin() == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_gradebook_already_set_up_is_only_looked_at(backend, request, tmp_path, monkeypatch):
    """A submission's first Gradebook finds the tables and the course's row in two queries and runs
    none of nbgrader's set-up; when the row or a table is missing, nbgrader's set-up makes it."""
    import nbgrader.api
    from nbgrader.api import Gradebook
    from sqlalchemy import event, inspect, text

    from rbtutor.course.nbgrader import gradebooks_set_up_once

    url = _shared_engines(backend, request, tmp_path, monkeypatch, "looked_at")
    with Gradebook(url, course_id="rbtutor") as made:  # a new database: nbgrader's set-up makes it
        made.add_student("ann")
        engine = made.engine
    checks, queries = [], []
    real_check = nbgrader.api.Gradebook.check_course
    monkeypatch.setattr(nbgrader.api.Gradebook, "check_course",
                        lambda self, *a, **k: checks.append(1) or real_check(self, *a, **k))

    def seen(connection, cursor, statement, *rest):
        queries.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    with gradebooks_set_up_once(), Gradebook(url, course_id="rbtutor") as first:
        assert len(queries) == 2
        assert [s.id for s in first.students] == ["ann"]
    assert checks == []
    with engine.begin() as connection:  # the course's row and a table gone: both made again
        connection.execute(text("DELETE FROM course WHERE id = 'rbtutor'"))
        connection.execute(text("DROP TABLE task_cells"))
    with gradebooks_set_up_once(), Gradebook(url, course_id="rbtutor") as again:
        assert again.db.query(nbgrader.api.Course).filter_by(id="rbtutor").one()
    assert checks == [1]
    assert "task_cells" in inspect(engine).get_table_names()
    with gradebooks_set_up_once(), Gradebook(url, course_id="another") as other:  # only the row missing
        assert other.db.query(nbgrader.api.Course).filter_by(id="another").one()
    assert checks == [1, 1]
    event.remove(engine, "before_cursor_execute", seen)


def test_export_and_class_report_read_the_postgresql_gradebook(collected, postgres_server, tmp_path):  # noqa: F811
    """A class graded into PostgreSQL: the Canvas file and the class report show its final scores."""
    import csv
    import statistics

    from nbgrader.api import Gradebook
    from test_class_report import parse

    url = postgres_server.create_database("export_report")
    env = {**os.environ, "RBTUTOR_GRADEBOOK": url}
    course = tmp_path / "course"
    shutil.copytree(collected, course, ignore=shutil.ignore_patterns("gradebook.db*"))

    def course_command(*args):
        result = subprocess.run([sys.executable, "-m", "rbtutor.course", "--root", str(course), *args], env=env,
                                capture_output=True, text=True, timeout=900)
        return result, result.stdout[-2000:] + result.stderr[-2000:]

    for command in (("generate",), ("grade",)):
        result, output = course_command(*command)
        assert result.returncode == 0, output
    assert not (course / "gradebook.db").exists(), "graded into SQLite, not PostgreSQL"
    with Gradebook(url, course_id="rbtutor") as gradebook:
        final = {s.student.id: s.score - s.late_submission_penalty for s in gradebook.find_assignment(NAME).submissions}
        pending = {s.student.id for s in gradebook.find_assignment(NAME).submissions if s.needs_manual_grade}
    assert sorted(final) == ["ann", "ben", "cat"]
    assert final["ann"] > final["ben"]

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email,lms_id,sis_user_id,sis_login_id,section\n"
                      + "".join(f"{s},{s.title()} Test,{s}@uni.test,{100 + k},S{k},{s}.t,A\n"
                                for k, s in enumerate(sorted(final))))
    out = tmp_path / "canvas.csv"
    result, output = course_command("export", "--to", "canvas", "--roster", str(roster), "--out", str(out))
    assert result.returncode == 0, output
    rows = list(csv.reader(out.open(newline="", encoding="utf-8")))
    cells = {row[0].split()[0].lower(): row[rows[0].index(NAME)] for row in rows[2:]}
    for student, score in final.items():  # a submission with written parts to grade is left empty
        assert cells[student] == ("" if student in pending else f"{score:g}"), (student, cells)
    assert pending != set(final), "expected some final scores in the file, not only empty cells"

    result, output = course_command("report")
    assert result.returncode == 0, output
    page = parse((course / "report" / "index.html").read_text(encoding="utf-8"))
    scores = list(final.values())
    expected = (f"Histogram of final scores for {NAME}: {len(scores)} students graded, median "
                f"{statistics.median(scores):.4g}")
    assert any(image["alt"].startswith(expected) for image in page.images), [i["alt"] for i in page.images]
    assert len(page.images) == 2
    assert f"Parts of {NAME}" in page.tables
