"""Step 3: cross products as matrices, and rates seen from a turning frame (section 5.2).

``a x b`` written three ways, the identities of the skew matrix that the
inertia steps use, the invariance of a cross product under rotation, and the
rate of a body-fixed vector measured in the GCS.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import TIME, functions_of_time, skew, trig_reduce
from rbtutor.symbolic.rotation import body_angular_velocity, euler_angle_symbols, euler_angles_of_time, rotation_matrix


def cross_product_as_matrix() -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """``a x b`` by components, as ``S(a) b`` and as ``-S(b) a`` (eq-cross-product-matrix).

    Returns
    -------
    (sympy.Matrix, sympy.Matrix, sympy.Matrix), shapes (3, 1)
        In the symbols ``a1, a2, a3, b1, b2, b3``.
    """
    a = sp.Matrix(sp.symbols("a1:4"))
    b = sp.Matrix(sp.symbols("b1:4"))
    by_components = sp.Matrix([
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ])
    return by_components, skew(a) * b, -skew(b) * a


def skew_square_identity() -> tuple[sp.Matrix, sp.Matrix]:
    """``S(a) S(a)`` and ``a a^T - (a . a) I``, which are equal (used in eq-parallel-axes-theorem)."""
    a = sp.Matrix(sp.symbols("a1:4"))
    return skew(a) * skew(a), a * a.T - (a.T * a)[0, 0] * sp.eye(3)


def jacobi_identity(a=None, b=None, c=None) -> sp.Matrix:
    """``a x (b x c) + b x (c x a) + c x (a x b)``, which is the zero vector (used in eq-inertia-simplify-2).

    Parameters
    ----------
    a, b, c : 3-vectors, optional
        General symbols ``a1..a3``, ``b1..b3``, ``c1..c3`` when omitted.

    Returns
    -------
    sympy.Matrix, shape (3, 1), expanded
    """
    a = sp.Matrix(sp.symbols("a1:4")) if a is None else sp.Matrix(a)
    b = sp.Matrix(sp.symbols("b1:4")) if b is None else sp.Matrix(b)
    c = sp.Matrix(sp.symbols("c1:4")) if c is None else sp.Matrix(c)
    return sp.expand(a.cross(b.cross(c)) + b.cross(c.cross(a)) + c.cross(a.cross(b)))


def rotated_cross_product() -> tuple[sp.Matrix, sp.Matrix]:
    """``R^T (R a x R b)`` reduced, and ``a x b``: a rotation carries cross products along.

    This is the step from eq-newtons-eom to eq-newtons-eom-1, where GCS cross
    products are turned into BCS ones.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 1)
    """
    rot = rotation_matrix(*euler_angle_symbols())
    a = sp.Matrix(sp.symbols("a1:4"))
    b = sp.Matrix(sp.symbols("b1:4"))
    return trig_reduce(rot.T * (rot * a).cross(rot * b)), a.cross(b)


def body_frame_derivative(names=("u", "v", "w")) -> tuple[sp.Matrix, sp.Matrix]:
    """GCS rate of a vector, in BCS components: ``R^T d/dt (R b)`` versus ``b_dot + omega x b``.

    With ``b = v`` this is eq-acc-vel-der-bcs; with ``b = L_G`` the step in
    eq-ang-momentum-conservation-1.

    Parameters
    ----------
    names : three str
        Names of the BCS components of b, made functions of time.

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 1)
        ``trig_reduce(R^T d/dt(R b))`` and ``b_dot + omega x b`` with omega
        from :func:`body_angular_velocity`.
    """
    rot = rotation_matrix(*euler_angles_of_time())
    b = functions_of_time(*names)
    omega = body_angular_velocity()
    return trig_reduce(rot.T * (rot * b).diff(TIME)), b.diff(TIME) + omega.cross(b)
