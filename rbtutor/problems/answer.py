"""An answer of the course and what judging it needs: its value, unit and kind, whether it is
a periodic angle or a unit quaternion, a round-off bound, its known mistakes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._checks import as_array

#: the kinds of answer the judge knows (see :class:`Answer`)
KINDS = ("algebraic", "integrated", "roundoff", "text")


#: units in which a periodic answer may be given, with one full turn in that unit
PERIODS = {"deg": 360.0, "rad": 2.0 * math.pi}


@dataclass(frozen=True, eq=False)
class Answer:
    """One answer, and what judging it needs.

    Attributes
    ----------
    value : float, str or ndarray
    unit : str
    kind : {"algebraic", "integrated", "roundoff", "text"}
        ``algebraic``: follows from the data by algebra; passes within half a unit
        of the last printed digit or 0.1 %, whichever is larger. ``integrated``:
        comes out of an adaptive time integration; must agree to the printed
        digits, so a loose tolerance is caught. ``roundoff``: zero in exact
        arithmetic; passes when every entry is within ``bound``. ``text``: words.
    periodic : bool
        A true angle (unit ``deg`` or ``rad``): equal modulo one full turn. Rates
        and accelerations of angles are not periodic.
    quaternion : bool
        A unit quaternion (Euler parameters): ``q`` and ``-q`` are the same rotation.
    bound : float or None
        The round-off bound of a ``roundoff`` answer, in its unit.
    mistakes : tuple of (str, value)
        Known wrong versions of this answer, each with the diagnosis code it earns
        (the codes of :data:`rbtutor.grading.judge.MESSAGES`).
    """

    value: object
    unit: str
    kind: str
    periodic: bool = False
    quaternion: bool = False
    bound: float | None = None
    mistakes: tuple = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"expected kind in {KINDS}, got {self.kind!r}")
        if (self.kind == "text") != isinstance(self.value, str):
            raise ValueError(f"expected a str value exactly for kind 'text', got {type(self.value).__name__} "
                             f"for kind {self.kind!r}")
        if self.periodic and self.unit not in PERIODS:
            raise ValueError(f"expected a periodic answer in {sorted(PERIODS)}, got unit {self.unit!r}")
        if (self.kind == "roundoff") != (self.bound is not None):
            raise ValueError(f"expected a bound exactly for kind 'roundoff', got bound {self.bound!r} "
                             f"for kind {self.kind!r}")
        if self.bound is not None and not self.bound > 0.0:
            raise ValueError(f"expected a positive round-off bound, got {self.bound!r}")
        if self.quaternion:
            q = as_array("quaternion answer", self.value, (4,))
            if abs(float(np.linalg.norm(q)) - 1.0) > 1e-9:
                raise ValueError(f"expected a unit quaternion, got norm {np.linalg.norm(q)!r}")
        mistakes = tuple((str(code), wrong) for code, wrong in self.mistakes)
        object.__setattr__(self, "mistakes", mistakes)


def algebraic(value, unit: str, **meta) -> Answer:
    """An answer of kind ``algebraic`` (see :class:`Answer`)."""
    return Answer(value, unit, "algebraic", **meta)


def integrated(value, unit: str, **meta) -> Answer:
    """An answer of kind ``integrated`` (see :class:`Answer`)."""
    return Answer(value, unit, "integrated", **meta)


def roundoff(value, unit: str, bound: float) -> Answer:
    """A residual that vanishes in exact arithmetic: kind ``roundoff`` with its bound."""
    return Answer(value, unit, "roundoff", bound=bound)
