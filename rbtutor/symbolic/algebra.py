"""Step 0 of the derivations: the algebra every later step leans on.

Holds the time symbol, the exact trigonometric comparison (:func:`trig_reduce`,
:func:`is_identity`, :func:`term_difference`), the display rewrite with dotted
symbols (:func:`dot_notation`), the skew matrix and its inverse, and the
builders of symbol columns and of functions of time. Nothing here knows about
ships or frames.
"""

from __future__ import annotations

import sympy as sp
from sympy.core.function import AppliedUndef

#: The time variable of every time-dependent derivation.
TIME = sp.Symbol("t")


_AXES = ("x", "y", "z")


def trig_reduce(expr):
    """Canonical form of a polynomial in sines and cosines, modulo ``sin^2 + cos^2 = 1``.

    Every ``sin(a)`` and ``cos(a)`` is replaced by a fresh symbol, the result is
    reduced by the polynomials ``cos(a)^2 + sin(a)^2 - 1`` (one per distinct
    argument ``a``), and the functions are put back. The normal form has no
    ``cos(a)^2`` left, so two expressions are equal if their reduced difference
    is zero. Distinct arguments are treated as independent angles: a zero
    result is always a proof, a non-zero result is conclusive only when no
    argument depends on another (``theta`` and ``2 theta`` would).

    Parameters
    ----------
    expr : sympy expression or Matrix
        Other factors (symbols, derivatives, undefined functions) may appear
        polynomially or in denominators free of sines and cosines.

    Returns
    -------
    sympy expression or Matrix, expanded

    Examples
    --------
    >>> import sympy as sp
    >>> x, y = sp.symbols("x y")
    >>> trig_reduce(sp.sin(x)**2 * y + sp.cos(x)**2 * y)
    y
    """
    expr = sp.sympify(expr)
    if isinstance(expr, sp.MatrixBase):
        return expr.applyfunc(trig_reduce)
    expr = sp.expand(expr)
    angles = sorted({f.args[0] for f in expr.atoms(sp.sin, sp.cos)}, key=sp.default_sort_key)
    if not angles:
        return expr
    sines = [sp.Dummy(f"s{k}") for k in range(len(angles))]
    cosines = [sp.Dummy(f"c{k}") for k in range(len(angles))]
    to_symbols = {}
    for angle, s, c in zip(angles, sines, cosines, strict=True):
        to_symbols[sp.sin(angle)] = s
        to_symbols[sp.cos(angle)] = c
    numerator, denominator = sp.fraction(sp.together(expr.xreplace(to_symbols)))
    identities = [c**2 + s**2 - 1 for s, c in zip(sines, cosines, strict=True)]
    _, remainder = sp.reduced(sp.expand(numerator), identities, *cosines, *sines)
    back = {symbol: function for function, symbol in to_symbols.items()}
    return sp.expand(remainder.xreplace(back) / denominator.xreplace(back))


def is_identity(lhs, rhs) -> bool:
    """True when ``lhs - rhs`` reduces to zero with :func:`trig_reduce` (scalars or matrices).

    Examples
    --------
    >>> import sympy as sp
    >>> a = sp.Symbol("a")
    >>> is_identity(sp.sin(a)**2, 1 - sp.cos(a)**2)
    True
    """
    difference = trig_reduce(sp.sympify(lhs) - sp.sympify(rhs))
    if isinstance(difference, sp.MatrixBase):
        return difference.is_zero_matrix is True
    return difference == 0


def term_difference(derived, printed) -> tuple[set, set]:
    """Compare two expressions term by term after expansion.

    Parameters
    ----------
    derived, printed : sympy expression

    Returns
    -------
    (set, set)
        The terms of ``expand(derived)`` that ``expand(printed)`` lacks, and the
        terms of ``expand(printed)`` that ``expand(derived)`` lacks. Both are
        empty when the expressions agree term for term.

    Examples
    --------
    >>> import sympy as sp
    >>> a, b = sp.symbols("a b")
    >>> term_difference(a * (a + b), a**2 + a * b)
    (set(), set())
    """
    left = set(sp.Add.make_args(sp.expand(derived)))
    right = set(sp.Add.make_args(sp.expand(printed)))
    return left - right, right - left


def dot_notation(expr):
    """Rewrite functions of :data:`TIME` with plain and dotted symbols, for display.

    ``phi(t)`` becomes ``phi``, its first derivative ``\\dot{\\phi}`` and its
    second ``\\ddot{\\phi}``.

    Examples
    --------
    >>> import sympy as sp
    >>> phi = sp.Function("phi")(TIME)
    >>> sp.latex(dot_notation(phi.diff(TIME) * sp.cos(phi)))
    '\\\\dot{\\\\phi} \\\\cos{\\\\left(\\\\phi \\\\right)}'
    """
    expr = sp.sympify(expr)
    replacements = {}
    for derivative in expr.atoms(sp.Derivative):
        base = sp.latex(sp.Symbol(derivative.expr.func.__name__))
        order = derivative.derivative_count
        accent = {1: "dot", 2: "ddot", 3: "dddot"}.get(order)
        if accent is None:
            raise ValueError(f"expected derivatives up to third order, got order {order}")
        replacements[derivative] = sp.Symbol(rf"\{accent}{{{base}}}")
    for function in expr.atoms(AppliedUndef):
        replacements[function] = sp.Symbol(function.func.__name__)
    # xreplace matches whole nodes from the top down, so a derivative is
    # replaced before the function inside it is reached.
    return expr.xreplace(replacements)


def skew(a) -> sp.Matrix:
    """Skew-symmetric matrix S(a) with ``S(a) b = a x b`` (eq-cross-product-matrix).

    Parameters
    ----------
    a : sequence of three sympy expressions

    Returns
    -------
    sympy.Matrix, shape (3, 3)

    Examples
    --------
    >>> import sympy as sp
    >>> skew(sp.symbols("a1:4"))
    Matrix([
    [  0, -a3,  a2],
    [ a3,   0, -a1],
    [-a2,  a1,   0]])
    """
    a1, a2, a3 = sp.Matrix(a)
    return sp.Matrix([[0, -a3, a2], [a3, 0, -a1], [-a2, a1, 0]])


def unskew(matrix) -> sp.Matrix:
    """The vector a of a skew-symmetric matrix S(a) (the inverse of :func:`skew`).

    Examples
    --------
    >>> import sympy as sp
    >>> unskew(skew(sp.symbols("a1:4"))).T
    Matrix([[a1, a2, a3]])
    """
    s = sp.Matrix(matrix)
    return sp.Matrix([s[2, 1], s[0, 2], s[1, 0]])


def vector(name: str, components=_AXES) -> sp.Matrix:
    """Column of symbols ``name_x, name_y, name_z`` (or other suffixes).

    Examples
    --------
    >>> vector("r").T
    Matrix([[r_x, r_y, r_z]])
    """
    return sp.Matrix([sp.Symbol(f"{name}_{c}") for c in components])


def functions_of_time(*names: str) -> sp.Matrix:
    """Column of undefined functions of :data:`TIME`, such as ``u(t), v(t), w(t)``.

    Examples
    --------
    >>> functions_of_time("u", "v").T
    Matrix([[u(t), v(t)]])
    """
    return sp.Matrix([sp.Function(n)(TIME) for n in names])
