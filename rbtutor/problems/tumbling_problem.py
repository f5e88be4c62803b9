"""Problem 11 (the course's own): the tumbling box, with Euler parameters."""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

from .._checks import as_array
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
from ..inertia import box_inertia
from ..kinematics import euler_angles_from_matrix
from ..torque_free import euler_rates
from .answer import Answer, algebraic, integrated, roundoff


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
