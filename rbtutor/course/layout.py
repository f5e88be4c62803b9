"""The course on disk: every folder and file of a course, named once, from the course root.

A course folder holds ``nbgrader_config.py`` (which calls
:func:`rbtutor.course.nbgrader.configure`), optionally ``course.toml`` (the grading options it
sets, :mod:`rbtutor.course.settings`), the source assignments in
``exercises/`` and nbgrader's working folders. Nothing in rbtutor finds a course
through the location of its own files: a course is always given by its root, so a
regular (non-editable) ``pip install`` grades as well as a checkout.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

NOT_GRADED = "_not_graded.json"  # in integrity/<student>/<assignment>/: why the last run could not grade it


class CourseError(RuntimeError):
    """The folder is not a course folder, or a part of it is missing."""


@dataclass(frozen=True)
class CourseLayout:
    """Paths of one course, from its root folder.

    Examples
    --------
    >>> layout = CourseLayout(Path("/srv/course"))
    >>> str(layout.submitted("s1", "problem03"))
    '/srv/course/submitted/s1/problem03'
    """

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root).absolute())

    @classmethod
    def find(cls, start: str | os.PathLike | None = None) -> CourseLayout:
        """The course whose root is ``start`` or its nearest ancestor holding ``nbgrader_config.py``."""
        here = Path(start or os.getcwd()).absolute()
        for folder in [here, *here.parents]:
            if (folder / "nbgrader_config.py").is_file():
                return cls(folder)
        raise CourseError(f"no nbgrader_config.py in {here} or above it: run this from a course folder "
                          "or pass --root")

    # --- what the instructor writes
    @property
    def config(self) -> Path:
        return self.root / "nbgrader_config.py"

    @property
    def settings_file(self) -> Path:
        """``course.toml``: the grading options the course sets (:mod:`rbtutor.course.settings`); may be absent."""
        return self.root / "course.toml"

    @property
    def exercises(self) -> Path:
        return self.root / "exercises"

    @property
    def data_file(self) -> Path:
        """The course's problem data when it is not the reference data (``make assignments DATA=...``)."""
        return self.exercises / "problem_data.yaml"

    def assignments(self) -> list[str]:
        """Names of the source assignments, ``problem01`` ...; sorted."""
        if not self.exercises.is_dir():
            return []
        return sorted(p.name for p in self.exercises.glob("problem[0-9][0-9]") if p.is_dir())

    def source_notebook(self, assignment: str) -> Path:
        return self.exercises / assignment / f"{assignment}.ipynb"

    # --- nbgrader's working folders
    @property
    def release(self) -> Path:
        return self.root / "release"

    @property
    def exchange(self) -> Path:
        return Path(os.environ.get("RBTUTOR_EXCHANGE") or self.root / "exchange")

    def submitted(self, student: str | None = None, assignment: str | None = None) -> Path:
        return _join(self.root / "submitted", student, assignment)

    def autograded(self, student: str | None = None, assignment: str | None = None) -> Path:
        return _join(self.root / "autograded", student, assignment)

    def feedback(self, student: str | None = None, assignment: str | None = None) -> Path:
        return _join(self.root / "feedback", student, assignment)

    @property
    def gradebook_file(self) -> Path:
        return self.root / "gradebook.db"

    @property
    def gradebook_url(self) -> str:
        """``RBTUTOR_GRADEBOOK`` (e.g. a PostgreSQL URL) or the SQLite file, waiting for its lock."""
        return os.environ.get("RBTUTOR_GRADEBOOK") or f"sqlite:///{self.gradebook_file}?timeout=120"

    # --- what grading writes besides nbgrader's folders
    @property
    def integrity(self) -> Path:
        """Per-notebook integrity events (see :mod:`rbtutor.grading.report`)."""
        return self.root / "integrity"

    def not_graded_mark(self, student: str, assignment: str) -> Path:
        """Where a submission that a run could not grade says why (``grade.withdraw_submission``)."""
        return _join(self.integrity, student, assignment) / NOT_GRADED

    def not_graded(self) -> dict[tuple[str, str], str]:
        """``{(student, assignment): reason}`` of every submission marked by :meth:`not_graded_mark`."""
        found = {}
        for path in sorted(self.integrity.glob(f"*/*/{NOT_GRADED}")):
            try:
                reason = str(json.loads(path.read_text())["stages"]["grade"][0]["reason"])
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                reason = "not graded (its record could not be read)"
            found[path.parent.parent.name, path.parent.name] = reason
        return found

    @property
    def grades_csv(self) -> Path:
        return self.root / "grades.csv"

    @property
    def scratch(self) -> Path:
        """Parent of the throwaway folders the grading kernels work in (private to the grader)."""
        return self.root / ".grading"


def _join(base: Path, *parts: str | None) -> Path:
    for part in parts:
        if part is None:
            break
        if not part or part in (".", "..") or "/" in part or "\0" in part:
            raise CourseError(f"expected a plain folder name, got {part!r}")
        base = base / part
    return base
