"""The question bank's numbers, and the questions of the graded quiz (Problem 12), written once.

Two places ask these questions. The book's question bank (``book/questions.md``) draws every
number from the seed of its first cell; the graded quiz, Problem 12 (``exercises/problem12``),
asks ten of the bank's questions with the numbers of the course data's ``quiz`` section, which
:mod:`rbtutor.problems.variants` draws for each student with the same :func:`draw`. Both show
the statements of :data:`STATEMENTS` and use the answers of :func:`answers`, so that a change
made here reaches the page and the quiz together.

* :func:`draw`: every number of the bank, one mapping per question
  (``{"q3": {"attitude_deg": [...]}, ...}``), rounded to the figures the page prints.
* :func:`statement`: a question's text with its numbers, as the page shows it (TeX);
  :func:`statement_template`: the same text with placeholders ``[[quiz.q3.attitude_deg.0|3s]]``
  that :mod:`rbtutor.course.render` fills with the course's or a student's numbers.
* :func:`answers`: the answers of the quiz's questions under ``q<n>.<name>``, each an
  :class:`~rbtutor.problems.Answer` with what judging it needs; a spot-the-error question's
  answer is the number of its wrong line (:data:`WRONG_LINES`).
* :func:`problem12`: the quiz's key under ids ``p12.<part>.q<n>_<name>`` (``p12.a.q7_a_P``),
  parts and questions in the order of :data:`QUIZ`.

Examples
--------
>>> import numpy as np
>>> numbers = draw(np.random.default_rng(7))
>>> sorted(answers(numbers))[:3]
['q10.line', 'q14.I_x_O', 'q14.I_xz_O']
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..euler_parameters import from_euler_angles
from ..inertia import box_inertia, inertia_from_gyration, parallel_axis, products_of_inertia
from ..kinematics import point_acceleration, rotation_matrix
from ..rigid_body import RigidBody
from .answer import Answer, algebraic

#: the quiz, part by part (the parts follow the book's pages): (part letter, questions of the bank)
QUIZ = (("a", (3, 7, 10)), ("b", (14, 18)), ("c", (22, 28)), ("d", (35, 37)), ("e", (41,)))
#: the questions whose numbers the quiz needs (Q22 uses the hull of Q21), in the order of the course data
QUIZ_SECTIONS = ("q3", "q7", "q14", "q21", "q22", "q28", "q35", "q41")
#: the wrong line of each spot-the-error question of the quiz
WRONG_LINES = {10: 4, 18: 3, 37: 3}
#: radii of gyration (m) of the hull of Q28, whose inertia none of its answers needs
Q28_RADII = (6.0, 18.0, 18.5)

# A number of the data in a statement: <<q3.attitude_deg>>.
_FIELD = re.compile(r"<<(q\d+)\.(\w+)>>")

#: the statements of the quiz's questions, with their numbers as <<question.field>>
STATEMENTS = {
    3: "A hull has roll, pitch and yaw <<q3.attitude_deg>> degrees (in that order). Give the GCS "
       "components of the unit vector that points along its bow, the body $x$ axis.",
    7: r"A body point lies at $\vec r_P =$ <<q7.r_p>> m. At one instant the hull has "
       r"$\boldsymbol\nu =$ <<q7.nu>> and $\dot{\boldsymbol\nu} =$ <<q7.nu_dot>> (SI units, "
       r"$[u, v, w, p, q, r]$ and their rates). What is the acceleration of the point, in BCS components?",
    10: "The acceleration of $G$ in matrix form:\n\n"
        r"1. $\vec v_G = \vec v + \vec\omega\times\vec r_G$, with $\vec r_G$ fixed in the body." "\n"
        r"2. Differentiating in the rotating frame, $\vec a_G = \dot{\vec v} + \dot{\vec\omega}\times\vec r_G"
        r" + \vec\omega\times\vec v_G$." "\n"
        r"3. So $\vec a_G = \dot{\vec v} + \vec\omega\times\vec v + \dot{\vec\omega}\times\vec r_G"
        r" + \vec\omega\times(\vec\omega\times\vec r_G)$." "\n"
        r"4. In matrices, $\vec a_G = \dot{\vec v} + \boldsymbol S(\vec\omega)\vec v"
        r" - \boldsymbol S(\dot{\vec\omega})\vec r_G + \boldsymbol S(\vec\omega)^2\vec r_G$.",
    14: "A hull of mass <<q14.mass>> kg has radii of gyration <<q14.radii>> m about $G$ (roll, pitch, "
        "yaw), a product of inertia $I_{xz}^G =$ <<q14.i_xz>> kg·m² and its centre of gravity at "
        r"$\vec r_G =$ <<q14.r_g>> m. Find $I_x^O$ and $I_{xz}^O$.",
    18: "The parallel-axis theorem in matrix form:\n\n"
        r"1. A point mass $m$ at $\vec r$ has the tensor $m\left(|\vec r|^2\boldsymbol I"
        r" - \vec r\,\vec r^T\right)$ about $O$." "\n"
        r"2. For any vector, $\boldsymbol S(\vec r)\boldsymbol S(\vec r) = \vec r\,\vec r^T"
        r" - |\vec r|^2\boldsymbol I$." "\n"
        r"3. So moving the tensor from $G$ to $O$ adds the point-mass term: $\boldsymbol I_O"
        r" = \boldsymbol I_G + m\,\boldsymbol S(\vec r_G)\boldsymbol S(\vec r_G)$.",
    22: "A hull of mass <<q21.mass>> kg has its centre of gravity at $\\vec r_G =$ <<q21.r_g>> m, radii "
        "of gyration <<q21.radii>> m about $G$ and no products of inertia. Find its kinetic energy at "
        r"$\boldsymbol\nu =$ <<q22.nu>>.",
    28: r"A hull of mass <<q28.mass>> kg with $G$ at $\vec r_G =$ <<q28.r_g>> m runs straight ahead at "
        r"$U =$ <<q28.u>> m/s. Give the entries of $\boldsymbol C_{\mathrm{lin}}$ in the sway row and yaw "
        "column, in the heave row and pitch column, and in the yaw row and yaw column.",
    35: "A hull has roll, pitch and yaw <<q35.attitude_deg>> degrees. Give its Euler parameters and "
        "the angle of the single turn that brings it there from the upright pose (between 0 and 180 "
        "degrees).",
    37: "From angular velocity to parameter rates:\n\n"
        r"1. $\vec\omega_b = \boldsymbol G_b\dot{\boldsymbol\theta}$, with $\boldsymbol G_b$ the"
        r" $3\times4$ matrix of the chapter (it carries the factor 2)." "\n"
        r"2. $\boldsymbol G_b^T\boldsymbol G_b = 4\left(\boldsymbol I_4"
        r" - \boldsymbol\theta\boldsymbol\theta^T\right)$ for a unit $\boldsymbol\theta$, and"
        r" $\boldsymbol\theta^T\dot{\boldsymbol\theta} = 0$." "\n"
        r"3. So $\boldsymbol G_b^T\vec\omega_b = 2\dot{\boldsymbol\theta}$, and"
        r" $\dot{\boldsymbol\theta} = \tfrac12\boldsymbol G_b^T\vec\omega_b$.",
    41: "A free box of mass <<q41.mass>> kg measuring <<q41.sides>> m turns about its centre with "
        r"$\vec\omega_b =$ <<q41.omega>> rad/s. What is the multiplier $\lambda$ of the node's constraint?",
}


# --------------------------------------------------------------------------- the numbers


def sig(value, digits: int = 3):
    """``value`` (a number or an array) rounded to ``digits`` significant figures, as plain floats.

    >>> sig(1234.5), sig([0.012345, -7.0], 2)
    (1230.0, [0.012, -7.0])
    """
    if np.ndim(value) == 0:
        return float(f"{float(value):.{digits - 1}e}") + 0.0
    return [sig(x, digits) for x in np.asarray(value, dtype=float)]


def _hull_radii(rng, low, high) -> list:
    """Radii of gyration (roll, pitch, yaw) of a possible hull: the yaw radius from the other two."""
    roll_pitch = sig(rng.uniform(low, high))
    yaw = math.sqrt(roll_pitch[1] ** 2 + rng.uniform(0.2, 0.8) * roll_pitch[0] ** 2)
    return sig([*roll_pitch, yaw])


def _unit_quaternion(rng) -> list:
    """Euler parameters at random, rounded to three figures and scaled back to unit norm."""
    theta = rng.normal(size=4)
    rounded = np.asarray(sig(theta / np.linalg.norm(theta)))
    return (rounded / np.linalg.norm(rounded)).tolist()


def draw(rng: np.random.Generator) -> dict:
    """Every number of the question bank, drawn from ``rng`` in the page's order.

    Returns ``{"q3": {"attitude_deg": [...]}, "q7": {...}, ...}``: SI units (angles of a
    question in degrees where its name says ``_deg``), plain floats rounded to the figures the
    page prints (two for masses, lengths of the box, the axis of Q34 and the speed of Q28).
    """
    def scaled(n, scales):
        return sig(rng.uniform(-1.0, 1.0, n) * scales)

    out = {"q3": {"attitude_deg": sig(rng.uniform([-20.0, -10.0, -170.0], [20.0, 10.0, 170.0]))}}
    out["q7"] = {"r_p": sig(rng.uniform([-40.0, -8.0, 1.0], [40.0, 8.0, 12.0])),
                 "nu": scaled(6, [6.0, 1.0, 0.5, 0.05, 0.03, 0.04]),
                 "nu_dot": scaled(6, [0.2, 0.1, 0.3, 0.02, 0.01, 0.005])}
    out["q8"] = {"attitude_deg": sig(rng.uniform([2.0, -3.0], [12.0, 3.0]))}
    out["q9"] = {"r_g": sig(rng.uniform([-6.0, -0.5, -3.0], [6.0, 0.5, 1.0])),
                 "nu": scaled(6, [7.0, 1.0, 0.3, 0.06, 0.02, 0.05])}
    mass = sig(rng.uniform(4.0e6, 8.0e6), 2)
    out["q14"] = {"mass": mass, "radii": _hull_radii(rng, [6.0, 18.0], [9.0, 25.0]),
                  "i_xz": sig(rng.uniform(1.0e7, 5.0e7), 2),
                  "r_g": sig(rng.uniform([-5.0, 0.0, -3.0], [5.0, 0.0, 1.0]))}
    out["q15"] = {"omega": scaled(3, [0.08, 0.0, 0.05])}
    out["q16"] = {"omega": scaled(3, [0.1, 0.05, 0.1])}
    out["q21"] = {"mass": sig(rng.uniform(2.0e6, 6.0e6), 2),
                  "r_g": sig(rng.uniform([-4.0, -0.4, -2.5], [4.0, 0.4, 0.5])),
                  "radii": _hull_radii(rng, [5.0, 15.0], [7.0, 20.0])}
    out["q22"] = {"nu": scaled(6, [6.0, 1.5, 0.4, 0.05, 0.02, 0.04])}
    out["q28"] = {"mass": sig(rng.uniform(2.0e6, 6.0e6), 2), "u": sig(rng.uniform(3.0, 9.0), 2),
                  "r_g": sig(rng.uniform([-4.0, 0.0, -2.5], [4.0, 0.0, 0.5]))}
    out["q29"] = {"nu": scaled(6, [2.0, 0.5, 0.2, 0.03, 0.01, 0.02]),
                  "nu_dot": scaled(6, [0.1, 0.05, 0.05, 0.005, 0.002, 0.002])}
    out["q34"] = {"axis": sig(rng.uniform(-1.0, 1.0, 3), 2), "angle_deg": sig(rng.uniform(20.0, 160.0))}
    out["q35"] = {"attitude_deg": sig(rng.uniform([-40.0, -60.0, -170.0], [40.0, 60.0, 170.0]))}
    out["q36"] = {"omega": scaled(3, [0.1, 0.1, 0.1])}
    out["q41"] = {"sides": sig(rng.uniform([3.0, 1.5, 1.0], [8.0, 4.0, 3.0]), 2),
                  "mass": sig(rng.uniform(1.0e4, 6.0e4), 2), "omega": scaled(3, [1.0, 1.0, 1.0])}
    out["q42"] = {"theta": _unit_quaternion(rng), "tau": scaled(3, [1.0e5, 1.0e5, 1.0e5])}
    return out


def quiz_numbers(numbers: dict) -> dict:
    """The part of the bank's numbers that the quiz needs (the course data's ``quiz`` section)."""
    return {section: dict(numbers[section]) for section in QUIZ_SECTIONS}


# --------------------------------------------------------------------------- the statements


def tex_number(x: float, digits: int = 3) -> str:
    """A number as TeX with ``digits`` significant figures and a power of ten when it needs one.

    >>> tex_number(4.5e6), tex_number(-0.0123)
    ('4.5\\\\times 10^{6}', '-0.0123')
    """
    mantissa, _, exponent = f"{float(x):.{digits}g}".partition("e")
    return mantissa + (rf"\times 10^{{{int(exponent)}}}" if exponent else "")


def tex_value(value, digits: int = 3) -> str:
    """A number or a vector as inline TeX (``$[1,\\ 2]$``), as the page prints the data."""
    parts = [tex_number(x, digits) for x in np.atleast_1d(np.asarray(value, dtype=float))]
    return "$" + (parts[0] if np.ndim(value) == 0 else "[" + r",\ ".join(parts) + "]") + "$"


def statement(number: int, numbers: dict) -> str:
    """The statement of question ``number`` with its numbers filled in from ``numbers`` (TeX)."""
    return _FIELD.sub(lambda m: tex_value(numbers[m.group(1)][m.group(2)]), STATEMENTS[number])


def _placeholder(section: str, field: str, value) -> str:
    """``[[quiz.q3.attitude_deg.0|3s]]`` for each entry of ``value``, inside TeX math."""
    entries = np.atleast_1d(np.asarray(value, dtype=float))
    spec = "tex3" if np.max(np.abs(entries)) >= 1.0e4 else "3s"
    path = f"quiz.{section}.{field}"
    if np.ndim(value) == 0:
        return f"$[[{path}|{spec}]]$"
    return "$[" + r",\ ".join(f"[[{path}.{i}|{spec}]]" for i in range(entries.size)) + "]$"


def statement_template(number: int, numbers: dict) -> str:
    """The statement of question ``number`` with placeholders for the renderer, shapes from ``numbers``."""
    return _FIELD.sub(lambda m: _placeholder(m.group(1), m.group(2), numbers[m.group(1)][m.group(2)]),
                      STATEMENTS[number])


# --------------------------------------------------------------------------- the answers


def _bow(attitude_deg, in_degrees: bool = False) -> np.ndarray:
    """Q3: the body x axis in GCS components; ``in_degrees`` gives the slip of degrees taken as radians."""
    angles = np.asarray(attitude_deg, dtype=float)
    return rotation_matrix(*(angles if in_degrees else np.radians(angles))) @ [1.0, 0.0, 0.0]


def _inertia_about_o(q: dict) -> dict[str, Answer]:
    """Q14: the moment I_x and the product I_xz about O, from the hull about G."""
    inertia_g = inertia_from_gyration(q["mass"], q["radii"], i_xz=q["i_xz"])
    inertia_o = parallel_axis(inertia_g, q["mass"], q["r_g"])
    x_g, y_g, z_g = q["r_g"]
    shift_x, shift_xz = q["mass"] * (y_g**2 + z_g**2), q["mass"] * x_g * z_g
    return {
        "q14.I_x_O": algebraic(float(inertia_o[0, 0]), "kg m^2", mistakes=(
            ("inertia_g_for_o", inertia_g[0, 0]), ("parallel_axis_sign", inertia_g[0, 0] - shift_x))),
        "q14.I_xz_O": algebraic(products_of_inertia(inertia_o)["xz"], "kg m^2", mistakes=(
            ("inertia_g_for_o", q["i_xz"]), ("parallel_axis_sign", q["i_xz"] - shift_xz))),
    }


def _linearised_entries(q: dict) -> dict[str, Answer]:
    """Q28: three entries of the Coriolis matrix linearised about straight-ahead motion at U."""
    runner = RigidBody(q["mass"], q["r_g"], inertia_from_gyration(q["mass"], Q28_RADII))
    nu_0 = np.array([q["u"], 0.0, 0.0, 0.0, 0.0, 0.0])
    # C_RB is linear in its argument: the derivative of C(nu) nu at nu_0 is C(nu_0) e_j + C(e_j) nu_0
    c_lin = np.column_stack([runner.coriolis_matrix(nu_0) @ e + runner.coriolis_matrix(e) @ nu_0
                             for e in np.eye(6)])
    return {"q28.C_sway_yaw": algebraic(float(c_lin[1, 5]), "kg m/s"),
            "q28.C_heave_pitch": algebraic(float(c_lin[2, 4]), "kg m/s"),
            "q28.C_yaw_yaw": algebraic(float(c_lin[5, 5]), "kg m^2/s")}


def _euler_parameters(attitude_deg) -> dict[str, Answer]:
    """Q35: the Euler parameters of an attitude and the angle of the single turn to it."""
    theta = from_euler_angles(*np.radians(attitude_deg))
    unconverted = from_euler_angles(*np.asarray(attitude_deg, dtype=float))  # degrees taken as radians
    turn = math.degrees(2.0 * math.acos(min(1.0, abs(float(theta[0])))))
    scalar_last = np.roll(theta, -1)
    conjugate = theta * np.array([1.0, -1.0, -1.0, -1.0])
    return {"q35.theta": algebraic(theta, "1", quaternion=True, mistakes=(
                ("scalar_last", scalar_last), ("conjugate", conjugate), ("degrees", unconverted))),
            "q35.turn_deg": algebraic(turn, "deg")}


def answers(numbers: dict) -> dict[str, Answer]:
    """The answers of the quiz's questions, computed with rbtutor from ``numbers`` (see :func:`draw`).

    Ids are ``q<question>.<name>``; the answer of a spot-the-error question is its wrong line.
    """
    q7, q21, q41 = numbers["q7"], numbers["q21"], numbers["q41"]
    hull = RigidBody(q21["mass"], q21["r_g"], inertia_from_gyration(q21["mass"], q21["radii"]))
    omega = np.asarray(q41["omega"], dtype=float)
    key = {
        "q3.bow": algebraic(_bow(numbers["q3"]["attitude_deg"]), "1", mistakes=(
            ("degrees", _bow(numbers["q3"]["attitude_deg"], in_degrees=True)),)),
        "q7.a_P": algebraic(point_acceleration(q7["r_p"], q7["nu"], q7["nu_dot"]), "m/s^2"),
        **_inertia_about_o(numbers["q14"]),
        "q22.T": algebraic(hull.kinetic_energy(numbers["q22"]["nu"]), "J"),
        **_linearised_entries(numbers["q28"]),
        **_euler_parameters(numbers["q35"]["attitude_deg"]),
        # the multiplier of the unit-norm constraint is omega^T J omega, twice the kinetic energy
        "q41.lambda": algebraic(float(omega @ box_inertia(q41["mass"], q41["sides"]) @ omega), "J"),
    }
    key.update({f"q{n}.line": algebraic(float(line), "1") for n, line in WRONG_LINES.items()})
    return key


def problem12(data: dict) -> dict[str, Answer]:
    """The quiz (Problem 12): the bank's questions of :data:`QUIZ` with the data's ``quiz`` numbers."""
    by_question = answers(data["quiz"])
    return {f"p12.{part}.{answer_id.replace('.', '_', 1)}": answer
            for part, numbers in QUIZ for number in numbers for answer_id, answer in by_question.items()
            if answer_id.startswith(f"q{number}.")}
