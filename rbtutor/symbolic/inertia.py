"""Step 4: the inertia tensor and the parallel-axis theorem (section 5.3).

The tensor with its products of inertia entered negatively, its symbols about
G or O, the shift from G to O, and that shift confirmed from first principles
on a handful of point masses.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import skew
from rbtutor.symbolic.frames import cog_vector


def inertia_tensor(i_x, i_y, i_z, i_xy=0, i_xz=0, i_yz=0) -> sp.Matrix:
    """Tensor with the products of inertia entered with a minus sign (eq-inertia-tensor).

    Examples
    --------
    >>> import sympy as sp
    >>> inertia_tensor(*sp.symbols("A B C"), i_xz=sp.Symbol("E"))
    Matrix([
    [ A, 0, -E],
    [ 0, B,  0],
    [-E, 0,  C]])
    """
    return sp.Matrix([[i_x, -i_xy, -i_xz], [-i_xy, i_y, -i_yz], [-i_xz, -i_yz, i_z]])


def inertia_symbols(point: str) -> dict[str, sp.Symbol]:
    """Symbols ``I_x^P, I_y^P, I_z^P, I_xy^P, I_xz^P, I_yz^P`` for the point P ("G" or "O").

    Returns
    -------
    dict
        Keys ``"x", "y", "z", "xy", "xz", "yz"``.
    """
    keys = ("x", "y", "z", "xy", "xz", "yz")
    return {k: sp.Symbol(f"I_{k}^{point}") for k in keys}


def symbolic_inertia(point: str) -> sp.Matrix:
    """Inertia tensor about ``point`` made of :func:`inertia_symbols` (eq-inertia-tensor)."""
    s = inertia_symbols(point)
    return inertia_tensor(s["x"], s["y"], s["z"], s["xy"], s["xz"], s["yz"])


def parallel_axis(inertia_g, mass, r_g) -> sp.Matrix:
    """``I_O = I_G - m S(r_G) S(r_G)`` (eq-parallel-axes-theorem).

    The symbolic twin of :func:`rbtutor.parallel_axis`.

    Returns
    -------
    sympy.Matrix, shape (3, 3), expanded
    """
    s = skew(r_g)
    return sp.expand(sp.Matrix(inertia_g) - mass * s * s)


def parallel_axis_components() -> dict[str, tuple]:
    """Each entry of ``I_O`` from :func:`parallel_axis`, next to its textbook scalar form.

    Returns
    -------
    dict
        Keys ``"x", "y", "z", "xy", "xz", "yz"``; values ``(from_tensor, scalar)``
        with, for example, ``I_x^O = I_x^G + m (y_G^2 + z_G^2)`` and
        ``I_xz^O = I_xz^G + m x_G z_G`` (eq-parallel-axes-theorem).
    """
    m = sp.Symbol("m")
    x, y, z = r_g = cog_vector()
    g = inertia_symbols("G")
    tensor = parallel_axis(symbolic_inertia("G"), m, r_g)
    scalar = {
        "x": g["x"] + m * (y**2 + z**2),
        "y": g["y"] + m * (z**2 + x**2),
        "z": g["z"] + m * (x**2 + y**2),
        "xy": g["xy"] + m * x * y,
        "xz": g["xz"] + m * x * z,
        "yz": g["yz"] + m * y * z,
    }
    from_tensor = {
        "x": tensor[0, 0], "y": tensor[1, 1], "z": tensor[2, 2],
        "xy": -tensor[0, 1], "xz": -tensor[0, 2], "yz": -tensor[1, 2],
    }
    return {k: (from_tensor[k], scalar[k]) for k in scalar}


def point_mass_inertia(masses, positions, point) -> sp.Matrix:
    """Inertia tensor of point masses about ``point``: ``sum m_k (|d_k|^2 I - d_k d_k^T)``.

    This is the discrete form of eq-IxG and eq-IxyG, with ``d_k`` the position
    of mass k relative to ``point`` (axes parallel to the BCS).

    Parameters
    ----------
    masses : sequence of n sympy expressions
    positions : sequence of n 3-vectors
    point : 3-vector

    Returns
    -------
    sympy.Matrix, shape (3, 3)
    """
    total = sp.zeros(3, 3)
    for m_k, r_k in zip(masses, positions, strict=True):
        d = sp.Matrix(r_k) - sp.Matrix(point)
        total += m_k * ((d.T * d)[0, 0] * sp.eye(3) - d * d.T)
    return total


def parallel_axis_from_point_masses(count: int = 3) -> tuple[sp.Matrix, sp.Matrix]:
    """The parallel-axis theorem checked from the definition, for ``count`` point masses.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 3)
        The tensor about O computed directly from the definition, and
        ``I_G - m S(r_G) S(r_G)`` with ``I_G`` computed directly about the
        centre of gravity ``r_G = sum m_k r_k / m`` of the same masses.
    """
    masses = sp.symbols(f"m_1:{count + 1}", positive=True)
    positions = [sp.Matrix(sp.symbols(f"x_{k} y_{k} z_{k}")) for k in range(1, count + 1)]
    total = sum(masses)
    r_g = sum((m_k * r_k for m_k, r_k in zip(masses, positions, strict=True)), sp.zeros(3, 1)) / total
    about_o = point_mass_inertia(masses, positions, sp.zeros(3, 1))
    about_g = point_mass_inertia(masses, positions, r_g)
    return about_o, parallel_axis(about_g, total, r_g)
