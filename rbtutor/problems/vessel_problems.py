"""Problems 1-10 (the chapter's): the vessel's inertia, mass matrix, loads and motions."""

from __future__ import annotations

import math

import numpy as np

from .._checks import as_array
from ..inertia import box_inertia, products_of_inertia
from ..kinematics import point_acceleration, skew
from ..rigid_body import RigidBody, shift_load
from ..simulation import simulate
from ..torque_free import integrate_spin, spin_stability
from .answer import Answer, algebraic, integrated, roundoff
from .data import loaded_vessel, steady_heel, vessel

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
