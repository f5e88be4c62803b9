"""What the locked ``problem_data`` cell of each problem defines, and its source for given data.

The course's renderer (:mod:`rbtutor.course.render`) writes these cells into the source
notebooks; the grader (:mod:`rbtutor.grading.restore`) writes a student's own numbers into
the submitted notebook from the same table; the personalising service
(:mod:`rbtutor.course.personal`) does the same for a student's Fetch.
"""

from __future__ import annotations

# What each problem's data cell defines: (variable, path in the problem data, unit, meaning).
_VESSEL = [
    ("m", "vessel.mass", "kg", "mass of the vessel"),
    ("r_G", "vessel.r_g", "m", "centre of gravity G from O, BCS components"),
    ("k_G", "vessel.radii_of_gyration", "m", "radii of gyration about G (x, y, z)"),
    ("I_xy_G", "vessel.products_of_inertia_g.xy", "kg m^2", "product of inertia about G"),
    ("I_xz_G", "vessel.products_of_inertia_g.xz", "kg m^2", "product of inertia about G"),
    ("I_yz_G", "vessel.products_of_inertia_g.yz", "kg m^2", "product of inertia about G"),
]
_G = [("g", "constants.g", "m/s^2", "gravitational acceleration")]
_TURN = [("nu_turn", "turn.nu", "m/s, rad/s", "steady turn [u, v, w, p, q, r]")]
DATA_CELLS: dict[int, list[tuple[str, str, str, str]]] = {
    1: _VESSEL,
    2: _VESSEL + _G + [
        ("r_P", "sensor.r_p", "m", "position of the motion sensor, BCS"),
        ("nu", "sensor.nu", "m/s, rad/s", "[u, v, w, p, q, r] at the instant"),
        ("nu_dot", "sensor.nu_dot", "m/s^2, rad/s^2", "their rates"),
        ("u_turn", "sensor.turn_u", "m/s", "surge speed in part (d)"),
        ("r_turn", "sensor.turn_r", "rad/s", "yaw rate in part (d)"),
    ],
    3: _VESSEL + _G + _TURN + [
        ("GM", "turn.gm", "m", "metacentric height"),
        ("z_G_raised", "turn.z_g_raised", "m", "z_G after re-ballasting, part (d)"),
    ],
    4: _VESSEL + [
        ("nu", "sensor.nu", "m/s, rad/s", "the state of Problem 2"),
        ("tau", "power.tau", "N, N m", "load [X, Y, Z, K, M, N]"),
    ],
    5: _VESSEL + _TURN,
    6: _VESSEL + [("tau_tow", "tow.tau", "N, N m", "towline load [X, Y, Z, K, M, N] at rest")],
    7: _VESSEL + [
        ("F_A", "crane.force", "N", "load-line force, BCS components"),
        ("r_A", "crane.point", "m", "where it acts, BCS"),
    ],
    8: [
        ("m_module", "module.mass", "kg", "mass of the module"),
        ("dims", "module.dimensions", "m", "outside dimensions along x, y, z"),
        ("Omega", "module.spin_rate", "rad/s", "steady spin rate for part (c)"),
        ("omega0", "module.omega0", "rad/s", "initial angular velocity for part (d)"),
        ("t_end", "module.t_end", "s", "duration of the integration in part (d)"),
    ],
    9: _VESSEL + _G + _TURN + [
        ("m_L", "load.mass", "kg", "mass of the lifted module"),
        ("r_L", "load.position", "m", "where it is held, BCS"),
        ("GM_loaded", "load.gm", "m", "metacentric height with the load"),
        ("GM_unloaded", "turn.gm", "m", "metacentric height of the empty ship (Problem 3)"),
    ],
    10: _VESSEL + [
        ("tau", "simulation.tau", "N, N m", "constant body-frame load"),
        ("t_end", "simulation.t_end", "s", "duration of the simulation"),
    ],
    11: [
        ("attitude", "euler.attitude", "rad", "[phi, theta, psi] of the vessel, part (a)"),
        ("theta_given", "euler.theta_given", "1", "logged Euler parameters, scalar first, part (a)"),
        ("theta_dot", "euler.theta_dot", "1/s", "parameter rates at the attitude of (a), part (b)"),
        ("omega_c", "euler.omega_body", "rad/s", "constant body angular velocity, part (c)"),
        ("h", "euler.step", "s", "fixed step of both integrators, part (c)"),
        ("t_c", "euler.t_end", "s", "length of the integration, part (c)"),
        ("p_node", "euler.node_position", "m", "node position (GCS), part (d)"),
        ("theta_node", "euler.node_theta", "1", "node Euler parameters, scalar first, part (d)"),
        ("v_node", "euler.node_velocity", "m/s", "node velocity (GCS), part (d)"),
        ("theta_dot_node", "euler.node_theta_dot", "1/s", "node parameter rates, part (d)"),
        ("r_A", "crane.point", "m", "crane tip A in the body frame (Problem 7), part (d)"),
        ("m_module", "module.mass", "kg", "mass of the box of Problem 8, part (e)"),
        ("dims", "module.dimensions", "m", "its outside dimensions along x, y, z"),
        ("omega0", "module.omega0", "rad/s", "its initial body angular velocity"),
        ("t_late", "euler.tumble_time", "s", "time of the Euler parameters asked in (e)"),
    ],
    12: [
        ("q3_attitude_deg", "quiz.q3.attitude_deg", "deg", "Q3: roll, pitch, yaw of the hull"),
        ("q7_r_p", "quiz.q7.r_p", "m", "Q7: the body point P, BCS"),
        ("q7_nu", "quiz.q7.nu", "m/s, rad/s", "Q7: [u, v, w, p, q, r]"),
        ("q7_nu_dot", "quiz.q7.nu_dot", "m/s^2, rad/s^2", "Q7: their rates"),
        ("q14_mass", "quiz.q14.mass", "kg", "Q14: mass of the hull"),
        ("q14_radii", "quiz.q14.radii", "m", "its radii of gyration about G (x, y, z)"),
        ("q14_i_xz", "quiz.q14.i_xz", "kg m^2", "its product of inertia I_xz about G"),
        ("q14_r_g", "quiz.q14.r_g", "m", "its centre of gravity G from O, BCS"),
        ("q21_mass", "quiz.q21.mass", "kg", "Q22: mass of the hull"),
        ("q21_r_g", "quiz.q21.r_g", "m", "its centre of gravity G from O, BCS"),
        ("q21_radii", "quiz.q21.radii", "m", "its radii of gyration about G (x, y, z)"),
        ("q22_nu", "quiz.q22.nu", "m/s, rad/s", "Q22: [u, v, w, p, q, r]"),
        ("q28_mass", "quiz.q28.mass", "kg", "Q28: mass of the hull"),
        ("q28_u", "quiz.q28.u", "m/s", "its forward speed U"),
        ("q28_r_g", "quiz.q28.r_g", "m", "its centre of gravity G from O, BCS"),
        ("q35_attitude_deg", "quiz.q35.attitude_deg", "deg", "Q35: roll, pitch, yaw of the hull"),
        ("q41_sides", "quiz.q41.sides", "m", "Q41: sides of the box along x, y, z"),
        ("q41_mass", "quiz.q41.mass", "kg", "mass of the box"),
        ("q41_omega", "quiz.q41.omega", "rad/s", "its body angular velocity"),
    ],
}


def lookup(data: dict, path: str):
    """The value at a dotted ``path`` of the data; a number in the path indexes a list."""
    value = data
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def data_source(problem: int, data: dict) -> str:
    """Source of the locked ``problem_data`` cell of one problem."""
    lines = [f"# Problem {problem} data: locked, generated from the course data. SI units, angles in rad.", ""]
    for name, path, unit, meaning in DATA_CELLS[problem]:
        value = lookup(data, path)
        code = f"np.array({[float(v) for v in value]!r})" if isinstance(value, list) else repr(float(value))
        lines.append(f"{name} = {code}  # {unit}: {meaning}")
    return "\n".join(lines)
