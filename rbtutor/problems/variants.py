"""Per-student variants: each student's own numbers, derived from the course data and their id.

:func:`variant` turns the course data and a student id into that student's data. The
derivation is deterministic: a NumPy ``Generator`` per data section, seeded from the
SHA-256 of the course salt, the student id and the section name, so the same student
gets the same numbers on every call, in every process, on every machine, and a new
field added to one section leaves the other sections' numbers alone. The student's key
is ``answer_key(variant(data, id))`` (:func:`student_key`, cached per process), so the
grader, the command line and a later check service all use one derivation.

The course data itself is the instructor's own variant: the ids in
:data:`RESERVED_IDS` (the empty id and ``"reference"``) get it back unchanged.

Switch and salt
---------------
Variants are on for a course when its data file (``exercises/problem_data.yaml``)
has a section ``variants: {per_student: true, salt: "..."}``; the salt changes every
student's numbers at once, e.g. from one year to the next. :func:`load_course_data` reads
such a file (the section is not part of the reference data, so
:func:`rbtutor.problems.load_data` would refuse it).

The salt is the course's secret, and it is one that can be *confirmed*: rbtutor is public,
so a student who guesses a salt can derive their own numbers from the guess and compare them
with the numbers they were given; a match gives them every classmate's numbers and key. Only
a salt too large to guess protects the class. So a course with ``per_student: true`` must
have a salt of at least :data:`MIN_SALT_LENGTH` characters, and :func:`settings` (which every
path that derives a student's numbers goes through: :func:`load_course_data`,
:func:`variant`, :func:`student_key`, :func:`data_digest`) refuses an empty or shorter one. The
bound is that of the salt the hub writes (16 hexadecimal digits, 64 random bits); it rules out
the words and dates a person would type, but a length cannot prove randomness: make the salt
with ``python -c "import secrets; print(secrets.token_hex(16))"``.

How the numbers vary (relative to the course data; zeros stay zero, signs never change)
--------------------------------------------------------------------------------------
Each range below is that of the factor drawn; rounding to the printed precision then
moves a number by at most half a rounding step (under 5 % of it everywhere).

One ship per student (Problems 1-7, 9, 10 and the crane point of 11):

* ``vessel.mass`` within 15 %, 3 significant figures; ``vessel.r_g`` x and z within
  15 % (to 0.1 m and 0.05 m), y stays 0 (the hull is symmetric); radii of gyration
  within 10 % (to 0.1 m); the product ``I_xz`` within 15 % (2 significant figures).
  Redrawn until ``I_G`` and ``I_O`` are positive definite and satisfy the triangle
  inequality (:func:`rbtutor.inertia.check_inertia`).
* ``sensor``: ``r_p`` within 15 % (to 0.5 m); ``nu``, ``nu_dot`` and the turn of part
  (d) within 15 % (2 significant figures, 3 for the surge speed).
* ``turn``: ``nu`` within 15 % (u to 0.1 m/s, the others 2 significant figures);
  ``gm`` within 15 % (to 0.05 m), at least 0.5 m; ``z_g_raised`` within 15 % (to
  0.05 m) and above ``z_G``. Problem 3(d) keeps GM as stated, as in the reference.
* ``power.tau``, ``tow.tau``, ``simulation.tau`` within 15 % (2 significant figures);
  ``crane.force`` within 15 % (3 significant figures), ``crane.point`` within 15 %
  (to 0.5 m).
* ``load``: mass within 15 % (2 significant figures), position within 15 % (to 0.5
  m), ``gm`` within 15 % (to 0.05 m), between 0.3 m and the unloaded GM (the lifted
  load raises G, so the loaded ship is less stiff, and still stable).
* ``module`` (Problem 8 and 11(e)): mass within 15 % (2 significant figures),
  dimensions within 10 % (to 0.1 m, their order kept, so y stays the intermediate
  axis), spin rate and initial rates within 15 % (2 significant figures); redrawn
  until the spin about y flips sign as often within ``t_end`` as for the course data
  (the notebook asks for that many flip times).
* ``euler`` (Problem 11): the attitude within 15 % (2 significant figures, 3 for the
  heading), the body rate of (c) within 15 % (2 significant figures), the node position
  within 15 % (3 significant figures, 2 for its height) and velocity within 15 % (to
  0.1 m/s). The logged parameters, the node parameters and both sets of
  parameter rates are made, as in the reference data, from angles and body rates
  varied within 15 % (to 0.01 rad and 0.001 rad/s), and printed to 6 decimals; the
  rates are tangent to the unit sphere at their parameters.
* ``quiz`` (Problem 12) is the exception to the heading above: its numbers are not varied
  around the course's but drawn afresh by the question bank's own draw
  (:func:`rbtutor.problems.question_bank.draw`, the ranges of ``book/questions.md``, signs
  included), so that each student's quiz is a fresh set of the bank's questions.
* Unchanged: ``constants``, the durations (``module.t_end``, ``simulation.t_end``,
  ``euler.step``, ``euler.t_end``, ``euler.tumble_time``).

Examples
--------
>>> from rbtutor.problems import load_data
>>> data = load_data()
>>> variant(data, "") == data
True
>>> variant(data, "alice") == variant(data, "alice") != data
True
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import yaml

from ..euler_parameters import from_euler_angles, g_matrix_body
from ..inertia import box_inertia, check_inertia, inertia_from_gyration, parallel_axis
from ..torque_free import sign_change_count
from . import REFERENCE_DATA, answer_key, load_data, merge_data, read_yaml
from .question_bank import draw, quiz_numbers

#: the section of a course data file that switches variants on (not problem data)
SETTINGS_KEY = "variants"
#: ids that get the course data itself (the instructor's own variant)
RESERVED_IDS = frozenset({"", "reference"})
#: the largest relative change of any varied number (the ranges above are at most this)
MAX_CHANGE = 0.15
#: redraws of one section before giving up (a valid draw comes within a few)
MAX_DRAWS = 200
#: the shortest salt a course with per-student numbers may have (see "Switch and salt" above)
MIN_SALT_LENGTH = 16
#: at most this many classmates are tried when the grader looks for whose numbers a wrong answer fits
MAX_CLASS = 1000

# The angles (rad, z-y-x) and body rates (rad/s) from which the reference's Euler parameters
# and their rates were made; a variant varies these and rebuilds the parameters from them.
_EULER_SEEDS = {
    "given_angles": (-0.25, 0.35, -1.10),
    "rates_omega_body": (0.06, 0.025, -0.04),
    "node_angles": (0.05, 0.08, -0.60),
    "node_omega_body": (0.01, -0.02, 0.05),
}


# --------------------------------------------------------------------------- settings


def settings(data: dict) -> dict:
    """``{"per_student": bool, "salt": str}`` of the course data (off, empty salt, by default).

    Raises ``ValueError`` for a malformed section, and when ``per_student`` is true with a salt
    shorter than :data:`MIN_SALT_LENGTH` characters (a salt that short can be guessed, and each
    guess checked against one student's own numbers).
    """
    raw = data.get(SETTINGS_KEY) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping for {SETTINGS_KEY}, got {raw!r}")
    unknown = set(raw) - {"per_student", "salt"}
    if unknown:
        raise ValueError(f"unknown keys in {SETTINGS_KEY}: {sorted(unknown)}; expected per_student, salt")
    per_student = raw.get("per_student", False)
    if not isinstance(per_student, bool):
        raise ValueError(f"expected true or false for {SETTINGS_KEY}.per_student, got {per_student!r}")
    salt = raw.get("salt", "")
    if salt is None:
        salt = ""
    salt = str(salt)
    if per_student and len(salt) < MIN_SALT_LENGTH:
        raise ValueError(
            f"expected a salt of at least {MIN_SALT_LENGTH} characters with {SETTINGS_KEY}.per_student "
            f"true, got {'an empty salt' if not salt else f'one of {len(salt)}'}: a short salt can be "
            "guessed and checked against a student's own numbers; make one with "
            "python -c \"import secrets; print(secrets.token_hex(16))\"")
    return {"per_student": per_student, "salt": salt}


def per_student(data: dict) -> bool:
    """Whether the course data switches per-student variants on."""
    return settings(data)["per_student"]


def load_course_data(path=None) -> dict:
    """The course data: the reference data with ``path`` merged over it, keeping a ``variants`` section.

    Like :func:`rbtutor.problems.load_data`, but a ``variants`` mapping at the top of
    the file is checked (:func:`settings`) and kept in the returned data.
    """
    if path is None:
        return load_data()
    raw = read_yaml(Path(path).read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping at the top of {path}, got {type(raw).__name__}")
    section = raw.pop(SETTINGS_KEY, None)
    data = merge_data(read_yaml(REFERENCE_DATA.read_text()), raw)
    if section is not None:
        data[SETTINGS_KEY] = section
        settings(data)
    return data


def problem_data(data: dict) -> dict:
    """``data`` without its ``variants`` section: only the problem data, as in ``reference_data.yaml``."""
    return {k: copy.deepcopy(v) for k, v in data.items() if k != SETTINGS_KEY}


# --------------------------------------------------------------------------- drawing


def _seed(salt: str, student_id: str, section: str) -> np.random.Generator:
    digest = hashlib.sha256("\0".join(("rbtutor-variant-1", salt, student_id, section)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


def _sig(x: float, figures: int) -> float:
    """``x`` rounded to ``figures`` significant figures (a plain float, as printed)."""
    return float(f"{x:.{figures - 1}e}") if x else 0.0


def _step(x: float, step: float) -> float:
    """``x`` rounded to a multiple of ``step`` (``0.1``, ``0.05``, ``0.5``, ...)."""
    decimals = max(0, -math.floor(math.log10(step)) + 1)
    return round(round(x / step) * step, decimals) + 0.0


def _vary(rng, value, rel: float, rounding):
    """``value`` (a number or a list) times ``1 + U(-rel, rel)`` entry by entry, then rounded.

    ``rounding`` is ``("sig", n)`` or ``("step", h)``. Zeros stay zero; since ``rel < 1``
    and the rounding is checked, no sign changes.
    """
    if isinstance(value, list):
        return [_vary(rng, v, rel, rounding) for v in value]
    factor = 1.0 + rng.uniform(-rel, rel)
    x = float(value) * factor
    if x == 0.0:
        return 0.0
    kind, size = rounding
    out = _sig(x, size) if kind == "sig" else _step(x, size)
    if out == 0.0 or math.copysign(1.0, out) != math.copysign(1.0, float(value)):
        out = float(value)  # rounding would lose the number or its sign: keep the course's
    return out


def _vessel_ok(v: dict) -> bool:
    p = v["products_of_inertia_g"]
    try:
        inertia_g = check_inertia("I_G", inertia_from_gyration(v["mass"], v["radii_of_gyration"],
                                                               p["xy"], p["xz"], p["yz"]))
        check_inertia("I_O", parallel_axis(inertia_g, v["mass"], v["r_g"]))
    except ValueError:
        return False
    return True


def _draw_vessel(rng, ref: dict) -> dict:
    for _ in range(MAX_DRAWS):
        x, y, z = ref["r_g"]
        v = {
            "mass": _vary(rng, ref["mass"], 0.15, ("sig", 3)),
            "r_g": [_vary(rng, x, 0.15, ("step", 0.1)), float(y), _vary(rng, z, 0.15, ("step", 0.05))],
            "radii_of_gyration": _vary(rng, ref["radii_of_gyration"], 0.10, ("step", 0.1)),
            "products_of_inertia_g": {k: _vary(rng, val, 0.15, ("sig", 2))
                                      for k, val in ref["products_of_inertia_g"].items()},
        }
        if _vessel_ok(v):
            return v
    raise ValueError("no physically valid vessel found near the course's vessel")


def _flip_count(module: dict) -> int:
    inertia = box_inertia(module["mass"], module["dimensions"]).diagonal()
    return sign_change_count(inertia, module["omega0"], module["t_end"], component=1)


@functools.lru_cache(maxsize=8)
def _reference_flips(module_json: str) -> int:
    """The flips of the course's module: the same for every student, so counted once per process."""
    return _flip_count(json.loads(module_json))


def _draw_module(rng, ref: dict) -> dict:
    flips = _reference_flips(_canonical(ref))
    order = np.argsort(ref["dimensions"])
    for _ in range(MAX_DRAWS):
        m = dict(ref)
        m["mass"] = _vary(rng, ref["mass"], 0.15, ("sig", 2))
        m["dimensions"] = _vary(rng, ref["dimensions"], 0.10, ("step", 0.1))
        m["spin_rate"] = _vary(rng, ref["spin_rate"], 0.15, ("sig", 2))
        m["omega0"] = _vary(rng, ref["omega0"], 0.15, ("sig", 2))
        dims = np.asarray(m["dimensions"])
        if len(set(m["dimensions"])) < 3 or not np.array_equal(np.argsort(dims), order):
            continue
        if _flip_count(m) == flips:
            return m
    raise ValueError("no module found near the course's module with the same number of flips")


def _draw_euler(rng, ref: dict) -> dict:
    e = dict(ref)
    e["attitude"] = _vary_vector_mixed(rng, ref["attitude"], [("sig", 2), ("sig", 2), ("sig", 3)])
    q = from_euler_angles(*e["attitude"])
    given = from_euler_angles(*_vary(rng, list(_EULER_SEEDS["given_angles"]), 0.15, ("step", 0.01)))
    if given @ np.asarray(ref["theta_given"], dtype=float) < 0.0:
        given = -given  # the same rotation, written with the sign the course's log uses
    e["theta_given"] = [round(float(c), 6) for c in given]
    w = np.array(_vary(rng, list(_EULER_SEEDS["rates_omega_body"]), 0.15, ("step", 0.001)))
    e["theta_dot"] = [round(float(c), 6) for c in g_matrix_body(q).T @ w / 4.0]
    e["omega_body"] = _vary(rng, ref["omega_body"], 0.15, ("sig", 2))
    e["node_position"] = _vary_vector_mixed(rng, ref["node_position"], [("sig", 3), ("sig", 3), ("sig", 2)])
    node = from_euler_angles(*_vary(rng, list(_EULER_SEEDS["node_angles"]), 0.15, ("step", 0.01)))
    e["node_theta"] = [round(float(c), 6) for c in node]
    e["node_velocity"] = _vary(rng, ref["node_velocity"], 0.15, ("step", 0.1))
    wn = np.array(_vary(rng, list(_EULER_SEEDS["node_omega_body"]), 0.15, ("step", 0.001)))
    e["node_theta_dot"] = [round(float(c), 6) for c in g_matrix_body(node).T @ wn / 4.0]
    return e


def _vary_vector_mixed(rng, ref: list, roundings: list) -> list:
    return [_vary(rng, v, 0.15, r) for v, r in zip(ref, roundings, strict=True)]


def _derive(data: dict, salt: str, student_id: str) -> dict:
    out = problem_data(data)

    def rng(section):
        return _seed(salt, student_id, section)

    out["vessel"] = _draw_vessel(rng("vessel"), data["vessel"])
    z_g = out["vessel"]["r_g"][2]

    r = rng("sensor")
    s = data["sensor"]
    out["sensor"] = {
        "r_p": _vary(r, s["r_p"], 0.15, ("step", 0.5)),
        "nu": _vary_vector_mixed(r, s["nu"], [("sig", 3)] + [("sig", 2)] * 5),
        "nu_dot": _vary(r, s["nu_dot"], 0.15, ("sig", 2)),
        "turn_u": _vary(r, s["turn_u"], 0.15, ("step", 0.1)),
        "turn_r": _vary(r, s["turn_r"], 0.15, ("sig", 2)),
    }

    r = rng("turn")
    t = data["turn"]
    for _ in range(MAX_DRAWS):
        turn = {
            "nu": _vary_vector_mixed(r, t["nu"], [("step", 0.1)] + [("sig", 2)] * 5),
            "gm": _vary(r, t["gm"], 0.15, ("step", 0.05)),
            "z_g_raised": _vary(r, t["z_g_raised"], 0.15, ("step", 0.05)),
        }
        if turn["gm"] >= 0.5 and turn["z_g_raised"] > z_g:
            break
    else:
        raise ValueError("no stable turn found near the course's")
    out["turn"] = turn

    for section in ("power", "tow", "simulation"):
        section_rng = rng(section)
        out[section] = dict(data[section])
        out[section]["tau"] = _vary(section_rng, data[section]["tau"], 0.15, ("sig", 2))

    r = rng("crane")
    out["crane"] = {"force": _vary(r, data["crane"]["force"], 0.15, ("sig", 3)),
                    "point": _vary(r, data["crane"]["point"], 0.15, ("step", 0.5))}

    r = rng("load")
    ld = data["load"]
    for _ in range(MAX_DRAWS):
        load = {"mass": _vary(r, ld["mass"], 0.15, ("sig", 2)),
                "position": _vary(r, ld["position"], 0.15, ("step", 0.5)),
                "gm": _vary(r, ld["gm"], 0.15, ("step", 0.05))}
        if 0.3 <= load["gm"] < out["turn"]["gm"]:
            break
    else:
        raise ValueError("no stable loaded condition found near the course's")
    out["load"] = load

    out["module"] = _draw_module(rng("module"), data["module"])
    out["euler"] = _draw_euler(rng("euler"), data["euler"])
    out["quiz"] = quiz_numbers(draw(rng("quiz")))
    return out


# --------------------------------------------------------------------------- public


def _check_id(student_id) -> str:
    if not isinstance(student_id, str):
        raise ValueError(f"expected a student id as text, got {type(student_id).__name__}")
    if "\0" in student_id or len(student_id) > 256:
        raise ValueError(f"expected a student id of at most 256 characters without NUL, got {student_id!r:.80}")
    return student_id


def _canonical(data: dict) -> str:
    return json.dumps(data, sort_keys=True, default=float)


def _canonical_problems(data: dict) -> str:
    """The canonical text of ``problem_data(data)``, without its deep copy: a digest took 0.23 ms
    with it and 0.09 without (2026-12-06), and a grading worker takes ten a notebook."""
    return _canonical({k: v for k, v in data.items() if k != SETTINGS_KEY})


def data_digest(data: dict) -> str:
    """A short hex digest of what every student's numbers follow from: the course data and its salt.

    Two course data files with the same digest give every student the same variant, so a
    store of the class's keys can be named by it (:func:`rbtutor.grading.judge.write_class_keys`).
    """
    text = _canonical_problems(data) + "\0" + settings(data)["salt"]
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@functools.lru_cache(maxsize=1024)
def _cached_variant(canonical: str, salt: str, student_id: str) -> str:
    return json.dumps(_derive(json.loads(canonical), salt, student_id))


def variant(data: dict, student_id: str, salt: str | None = None) -> dict:
    """The problem data of one student (the section ``variants`` left out).

    Parameters
    ----------
    data : dict
        The course data (:func:`load_course_data`), the instructor's own variant.
    student_id : str
        The student's id (nbgrader's student id, the hub's user name). An id of
        :data:`RESERVED_IDS` gets ``data`` back unchanged.
    salt : str, optional
        The course salt; by default ``data["variants"]["salt"]``, else empty.

    Returns
    -------
    dict
        Data in the format of ``reference_data.yaml``; plain numbers, rounded as a
        textbook prints them. Ranges: see the module docstring.

    Raises
    ------
    ValueError
        If the id is not text, or no valid variant is found (does not happen for data
        near the reference data).
    """
    student_id = _check_id(student_id)
    salt = settings(data)["salt"] if salt is None else str(salt)
    if student_id in RESERVED_IDS:
        return problem_data(data)
    return _ordered_like(json.loads(_cached_variant(_canonical_problems(data), salt, student_id)),
                         problem_data(data))


def _ordered_like(value, template):
    """``value`` with its mappings' keys in the order of ``template`` (the course data's)."""
    if not isinstance(value, dict) or not isinstance(template, dict):
        return value
    keys = [k for k in template if k in value] + [k for k in value if k not in template]
    return {k: _ordered_like(value[k], template.get(k)) for k in keys}


@functools.lru_cache(maxsize=4096)
def _cached_key(canonical: str, salt: str, student_id: str, problems: tuple | None):
    data = json.loads(canonical)
    return answer_key(variant(data, student_id, salt), None if problems is None else list(problems))


def student_key(data: dict, student_id: str, problems=None, salt: str | None = None) -> dict:
    """The answer key of one student: ``answer_key(variant(data, student_id), problems)``, cached.

    The returned dict is shared between calls (cached per process): do not change it.
    """
    student_id = _check_id(student_id)
    salt = settings(data)["salt"] if salt is None else str(salt)
    chosen = None if problems is None else tuple(sorted(int(p) for p in problems))
    return _cached_key(_canonical_problems(data), salt, student_id, chosen)


def problem_of(answer_id: str) -> int:
    """The problem number of an answer id (``"p3.b.K"`` -> 3)."""
    head = answer_id.split(".", 1)[0]
    if not head.startswith("p") or not head[1:].isdigit():
        raise ValueError(f"expected an answer id like 'p3.b.K', got {answer_id!r}")
    return int(head[1:])


def to_yaml(data: dict) -> str:
    """``data`` as YAML in the layout of ``reference_data.yaml`` (sections in its order, lists inline)."""

    reference = read_yaml(REFERENCE_DATA.read_text())
    ordered = {k: data[k] for k in reference if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})

    class Dumper(yaml.SafeDumper):
        pass

    def number(dumper, x):  # 5.93e+06 rather than 5930000.0; read back as floats by read_yaml
        text = f"{x:.6g}" if x and not 1e-4 <= abs(x) < 1e4 else repr(x)
        text = text if any(c in text for c in ".en") else text + ".0"
        return dumper.represent_scalar("tag:yaml.org,2002:float", text)

    Dumper.add_representer(float, number)
    return yaml.dump(ordered, Dumper=Dumper, sort_keys=False, default_flow_style=None, width=120)
