"""The class the grading benchmark grades: a course folder with one notebook handed in per student
and assignment, as a real class would hand them in (benchmark set-up; no pipeline step).

* Per-student variants are on (``exercises/problem_data.yaml``: ``variants: {per_student: true}``),
  and each student's notebook is the released one with that student's numbers put in by the
  course's own fetch step (:func:`rbtutor.course.personal.personalise`), then answered with the
  key's computations in the student's own text (:func:`rbtutor.course.trial.answered`, with the
  student's name in every note and in the written parts): no two notebooks are the same.
* Every :data:`WRONG_EVERY`-th submission has a wrong answer: its first handed-in value that
  is numeric and not zero in the student's own key is scaled by :data:`WRONG_FACTOR`, in a cell
  of its own just before it is handed in.
* Written parts are answered in words (they wait for a human grader).
* One submission (the middle one) is slow: a cell at its end burns about
  :data:`SLOW_LOOP` loop turns of CPU (about 2 s here) before the notebook ends.

Submissions are spread over students in order: submission ``k`` is assignment ``k mod 11`` of
student ``k div 11``, so a class of 30 is two full students and eight notebooks of a third.
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
SLOW_LOOP = 25_000_000
TIMESTAMP = "2026-12-01 12:00:00.000000 UTC"


@dataclass(frozen=True)
class Submission:
    student: str
    assignment: str
    kind: str  # "right", "wrong" or "slow"


def plan(count: int, assignments: list[str]) -> list[Submission]:
    """Who hands in what: ``count`` submissions over as few students as hold them.

    >>> [(s.student, s.assignment, s.kind) for s in plan(5, ["a", "b"])]
    [('s0000', 'a', 'right'), ('s0000', 'b', 'wrong'), ('s0001', 'a', 'slow'), ('s0001', 'b', 'right'), \
('s0002', 'a', 'right')]
    """
    if count < 1 or not assignments:
        raise ValueError(f"expected at least one submission and one assignment, got {count} and {assignments}")
    slow = count // 2
    return [Submission(f"s{k // len(assignments):04d}", assignments[k % len(assignments)],
                       "slow" if k == slow else "wrong" if k % WRONG_EVERY == 1 else "right")
            for k in range(count)]


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


def make_class(course: Path, count: int) -> list[Submission]:
    """A course folder at ``course`` (made here) with ``count`` submissions in ``submitted/``."""
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
    for name in names:
        result = grader.generate_assignment(name, force=True)
        if not result["success"]:
            raise RuntimeError(f"generate_assignment {name} failed:\n{result['log'][-2000:]}")
    submissions = plan(count, names)
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
