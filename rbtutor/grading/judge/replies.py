"""Step: judge, the instant check's words. What a check adds to "right" or "not right yet", by diagnosis.

The check service (:mod:`rbtutor.course.checks`) judges a value with :func:`.verdicts.judge` and
replies with :func:`check_reply`: at most one short diagnosis, and, like :data:`.verdicts.MESSAGES`,
never how far off a value is.
"""

from __future__ import annotations

from ...problems import Answer
from .verdicts import Verdict

#: the instant check's words for each diagnosis (the reply adds them after "not right yet: "); short,
#: and, like :data:`MESSAGES`, never saying how far off a value is
CHECK_REPLIES = {
    "sign": "the sign is wrong (x forward, y to port, z up)",
    "transposed": "rows and columns are swapped",
    "degrees": "this looks like degrees where radians are asked, or the other way round",
    "factor_1000": "it is off by a factor of 1000: check the units",
    "factor_g": "it is off by a factor of g: check weight against mass, m/s^2 against g",
    "factor_2pi": "it is off by a factor of 2 pi: check rad/s against Hz, radians against turns",
    "inertia_g_for_o": "this is about G; the question asks about O",
    "origin_at_g": "this is the matrix about G; the question asks about O",
    "parallel_axis_sign": "the parallel-axis term has the wrong sign",
    "scalar_last": "the scalar is last; the course puts it first",
    "conjugate": "this is the inverse rotation",
    "quaternion_sign": "this is for -theta: G and the rates change sign with theta",
    "wrong_frame": "this is the other frame (GCS against body)",
    "sequence": "this is another rotation sequence; the course uses z-y-x",
    "degrees_in": "this takes the data's angles, in radians, as degrees",
    "reference_ship": "this is the answer for the book's ship; use the numbers of your notebook",
}


def check_reply(verdict: Verdict, answer: Answer) -> str:
    """The words an instant check adds to "right" or "not right yet" for ``verdict``: at most one diagnosis.

    Empty for a pass and for a value that is none of the recognised slips (the same for every
    such value: nothing about its distance), except that a time integration is reminded of the
    solver's tolerances and a round-off answer that it should vanish.
    """
    if verdict.passed:
        return ""
    if verdict.diagnosis in CHECK_REPLIES:
        return CHECK_REPLIES[verdict.diagnosis]
    if verdict.diagnosis == "wrong_value" and answer.kind == "integrated":
        return "check the solver's tolerances too"
    if verdict.diagnosis == "wrong_value" and answer.kind == "roundoff":
        return "this should vanish up to round-off"
    return ""
