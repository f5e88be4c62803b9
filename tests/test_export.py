"""Grades into the LMS (rbtutor.course.export): each file against its LMS's import rules.

The class is a gradebook built with nbgrader's own API (no notebook is executed), so the whole
file runs in seconds: ann is fully graded but late, ben has a written part still to grade,
cat submitted one assignment only, dan is graded but not on the roster, and eve is on the
roster with nothing graded.
"""

from __future__ import annotations

import contextlib
import csv
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROSTER_HEADER = "student_id,name,email,lms_id,sis_user_id,sis_login_id,section"
ROSTER = "\n".join([
    ROSTER_HEADER,
    "ann,\"Lee, Ann\",ann@uni.test,101,S101,ann.lee,A",
    "ben,Ben Okafor,ben@uni.test,102,S102,ben.okafor,A",
    "cat,=HYPERLINK(\"http://x\"),cat@uni.test,103,S103,cat.x,B",
    "eve,Eve Moss,eve@uni.test,105,S105,eve.moss,B",
]) + "\n"
AUTO, WRITTEN = 6.0, 4.0  # points of problem01's autograded and hand-graded cells
LATE_PENALTY = 1.5


def _add_assignment(gradebook, name: str, cells: list[tuple[str, float, str]]) -> None:
    gradebook.add_assignment(name)
    gradebook.add_notebook(name, name)
    for grade_id, points, cell_type in cells:
        gradebook.add_grade_cell(grade_id, name, name, max_score=points, cell_type=cell_type)


def _grade(gradebook, assignment: str, student: str, scores: dict[str, float | None]) -> None:
    submission = gradebook.add_submission(assignment, student)
    for grade_id, score in scores.items():
        grade = gradebook.find_grade(grade_id, assignment, assignment, student)
        if grade_id.endswith("auto"):
            grade.auto_score, grade.needs_manual_grade = score, False
        elif score is None:  # a written part not graded yet
            grade.manual_score, grade.needs_manual_grade = None, True
        else:
            grade.manual_score, grade.needs_manual_grade = score, False
    return submission


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    from rbtutor.course import api

    course = tmp_path_factory.mktemp("export") / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    grader = api(course)
    with grader.gradebook as gradebook:
        _add_assignment(gradebook, "problem01", [("p1_auto", AUTO, "code"), ("p1_written", WRITTEN, "markdown")])
        _add_assignment(gradebook, "problem02", [("p2_auto", 5.0, "code")])
        for student in ("ann", "ben", "cat", "dan", "eve"):
            gradebook.add_student(student)
        late = _grade(gradebook, "problem01", "ann", {"p1_auto": 5.0, "p1_written": 3.0})
        late.notebooks[0].late_submission_penalty = LATE_PENALTY  # the assignment's sums its notebooks'
        _grade(gradebook, "problem02", "ann", {"p2_auto": 5.0})
        _grade(gradebook, "problem01", "ben", {"p1_auto": 6.0, "p1_written": None})
        _grade(gradebook, "problem02", "ben", {"p2_auto": 2.0})
        _grade(gradebook, "problem02", "cat", {"p2_auto": 4.0})
        _grade(gradebook, "problem01", "dan", {"p1_auto": 1.0, "p1_written": 1.0})
        gradebook.db.commit()
    roster = course / "roster.csv"
    roster.write_text(ROSTER)
    return course, grader, roster


def _export(graded_class, lms: str, tmp_path):
    from rbtutor.course.export import export_lms

    _course, grader, roster = graded_class
    out = tmp_path / f"grades-{lms}.csv"
    summary = export_lms(grader, lms, roster, out)
    return summary, out


def _read(path: Path, delimiter: str = ",") -> list[list[str]]:
    """The file through csv.reader: quoted CSV, or (Blackboard) tabs and no quote characters."""
    options = {"quoting": csv.QUOTE_NONE} if delimiter == "\t" else {}
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle, delimiter=delimiter, **options))


def _by_student(rows: list[list[str]], key_column: str, skip: int = 1) -> dict[str, dict[str, str]]:
    header = rows[0]
    return {row[header.index(key_column)]: dict(zip(header, row, strict=True)) for row in rows[skip:]}


def test_canvas_file_follows_the_gradebook_import_layout(graded_class, tmp_path):
    _summary, out = _export(graded_class, "canvas", tmp_path)
    rows = _read(out)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "problem01", "problem02"]
    assert rows[1] == ["Points Possible", "", "", "", "", f"{AUTO + WRITTEN:g}", "5"]
    assert all(len(row) == len(rows[0]) for row in rows)
    students = _by_student(rows, "ID", skip=2)
    assert set(students) == {"101", "102", "103", "105"}
    assert students["101"]["Student"] == "Lee, Ann"
    assert students["101"]["SIS Login ID"] == "ann.lee"
    assert students["101"]["Section"] == "A"
    assert students["103"]["Section"] == "B"


def test_late_penalty_is_taken_off(graded_class, tmp_path):
    _summary, out = _export(graded_class, "canvas", tmp_path)
    ann = _by_student(_read(out), "ID", skip=2)["101"]
    assert float(ann["problem01"]) == pytest.approx(5.0 + 3.0 - LATE_PENALTY)
    assert float(ann["problem02"]) == pytest.approx(5.0)


def test_the_scores_are_those_of_grades_csv(graded_class, tmp_path):
    from rbtutor.course.grade import export_grades

    _course, grader, _ = graded_class
    export_grades(grader, tmp_path / "grades.csv")
    final = {(r["student"], r["assignment"]): r["final_score"]
             for r in csv.DictReader((tmp_path / "grades.csv").open(newline=""))}
    _summary, out = _export(graded_class, "moodle", tmp_path)
    rows = _by_student(_read(out), "ID number")
    assert rows["S101"]["problem01"] == final["ann", "problem01"]
    assert rows["S102"]["problem02"] == final["ben", "problem02"]


def test_pending_written_parts_are_empty_not_zero(graded_class, tmp_path):
    for lms, key, delimiter, skip in [("canvas", "ID", ",", 2), ("moodle", "ID number", ",", 1),
                                      ("blackboard", "Username", "\t", 1)]:
        summary, out = _export(graded_class, lms, tmp_path)
        ben = _by_student(_read(out, delimiter), key, skip)["102" if key != "ID number" else "S102"]
        assert ben["problem01"] == "", lms  # 6 of 10 points graded, 4 still to grade: not a 6, not a 0
        assert float(ben["problem02"]) == 2.0
        assert "ben problem01 (1 written part to grade)" in summary.pending
        assert any("empty cell" in line for line in summary.lines())


def test_moodle_file_has_an_identifier_column_per_user(graded_class, tmp_path):
    _summary, out = _export(graded_class, "moodle", tmp_path)
    rows = _read(out)
    assert rows[0] == ["Full name", "ID number", "Email address", "problem01", "problem02"]
    emails = [row[2] for row in rows[1:]]
    assert emails == ["ann@uni.test", "ben@uni.test", "cat@uni.test", "eve@uni.test"]
    assert len(set(emails)) == len(emails)  # one line per user, so Moodle's mapping is one-to-one


def test_blackboard_file_is_tab_separated_with_usernames(graded_class, tmp_path):
    _summary, out = _export(graded_class, "blackboard", tmp_path)
    raw = out.read_text(encoding="utf-8")
    lines = raw.splitlines()
    assert lines[0] == "Last Name\tFirst Name\tUsername\tStudent ID\tproblem01\tproblem02"
    assert all(line.count("\t") == 5 for line in lines)
    assert "," not in lines[0]
    rows = _by_student(_read(out, "\t"), "Username")
    assert rows["101"]["Last Name"] == "Lee"
    assert rows["101"]["First Name"] == "Ann"
    assert rows["102"]["Last Name"] == "Okafor"
    assert rows["103"]["problem02"] == "4"
    assert rows["103"]["Last Name"] == "'=HYPERLINK(\"http://x\")"  # no quote characters added


def test_missing_and_extra_roster_entries_are_listed(graded_class, tmp_path):
    summary, out = _export(graded_class, "canvas", tmp_path)
    assert summary.not_in_roster == ["dan"]
    assert summary.without_grades == ["eve"]
    assert "cat problem01" in summary.not_submitted
    problems = summary.problems()
    assert any("dan" in line and "NOT exported" in line for line in problems)
    assert any("eve" in line for line in problems)
    assert "dan" not in out.read_text()


def test_cells_are_never_formulas(graded_class, tmp_path):
    for lms, delimiter in [("canvas", ","), ("moodle", ","), ("blackboard", "\t")]:
        _summary, out = _export(graded_class, lms, tmp_path)
        cells = [cell for row in _read(out, delimiter) for cell in row]
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells), lms
        assert any(cell.startswith("'=HYPERLINK") for cell in cells), lms


HIDDEN_FORMULAS = ["\ufeff=1+1", "\u200b@SUM(A1)", "\u00a0=1", "\uff1d1+1", "\u3000\uff0b1", "\u2060\uff0d1",
                   "\uff20SUM(A1)", "\u200e\u00a0\ufeff=HYPERLINK(\"http://x\")"]


def _runs_as_formula(cell: str) -> bool:
    """What a lenient spreadsheet does: drop leading format characters and spaces of any kind, fold
    full-width signs (NFKC), then read ``= + - @`` as the start of a formula; a leading ``'`` is text."""
    import unicodedata

    if cell.startswith("'"):
        return False
    folded = unicodedata.normalize("NFKC", cell)
    kept = "".join(c for c in folded if unicodedata.category(c) != "Cf").lstrip()
    return kept.startswith(("=", "+", "-", "@"))


@pytest.mark.parametrize("text", HIDDEN_FORMULAS)
def test_a_formula_behind_invisible_or_full_width_characters_is_guarded(text):
    from rbtutor.grading.report import csv_cell

    assert _runs_as_formula(text)  # the case is a formula to a lenient reader
    assert csv_cell(text) == "'" + text  # guarded, and nothing else changed
    assert not _runs_as_formula(csv_cell(text))


def test_lms_files_guard_formulas_behind_invisible_characters(graded_class, tmp_path):
    from rbtutor.course.export import export_lms

    _course, grader, _roster = graded_class
    names = HIDDEN_FORMULAS[:4]
    roster = tmp_path / "hidden.csv"
    students = zip(["ann", "ben", "cat", "eve"], names, strict=True)
    lines = [ROSTER_HEADER] + [f"{student},{name},{student}@uni.test,{100 + k},S{k},{student}.x,A"
                               for k, (student, name) in enumerate(students)]
    roster.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for lms, delimiter in [("canvas", ","), ("moodle", ","), ("blackboard", "\t")]:
        out = tmp_path / f"hidden-{lms}.csv"
        export_lms(grader, lms, roster, out)
        cells = [cell for row in _read(out, delimiter) for cell in row]
        assert not [cell for cell in cells if _runs_as_formula(cell)], lms
        written = {name.strip() for name in names}  # the roster reader trims spaces around a cell
        assert {"'" + name for name in written} <= set(cells), lms


@pytest.mark.parametrize(("text", "message"), [
    ("student_id,name,lms_id\nann,Ann,1\n", "missing: email"),
    (ROSTER_HEADER + "\nann,A,a@x,1,,,\nann,B,b@x,2,,,\n", "already on line 2"),
    (ROSTER_HEADER + "\nq[x],A,a@x,1,,,\n", "expected a student id, got 'q[x]'"),
    (ROSTER_HEADER + "\nreference,A,a@x,1,,,\n", "reserved"),
    (ROSTER_HEADER + "\nann,A\tB,a@x,1,,,\n", "expected printable text in name"),
    (ROSTER_HEADER + "\nann,A,a@x,1,,\n", "expected 7 cells, got 6"),
    ("", "got an empty file"),
])
def test_bad_rosters_are_refused(tmp_path, text, message):
    from rbtutor.course.export import RosterError, read_roster

    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(RosterError, match=re.escape(message)):
        read_roster(path)


def test_names_in_any_script_are_kept(tmp_path):
    from rbtutor.course.export import read_roster

    path = tmp_path / "roster.csv"
    name = "Mehr\u200cdad Rez\u0101\u00a0Ahmadi"  # a zero-width non-joiner and a no-break space
    path.write_text(ROSTER_HEADER + f"\nmehrdad,{name},m@x,1,,,\n", encoding="utf-8")
    assert read_roster(path)[0].name == name


def test_an_lms_without_its_identifier_is_refused_before_writing(graded_class, tmp_path):
    from rbtutor.course.export import RosterError, export_lms

    _course, grader, _ = graded_class
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER_HEADER + "\nann,Ann Lee,ann@uni.test,,S101,,A\n")
    out = tmp_path / "bb.txt"
    with pytest.raises(RosterError, match=r"expected one of blackboard_username for blackboard.*ann \(line 2\)"):
        export_lms(grader, "blackboard", roster, out)
    assert not out.exists()
    export_lms(grader, "canvas", roster, out)  # Canvas matches on the SIS User ID
    assert _by_student(_read(out), "SIS User ID", skip=2)["S101"]["ID"] == ""


def test_a_shared_lms_identifier_is_refused(graded_class, tmp_path):
    from rbtutor.course.export import RosterError, export_lms

    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER_HEADER + "\nann,Ann,same@uni.test,1,,,\nben,Ben,same@uni.test,2,,,\n")
    with pytest.raises(RosterError, match=r"line 3: email 'same@uni.test' is also on line 2"):
        export_lms(graded_class[1], "moodle", roster, tmp_path / "m.csv")
    export_lms(graded_class[1], "blackboard", roster, tmp_path / "b.txt")  # an older roster's lms_id serves


def test_only_assignments_released_or_handed_in_get_a_column(graded_class, tmp_path):
    """An LMS makes a new column of any column it cannot match, so an assignment the students
    have not been given is not in the file; once released (in nbgrader's exchange), it is."""
    from rbtutor.course import api
    from rbtutor.course.export import export_lms

    course, grader, roster = graded_class
    with grader.gradebook as gradebook:
        if "problem03" not in {a.name for a in gradebook.assignments}:
            _add_assignment(gradebook, "problem03", [("p3_auto", 2.0, "code")])
            gradebook.db.commit()
    summary, out = _export(graded_class, "canvas", tmp_path)
    assert summary.assignments == ["problem01", "problem02"]
    assert "problem03" not in _read(out)[0]
    outbound = course / "exchange" / "rbtutor" / "outbound" / "problem03"
    outbound.mkdir(parents=True)
    (outbound / "problem03.ipynb").write_text("{}")
    try:  # nbgrader looks for the exchange when its API is made: a new one sees the release
        summary = export_lms(api(course), "canvas", roster, tmp_path / "released.csv")
        assert summary.assignments == ["problem01", "problem02", "problem03"]
        assert _read(tmp_path / "released.csv")[0][-1] == "problem03"
    finally:
        shutil.rmtree(course / "exchange")
    summary = export_lms(grader, "canvas", roster, tmp_path / "named.csv", ["problem02"])
    assert summary.assignments == ["problem02"]
    assert _read(tmp_path / "named.csv")[0][5:] == ["problem02"]


def test_what_is_left_empty_is_one_line_with_counts(graded_class, tmp_path):
    summary, _ = _export(graded_class, "canvas", tmp_path)
    lines = [line for line in summary.lines() if "left empty" in line]
    assert len(lines) == 1, summary.lines()
    assert lines[0].startswith(f"left empty: {len(summary.pending) + len(summary.not_submitted)} cells, ")
    assert "part(s)" not in "\n".join(summary.lines())


def test_a_failed_export_leaves_the_previous_file_as_it_was(graded_class, tmp_path):
    """The file is written beside the target and renamed over it: stopped halfway (here by a
    file-size limit), the export leaves the previous file whole and no temporary file behind."""
    import subprocess
    import sys

    course, _, roster = graded_class
    out = tmp_path / "canvas.csv"
    out.write_text("the previous export\n")
    script = (
        "import resource, signal, sys\n"
        "from rbtutor.course import api\n"
        "from rbtutor.course.export import export_lms\n"
        "grader = api(sys.argv[1])\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
        "try:\n"
        "    export_lms(grader, 'canvas', sys.argv[2], sys.argv[3])\n"
        "except OSError as exc:\n"
        "    print('refused:', exc.errno)\n"
        "    sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", script, str(course), str(roster), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    assert out.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canvas.csv"]


def test_command_line_lists_unrostered_students_and_fails(graded_class, tmp_path, capsys):
    from rbtutor.course.cli import main

    course, _, roster = graded_class
    out = tmp_path / "canvas.csv"
    status = main(["--root", str(course), "export", "--to", "canvas", "--roster", str(roster), "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 1
    assert out.exists()
    assert "dan" in captured.err
    assert "eve" in captured.err
    assert "4 students, 2 assignments" in captured.out
    status = main(["--root", str(course), "export", "--to", "canvas", "--roster", str(tmp_path / "none.csv"),
                   "--out", str(tmp_path / "x.csv")])
    assert status == 2
    assert "none.csv" in capsys.readouterr().err
    status = main(["--root", str(course), "export", "--to", "canvas", "--roster", str(roster),
                   "--out", str(tmp_path / "y.csv"), "--assignments", "problem01,problem99"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1
    assert "problem99" in err
    assert "expected assignments of the gradebook" in err
    assert not (tmp_path / "y.csv").exists()


# --------------------------------------------------------------------------- hand grades that are not numbers

#: hand grades of problem01's written part (4 points) a grader could send through the Formgrader's API
BAD_HAND_GRADES = {"fay": float("inf"), "gus": float("-inf"), "hal": float("nan"), "ida": 99.0, "jon": -1.0}


@contextlib.contextmanager
def unguarded():
    """The gradebook as one written before the course refused bad hand grades where they are entered
    (or by another tool) can hold them: rbtutor.course.hand_grades's listener is off meanwhile."""
    from nbgrader.api import Grade
    from sqlalchemy import event as sql_event

    from rbtutor.course.hand_grades import refuse_entered

    columns = [c for c in (Grade.manual_score, Grade.extra_credit) if sql_event.contains(c, "set", refuse_entered)]
    for column in columns:
        sql_event.remove(column, "set", refuse_entered)
    try:
        yield
    finally:
        for column in columns:
            sql_event.listen(column, "set", refuse_entered, retval=True)


@pytest.fixture(scope="module")
def bad_hand_grades(tmp_path_factory):
    """A class whose written parts were graded with inf, -inf, NaN (SQLite keeps no score), 99 of 4 and
    -1; kim's is an honest 2.5, and lee's autograded part was overridden with inf (its 5 stands)."""
    from rbtutor.course import api

    course = tmp_path_factory.mktemp("bad-hand-grades") / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    grader = api(course)
    with unguarded(), grader.gradebook as gradebook:
        _add_assignment(gradebook, "problem01", [("p1_auto", AUTO, "code"), ("p1_written", WRITTEN, "markdown")])
        for student, score in [*BAD_HAND_GRADES.items(), ("kim", 2.5), ("lee", 1.0)]:
            gradebook.add_student(student)
            _grade(gradebook, "problem01", student, {"p1_auto": 5.0, "p1_written": score})
        gradebook.find_grade("p1_auto", "problem01", "problem01", "lee").manual_score = float("inf")
        gradebook.db.commit()
    roster = course / "roster.csv"
    roster.write_text("\n".join([ROSTER_HEADER] + [f"{s},{s.title()} X,{s}@uni.test,{200 + k},S{k},{s}.x,A"
                                                   for k, s in enumerate([*BAD_HAND_GRADES, "kim", "lee"])]) + "\n")
    return course, grader, roster


def test_grades_csv_never_holds_a_hand_grade_that_is_not_a_number(bad_hand_grades, tmp_path):
    from rbtutor.course.grade import export_grades

    _course, grader, _roster = bad_hand_grades
    refused: list[str] = []
    path = tmp_path / "grades.csv"
    export_grades(grader, path, refused=refused)
    rows = {row["student"]: row for row in csv.DictReader(path.open(newline=""))}
    assert not re.search(r"inf|nan", path.read_text(), re.I)
    for student in BAD_HAND_GRADES:  # not counted: the autograded 5 only, and the part is to grade
        assert (rows[student]["score"], rows[student]["written_parts"]) == ("5", "to grade (1)"), student
    assert (rows["kim"]["score"], rows["kim"]["written_parts"]) == ("7.5", "done")
    assert (rows["lee"]["score"], rows["lee"]["written_parts"], rows["lee"]["overridden"]) == ("6", "done", "")
    named = {line.split()[0]: line for line in refused}
    assert set(named) == {*BAD_HAND_GRADES, "lee"}
    assert "problem01/p1_written: hand grade inf is not a finite number" in named["fay"]
    assert "not between 0 and the part's 4 points" in named["ida"]
    assert "not between 0 and the part's 4 points" in named["jon"]
    assert "NaN" in named["hal"]
    assert "problem01/p1_auto" in named["lee"]


def test_lms_files_leave_a_refused_hand_grade_empty_and_name_it(bad_hand_grades, tmp_path, capsys):
    from rbtutor.course.export import export_lms, run_export
    from rbtutor.course.layout import CourseLayout

    course, grader, roster = bad_hand_grades
    for lms, delimiter in [("canvas", ","), ("moodle", ","), ("blackboard", "\t")]:
        out = tmp_path / f"{lms}.csv"
        summary = export_lms(grader, lms, roster, out)
        assert not re.search(r"inf|nan", out.read_text(), re.I), lms
        header_rows = 2 if lms == "canvas" else 1  # Canvas has a Points Possible row
        assert {line.split()[0] for line in summary.refused_hand_grades} == {*BAD_HAND_GRADES, "lee"}
        assert all(any(s in line for line in summary.problems()) for s in BAD_HAND_GRADES)
        assert sorted(p.split()[0] for p in summary.pending) == sorted(BAD_HAND_GRADES), lms
        assert len(_read(out, delimiter)) == header_rows + len(BAD_HAND_GRADES) + 2, lms  # everyone is in it
    assert run_export(CourseLayout(course), "canvas", roster, tmp_path / "cli.csv") == 1
    assert "hand grade not counted" in capsys.readouterr().err
    rows = _by_student(_read(tmp_path / "cli.csv"), "SIS User ID", skip=2)
    assert rows["S5"]["problem01"] == "7.5"  # kim
    assert rows["S6"]["problem01"] == "6"  # lee: the override refused, the autograded score stands
    assert all(rows[f"S{k}"]["problem01"] == "" for k in range(len(BAD_HAND_GRADES)))


def test_a_hand_grade_that_is_not_a_number_is_refused_where_it_is_entered(bad_hand_grades):
    """What the Formgrader's grade handler does (set manual_score, then commit) fails for inf, -inf, NaN
    and a score outside the part's points once guard_hand_grades is on; the gradebook keeps its grade."""
    from nbgrader.api import Grade
    from sqlalchemy import event as sql_event

    from rbtutor.course.hand_grades import guard_hand_grades, refuse_entered

    _course, grader, _roster = bad_hand_grades
    with unguarded():
        guard_hand_grades()
        guard_hand_grades()  # once only
        with grader.gradebook as gradebook:
            grade = gradebook.find_grade("p1_written", "problem01", "problem01", "kim")
            for value in (float("inf"), float("-inf"), float("nan"), 4.5, -0.5):
                with pytest.raises(ValueError, match="expected a"):
                    grade.manual_score = value
                assert grade.manual_score == 2.5
            with pytest.raises(ValueError, match="finite"):
                grade.extra_credit = float("inf")
            grade.manual_score = 4.0  # a real grade still goes in
            grade.manual_score = 2.5
            gradebook.db.commit()
        for column in (Grade.manual_score, Grade.extra_credit):
            sql_event.remove(column, "set", refuse_entered)  # once only: a second removal would raise


def test_every_nbgrader_process_of_the_course_refuses_them_where_they_are_entered(tmp_path):
    """The course's nbgrader_config.py (read by the Formgrader, nbgrader's commands and the grader)
    turns the guard on: loading it is enough."""
    from nbgrader.api import Grade
    from sqlalchemy import event as sql_event

    from rbtutor.course import api
    from rbtutor.course.hand_grades import refuse_entered

    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    with unguarded():
        assert not sql_event.contains(Grade.manual_score, "set", refuse_entered)
        api(course)
        assert sql_event.contains(Grade.manual_score, "set", refuse_entered)
        assert sql_event.contains(Grade.extra_credit, "set", refuse_entered)


# --------------------------------------------------------------------------- the importers' rules the files follow

NEW_ROSTER = "\n".join([
    "student_id,name,email,canvas_user_id,blackboard_username,sis_user_id,sis_login_id,section,lms_user_id",
    "ann,\"Lee, Ann\",ann@uni.test,5101,alee,S101,ann.lee,A,lti-ann",
    "ben,Ben Okafor,ben@uni.test,5102,bokafor,S102,ben.okafor,A,lti-ben",
    "cat,Cat Xu,cat@uni.test,5103,cxu,S103,cat.x,B,lti-cat",
]) + "\n"
#: a canvas-lms export's assignment header, "Title (id)": the title, then the id in brackets at the end
CANVAS_TITLE_ID = re.compile(r"^(?P<title>.+) \((?P<id>\d+)\)$")
#: a Blackboard Grade Center download's column header: "Title [Total Pts: P Score] |ColumnID"
BLACKBOARD_COLUMN = re.compile(r"^(?P<title>.+) \[Total Pts: (?P<points>[0-9.]+) Score\] \|(?P<id>[0-9_]+)$")


def _columns_file(tmp_path, lines: list[str]) -> Path:
    path = tmp_path / "columns.csv"
    path.write_text("\n".join(["assignment,canvas_assignment_id,blackboard_column_id,title", *lines]) + "\n")
    return path


def test_one_roster_serves_canvas_and_blackboard_with_their_own_ids(graded_class, tmp_path):
    """Canvas's ID column takes the roster's canvas_user_id and Blackboard's Username its
    blackboard_username: two fields, no longer one lms_id for both."""
    from rbtutor.course.export import export_lms

    roster = tmp_path / "roster.csv"
    roster.write_text(NEW_ROSTER)
    canvas = export_lms(graded_class[1], "canvas", roster, tmp_path / "c.csv")
    blackboard = export_lms(graded_class[1], "blackboard", roster, tmp_path / "b.txt")
    by_id = _by_student(_read(tmp_path / "c.csv"), "ID", skip=2)
    by_user = _by_student(_read(tmp_path / "b.txt", "\t"), "Username")
    assert set(by_id) == {"5101", "5102", "5103"}
    assert set(by_user) == {"alee", "bokafor", "cxu"}
    assert by_id["5101"]["problem02"] == by_user["alee"]["problem02"] == "5"
    assert not [n for n in canvas.notes + blackboard.notes if "older column" in n]


def test_an_older_roster_is_read_with_a_note_naming_the_column(graded_class, tmp_path, capsys):
    from rbtutor.course.export import run_export
    from rbtutor.course.layout import CourseLayout

    course, _grader, roster = graded_class  # the older header: one lms_id column
    assert run_export(CourseLayout(course), "blackboard", roster, tmp_path / "b.txt") == 1  # dan: not on it
    said = capsys.readouterr().out
    assert "older column lms_id and no blackboard_username" in said
    assert "Blackboard's user name" in said
    assert set(_by_student(_read(tmp_path / "b.txt", "\t"), "Username")) == {"101", "102", "103", "105"}
    run_export(CourseLayout(course), "moodle", roster, tmp_path / "m.csv")
    assert "older column" not in capsys.readouterr().out  # Moodle never read lms_id


def test_known_canvas_and_blackboard_ids_head_the_columns(graded_class, tmp_path):
    """With the ids known, each header is what the importer matches by id (Canvas: ``Title (id)``,
    Blackboard: ``... |ColumnID``), so a title that differs no longer makes a new column."""
    from rbtutor.course.export import export_lms

    roster = tmp_path / "roster.csv"
    roster.write_text(NEW_ROSTER)
    columns = _columns_file(tmp_path, ["problem01,4711,_1234_1,Problem 1: the ship's inertia",
                                       "problem02,4712,1235,"])
    export_lms(graded_class[1], "canvas", roster, tmp_path / "c.csv", columns=columns)
    export_lms(graded_class[1], "blackboard", roster, tmp_path / "b.txt", columns=columns)
    canvas = [CANVAS_TITLE_ID.match(cell) for cell in _read(tmp_path / "c.csv")[0][5:]]
    assert [(m["title"], m["id"]) for m in canvas] == [("Problem 1: the ship's inertia", "4711"), ("problem02", "4712")]
    blackboard = [BLACKBOARD_COLUMN.match(cell) for cell in _read(tmp_path / "b.txt", "\t")[0][4:]]
    assert [(m["id"], float(m["points"])) for m in blackboard] == [("_1234_1", AUTO + WRITTEN), ("1235", 5.0)]
    by_id = _by_student(_read(tmp_path / "c.csv"), "ID", skip=2)
    assert by_id["5102"]["problem02 (4712)"] == "2"


def test_columns_without_an_id_are_named_in_a_note(graded_class, tmp_path):
    from rbtutor.course.export import export_lms

    roster = tmp_path / "roster.csv"
    roster.write_text(NEW_ROSTER)
    columns = _columns_file(tmp_path, ["problem01,4711,,"])
    summary = export_lms(graded_class[1], "blackboard", roster, tmp_path / "b.txt", columns=columns)
    assert _read(tmp_path / "b.txt", "\t")[0][4:] == ["problem01", "problem02"]  # no Column ID known: bare
    notes = [n for n in summary.notes if "blackboard_column_id" in n]
    assert len(notes) == 1
    assert "problem01, problem02" in notes[0]
    assert "new 0-point column" in notes[0]
    summary = export_lms(graded_class[1], "canvas", roster, tmp_path / "c.csv", columns=columns)
    canvas_note = next(n for n in summary.notes if "canvas_assignment_id" in n)
    assert canvas_note.startswith("no canvas_assignment_id known for problem02:")


@pytest.mark.parametrize(("lines", "message"), [
    (["problem07,1,2,"], "assignment 'problem07' is not one of the gradebook's"),
    (["problem01,12a,,"], "expected canvas_assignment_id to be digits"),
    (["problem01,,1|2,"], "expected blackboard_column_id to be Blackboard's Column ID"),
    (["problem01,5,,", "problem02,5,,"], "canvas_assignment_id 5 is also on line 2"),
    (["problem01,5,,", "problem01,6,,"], "assignment 'problem01' appears twice"),
])
def test_a_bad_column_map_is_refused_before_writing(graded_class, tmp_path, lines, message):
    from rbtutor.course.export import RosterError, export_lms

    roster = tmp_path / "roster.csv"
    roster.write_text(NEW_ROSTER)
    out = tmp_path / "c.csv"
    with pytest.raises(RosterError, match=re.escape(message)):
        export_lms(graded_class[1], "canvas", roster, out, columns=_columns_file(tmp_path, lines))
    assert not out.exists()
