"""Step 10: the Coriolis-centripetal matrix and the matrix form (eq-coriolis-mass-param, eq-eom-matrix-form).

``C_RB(nu)`` built from the blocks of ``M_RB``, and ``M_RB nu_dot + C_RB(nu) nu``,
which must reproduce the six scalar equations of step 8.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import skew
from rbtutor.symbolic.body import RigidBodySymbols, rigid_body_symbols
from rbtutor.symbolic.mass_matrix import mass_matrix


def coriolis_matrix(body: RigidBodySymbols | None = None, inertia_o=None) -> sp.Matrix:
    """``C_RB(nu)`` parameterised by the blocks of ``M_RB`` (eq-coriolis-mass-param).

    The symbolic twin of :meth:`rbtutor.RigidBody.coriolis_matrix`.

    Returns
    -------
    sympy.Matrix, shape (6, 6)
    """
    b = body or rigid_body_symbols()
    mrb = mass_matrix(b, inertia_o)
    m11, m12, m21, m22 = mrb[:3, :3], mrb[:3, 3:], mrb[3:, :3], mrb[3:, 3:]
    nu1, nu2 = b.linear_velocity, b.angular_velocity
    upper = -skew(m11 * nu1 + m12 * nu2)
    lower = -skew(m21 * nu1 + m22 * nu2)
    return sp.BlockMatrix([[sp.zeros(3, 3), upper], [upper, lower]]).as_explicit()


def matrix_form(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """``M_RB nu_dot + C_RB(nu) nu``, expanded (eq-eom-matrix-form).

    It equals :func:`expanded_equations`.
    """
    b = body or rigid_body_symbols()
    return sp.expand(mass_matrix(b) * b.nu_dot + coriolis_matrix(b) * b.nu)
