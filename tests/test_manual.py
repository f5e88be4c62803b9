"""The Instructor guide's quick path runs as printed.

The block named ``instructor-quick-path`` in ``book/manual/instructor/index.md`` is read from the
page itself, and every ``$`` line of it runs, in order, in a fresh course in ``tmp_path`` (the
course configuration and one assignment, as ``rbtutor try`` makes it). Only where the block's
comments say students or a grader act does the test act for them: the students fetch, answer and
submit through the course's exchange (alice with the worked solution, bob with the notebook as
fetched), and the grader enters a hand grade for each written part of alice's (what the
Formgrader's grade form stores). Each command must exit 0, and what it is meant to produce is
checked: the released and collected files, the rows of ``grades.csv`` against the points of the
source notebook, the feedback pages, the class report and the LMS file.
"""

from __future__ import annotations

import csv
import os
import re
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import require_sandbox

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "manual" / "instructor" / "index.md"
BIN = Path(sys.executable).parent
STUDENTS = ("alice", "bob")  # alice answers with the worked solution, bob hands in the notebook as fetched


def quick_path(text: str) -> list[tuple[str, str]]:
    """The block named ``instructor-quick-path`` as ``("command", argv line)`` and ``("comment", text)`` items."""
    match = re.search(r"^```\{code-block\} console\n:name: instructor-quick-path\n(.*?)^```", text, re.M | re.S)
    assert match, f"{PAGE} has no code-block named instructor-quick-path"
    items = []
    for line in match.group(1).splitlines():
        if line.startswith("$ "):
            items.append(("command", line[2:]))
        elif line.startswith("#"):
            items.append(("comment", line.lstrip("# ")))
        else:
            assert not line.strip(), f"a line of the quick path is neither a command nor a comment: {line!r}"
    return items


def test_the_quick_path_reads_its_commands_and_comments():
    text = "x\n```{code-block} console\n:name: instructor-quick-path\n$ rbtutor grade  # now\n# students submit\n```\n"
    assert quick_path(text) == [("command", "rbtutor grade  # now"), ("comment", "students submit")]
    with pytest.raises(AssertionError, match="neither a command nor a comment"):
        quick_path(text.replace("# students", "students"))


def points(source: Path) -> tuple[float, dict[str, float]]:
    """The autograded points of the source notebook, and the points of each part graded by hand."""
    import nbformat

    auto, written = 0.0, {}
    for cell in nbformat.read(source, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            if meta.get("solution"):
                written[meta["grade_id"]] = float(meta["points"])
            else:
                auto += float(meta["points"])
    return auto, written


@contextmanager
def as_student(homes: Path, student: str):
    """The student's own nbgrader cache (where their submissions' secrets are kept), as in their own
    home: one cache shared by the pretend students would give each one the others' feedback too."""
    before = os.environ.get("JUPYTER_DATA_DIR")
    os.environ["JUPYTER_DATA_DIR"] = str(homes / student / ".local" / "share" / "jupyter")
    try:
        yield
    finally:
        if before is None:
            del os.environ["JUPYTER_DATA_DIR"]
        else:
            os.environ["JUPYTER_DATA_DIR"] = before


def students_hand_in(course: Path, homes: Path, assignment: str) -> None:
    """What the students do between release and collect: fetch, answer (or not), submit."""
    import nbformat

    from rbtutor.course.trial import answered, student_exchange

    for student in STUDENTS:
        home = homes / student
        home.mkdir(parents=True)
        with as_student(homes, student):
            student_exchange("fetch", course, home, assignment, student)
            if student == "alice":
                for path in sorted((home / assignment).glob("*.ipynb")):
                    source = course / "exercises" / assignment / path.name
                    nbformat.write(answered(nbformat.read(path, as_version=4), source), path)
            student_exchange("submit", course, home, assignment, student)


def grader_grades_written_parts(course: Path, assignment: str) -> int:
    """Full points for each written part of alice's that waits for a hand grade, stored as the
    Formgrader's grade form stores it; returns how many parts were graded."""
    from nbgrader.api import Gradebook

    graded = 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for notebook in gradebook.find_submission(assignment, "alice").notebooks:
            for grade in notebook.grades:
                if grade.needs_manual_grade:
                    grade.manual_score, grade.needs_manual_grade = grade.max_score, False
                    graded += 1
        gradebook.db.commit()
    return graded


def grade_rows(course: Path) -> dict[str, dict[str, str]]:
    with (course / "grades.csv").open(newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def check_outcome(argv: list[str], course: Path, homes: Path, assignment: str, auto: float,
                  written: dict[str, float], hand_graded: int) -> None:
    """What the command ``argv`` of the quick path is meant to produce is there."""
    verb = argv[1] if argv[0] == "rbtutor" else argv[0]
    if verb == "assign":
        assert (course / "release" / assignment / f"{assignment}.ipynb").is_file()
    elif verb == "nbgrader" and argv[1] == "release_assignment":
        assert (course / "exchange" / "rbtutor" / "outbound" / assignment / f"{assignment}.ipynb").is_file()
    elif verb == "collect":
        for student in STUDENTS:
            assert (course / "submitted" / student / assignment / f"{assignment}.ipynb").is_file(), student
    elif verb == "grade":
        rows = grade_rows(course)
        total = auto + sum(written.values())
        alice, bob = rows["alice"], rows["bob"]
        assert float(alice["max_score"]) == float(bob["max_score"]) == total
        if hand_graded:
            assert (float(alice["score"]), alice["written_parts"]) == (total, "done")
        else:
            assert (float(alice["score"]), alice["written_parts"]) == (auto, f"to grade ({len(written)})")
        assert float(alice["final_score"]) == float(alice["score"])  # no due date: nothing is late
        assert (float(bob["score"]), bob["written_parts"]) == (0.0, "done")  # left as fetched: 0, nothing to grade
        for student in STUDENTS:
            page = course / "feedback" / student / assignment / f"{assignment}.html"
            assert student in page.read_text(encoding="utf-8")
        assert assignment in (course / "report" / "index.html").read_text(encoding="utf-8")
    elif verb == "feedback":
        from rbtutor.course.trial import student_exchange

        for student in STUDENTS:  # what a student's Fetch Feedback then gets
            with as_student(homes, student):
                student_exchange("feedback", course, homes / student, assignment, student)
            pages = list((homes / student / assignment / "feedback").glob(f"*/{assignment}.html"))
            assert len(pages) == 1, student
            assert student in pages[0].read_text(encoding="utf-8")
    elif verb == "export":
        assert argv[argv.index("--to") + 1] == "canvas", "the test reads the Canvas file's columns"
        out = course / argv[argv.index("--out") + 1]
        rows = grade_rows(course)
        with out.open(newline="") as handle:
            lines = list(csv.DictReader(handle))
        scores = {line["ID"]: line[assignment] for line in lines if line["Student"] != "Points Possible"}
        possible = {line["Student"]: line[assignment] for line in lines}["Points Possible"]
        assert possible == f"{auto + sum(written.values()):g}"
        assert scores == {str(1001 + n): f"{float(rows[s]['final_score']):g}" for n, s in enumerate(STUDENTS)}


def test_the_quick_path_runs_as_printed(tmp_path):
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.trial import new_course

    require_sandbox()
    items = quick_path(PAGE.read_text(encoding="utf-8"))
    commands = [shlex.split(line, comments=True) for kind, line in items if kind == "command"]
    verbs = [argv[1] if argv[0] == "rbtutor" else argv[0] for argv in commands]
    for needed in ("assign", "collect", "grade", "feedback", "export"):
        assert needed in verbs, f"the quick path has no rbtutor {needed}"
    assert sum(kind == "comment" and "submit" in text for kind, text in items) == 1, \
        "the quick path says once where the students submit"

    assignment = next(argv[2] for argv in commands if argv[:2] == ["rbtutor", "collect"])
    course = new_course(CourseLayout(ROOT), assignment, tmp_path).root
    homes = tmp_path / "students"
    auto, written = points(course / "exercises" / assignment / f"{assignment}.ipynb")
    assert auto
    assert written
    with (course / "roster.csv").open("w", newline="") as handle:  # the class list the LMS gives
        out = csv.writer(handle)
        out.writerow(["student_id", "name", "email", "lms_id", "sis_user_id", "sis_login_id", "section"])
        for number, student in enumerate(STUDENTS):
            out.writerow([student, f"{student.title()} Example", f"{student}@example.org", 1001 + number, "", "", ""])
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("RBTUTOR_EXCHANGE", None)
    env.pop("RBTUTOR_GRADEBOOK", None)
    hand_graded = 0
    timings = []
    for kind, line in items:
        if kind == "comment":
            if "submit" in line:
                students_hand_in(course, homes, assignment)
            elif "Formgrader" in line:
                hand_graded = grader_grades_written_parts(course, assignment)
                assert hand_graded == len(written)
            continue
        argv = shlex.split(line, comments=True)
        started = time.perf_counter()
        run = subprocess.run(argv, cwd=course, env=env, capture_output=True, text=True, timeout=600)
        timings.append(f"{line}: {time.perf_counter() - started:.1f} s")
        assert run.returncode == 0, f"$ {line}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        check_outcome(argv, course, homes, assignment, auto, written, hand_graded)
    assert hand_graded, "the quick path never has the written parts graded"
    print("\n".join(timings))
