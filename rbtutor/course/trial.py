"""Try the course alone: the whole loop of one assignment, as a pretend student and instructor.

``rbtutor try [ASSIGNMENT] [--into FOLDER]`` needs no hub, no accounts and no system
configuration. It copies the course (``nbgrader_config.py`` and the assignment's source) into
``FOLDER/course`` with its own exchange in ``FOLDER/course/exchange``, and then, one step a
line with its time:

1. ``assign``: the student version, released into that exchange;
2. the student ``learner`` fetches it into ``FOLDER/students/learner``;
3. answers every part with the worked solution, written as a student would (each statement
   followed by a note of their own: the intake refuses a verbatim copy of the source);
4. submits it;
5. the instructor collects and grades (the grading sandbox, as in a real course);
6. returns the feedback, which the student fetches.

Every file is the user's own, so the entry owners are not checked (as in an exchange of one
service account, ``c.ExchangeCollect.check_owner = False``). The pieces are the ones the test
suite plays students with (:func:`answered`, :func:`student_exchange`).
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import sys
import time
import tokenize
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import nbformat
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeSubmit
from traitlets.config import Config

from .grade import collect, generate, grade, return_feedback
from .layout import CourseLayout
from .nbgrader import api

COURSE_ID = "rbtutor"
STUDENT = "learner"
#: the text a written answer gets (the worked solution's words are the instructor's)
OWN_EXPLANATION = "My own explanation of this part, in my words."


def own_work(code: str) -> str:
    """``code`` as a student who computed the same thing would hand it in: the same statements,
    each followed by a note of their own, so that the text is not the instructor's verbatim."""
    lines = code.splitlines()
    ends = sorted({tok.end[0] for tok in tokenize.generate_tokens(io.StringIO(code + "\n").readline)
                   if tok.type == tokenize.NEWLINE})
    for number in reversed(ends):
        indent = re.match(r"\s*", lines[number - 1]).group(0) if number <= len(lines) else ""
        lines.insert(number, f"{indent}# (my working)")
    return "\n".join(lines)


def _grading(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def answered(nb, source: Path):
    """The released notebook ``nb`` answered with the worked solution of ``source``, in the student's own text."""

    solutions = {_grading(c)["grade_id"]: c for c in nbformat.read(source, as_version=4).cells
                 if _grading(c).get("solution")}
    for cell in nb.cells:
        grade_id = _grading(cell).get("grade_id")
        if _grading(cell).get("solution"):
            key = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", "", solutions[grade_id].source, flags=re.M)
            cell.source = own_work(key) if solutions[grade_id].cell_type == "code" else OWN_EXPLANATION
    return nb


def exchange_config(course: Path, home: Path):
    """A student's nbgrader configuration for the course's own exchange, working in ``home``."""

    config = Config()
    config.CourseDirectory.course_id = COURSE_ID
    config.Exchange.root = str(CourseLayout(course).exchange)
    config.Exchange.assignment_dir = str(home)
    return config


def student_exchange(action: str, course: Path, home: Path, assignment: str, student: str = STUDENT) -> None:
    """``student`` does ``action`` (``fetch``, ``submit`` or ``feedback``) with the course's exchange."""

    config = exchange_config(course, home)
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    kind = {"fetch": ExchangeFetchAssignment, "submit": ExchangeSubmit, "feedback": ExchangeFetchFeedback}[action]
    kind(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()


class TrialError(RuntimeError):
    """A step of the trial failed; the message says which and why."""


def new_course(source: CourseLayout, assignment: str, folder: Path) -> CourseLayout:
    """``folder/course``: the course's configuration and one assignment, with an exchange of its own."""
    course = folder / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(source.config, course / "nbgrader_config.py")
    shutil.copytree(source.exercises / assignment, course / "exercises" / assignment,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    with (course / "nbgrader_config.py").open("a") as config:
        config.write("\n# rbtutor try: every exchange entry is this user's own, whoever it names\n"
                     "get_config().ExchangeCollect.check_owner = False  # noqa: F821\n")
    return CourseLayout(course)


def run_trial(source: CourseLayout, assignment: str, folder: Path, out=sys.stdout) -> dict:
    """The whole loop of ``assignment`` in ``folder``; returns the student's row of ``grades.csv``.

    Raises :class:`TrialError` naming the step that failed.
    """

    steps = 6
    layout = new_course(source, assignment, folder)
    home = folder / "students" / STUDENT
    home.mkdir(parents=True)
    quiet = io.StringIO()  # the commands' own lines; shown only when a step fails

    def step(k: int, what: str, action) -> None:
        started = time.perf_counter()
        print(f"[{k}/{steps}] {what} ...", end="", flush=True, file=out)
        try:
            ok = action()
        except Exception as exc:  # whatever a step raised is said with the step's name
            print(" failed", file=out)
            raise TrialError(f"{what}: {type(exc).__name__}: {exc}") from exc
        if ok is False:
            print(" failed", file=out)
            raise TrialError(f"{what} failed:\n{quiet.getvalue()[-3000:]}")
        print(f" done ({time.perf_counter() - started:.1f} s)", file=out)

    def quietly(command, *args):

        with redirect_stdout(quiet), redirect_stderr(quiet):
            return command(*args)

    def release() -> bool:
        if quietly(generate, layout) != 0:
            return False
        return api(layout).release_assignment(assignment)["success"]

    def answer() -> None:

        for path in sorted((home / assignment).glob("*.ipynb")):
            source_nb = layout.exercises / assignment / path.name
            nbformat.write(answered(nbformat.read(path, as_version=4), source_nb), path)

    step(1, f"the instructor releases {assignment}", release)
    step(2, f"{STUDENT} fetches it into {home / assignment}",
         lambda: student_exchange("fetch", layout.root, home, assignment))
    step(3, f"{STUDENT} answers every part with the worked solution, and submits",
         lambda: (answer(), student_exchange("submit", layout.root, home, assignment)))
    step(4, "the instructor collects it", lambda: quietly(collect, layout, assignment) == 0)
    step(5, "the instructor grades it (in the grading sandbox)", lambda: quietly(grade, layout, 1) == 0)
    step(6, f"the feedback goes back, and {STUDENT} fetches it",
         lambda: (quietly(return_feedback, layout) == 0
                  and student_exchange("feedback", layout.root, home, assignment) is None))
    with layout.grades_csv.open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["student"] == STUDENT and r["assignment"] == assignment]
    if not rows:
        raise TrialError(f"grades.csv has no row for {STUDENT} {assignment}")
    return rows[0]


def run_try(source: CourseLayout, assignment: str, into: str | None) -> int:
    """The ``try`` verb: the exit status (2 for a bad assignment or folder, 1 when a step fails)."""
    folder = Path(into or "rbtutor-try").resolve()
    if assignment not in source.assignments():
        print(f"rbtutor try: no assignment {assignment!r} in {source.exercises}; expected one of "
              f"{', '.join(source.assignments())}", file=sys.stderr)
        return 2
    if folder.exists() and any(folder.iterdir()):
        print(f"rbtutor try: {folder} is not empty; remove it or name another folder with --into", file=sys.stderr)
        return 2
    print(f"Trying {assignment} as a pretend student and instructor, in {folder}")
    started = time.perf_counter()
    try:
        row = run_trial(source, assignment, folder)
    except TrialError as exc:
        print(f"rbtutor try: {exc}", file=sys.stderr)
        return 1
    feedback = sorted((folder / "students" / STUDENT / assignment / "feedback").glob("*/*.html"))
    pending = re.fullmatch(r"to grade \((\d+)\)", row["written_parts"])
    left = f"; {pending.group(1)} written part(s) wait for a hand grade in the Formgrader" if pending else ""
    print(f"\n{STUDENT} scored {row['score']} of {row['max_score']} points{left}. "
          f"The whole loop took {time.perf_counter() - started:.0f} s.")
    print(f"  the answered notebook: {folder / 'students' / STUDENT / assignment}")
    if feedback:
        print(f"  the feedback page:     {feedback[0]}")
    print(f"  grades.csv:            {folder / 'course' / 'grades.csv'}")
    print(f"  the class report:      {folder / 'course' / 'report' / 'index.html'}")
    return 0
