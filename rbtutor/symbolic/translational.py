"""Step 6: Newton's law in the body frame (the Translational page, up to eq-newtons-eom-final).

The acceleration of G derived from the moving origin and the rotation, first
in GCS and then in BCS components, and the left-hand side of the three
translational equations.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import TIME, functions_of_time, trig_reduce
from rbtutor.symbolic.body import RigidBodySymbols, point_acceleration, rigid_body_symbols
from rbtutor.symbolic.frames import cog_vector
from rbtutor.symbolic.rotation import (
    body_angular_velocity,
    euler_angles_of_time,
    global_angular_velocity,
    rotation_matrix,
)


def acceleration_of_g_gcs() -> tuple[sp.Matrix, sp.Matrix]:
    """The part of the GCS acceleration of G due to the rotation (eq-acc-triangle-law-2).

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 1)
        ``d^2/dt^2 (R r_G)`` and ``alpha0 x d + omega0 x (omega0 x d)`` with
        ``d = R r_G = r_0G - r_0O`` and ``alpha0 = d omega0 / dt``.
    """
    rot = rotation_matrix(*euler_angles_of_time())
    d = rot * cog_vector()
    omega0 = global_angular_velocity()
    alpha0 = omega0.diff(TIME)
    return rot.diff(TIME, 2) * cog_vector(), alpha0.cross(d) + omega0.cross(omega0.cross(d))


def acceleration_of_g() -> tuple[sp.Matrix, sp.Matrix]:
    """Acceleration of G in BCS components (eq-newtons-eom-1 with eq-acc-vel-der-bcs, eq-newtons-eom-2).

    The origin O moves with BCS velocity ``v = [u(t), v(t), w(t)]``, so
    ``d r_0O / dt = R v`` and ``r_0G = r_0O + R r_G``.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 1)
        ``trig_reduce(R^T d^2 r_0G / dt^2)`` and
        ``v_dot + omega x v + alpha x r_G + omega x (omega x r_G)``.
    """
    rot = rotation_matrix(*euler_angles_of_time())
    v = functions_of_time("u", "v", "w")
    r_g = cog_vector()
    omega = body_angular_velocity()
    alpha = omega.diff(TIME)
    a_0g = (rot * v).diff(TIME) + rot.diff(TIME, 2) * r_g
    printed = v.diff(TIME) + omega.cross(v) + alpha.cross(r_g) + omega.cross(omega.cross(r_g))
    return trig_reduce(rot.T * a_0g), printed


def translational_equations(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """Left-hand side of eq-newtons-eom-final: ``m [v_dot + w x v + w_dot x r_G + w x (w x r_G)]``."""
    b = body or rigid_body_symbols()
    return b.mass * point_acceleration(b.r_g, b)
