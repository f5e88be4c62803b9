"""Step 8: the six scalar equations of motion (eq-eom-expanded-1 to -6).

The translational and rotational left-hand sides stacked and expanded, next to
the chapter's written-out form.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.body import RigidBodySymbols, rigid_body_symbols
from rbtutor.symbolic.inertia import inertia_symbols
from rbtutor.symbolic.rotational import rotational_equations
from rbtutor.symbolic.translational import translational_equations


def expanded_equations(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """The six scalar left-hand sides of eq-newtons-eom-final and eq-euler-eom-final, expanded.

    Returns
    -------
    sympy.Matrix, shape (6, 1)
        Surge, sway, heave, roll, pitch and yaw, equal to ``tau`` in the
        equations of motion.
    """
    b = body or rigid_body_symbols()
    return sp.expand(translational_equations(b).col_join(rotational_equations(b)))


def printed_expanded_equations(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """Transcription of the left-hand sides of eq-eom-expanded-1 to eq-eom-expanded-6.

    The chapter writes ``I_x, I_xy, ...`` without a superscript; they are the
    moments and products about O, here ``I_x^O, I_xy^O, ...``, and
    ``I_yx = I_xy`` etc.

    Returns
    -------
    sympy.Matrix, shape (6, 1), not expanded
    """
    b = body or rigid_body_symbols()
    m = b.mass
    x_g, y_g, z_g = b.r_g
    u, v, w, p, q, r = b.nu
    ud, vd, wd, pd, qd, rd = b.nu_dot
    i = inertia_symbols("O")
    i_x, i_y, i_z, i_xy, i_xz, i_yz = (i[k] for k in ("x", "y", "z", "xy", "xz", "yz"))
    surge = ud - v * r + w * q
    sway = vd - w * p + u * r
    heave = wd - u * q + v * p
    return sp.Matrix([
        m * (surge - x_g * (q**2 + r**2) + y_g * (p * q - rd) + z_g * (p * r + qd)),
        m * (sway - y_g * (r**2 + p**2) + z_g * (q * r - pd) + x_g * (q * p + rd)),
        m * (heave - z_g * (p**2 + q**2) + x_g * (r * p - qd) + y_g * (r * q + pd)),
        i_x * pd + (i_z - i_y) * q * r - (rd + p * q) * i_xz + (r**2 - q**2) * i_yz
        + (p * r - qd) * i_xy + m * (y_g * heave - z_g * sway),
        i_y * qd + (i_x - i_z) * r * p - (pd + q * r) * i_xy + (p**2 - r**2) * i_xz
        + (q * p - rd) * i_yz + m * (z_g * surge - x_g * heave),
        i_z * rd + (i_y - i_x) * p * q - (qd + r * p) * i_yz + (q**2 - p**2) * i_xy
        + (r * q - pd) * i_xz + m * (x_g * sway - y_g * surge),
    ])
