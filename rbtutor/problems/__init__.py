"""The problems of the course: their data, and every answer as a function of it.

``load_data()`` returns the reference data (``reference_data.yaml`` beside this
file); ``load_data(path)`` merges a variant file over it, so a variant needs only
the numbers that change. ``answer_key(data)`` computes every answer under an id
``p<problem>.<part>.<name>``; ``python -m rbtutor key`` prints it. Problems 1-10
are the chapter's; Problem 11 (Euler parameters) is the course's own.

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

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.integrate import solve_ivp

from .._checks import as_array, as_scalar
from ..euler_parameters import (
    from_euler_angles,
    from_rotation_matrix,
    g_matrix_body,
    g_matrix_body_unchecked,
    g_matrix_global,
    rotation_matrix_ep,
    rotation_matrix_ep_unchecked,
    tait_bryan_xyz,
    to_euler_angles,
)
from ..inertia import box_inertia, inertia_from_gyration, products_of_inertia
from ..kinematics import euler_angles_from_matrix, point_acceleration, skew
from ..rigid_body import RigidBody, shift_load
from ..simulation import simulate
from ..torque_free import euler_rates, integrate_spin, spin_stability

REFERENCE_DATA = Path(__file__).with_name("reference_data.yaml")
#: the printed answer key of the reference chapter, as published (with errata notes); package data
PUBLISHED_KEY = Path(__file__).with_name("answer_key.yaml")


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


def merge_data(base: dict, override: dict, where: str = "") -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise ValueError(f"unknown problem data key {where}{key!r}; expected one of {sorted(base)}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"expected a mapping for {where}{key}, got {value!r}")
            merged[key] = merge_data(base[key], value, f"{where}{key}.")
        else:
            merged[key] = value
    return merged


def read_yaml(text: str):
    """Parse YAML, reading ``6.0e6`` and ``1e-3`` as floats (PyYAML alone keeps them as strings)."""


    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
        list("-+0123456789."),
    )
    return yaml.load(text, Loader=Loader)


def load_data(path=None) -> dict:
    """The problem data: the reference data, with a variant YAML file merged over it."""
    data = read_yaml(REFERENCE_DATA.read_text())
    if path is not None:
        variant = read_yaml(Path(path).read_text()) or {}
        if not isinstance(variant, dict):
            raise ValueError(f"expected a mapping at the top of {path}, got {type(variant).__name__}")
        data = merge_data(data, variant)
    return data


def vessel(data: dict) -> RigidBody:
    """The supply vessel of Problem 1 about O."""
    v = data["vessel"]
    p = v["products_of_inertia_g"]
    inertia_g = inertia_from_gyration(v["mass"], v["radii_of_gyration"], p["xy"], p["xz"], p["yz"])
    return RigidBody(v["mass"], v["r_g"], inertia_g)


def loaded_vessel(data: dict) -> RigidBody:
    """The vessel with the module of Problem 9 held as a point mass."""
    return vessel(data).with_point_masses([data["load"]["mass"]], [data["load"]["position"]])


def steady_heel(body: RigidBody, nu, gm: float, g: float) -> tuple[float, float]:
    """Roll moment needed for the steady motion ``nu`` and the heel that supplies it (Problem 3).

    The moment comes from the roll row of ``C_RB(nu) nu`` (nothing accelerates), and
    the heel from ``-m g GM phi = K``. Returns ``(K, phi)`` in N m and rad.

    ``gm`` is used as given: when G has been moved, pass the metacentric height of
    the new loading condition (:func:`metacentric_height`). Problem 3(d) keeps GM
    fixed while G rises, because its statement says so.

    Raises
    ------
    ValueError
        If ``gm`` is not positive: without a positive GM the upright hull is not
        stable and the small-angle balance describes no steady heel.
    """
    gm = as_scalar("gm", gm)
    if gm <= 0.0:
        raise ValueError(f"expected a positive metacentric height gm, got {gm} m: with GM <= 0 the "
                         "upright hull is unstable and has no steady small heel")
    roll_moment = float(body.coriolis_forces(nu)[3])
    return roll_moment, -roll_moment / (body.mass * g * gm)


def metacentric_height(gm_0: float, z_g_0: float, z_g: float) -> float:
    """GM after G moves vertically with the displacement unchanged (eq-gm-shift, heel page).

    The metacentre M depends on the underwater hull only, so with the same
    displacement KM stays put and ``GM = KM - KG`` falls by exactly the rise of G:
    ``GM(z_G) = GM_0 - (z_G - z_G0)``.

    Parameters
    ----------
    gm_0 : float, m
        Metacentric height when G is at ``z_g_0``.
    z_g_0, z_g : float, m
        Heights of G above the waterline (BCS z, up) before and after.

    Returns
    -------
    float, m
        May be zero or negative: the hull is then unstable upright.

    Examples
    --------
    >>> round(metacentric_height(1.8, -1.2, 0.0), 6)
    0.6
    >>> round(metacentric_height(1.8, -1.2, 0.8), 6)  # Problem 3(d) with GM made consistent
    -0.2
    """
    gm_0, z_g_0, z_g = as_scalar("gm_0", gm_0), as_scalar("z_g_0", z_g_0), as_scalar("z_g", z_g)
    return gm_0 - (z_g - z_g_0)


_DOF = ("surge", "sway", "heave", "roll", "pitch", "yaw")


def _wrong_parallel_axis(body: RigidBody) -> np.ndarray:
    """I_G + m S(r_G) S(r_G): the parallel-axis term added with the wrong sign."""
    s = skew(body.r_g)
    return body.inertia_g + body.mass * (s @ s)


def _inertia_mistakes(body: RigidBody, pick=lambda t: t) -> tuple:
    """I_G where I_O belongs, and the parallel-axis term with the wrong sign (of ``pick(tensor)``)."""
    return (("inertia_g_for_o", pick(body.inertia_g)), ("parallel_axis_sign", pick(_wrong_parallel_axis(body))))


def _mass_matrix_mistakes(body: RigidBody) -> tuple:
    """M_RB about G instead of O, and M_RB with a wrong rotational block."""
    def with_block(inertia):
        m = body.mass_matrix()
        m[3:, 3:] = inertia
        return m

    return (("origin_at_g", body.at_g().mass_matrix()), ("inertia_g_for_o", with_block(body.inertia_g)),
            ("parallel_axis_sign", with_block(_wrong_parallel_axis(body))))


def problem1(data: dict) -> dict[str, Answer]:
    body = vessel(data)
    m_rb = body.mass_matrix()
    io = products_of_inertia(body.inertia_o)
    key = {
        "p1.a.I_G": algebraic(body.inertia_g, "kg m^2"),
        "p1.a.I_O": algebraic(body.inertia_o, "kg m^2", mistakes=_inertia_mistakes(body)),
        "p1.a.I_x_O": algebraic(body.inertia_o[0, 0], "kg m^2", mistakes=_inertia_mistakes(body, lambda t: t[0, 0])),
        "p1.a.I_y_O": algebraic(body.inertia_o[1, 1], "kg m^2", mistakes=_inertia_mistakes(body, lambda t: t[1, 1])),
        "p1.a.I_z_O": algebraic(body.inertia_o[2, 2], "kg m^2", mistakes=_inertia_mistakes(body, lambda t: t[2, 2])),
        "p1.a.I_xz_O": algebraic(io["xz"], "kg m^2", mistakes=_inertia_mistakes(body, lambda t: -t[0, 2])),
        "p1.b.M_RB": algebraic(m_rb, "kg, kg m, kg m^2", mistakes=_mass_matrix_mistakes(body)),
        "p1.b.max_asymmetry": roundoff(float(np.max(np.abs(m_rb - m_rb.T))), "kg m^2", 1.0e-6),
    }
    eig = np.linalg.eigvalsh(m_rb)
    key["p1.c.eig_min"] = algebraic(eig[0], "kg or kg m^2")
    key["p1.c.eig_max"] = algebraic(eig[-1], "kg or kg m^2")
    ratios = {}
    for i in range(3):
        for j in range(3, 6):
            if m_rb[i, j] != 0.0:
                name = f"{_DOF[i]}_{_DOF[j]}"
                key[f"p1.d.coupling_{name}"] = algebraic(abs(m_rb[i, j]), "kg m")
                ratios[name] = abs(m_rb[i, j]) / math.sqrt(m_rb[i, i] * m_rb[j, j])
    strongest = max(ratios, key=ratios.get)
    key["p1.d.strongest_pair"] = Answer(strongest.replace("_", "-"), "", "text")
    key["p1.d.max_coupling_ratio"] = algebraic(ratios[strongest], "1")
    return key


def problem2(data: dict) -> dict[str, Answer]:
    s = data["sensor"]
    r_p = as_array("sensor.r_p", s["r_p"], (3,))
    nu, nu_dot = as_array("sensor.nu", s["nu"], (6,)), as_array("sensor.nu_dot", s["nu_dot"], (6,))
    a_o = point_acceleration([0.0, 0.0, 0.0], nu, nu_dot)
    a_p = point_acceleration(r_p, nu, nu_dot)
    euler_term = np.cross(nu_dot[3:], r_p)
    centripetal = np.cross(nu[3:], np.cross(nu[3:], r_p))
    rot = a_p - a_o
    turn = np.array([s["turn_u"], 0, 0, 0, 0, s["turn_r"]], dtype=float)
    a_turn = point_acceleration(r_p, turn, np.zeros(6))
    g = data["constants"]["g"]
    return {
        "p2.b.a_O": algebraic(a_o, "m/s^2"),
        "p2.b.a_rot": algebraic(rot, "m/s^2"),
        "p2.b.a_P": algebraic(a_p, "m/s^2"),
        "p2.b.a_rot_norm": algebraic(np.linalg.norm(rot), "m/s^2"),
        "p2.b.a_O_norm": algebraic(np.linalg.norm(a_o), "m/s^2"),
        "p2.b.rot_fraction": algebraic(np.linalg.norm(rot) / np.linalg.norm(a_p), "1"),
        "p2.b.rot_to_origin_ratio": algebraic(np.linalg.norm(rot) / np.linalg.norm(a_o), "1"),
        "p2.c.a_P_z": algebraic(a_p[2], "m/s^2"),
        "p2.c.error": algebraic(a_p[2] - nu_dot[2], "m/s^2"),
        "p2.c.error_fraction": algebraic((a_p[2] - nu_dot[2]) / nu_dot[2], "1"),
        "p2.c.euler_term_z": algebraic(euler_term[2], "m/s^2"),
        "p2.c.centripetal_term_z": algebraic(centripetal[2], "m/s^2"),
        "p2.d.a_P": algebraic(a_turn, "m/s^2"),
        "p2.d.lateral": algebraic(a_turn[1], "m/s^2"),
        "p2.d.lateral_g": algebraic(a_turn[1] / g, "g"),
    }


def problem3(data: dict) -> dict[str, Answer]:
    body, t, g = vessel(data), data["turn"], data["constants"]["g"]
    k, phi = steady_heel(body, t["nu"], t["gm"], g)
    raised = RigidBody(body.mass, [body.r_g[0], body.r_g[1], t["z_g_raised"]], body.inertia_g)
    k_raised, phi_raised = steady_heel(raised, t["nu"], t["gm"], g)
    return {
        "p3.b.K": algebraic(k, "N m"),
        "p3.c.phi_rad": algebraic(phi, "rad"),
        "p3.c.phi_deg": algebraic(math.degrees(phi), "deg", periodic=True),
        "p3.d.K": algebraic(k_raised, "N m"),
        "p3.d.phi_deg": algebraic(math.degrees(phi_raised), "deg", periodic=True),
    }


def problem4(data: dict) -> dict[str, Answer]:
    body = vessel(data)
    nu = as_array("sensor.nu", data["sensor"]["nu"], (6,))
    tau = as_array("power.tau", data["power"]["tau"], (6,))
    c = body.coriolis_matrix(nu)
    nu_dot = body.accelerations(nu, tau)
    power = float(nu @ tau)
    power_m = float(nu @ body.mass_matrix() @ nu_dot)
    flipped = c.copy()
    flipped[3:, :3] *= -1.0
    return {
        "p4.b.nuCnu": roundoff(float(nu @ c @ nu), "W", 1.0e-6),
        "p4.d.power": algebraic(power, "W"),
        "p4.d.power_from_M": algebraic(power_m, "W"),
        "p4.d.rel_diff": roundoff(abs(power - power_m) / abs(power), "1", 1.0e-12),
        "p4.e.max_C_plus_CT": algebraic(float(np.max(np.abs(flipped + flipped.T))), "kg m/s and kg m^2/s"),
        "p4.e.spurious_power": algebraic(float(nu @ flipped @ nu), "W"),
    }


def problem5(data: dict) -> dict[str, Answer]:
    body = vessel(data)
    nu = as_array("turn.nu", data["turn"]["nu"], (6,))
    tau = body.forces(nu, np.zeros(6))
    c_nu = body.coriolis_matrix(nu) @ nu
    key = {"p5.a.nu_dot": algebraic(np.zeros(6), "m/s^2, rad/s^2")}
    for k, (name, unit) in enumerate(zip("XYZKMN", ["N"] * 3 + ["N m"] * 3, strict=True)):
        key[f"p5.c.{name}"] = algebraic(tau[k], unit)
    key["p5.c.C_check"] = roundoff(float(np.max(np.abs(c_nu - tau))), "N, N m", 1.0e-6)
    return key


def problem6(data: dict) -> dict[str, Answer]:
    body = vessel(data)
    m_rb = body.mass_matrix()
    nu_dot = body.accelerations(np.zeros(6), data["tow"]["tau"])
    pure = np.zeros(6)
    pure[0] = nu_dot[0]
    needed = m_rb @ pure
    return {
        "p6.b.nu_dot": algebraic(nu_dot, "m/s^2, rad/s^2"),
        "p6.b.w_dot": algebraic(nu_dot[2], "m/s^2"),
        "p6.b.q_dot": algebraic(nu_dot[4], "rad/s^2"),
        "p6.b.q_dot_deg": algebraic(math.degrees(nu_dot[4]), "deg/s^2"),  # a rate: not periodic
        "p6.c.m_z_G": algebraic(m_rb[0, 4], "kg m"),
        "p6.c.minus_m_x_G": algebraic(m_rb[2, 4], "kg m"),
        "p6.d.X": algebraic(needed[0], "N"),
        "p6.d.M": algebraic(needed[4], "N m"),
    }


def problem7(data: dict) -> dict[str, Answer]:
    body = vessel(data)
    force = as_array("crane.force", data["crane"]["force"], (3,))
    point = as_array("crane.point", data["crane"]["point"], (3,))
    tau_o = np.concatenate([force, np.cross(point, force)])
    tau_g = shift_load(tau_o, body.r_g)
    moment_g = np.cross(point - body.r_g, force)
    at_g = body.at_g()
    nu_dot = body.accelerations(np.zeros(6), tau_o)
    nu_dot_g = at_g.accelerations(np.zeros(6), tau_g)
    a_g_from_o = nu_dot[:3] + np.cross(nu_dot[3:], body.r_g)
    return {
        "p7.a.M_O": algebraic(tau_o[3:], "N m"),
        "p7.a.M_G": algebraic(moment_g, "N m"),
        "p7.a.r_G_x_F": algebraic(np.cross(body.r_g, force), "N m"),
        "p7.a.max_discrepancy": roundoff(float(np.max(np.abs(tau_g[3:] - moment_g))), "N m", 1.0e-6),
        "p7.b.nu_dot": algebraic(nu_dot, "m/s^2, rad/s^2"),
        "p7.b.a_O": algebraic(nu_dot[:3], "m/s^2"),
        "p7.b.alpha": algebraic(nu_dot[3:], "rad/s^2"),
        "p7.c.nu_dot_G": algebraic(nu_dot_g, "m/s^2, rad/s^2"),
        "p7.c.a_G": algebraic(nu_dot_g[:3], "m/s^2"),
        "p7.c.alpha_G": algebraic(nu_dot_g[3:], "rad/s^2"),
        "p7.d.max_alpha_diff": roundoff(float(np.max(np.abs(nu_dot[3:] - nu_dot_g[3:]))), "rad/s^2", 1.0e-15),
        "p7.d.a_G_from_O": algebraic(a_g_from_o, "m/s^2"),
        "p7.d.residual": roundoff(float(np.max(np.abs(a_g_from_o - nu_dot_g[:3]))), "m/s^2", 1.0e-12),
        "p7.e.F_over_m": algebraic(force / body.mass, "m/s^2"),
    }


def problem8(data: dict) -> dict[str, Answer]:
    mod = data["module"]
    inertia = box_inertia(mod["mass"], mod["dimensions"]).diagonal()
    stability = {s.axis: s for s in spin_stability(inertia, mod["spin_rate"])}
    spin = integrate_spin(inertia, mod["omega0"], mod["t_end"], component=1)
    flips = spin.t_events[0]
    norms = np.linalg.norm(spin.sol(np.linspace(0.0, mod["t_end"], 6001)), axis=0)
    key = {f"p8.a.I_{axis}": algebraic(i, "kg m^2") for axis, i in zip("xyz", inertia, strict=True)}
    growth = [s for s in stability.values() if s.kind == "growth"]
    if growth:
        key["p8.c.growth_rate"] = algebraic(growth[0].rate, "1/s")
        key["p8.c.e_folding_time"] = algebraic(growth[0].e_folding_time, "s")
    for axis in ("x", "z"):
        if stability[axis].kind == "oscillation":
            key[f"p8.c.omega_{axis}"] = algebraic(stability[axis].rate, "rad/s")
            key[f"p8.c.period_{axis}"] = algebraic(stability[axis].period, "s")
    key["p8.d.flip_times"] = integrated(flips, "s")
    if len(flips) > 1:
        key["p8.d.flip_interval"] = integrated(float(np.mean(np.diff(flips))), "s")
    key["p8.d.omega_norm_min"] = integrated(float(norms.min()), "rad/s")
    key["p8.d.omega_norm_max"] = integrated(float(norms.max()), "rad/s")
    return key


def problem9(data: dict) -> dict[str, Answer]:
    body, loaded = vessel(data), loaded_vessel(data)
    g, t = data["constants"]["g"], data["turn"]
    k, phi = steady_heel(loaded, t["nu"], data["load"]["gm"], g)
    _, phi_unloaded = steady_heel(body, t["nu"], t["gm"], g)
    return {
        "p9.a.mass": algebraic(loaded.mass, "kg"),
        "p9.a.mass_increase": algebraic(data["load"]["mass"] / body.mass, "1"),
        "p9.a.load_fraction": algebraic(data["load"]["mass"] / body.mass, "1"),
        "p9.a.r_G": algebraic(loaded.r_g, "m"),
        "p9.a.shift": algebraic(loaded.r_g - body.r_g, "m"),
        "p9.b.I_G": algebraic(loaded.inertia_g, "kg m^2"),
        "p9.b.I_O": algebraic(loaded.inertia_o, "kg m^2", mistakes=_inertia_mistakes(loaded)),
        "p9.c.M_RB": algebraic(loaded.mass_matrix(), "kg, kg m, kg m^2", mistakes=_mass_matrix_mistakes(loaded)),
        "p9.d.K": algebraic(k, "N m"),
        "p9.d.phi_deg": algebraic(math.degrees(phi), "deg", periodic=True),
        "p9.d.phi_unloaded_deg": algebraic(math.degrees(phi_unloaded), "deg", periodic=True),
        "p9.d.heel_ratio": algebraic(phi / phi_unloaded, "1"),
    }


def problem10(data: dict) -> dict[str, Answer]:
    sim = data["simulation"]
    # dense output times only for the length of the track; the steps are the integrator's own
    result = simulate(vessel(data), sim["tau"], sim["t_end"], t_eval=np.linspace(0.0, sim["t_end"], 9001))
    x = result.final_state
    track = np.sum(np.linalg.norm(np.diff(result.position[:, :2], axis=0), axis=1))
    delta_t = result.kinetic_energy[-1] - result.kinetic_energy[0]
    return {
        "p10.b.nu1": integrated(x[0:3], "m/s"),
        "p10.b.nu2": integrated(x[3:6], "rad/s"),
        "p10.b.eta1": integrated(x[6:9], "m"),
        "p10.b.eta2_deg": integrated(np.degrees(x[9:12]), "deg", periodic=True),
        "p10.b.displacement": integrated(float(np.hypot(x[6], x[7])), "m"),
        "p10.b.track_length": integrated(float(track), "m"),
        "p10.b.heading_change_deg": integrated(math.degrees(x[11]), "deg", periodic=True),
        "p10.c.delta_T": integrated(delta_t, "J"),
        "p10.c.work": integrated(result.work[-1], "J"),
        "p10.c.rel_diff": roundoff(abs(delta_t - result.work[-1]) / abs(result.work[-1]), "1", 1.0e-10),
    }


def _unit(name: str, theta) -> np.ndarray:
    """Euler parameters given with a few digits, scaled back to unit norm."""
    q = as_array(name, theta, (4,))
    return q / np.linalg.norm(q)


def _scalar_last(q: np.ndarray) -> np.ndarray:
    """``[theta1, theta2, theta3, theta0]``: what a scalar-last library returns for ``q``."""
    return np.roll(q, -1)


def _read_scalar_last(q: np.ndarray) -> np.ndarray:
    """The scalar-first form of ``q`` misread as scalar last (``[x, y, z, w]`` taken for ``q``)."""
    return np.roll(q, 1)


def _conjugate(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def _fixed_step_norm_drift(theta0, omega_body, step: float, t_end: float, method: str) -> float:
    """``theta @ theta - 1`` after integrating the parameter kinematics with a fixed step.

    The rates are ``theta_dot = G_b(theta)^T omega_b / 4`` (eq-noderigidbodyep-gm) for a
    constant body rate, integrated without any normalisation by the explicit Euler
    method (``"euler"``) or the classical fourth-order Runge-Kutta method (``"rk4"``).
    """

    w = as_array("omega_body", omega_body, (3,))
    n = round(t_end / step)
    if n < 1 or not math.isclose(n * step, t_end, rel_tol=1e-12):
        raise ValueError(f"expected t_end to be a whole number of steps, got t_end {t_end} and step {step}")

    def rate(q):
        return g_matrix_body_unchecked(q).T @ w / 4.0

    q = as_array("theta0", theta0, (4,)).copy()
    for _ in range(n):
        if method == "euler":
            q = q + step * rate(q)
        elif method == "rk4":
            k1 = rate(q)
            k2 = rate(q + step / 2 * k1)
            k3 = rate(q + step / 2 * k2)
            k4 = rate(q + step * k3)
            q = q + step / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        else:
            raise ValueError(f"expected method 'euler' or 'rk4', got {method!r}")
    return float(q @ q - 1.0)


def _tumble_with_parameters(data: dict):
    """The box of Problem 8, torque free, with its attitude in Euler parameters (13-state model, rotation part).

    State ``[p, q, r, theta0..theta3]``: Euler's equations for the rates and
    ``theta_dot = G_b^T omega / 4`` (eq-noderigidbodyep-gm); upright at t = 0. Returns the
    dense solution and the first time the body x axis is closest to the vertical (the
    pitch of the z-y-x angles at its largest), found as an event.
    """


    mod, eul = data["module"], data["euler"]
    inertia = box_inertia(mod["mass"], mod["dimensions"]).diagonal()

    def rhs(t, y):
        return np.concatenate([euler_rates(inertia, y[:3]), g_matrix_body_unchecked(y[3:]).T @ y[:3] / 4.0])

    def pitch_rate_zero(t, y):  # d/dt of R[2, 0] = (R S(omega_b))[2, 0]; rising through zero at a minimum
        rot = rotation_matrix_ep_unchecked(y[3:] / np.linalg.norm(y[3:]))
        return rot[2, 1] * y[2] - rot[2, 2] * y[1]

    pitch_rate_zero.direction = 1.0

    t_end = max(float(eul["tumble_time"]), 2.0 * math.pi / float(np.linalg.norm(mod["omega0"])))
    y0 = np.concatenate([as_array("module.omega0", mod["omega0"], (3,)), [1.0, 0.0, 0.0, 0.0]])
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-12, atol=1e-14,
                    events=pitch_rate_zero, dense_output=True)
    if not len(sol.t_events[0]):
        raise ValueError("the body x axis never came closest to the vertical within the run")
    return sol, float(sol.t_events[0][0])


def problem11(data: dict) -> dict[str, Answer]:
    """Euler parameters (the course's own problem, on the rigid-body node of the Euler chapter)."""

    eul = data["euler"]
    phi, theta, psi = as_array("euler.attitude", eul["attitude"], (3,))
    # (a) attitude to parameters, and parameters to attitude
    q = from_euler_angles(phi, theta, psi)
    rx, ry, rz = (_axis_rotation(k, angle) for k, angle in ((0, phi), (1, theta), (2, psi)))
    given = _unit("euler.theta_given", eul["theta_given"])
    angles = to_euler_angles(given)
    key = {
        "p11.a.q": algebraic(q, "1", quaternion=True, mistakes=(
            ("scalar_last", _scalar_last(q)), ("conjugate", _conjugate(q)),
            ("sequence", from_rotation_matrix(rx @ ry @ rz)),
            ("degrees_in", from_euler_angles(*np.radians([phi, theta, psi]))))),
        "p11.a.angles": algebraic(angles, "rad", periodic=True, mistakes=(
            ("scalar_last", to_euler_angles(_read_scalar_last(given))),
            ("conjugate", to_euler_angles(_conjugate(given))),
            ("sequence", tait_bryan_xyz(rotation_matrix_ep(given))))),
    }
    # (b) the G matrices at q (theta0 > 0) and the angular velocity of given parameter rates
    rates = as_array("euler.theta_dot", eul["theta_dot"], (4,))
    g0, gb = g_matrix_global(q), g_matrix_body(q)
    g0_last, gb_last = g_matrix_global(_scalar_last(q)), g_matrix_body(_scalar_last(q))
    key.update({
        "p11.b.G_global": algebraic(g0, "1", mistakes=(
            ("wrong_frame", gb), ("quaternion_sign", -g0), ("scalar_last", g0_last))),
        "p11.b.G_body": algebraic(gb, "1", mistakes=(
            ("wrong_frame", g0), ("quaternion_sign", -gb), ("scalar_last", gb_last))),
        "p11.b.omega_global": algebraic(g0 @ rates, "rad/s", mistakes=(
            ("wrong_frame", gb @ rates), ("quaternion_sign", -(g0 @ rates)), ("scalar_last", g0_last @ rates))),
        "p11.b.omega_body": algebraic(gb @ rates, "rad/s", mistakes=(
            ("wrong_frame", g0 @ rates), ("quaternion_sign", -(gb @ rates)), ("scalar_last", gb_last @ rates))),
    })
    # (c) the constraint: exact on velocity level, drifting under a fixed-step integration
    omega_c = as_array("euler.omega_body", eul["omega_body"], (3,))
    step, t_end = float(eul["step"]), float(eul["t_end"])
    key.update({
        "p11.c.constraint_rate": roundoff(float(2.0 * q @ (gb.T @ omega_c / 4.0)), "1/s", 1.0e-12),
        # a fixed-step recursion has one exact result: judged like algebra, not like an adaptive run
        "p11.c.residual_euler": algebraic(_fixed_step_norm_drift(q, omega_c, step, t_end, "euler"), "1"),
        "p11.c.residual_rk4": algebraic(_fixed_step_norm_drift(q, omega_c, step, t_end, "rk4"), "1"),
    })
    # (d) the node's outputs for given coordinates, and a point of the hull (the crane tip of Problem 7)
    pos = as_array("euler.node_position", eul["node_position"], (3,))
    vel = as_array("euler.node_velocity", eul["node_velocity"], (3,))
    node = _unit("euler.node_theta", eul["node_theta"])
    node_rates = as_array("euler.node_theta_dot", eul["node_theta_dot"], (4,))
    point = as_array("crane.point", data["crane"]["point"], (3,))
    rot = rotation_matrix_ep(node)
    w0, wb = g_matrix_global(node) @ node_rates, g_matrix_body(node) @ node_rates
    key.update({
        "p11.d.R": algebraic(rot, "1", mistakes=(
            ("conjugate", rot.T), ("scalar_last", rotation_matrix_ep(_scalar_last(node))))),
        "p11.d.rotation_xyz": algebraic(tait_bryan_xyz(rot), "rad", periodic=True, mistakes=(
            ("sequence", euler_angles_from_matrix(rot)),)),
        "p11.d.omega_global": algebraic(w0, "rad/s", mistakes=(("wrong_frame", wb),)),
        "p11.d.omega_body": algebraic(wb, "rad/s", mistakes=(("wrong_frame", w0),)),
        "p11.d.position_P": algebraic(pos + rot @ point, "m", mistakes=(
            ("conjugate", pos + rot.T @ point), ("wrong_frame", pos + point))),
        "p11.d.velocity_P": algebraic(vel + np.cross(w0, rot @ point), "m/s", mistakes=(
            ("wrong_frame", vel + np.cross(wb, rot @ point)), ("conjugate", vel + np.cross(w0, rot.T @ point)))),
    })
    # (e) the tumbling box of Problem 8 through pitch 90 degrees, with Euler parameters
    sol, t_top = _tumble_with_parameters(data)
    at_top = sol.sol(t_top)[3:]
    late = sol.sol(float(eul["tumble_time"]))[3:]
    key.update({
        "p11.e.t_pitch_max": integrated(t_top, "s"),
        "p11.e.pitch_max_deg": integrated(math.degrees(to_euler_angles(at_top / np.linalg.norm(at_top))[1]),
                                          "deg", periodic=True),
        "p11.e.q_late": integrated(late / np.linalg.norm(late), "1", quaternion=True, mistakes=(
            ("scalar_last", _scalar_last(late / np.linalg.norm(late))),
            ("conjugate", _conjugate(late / np.linalg.norm(late))))),
    })
    return key


def _axis_rotation(axis: int, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the body axis ``axis`` (0, 1, 2 for x, y, z)."""
    c, s = math.cos(angle), math.sin(angle)
    i, j = [k for k in range(3) if k != axis]
    rot = np.eye(3)
    rot[i, i], rot[i, j], rot[j, i], rot[j, j] = c, -s, s, c
    return rot


PROBLEMS: tuple[Callable[[dict], dict[str, Answer]], ...] = (
    problem1, problem2, problem3, problem4, problem5,
    problem6, problem7, problem8, problem9, problem10, problem11,
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
