"""Step 7: Euler's equations, moved from G to O (the Rotational page).

The transfer of a general load's moment from G to O, the chains of equal forms
for the angular-acceleration and gyroscopic terms, and the left-hand sides of
the rotational equations about O and about G.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import skew, trig_reduce, vector
from rbtutor.symbolic.body import RigidBodySymbols, rigid_body_symbols
from rbtutor.symbolic.frames import cog_vector
from rbtutor.symbolic.inertia import parallel_axis
from rbtutor.symbolic.rotation import euler_angle_symbols, rotation_matrix
from rbtutor.symbolic.translational import translational_equations


def moment_transfer() -> tuple[sp.Matrix, sp.Matrix]:
    """Both sides of eq-ext-moment for a general load: ``R^T M_0G`` and ``M - r_G x F``.

    The load is a force ``F`` (BCS components ``F_x, F_y, F_z``) acting at the
    body point ``r_P`` plus a couple ``C``; any set of loads on a rigid body
    reduces to that. ``M_0G`` is its moment about G in GCS components and
    ``M = C + r_P x F`` its moment about O in BCS components.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 1)
    """
    rot = rotation_matrix(*euler_angle_symbols())
    force, couple, r_p = vector("F"), vector("C"), vector("r_P")
    r_g = cog_vector()
    moment_0g = rot * couple + (rot * (r_p - r_g)).cross(rot * force)
    moment_o = couple + r_p.cross(force)
    return trig_reduce(rot.T * moment_0g), moment_o - r_g.cross(force)


def angular_acceleration_terms(body: RigidBodySymbols | None = None) -> list[sp.Matrix]:
    """The stages of eq-inertia-simplify-1 and eq-inertia-simplify-1a, with ``I_O`` from ``I_G``.

    Returns
    -------
    list of sympy.Matrix, shapes (3, 1)
        ``I_G w_dot + m r_G x (w_dot x r_G)``,
        ``I_G w_dot - m r_G x (r_G x w_dot)``,
        ``(I_G - m S(r_G) S(r_G)) w_dot`` and ``I_O w_dot``; all equal.
    """
    b = body or rigid_body_symbols()
    m, r, i_g, wd = b.mass, b.r_g, b.inertia_g, b.angular_acceleration
    s = skew(r)
    return [
        i_g * wd + m * r.cross(wd.cross(r)),
        i_g * wd - m * r.cross(r.cross(wd)),
        (i_g - m * s * s) * wd,
        parallel_axis(i_g, m, r) * wd,
    ]


def gyroscopic_terms(body: RigidBodySymbols | None = None) -> list[sp.Matrix]:
    """The stages of eq-inertia-simplify-2 to eq-inertia-simplify-4, with ``I_O`` from ``I_G``.

    Returns
    -------
    list of sympy.Matrix, shapes (3, 1)
        ``w x I_G w + m r_G x (w x (w x r_G))``,
        ``w x I_G w + m w x (r_G x (w x r_G))``,
        ``w x I_G w - m w x (r_G x (r_G x w))``,
        ``w x (I_G - m S(r_G) S(r_G)) w`` and ``w x I_O w``; all equal.
    """
    b = body or rigid_body_symbols()
    m, r, i_g, w = b.mass, b.r_g, b.inertia_g, b.angular_velocity
    s = skew(r)
    gyro = w.cross(i_g * w)
    return [
        gyro + m * r.cross(w.cross(w.cross(r))),
        gyro + m * w.cross(r.cross(w.cross(r))),
        gyro - m * w.cross(r.cross(r.cross(w))),
        w.cross((i_g - m * s * s) * w),
        w.cross(parallel_axis(i_g, m, r) * w),
    ]


def rotational_equations(body: RigidBodySymbols | None = None, inertia_o=None) -> sp.Matrix:
    """Left-hand side of eq-euler-eom-final: ``I_O w_dot + w x I_O w + m r_G x (v_dot + w x v)``.

    Parameters
    ----------
    body : RigidBodySymbols, optional
    inertia_o : sympy.Matrix, optional
        Defaults to the independent symbols ``body.inertia_o``.
    """
    b = body or rigid_body_symbols()
    i_o = b.inertia_o if inertia_o is None else sp.Matrix(inertia_o)
    w, wd = b.angular_velocity, b.angular_acceleration
    v, vd = b.linear_velocity, b.linear_acceleration
    return i_o * wd + w.cross(i_o * w) + b.mass * b.r_g.cross(vd + w.cross(v))


def rotational_equations_about_g(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """Left-hand side of eq-euler-eom-2: Euler's equation about G with the moment moved to O.

    ``I_G w_dot + w x I_G w + r_G x m [v_dot + w x v + w_dot x r_G + w x (w x r_G)]``,
    that is eq-rotational-eqn-cog-1 with F from eq-newtons-eom-2. It equals
    :func:`rotational_equations` with ``I_O`` from :func:`parallel_axis`.
    """
    b = body or rigid_body_symbols()
    w, wd = b.angular_velocity, b.angular_acceleration
    return b.inertia_g * wd + w.cross(b.inertia_g * w) + b.r_g.cross(translational_equations(b))
