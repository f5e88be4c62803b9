"""Step 1: points of the body written as position vectors (section 5.2).

The centre of gravity relative to the body origin, and the GCS positions of O
and G as the chapter prints them next to what it means (the printed pair
repeats the x coordinate; see the errata page).
"""

from __future__ import annotations

import sympy as sp


def cog_vector() -> sp.Matrix:
    """``r_G = [x_G, y_G, z_G]``: G from O in BCS components (eq-cog-vec-bcs)."""
    return sp.Matrix(sp.symbols("x_G y_G z_G"))


def printed_position_vectors() -> dict[str, tuple[sp.Matrix, sp.Matrix]]:
    """GCS positions of O and G as printed in the chapter and as meant (eq-bcs-origin-vec-gcs, eq-cog-vec-gcs).

    Returns
    -------
    dict
        Label -> ``(printed, intended)`` GCS components. The printed forms use
        the x coordinate twice.
    """
    out = {}
    for label, point in (("eq-bcs-origin-vec-gcs", "O"), ("eq-cog-vec-gcs", "G")):
        x, y, z = sp.symbols(f"x_0{point} y_0{point} z_0{point}")
        out[label] = (sp.Matrix([x, x, z]), sp.Matrix([x, y, z]))
    return out
