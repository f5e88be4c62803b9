"""The problems of the course: their data, and every answer as a function of it.

``load_data()`` returns the reference data (``reference_data.yaml`` beside this
file); ``load_data(path)`` merges a variant file over it, so a variant needs only
the numbers that change. ``answer_key(data)`` computes every answer under an id
``p<problem>.<part>.<name>``; ``python -m rbtutor key`` prints it. Problems 1-10
are the chapter's; Problem 11 (Euler parameters) is the course's own; Problem 12 is the
quiz, ten questions of the book's question bank (:mod:`.question_bank`).

Each :class:`Answer` carries, beside its value and unit, what judging it needs
(its kind, whether it is a periodic angle or a unit quaternion, a round-off
bound, its known mistakes). They are set here, where the value is computed, so
the judge (:mod:`rbtutor.grading.judge`) never infers them from an id's spelling.

Examples
--------
>>> key = answer_key()
>>> key["p3.b.K"].unit
'N m'
"""

from __future__ import annotations

from collections.abc import Callable

from .answer import KINDS, PERIODS, Answer, algebraic, integrated, roundoff
from .data import (
    PUBLISHED_KEY,
    REFERENCE_DATA,
    load_data,
    loaded_vessel,
    merge_data,
    metacentric_height,
    read_yaml,
    steady_heel,
    vessel,
)
from .question_bank import problem12
from .tumbling_problem import problem11
from .vessel_problems import (
    problem1,
    problem2,
    problem3,
    problem4,
    problem5,
    problem6,
    problem7,
    problem8,
    problem9,
    problem10,
)

__all__ = [
    "KINDS", "PERIODS", "PROBLEMS", "PUBLISHED_KEY", "REFERENCE_DATA", "Answer", "algebraic", "answer_key",
    "integrated", "load_data", "loaded_vessel", "merge_data", "metacentric_height", "problem1", "problem2", "problem3",
    "problem4", "problem5", "problem6", "problem7", "problem8", "problem9", "problem10", "problem11", "problem12",
    "read_yaml",
    "roundoff", "steady_heel", "vessel",
]

PROBLEMS: tuple[Callable[[dict], dict[str, Answer]], ...] = (
    problem1, problem2, problem3, problem4, problem5,
    problem6, problem7, problem8, problem9, problem10, problem11, problem12,
)


def answer_key(data: dict | None = None, problems=None) -> dict[str, Answer]:
    """Every answer of the chosen problems (all by default), computed from ``data``."""
    data = load_data() if data is None else data
    chosen = range(1, len(PROBLEMS) + 1) if problems is None else problems
    key: dict[str, Answer] = {}
    for number in chosen:
        if not 1 <= number <= len(PROBLEMS):
            raise ValueError(f"expected problem numbers from 1 to {len(PROBLEMS)}, got {number}")
        key.update(PROBLEMS[number - 1](data))
    return key
