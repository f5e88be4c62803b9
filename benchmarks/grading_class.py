"""The class the grading benchmark grades: a course folder with one notebook handed in per student
and assignment, as a real class would hand them in (benchmark set-up; no pipeline step).

* Per-student variants are on (``exercises/problem_data.yaml``: ``variants: {per_student: true}``),
  and each student's notebook is the released one with that student's numbers put in by the
  course's own fetch step (:func:`rbtutor.course.personal.personalise`), then answered with the
  key's computations in the student's own text (:func:`rbtutor.course.trial.answered`, with the
  student's name in every note and in the written parts): no two notebooks are the same.
* One notebook in :data:`WRONG_EVERY` of each assignment has a wrong answer (see :func:`plan`):
  its first handed-in value that is numeric and not zero in the student's own key is scaled by
  :data:`WRONG_FACTOR`, in a cell of its own just before it is handed in.
* Written parts are answered in words (they wait for a human grader).
* One submission is slow: the middle student's first assignment ends with a cell that burns about
  :data:`SLOW_LOOP` loop turns of CPU (about 2 s here).

The class is shaped as a real one (:class:`ClassShape`): every student hands in the same
assignments, problem03 and problem10 by default (``BENCH_CLASS=30``: 30 students, 60 notebooks),
or every assignment of the course (``BENCH_CLASS=273xall``: 273 students, 3 276 notebooks of twelve assignments).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parents[1]
COURSE_DATA = "# the benchmark's course data: the reference ship, per-student variants on\n" \
              "variants: {per_student: true, salt: bench-course-salt-2026}\n"
WRONG_EVERY, WRONG_FACTOR = 4, 1.07
SAME_ASSIGNMENTS = ("problem03", "problem10")  # what every student of a class "N" hands in
SLOW_LOOP = 25_000_000
TIMESTAMP = "2026-12-01 12:00:00.000000 UTC"


@dataclass(frozen=True)
class Submission:
    student: str
    assignment: str
    kind: str  # "right", "wrong" or "slow"


@dataclass(frozen=True)
class ClassShape:
    """A class: ``students`` students, each handing in every one of ``assignments`` (None: all of the course's)."""

    students: int
    assignments: tuple[str, ...] | None = SAME_ASSIGNMENTS

    def __str__(self) -> str:
        handed = "every assignment" if self.assignments is None else " and ".join(self.assignments)
        return f"{self.students} students, each handing in {handed}"


def parse_shape(text: str) -> ClassShape:
    """A class from its ``BENCH_CLASS`` entry: ``N`` (problem03 and problem10) or ``Nxall`` (every assignment).

    >>> parse_shape("30"), parse_shape("273xall")
    (ClassShape(students=30, assignments=('problem03', 'problem10')), ClassShape(students=273, assignments=None))
    """
    match = re.fullmatch(r"\s*(\d+)\s*(x\s*all)?\s*", text)
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"expected a class such as 30 (students handing in problem03 and problem10) or 273xall "
                         f"(students handing in every assignment), got {text!r}")
    return ClassShape(int(match.group(1)), None if match.group(2) else SAME_ASSIGNMENTS)


def plan(students: int, assignments: list[str]) -> list[Submission]:
    """Who hands in what: every one of ``students`` students hands in every one of ``assignments``.

    A student's answer to the ``a``-th assignment is wrong when ``student + a`` leaves 1 divided by
    :data:`WRONG_EVERY` (one in four of each assignment's notebooks); the middle student's first
    assignment is the slow one.

    >>> [(s.student, s.assignment, s.kind) for s in plan(3, ["a", "b"])]
    [('s0000', 'a', 'right'), ('s0000', 'b', 'wrong'), ('s0001', 'a', 'slow'), ('s0001', 'b', 'right'), \
('s0002', 'a', 'right'), ('s0002', 'b', 'right')]
    """
    if students < 1 or not assignments:
        raise ValueError(f"expected at least one student and one assignment, got {students} and {assignments}")
    slow = students // 2
    return [Submission(f"s{student:04d}", name,
                       "slow" if (student, a) == (slow, 0) else "wrong" if (student + a) % WRONG_EVERY == 1
                       else "right")
            for student in range(students) for a, name in enumerate(assignments)]


def _answered_by(student: str, nb, source: Path) -> nbformat.NotebookNode:
    """The key's computations and written parts, in ``student``'s own words."""
    from rbtutor.course.trial import OWN_EXPLANATION, answered

    nb = answered(nb, source)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = cell.source.replace("# (my working)", f"# ({student}: my working)")
        elif cell.source == OWN_EXPLANATION:
            cell.source = f"{student} explains this part in their own words: {OWN_EXPLANATION.lower()}"
    return nb


def _scalable(value) -> bool:
    """Whether scaling ``value`` makes it wrong: numeric, finite, and not (numerically) zero."""
    import numpy as np

    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(array.size and np.all(np.isfinite(array)) and np.abs(array).max() > 1e-6)


def _make_wrong(nb, key: dict) -> None:
    """Scale the first handed-in value that scaling makes wrong (per the student's own ``key``) by
    WRONG_FACTOR, in a cell just before it is handed in."""
    for at, cell in enumerate(nb.cells):
        match = re.search(r"""^hand_in\(\s*["']([\w.]+)["']\s*,\s*(\w+)\s*\)""", cell.source, re.M)
        if cell.cell_type == "code" and match and match.group(1) in key and _scalable(key[match.group(1)].value):
            name = match.group(2)
            nb.cells.insert(at, new_code_cell(f"import numpy as _np\n{name} = _np.asarray({name}, dtype=float) "
                                              f"* {WRONG_FACTOR}  # a slip"))
            return
    raise ValueError("expected a hand_in cell of a non-zero numeric answer in the notebook, found none")


def _make_slow(nb) -> None:
    nb.cells.append(new_code_cell(f"total = 0\nfor k in range({SLOW_LOOP}):\n    total += k & 7  # a slow loop"))


def problem_of_assignment(name: str) -> int:
    """``problem04`` -> 4."""
    match = re.fullmatch(r"problem(\d\d)", name)
    if match is None:
        raise ValueError(f"expected an assignment named problemNN, got {name!r}")
    return int(match.group(1))


def make_class(course: Path, shape: ClassShape) -> list[Submission]:
    """A course folder at ``course`` (made here) with the submissions of a class of ``shape`` in ``submitted/``."""
    from rbtutor.course import CourseLayout, api
    from rbtutor.course.personal import personalise
    from rbtutor.problems.variants import load_course_data, student_key

    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises", course / "exercises",
                    ignore=shutil.ignore_patterns("problem_data.yaml", ".ipynb_checkpoints"))
    (course / "exercises" / "problem_data.yaml").write_text(COURSE_DATA)
    data = load_course_data(course / "exercises" / "problem_data.yaml")
    layout, grader = CourseLayout(course), api(course)
    names = layout.assignments()
    handed = names if shape.assignments is None else list(shape.assignments)
    if not set(handed) <= set(names):
        raise ValueError(f"expected assignments of the course ({', '.join(names)}), got {', '.join(handed)}")
    for name in handed:
        result = grader.generate_assignment(name, force=True)
        if not result["success"]:
            raise RuntimeError(f"generate_assignment {name} failed:\n{result['log'][-2000:]}")
    submissions = plan(shape.students, handed)
    for sub in submissions:
        folder = layout.submitted(sub.student, sub.assignment)
        folder.mkdir(parents=True)
        path = folder / f"{sub.assignment}.ipynb"
        shutil.copyfile(layout.release / sub.assignment / f"{sub.assignment}.ipynb", path)
        if not personalise(path, data, sub.student):
            raise ValueError(f"expected a problem_data cell in the released {sub.assignment}, found none")
        nb = _answered_by(sub.student, nbformat.read(path, as_version=4),
                          layout.exercises / sub.assignment / f"{sub.assignment}.ipynb")
        if sub.kind == "wrong":
            _make_wrong(nb, student_key(data, sub.student, [problem_of_assignment(sub.assignment)]))
        elif sub.kind == "slow":
            _make_slow(nb)
        nbformat.write(nb, path)
        (folder / "timestamp.txt").write_text(TIMESTAMP)
    return submissions
