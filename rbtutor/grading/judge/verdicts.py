"""Step: judge. The grader's decision on each handed-in answer: pass or fail, feedback, a diagnosis.

The verdict is recorded on its test cell; the next step, :mod:`rbtutor.grading.scores`, turns
verdicts into points.

This runs in the grading process (an nbgrader preprocessor calls it after the
student's notebook has been executed), never in the student's kernel: the
submitted object is only inspected, never trusted. It is accepted only if it is
made of plain numbers (``int``, ``float``, ``bool``, NumPy integer, floating or
bool scalars, NumPy arrays of those dtypes, and lists or tuples of these) and is
then converted once with ``np.asarray(value, dtype=float)``; anything else, such
as an object with a custom ``__eq__``, ``__float__`` or ``__array__``, fails as
``"not_numeric"`` without any of its methods being called.

The reference value always comes from :func:`rbtutor.problems.answer_key`
(computed from the problem data), and the printed precision from
the published key (``rbtutor/problems/answer_key.yaml``). How an answer is
judged comes from its :class:`rbtutor.problems.Answer`: its ``kind`` (algebraic,
integrated, roundoff, text), whether it is ``periodic`` (an angle, equal modulo a
full turn), whether it is a ``quaternion`` (``q`` and ``-q`` both right), its
round-off ``bound`` and its known ``mistakes``. Nothing is read from the spelling
of an answer id.

What a failed answer's feedback says: a recognised mistake by name, or that the
value is not accepted. It never states the reference value, and never how far
off a value is or in which direction: the same judge answers the instant checks
of the hub (:mod:`rbtutor.course.checks`), and a message such as "about 3 % too
large" would let a student home in on the key by bisection. A named mistake is
recognised only within the pass tolerance carried over to the wrong version, so
it tells no more than a pass would (a "sign" tells the sign, nothing finer).

Diagnosis codes (``Verdict.diagnosis``)
---------------------------------------
On a pass: ``None``, or ``"accepted_printed"`` when the value printed in the
key was accepted under an erratum with ``accept_printed: true``.

On a failure, input problems: ``"not_numeric"``, ``"not_text"``,
``"not_finite"``, ``"shape"``, and in a graded notebook ``"not_handed_in"`` (no value
reached the grader: the test cell stopped before ``hand_in``). Recognised mistakes (the answer's own
``mistakes`` first, then :data:`GENERIC_MISTAKES`; every code has its text in
:data:`MESSAGES`): ``"sign"``, ``"transposed"`` (also a matrix handed in with
rows and columns swapped, whatever its shape), ``"degrees"``, ``"factor_1000"``,
``"factor_g"``, ``"factor_2pi"``, ``"inertia_g_for_o"``, ``"origin_at_g"``,
``"parallel_axis_sign"``, and for Euler parameters ``"scalar_last"``,
``"conjugate"``, ``"quaternion_sign"``, ``"wrong_frame"``, ``"sequence"``,
``"degrees_in"``; the check service adds ``"reference_ship"`` (the right answer for the
course's own numbers, handed in by a student who has numbers of their own). Anything
else: ``"wrong_value"``, with one message per kind of answer that does not depend on the
value handed in (:func:`not_accepted`).

Examples
--------
>>> judge("p3.b.K", 2.16e6).passed
True
>>> judge("p3.b.K", -2.16e6).diagnosis
'sign'
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...problems import PERIODS, PUBLISHED_KEY, Answer, answer_key, read_yaml
from ...problems.printed import printed_half_unit, printed_value

ERRATA_PAGE = "the errata page of the book (book/errata)"

#: The judging rules, in one place.
RULES: dict[str, object] = {
    # Algebraic answers pass within max(printed half-unit, this x |reference|), entry by
    # entry: right to about three significant figures is right.
    "algebraic_rtol": 1e-3,
    # Answers of kind "integrated" (a time integration) must agree to the printed
    # half-unit of each entry (no relative allowance).
    # An integrated answer that the printed key does not give: relative tolerance per entry.
    "integrated_unpublished_rtol": 1e-4,
    # Floor of every tolerance, relative to the largest entry of the reference, so that an
    # entry that is zero in theory may carry floating-point noise.
    "zero_floor_rtol": 1e-9,
    # Answers marked periodic are equal modulo one full turn of their unit.
    "periods": PERIODS,
    # A submitted value may hold at most this many numbers (more is refused as "shape").
    "max_entries": 10_000,
}

MESSAGES = {
    "sign": "The size is right but the sign is not. Check the direction of the axes "
            "(x forward, y to port, z up) and the order of the factors in cross products.",
    "transposed": "The entries are right but transposed: rows and columns are swapped.",
    "degrees": "The value looks like degrees where radians are asked for, or the other way round.",
    "factor_1000": "The value is off by a factor of a thousand: check the units "
                   "(kg or tonnes, N or kN, m or mm).",
    "inertia_g_for_o": "This uses the inertia about G where the inertia about O is asked for; "
                       "move it to O with the parallel-axis theorem.",
    "origin_at_g": "This is the matrix with the origin at G; the question asks for it about O, "
                   "where translation and rotation are coupled through m S(r_G).",
    "parallel_axis_sign": "The parallel-axis term has the wrong sign: I_O = I_G - m S(r_G) S(r_G). "
                          "Moving the reference point away from G can only increase the moments "
                          "of inertia.",
    "scalar_last": "These are the right Euler parameters in the wrong order: the course stores them "
                   "scalar first, [theta0, theta1, theta2, theta3], while some libraries (scipy's "
                   "Rotation.as_quat, for one) put the scalar last.",
    "conjugate": "This is the inverse rotation: the vector part [theta1, theta2, theta3] has the wrong "
                 "sign (or the matrix maps GCS to body instead of body to GCS).",
    "quaternion_sign": "This has the opposite sign. G is linear in the Euler parameters, so G(-theta) = "
                       "-G(theta): the given parameter rates belong to the parameters with theta0 > 0, "
                       "and with -theta the rates change sign too.",
    "wrong_frame": "This is the right quantity in the other frame: G_0 gives components in the GCS, "
                   "G_b in the body frame, and R takes body components to GCS components.",
    "sequence": "This is a different rotation sequence. The course's Euler angles are z-y-x: "
                "R = Rz(psi) Ry(theta) Rx(phi); the node's 'Rotation' output is x-y-z: "
                "R = Rx(phi0) Ry(phi1) Rz(phi2).",
    "degrees_in": "The angles of the data are in radians; this treats them as degrees.",
    "reference_ship": "This is the answer for the course's own ship, the numbers of the book, not for "
                      "yours: start again from the numbers in the data cell of your notebook.",
    "factor_g": "The value is off by a factor of g (9.81 m/s^2): check whether a weight or a mass, "
                "and an acceleration in m/s^2 or in units of g, is asked for.",
    "factor_2pi": "The value is off by a factor of 2 pi: check whether an angular frequency (rad/s), "
                  "a frequency (Hz) or a period is asked for, and radians against turns.",
}


@dataclass(frozen=True)
class Verdict:
    """The decision on one answer, and, once it is judged in a graded notebook, what is at stake.

    :func:`judge` fills ``passed``, ``message`` and ``diagnosis``; :class:`JudgeAnswers` adds the
    ``answer_id`` and the ``max_points`` of the test cell (from the gradebook's copy of the cell,
    restored before execution) and records the verdict on the cell (:data:`VERDICT_KEY`). What a
    verdict earns is decided in one place, :func:`rbtutor.grading.scores.points_earned`.

    Attributes
    ----------
    passed : bool
    message : str
        Feedback for the student; it never contains the reference value.
    diagnosis : str or None
        A short code (see the module docstring), None for a plain pass.
    answer_id : str or None
        The answer judged (``"p3.b.K"``); None outside a graded notebook (the instant checks).
    max_points : float or None
        The points of the test cell that handed the answer in; None outside a graded notebook.
    """

    passed: bool
    message: str
    diagnosis: str | None = None
    answer_id: str | None = None
    max_points: float | None = None

    def record(self) -> dict:
        """The verdict as the plain mapping stored in a cell's metadata (JSON)."""
        return {"answer_id": self.answer_id, "passed": self.passed, "diagnosis": self.diagnosis,
                "message": self.message, "max_points": self.max_points}

    @classmethod
    def from_record(cls, record) -> Verdict:
        """The verdict stored by :meth:`record`; ``ValueError`` when it is not such a mapping."""
        fields = ("answer_id", "passed", "diagnosis", "message", "max_points")
        if not isinstance(record, dict) or set(record) != set(fields):
            got = sorted(record) if isinstance(record, dict) else type(record).__name__
            raise ValueError(f"expected a verdict record with the keys {sorted(fields)}, got {got}")
        if type(record["passed"]) is not bool:
            raise ValueError(f"expected passed to be True or False, got {record['passed']!r}")
        points = record["max_points"]
        if type(points) not in (int, float) or not math.isfinite(points) or points < 0:
            raise ValueError(f"expected max_points to be a finite number >= 0, got {points!r}")
        return cls(record["passed"], record["message"], record["diagnosis"], record["answer_id"],
                   float(points))


#: where :class:`JudgeAnswers` records a test cell's verdict: ``cell.metadata["rbtutor"]["verdict"]``.
#: Only the grading process writes it (the kernel has no way to write cell metadata, and a value the
#: submitted notebook brings along is removed before judging).
VERDICT_KEY = "verdict"


# --- recognised mistakes ------------------------------------------------------------------
# Quantity-specific wrong versions are carried by each Answer (its ``mistakes``, computed in
# rbtutor.problems beside the value); the generic ones below are tried for every numeric answer.


def _to_degrees(ref: np.ndarray, unit: str):
    return (np.degrees(ref), "deg") if unit.strip().startswith("rad") else None


def _to_radians(ref: np.ndarray, unit: str):
    return (np.radians(ref), "rad") if unit.strip().startswith("deg") else None


#: the standard gravity and one full turn in radians: factors a value may be off by (``factor_g``,
#: ``factor_2pi``); 9.81 is what most students type, and 9.80665 is within the tolerance of it
KNOWN_CONSTANTS = {"factor_g": 9.81, "factor_2pi": 2.0 * math.pi}

#: Wrong versions tried for every numeric answer, in order: (diagnosis, (reference, unit) ->
#: (value, unit of that value) or None).
GENERIC_MISTAKES: list[tuple[str, Callable[[np.ndarray, str], tuple[np.ndarray, str] | None]]] = [
    ("sign", lambda ref, unit: (-ref, unit)),
    ("transposed", lambda ref, unit: (ref.T, unit) if ref.ndim == 2 else None),
    ("degrees", _to_degrees),
    ("degrees", _to_radians),
    ("factor_1000", lambda ref, unit: (ref * 1000.0, unit)),
    ("factor_1000", lambda ref, unit: (ref / 1000.0, unit)),
    ("factor_g", lambda ref, unit: (ref * KNOWN_CONSTANTS["factor_g"], unit)),
    ("factor_g", lambda ref, unit: (ref / KNOWN_CONSTANTS["factor_g"], unit)),
    ("factor_2pi", lambda ref, unit: (ref * KNOWN_CONSTANTS["factor_2pi"], unit)),
    ("factor_2pi", lambda ref, unit: (ref / KNOWN_CONSTANTS["factor_2pi"], unit)),
]


# --- inputs ------------------------------------------------------------------------------

_PLAIN_TYPES = (int, float, bool)
_NUMPY_SCALARS = frozenset(
    np.dtype(code).type for code in np.typecodes["AllInteger"] + np.typecodes["Float"] + "?"
)


def _plain_numbers(obj, limit: int) -> str:
    """"ok", "not_numeric" or "too_many": whether obj is made only of plain numbers.

    Only exact types are looked at (no subclasses), and no method of obj is called.
    """
    stack, count = [obj], 0
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _PLAIN_TYPES or kind in _NUMPY_SCALARS:
            count += 1
        elif kind is np.ndarray:
            if item.dtype.kind not in "biuf":
                return "not_numeric"
            count += item.size
        elif kind is list or kind is tuple:
            count += len(item)
            if count <= limit:
                stack.extend(item)
        else:
            return "not_numeric"
        if count > limit:
            return "too_many"
    return "ok"


def _describe_shape(shape: tuple) -> str:
    if shape == ():
        return "a single number"
    if len(shape) == 1:
        return f"a vector of {shape[0]} numbers"
    if len(shape) == 2:
        return f"a {shape[0]} x {shape[1]} matrix"
    return f"an array of shape {shape}"


def _as_numbers(submitted, expected_shape: tuple) -> np.ndarray | Verdict:
    """The submitted value as a float array of the expected shape, or the failing Verdict."""
    expected = _describe_shape(expected_shape)
    status = _plain_numbers(submitted, int(RULES["max_entries"]))
    if status == "not_numeric":
        return Verdict(False, f"Expected plain numbers ({expected}), got an object of type "
                              f"{type(submitted).__name__}.", "not_numeric")
    if status == "too_many":
        return Verdict(False, f"Expected {expected}, got far too many numbers.", "shape")
    try:
        array = np.asarray(submitted, dtype=float)
    except OverflowError:
        return Verdict(False, "A number is too large to be represented.", "not_finite")
    except ValueError:
        return Verdict(False, f"Expected {expected}, got rows of unequal length.", "shape")
    except TypeError:
        return Verdict(False, f"Expected plain numbers ({expected}).", "not_numeric")
    array = np.squeeze(array)
    if array.shape != expected_shape:
        return Verdict(False, f"Expected {expected}, got {_describe_shape(array.shape)}.", "shape")
    if not np.all(np.isfinite(array)):
        return Verdict(False, "The answer contains NaN or infinity.", "not_finite")
    return array


# --- published key and reference ---------------------------------------------------------


@functools.lru_cache(maxsize=4)
def read_published(path: str) -> dict:
    return read_yaml(Path(path).read_text(encoding="utf-8")) or {}


@functools.lru_cache(maxsize=1)
def _reference_key() -> dict:
    return answer_key()


def _printed_array(printed, shape: tuple, parse) -> np.ndarray | None:
    """parse() applied to each printed entry, as an array of ``shape``, or None if they do not fit."""
    if printed is None:
        return None
    try:
        values = np.vectorize(lambda s: parse(str(s)), otypes=[float])(np.array(printed, dtype=object))
    except ValueError:
        return None
    values = np.squeeze(values)
    return values if values.shape == shape else None


# --- comparison ---------------------------------------------------------------------------


def _period(answer: Answer, unit: str | None = None) -> float | None:
    """One full turn in ``unit`` (the answer's own by default) for a periodic answer, else None."""
    if not answer.periodic:
        return None
    return float(RULES["periods"][(unit or answer.unit).strip()])


def _difference(x: np.ndarray, target: np.ndarray, period: float | None) -> np.ndarray:
    d = x - target
    if period is not None:
        d = (d + period / 2) % period - period / 2
    return d


def _agrees(x, target, tol, period) -> np.ndarray:
    """Entry-by-entry agreement (a value exactly on the boundary agrees)."""
    return np.abs(_difference(x, target, period)) <= tol * (1.0 + 1e-9) + 1e-300


def _same(x, target, tol, period, quaternion: bool) -> bool:
    """Whether every entry agrees; for a quaternion, with ``target`` or with ``-target``."""
    if np.all(_agrees(x, target, tol, period)):
        return True
    return quaternion and bool(np.all(_agrees(x, -target, tol, period)))


def _tolerance(reference: np.ndarray, half: np.ndarray | None, integrated: bool) -> np.ndarray:
    size = np.abs(reference)
    floor = float(RULES["zero_floor_rtol"]) * (float(size.max()) if size.size else 0.0)
    if integrated:
        tol = half if half is not None else float(RULES["integrated_unpublished_rtol"]) * size
    else:
        tol = np.maximum(0.0 if half is None else half, float(RULES["algebraic_rtol"]) * size)
    return np.maximum(tol, floor)


def _scaled_tolerance(tol: np.ndarray, reference: np.ndarray, wrong: np.ndarray) -> np.ndarray:
    """The pass tolerance carried over to a wrong version, entry by entry and relatively.

    Where the reference entry is not zero the window around the wrong version is exactly
    the pass window scaled, so hitting a named mistake locates the key no better than a
    pass would (a wider window could be found first and then bisected at its edges). Where
    the reference entry is zero, the wrong entry gets three significant figures.
    """
    nonzero = reference != 0
    ratio = np.divide(np.abs(wrong), np.abs(reference), out=np.zeros_like(tol), where=nonzero)
    return np.where(nonzero, tol * ratio, np.maximum(tol, float(RULES["algebraic_rtol"]) * np.abs(wrong)))


#: the slips of :data:`GENERIC_MISTAKES` that can apply to an answer, by what the answer is (see
#: :func:`generic_slips`): a slip that cannot apply is neither tried nor listed
SLIPS_BY_FORM = {
    "quaternion": (),  # -q is the same rotation; a unit quaternion has no unit and no scale
    "angle": ("sign", "degrees"),  # a turn more or less is the same angle (periodic answers)
    "dimensionless": ("sign", "transposed"),
    "scalar": ("sign", "degrees", "factor_1000", "factor_g", "factor_2pi"),
    "vector": ("sign", "degrees", "factor_1000"),
    "matrix": ("sign", "transposed", "factor_1000"),
}

#: what each slip is called when the feedback lists the slips an answer was tried for
SLIP_NAMES = {
    "sign": "a wrong sign", "transposed": "rows and columns swapped", "degrees": "degrees for radians",
    "factor_1000": "a factor of 1000", "factor_g": "a factor of g", "factor_2pi": "a factor of 2 pi",
    "inertia_g_for_o": "the wrong reference point", "origin_at_g": "the wrong reference point",
    "parallel_axis_sign": "the sign of the parallel-axis term", "scalar_last": "the scalar last",
    "conjugate": "the inverse rotation", "quaternion_sign": "-theta for theta", "wrong_frame": "the other frame",
    "sequence": "another rotation sequence", "degrees_in": "the data's angles taken as degrees",
}


def answer_form(answer: Answer) -> str:
    """What an answer is, for the choice of slips: a key of :data:`SLIPS_BY_FORM`."""
    unit = answer.unit.strip()
    if answer.quaternion:
        return "quaternion"
    if unit in RULES["periods"]:
        return "angle"
    if unit == "1":
        return "dimensionless"
    return {0: "scalar", 1: "vector"}.get(np.ndim(np.squeeze(np.asarray(answer.value, dtype=float))), "matrix")


def generic_slips(answer: Answer) -> list:
    """The entries of :data:`GENERIC_MISTAKES` that can apply to ``answer`` (by :func:`answer_form`)."""
    allowed = SLIPS_BY_FORM[answer_form(answer)]
    return [(code, make) for code, make in GENERIC_MISTAKES if code in allowed]


def not_accepted(answer: Answer) -> str:
    """The feedback on a wrong numeric answer that is none of the recognised mistakes.

    It depends on the answer only, never on the value handed in: how far off a value is, or
    in which direction, is not said. It lists the slips tried for this answer, and no other.
    """
    reference = np.squeeze(np.asarray(answer.value, dtype=float))
    codes = [code for code, _ in answer.mistakes]
    for code, make in generic_slips(answer):
        made = make(reference, answer.unit)
        if made is not None and not np.array_equal(made[0], reference):  # the transpose of a symmetric matrix
            codes.append(code)
    names = list(dict.fromkeys(SLIP_NAMES[c] for c in codes))
    tried = f" nor one of the slips the checks recognise for it ({', '.join(names)})" if names else ""
    text = f"This is neither the key's value{tried}. Checks never say how far off a value is."
    if answer.kind == "integrated":
        text += (" For a quantity found by time integration, also check the solver's tolerances: "
                 "the defaults of solve_ivp are too loose here; tighten rtol and atol by several "
                 "orders of magnitude, or use a higher-order method such as DOP853.")
    return text


def _judge_text(reference: str, submitted) -> Verdict:
    if type(submitted) is not str:
        return Verdict(False, "Expected text naming the answer, for example two motions "
                              "joined by a hyphen.", "not_text")

    def words(text: str) -> list[str]:
        return [w for w in re.split(r"[\s\-_]+", text.strip().lower()) if w]

    got, want = words(submitted), words(reference)
    if got == want or got == want[::-1]:
        return Verdict(True, "Correct.")
    return Verdict(False, "That is not the answer of the key.", "wrong_value")


# --- the decision -------------------------------------------------------------------------


def judge(answer_id: str, submitted, *, key=None, published=None, data=None,
          published_path=None, diagnose=True) -> Verdict:
    """Decide whether ``submitted`` is a right answer to ``answer_id``.

    Parameters
    ----------
    answer_id : str
        An id of :func:`rbtutor.problems.answer_key`, such as ``"p1.a.I_O"``.
    submitted : object
        The student's value: any array-like of plain numbers that squeezes to the
        reference's shape (or a string, for text answers).
    key : dict, optional
        ``answer_key(data)``; computed when omitted.
    published : dict, optional
        The parsed published key; read from ``published_path`` (by default
        the published key (``rbtutor/problems/answer_key.yaml``)) when omitted.
    data : dict, optional
        Problem data from which the key is computed when ``key`` is omitted; the
        reference data when both are omitted.
    published_path : path, optional
    diagnose : bool
        Whether a failed answer is matched against the known mistakes to say which one it is
        (nine tenths of the cost of judging a wrong answer). With False, a failed answer gets the
        plain "wrong_value" verdict; ``passed`` is the same either way.

    Returns
    -------
    Verdict

    Raises
    ------
    KeyError
        When ``answer_id`` is not in the key (a grader's mistake, not the student's).
    """
    if key is None:
        key = _reference_key() if data is None else answer_key(data)
    if published is None:
        published = read_published(str(published_path or PUBLISHED_KEY))
    if answer_id not in key:
        raise KeyError(f"unknown answer id {answer_id!r}; expected one of the ids of answer_key()")
    answer = key[answer_id]
    entry = published.get(answer_id) or {}

    if answer.kind == "text":
        return _judge_text(answer.value, submitted)

    reference = np.squeeze(np.asarray(answer.value, dtype=float))
    x = _as_numbers(submitted, reference.shape)
    if isinstance(x, Verdict):
        return _transposed_shape(submitted, reference, x)

    if answer.kind == "roundoff":
        if np.all(np.abs(x) <= float(answer.bound)):
            return Verdict(True, "Correct: within round-off.")
        return Verdict(False, "This should vanish up to floating-point round-off, and it is "
                              "larger than round-off can explain.", "wrong_value")

    erratum = entry.get("erratum") or {}
    precision_text = erratum.get("correct", entry.get("printed"))
    half = _printed_array(precision_text, reference.shape, printed_half_unit)
    integrated = answer.kind == "integrated"
    period = _period(answer)
    tol = _tolerance(reference, half, integrated)

    ok = _agrees(x, reference, tol, period)
    if np.all(ok):
        return Verdict(True, "Correct.")
    if answer.quaternion and np.all(_agrees(x, -reference, tol, period)):
        return Verdict(True, "Correct (q and -q are the same rotation).")

    if erratum.get("accept_printed") and _is_the_books(reference, erratum, half, period):
        accepted = _printed_accepted(x, reference.shape, entry, period, integrated)
        if accepted is not None:
            return accepted
    if not diagnose:
        return Verdict(False, not_accepted(answer), "wrong_value")
    return _diagnosis(x, reference, answer, tol, period)


def _printed_accepted(x: np.ndarray, shape: tuple, entry: dict, period, integrated: bool) -> Verdict | None:
    """A pass when ``x`` is the value the key printed under an erratum that accepts it; else None."""
    printed = _printed_array(entry.get("printed"), shape, printed_value)
    printed_half = _printed_array(entry.get("printed"), shape, printed_half_unit)
    if printed is not None and np.all(_agrees(x, printed, _tolerance(printed, printed_half, integrated), period)):
        return Verdict(True, "Accepted: this is the value printed in the answer key, which has an "
                             f"erratum; the corrected value and the reason are on {ERRATA_PAGE}.",
                       "accepted_printed")
    return None


def _diagnosis(x: np.ndarray, reference: np.ndarray, answer, tol, period) -> Verdict:
    """The failed verdict of ``x``: a known mistake it matches within tolerance, or plain "wrong_value"."""
    candidates = [(code, wrong, answer.unit) for code, wrong in answer.mistakes]
    for code, make in generic_slips(answer):
        made = make(reference, answer.unit)
        if made is not None:
            candidates.append((code, *made))
    for code, wrong, unit in candidates:
        wrong = np.squeeze(np.asarray(wrong, dtype=float))
        wrong_period = _period(answer, unit)
        if wrong.shape != reference.shape or _same(wrong, reference, tol, period, answer.quaternion):
            continue
        scaled = _scaled_tolerance(tol, reference, wrong)
        if wrong_period is not None and np.any(scaled >= wrong_period / 4):
            continue  # an angle a thousand times too large: modulo 360 deg, it would fit anything
        if wrong_period is not None and period is not None:
            # Modulo a turn the wrong version lands anywhere in the turn, so a window scaled with its
            # size would be wider than the pass window there (g times, for factor_g), and undoing
            # the named factor on values inside it sweeps a wide arc that can hold the key. The pass
            # window carried over to the wrong version's unit locates it no better than a pass would.
            scaled = np.minimum(scaled, tol * (wrong_period / period))
        if _same(x, wrong, scaled, wrong_period, answer.quaternion):
            return Verdict(False, MESSAGES[code], code)
    return Verdict(False, not_accepted(answer), "wrong_value")


def _is_the_books(reference: np.ndarray, erratum: dict, half, period) -> bool:
    """Whether this key is the book's own (its value is the erratum's corrected one).

    The value printed under an erratum is accepted only then: for another ship's numbers (a
    per-student variant) the book's printed value is simply some other number, and accepting
    it would hand a pass to anyone who types it in.
    """
    correct = _printed_array(erratum.get("correct"), reference.shape, printed_value)
    if correct is None or half is None:
        return False
    return bool(np.all(_agrees(reference, correct, half, period)))


def _transposed_shape(submitted, reference: np.ndarray, refused: Verdict) -> Verdict:
    """A matrix handed in with rows and columns swapped (shape (n, m) for (m, n)) is named as such."""
    if refused.diagnosis != "shape" or reference.ndim != 2 or reference.shape[0] == reference.shape[1]:
        return refused
    swapped = _as_numbers(submitted, reference.T.shape)
    if isinstance(swapped, Verdict):
        return refused
    tol = _tolerance(reference, None, False)
    if np.all(_agrees(swapped.T, reference, tol, None)):
        return Verdict(False, f"{refused.message} {MESSAGES['transposed']}", "transposed")
    return refused
