"""Step 9: the rigid-body mass matrix ``M_RB`` (eq-mass-matrix).

Assembled from its four 3x3 blocks, next to the chapter's entry-by-entry form.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import skew
from rbtutor.symbolic.body import RigidBodySymbols, rigid_body_symbols
from rbtutor.symbolic.inertia import inertia_symbols


def mass_matrix(body: RigidBodySymbols | None = None, inertia_o=None) -> sp.Matrix:
    """``M_RB = [[m I, -m S(r_G)], [m S(r_G), I_O]]`` from its blocks (eq-mass-matrix).

    The symbolic twin of :meth:`rbtutor.RigidBody.mass_matrix`.

    Returns
    -------
    sympy.Matrix, shape (6, 6)
    """
    b = body or rigid_body_symbols()
    i_o = b.inertia_o if inertia_o is None else sp.Matrix(inertia_o)
    m_s = b.mass * skew(b.r_g)
    return sp.BlockMatrix([[b.mass * sp.eye(3), -m_s], [m_s, i_o]]).as_explicit()


def printed_mass_matrix(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """Transcription of the element-by-element matrix in eq-mass-matrix."""
    b = body or rigid_body_symbols()
    m = b.mass
    x_g, y_g, z_g = b.r_g
    i = inertia_symbols("O")
    return sp.Matrix([
        [m, 0, 0, 0, m * z_g, -m * y_g],
        [0, m, 0, -m * z_g, 0, m * x_g],
        [0, 0, m, m * y_g, -m * x_g, 0],
        [0, -m * z_g, m * y_g, i["x"], -i["xy"], -i["xz"]],
        [m * z_g, 0, -m * x_g, -i["xy"], i["y"], -i["yz"]],
        [-m * y_g, m * x_g, 0, -i["xz"], -i["yz"], i["z"]],
    ])
