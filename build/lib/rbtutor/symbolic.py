"""The chapter's derivations in SymPy: every step the book checks, as a function.

Each public function builds one relation of the rigid-body chapter and returns
SymPy objects (usually the two sides of the relation, or the stages of a chain
of equalities), so that a book page or a test can display them and confirm
that their difference vanishes. Nothing here prints or asserts. The docstrings
name the chapter's equation labels (``eq-...``), which the book uses as well.

Conventions are those of :mod:`rbtutor.kinematics`: BCS x forward, y to port,
z up; ``R = Rz(psi) Ry(theta) Rx(phi)`` maps body components to GCS
components; the inertia tensor carries ``-I_xy`` etc. off its diagonal.

Two kinds of symbols are used:

* derivations in time (``rdot_rt``, ``body_frame_derivative``, ...) use the
  Euler angles and the velocities as undefined functions of :data:`TIME`, so
  that ``sympy.diff`` can differentiate them; :func:`dot_notation` rewrites the
  results with dotted symbols for display;
* the equations of motion use plain symbols, collected in
  :class:`RigidBodySymbols` (:func:`rigid_body_symbols`).

Expressions that are polynomials in sines and cosines are compared with
:func:`trig_reduce`, which brings them to a canonical form modulo
``sin^2 + cos^2 = 1``; it is much faster than ``sympy.simplify`` and exact.

SymPy is imported by this module only; ``import rbtutor`` does not load it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp
from sympy.core.function import AppliedUndef

#: The time variable of every time-dependent derivation.
TIME = sp.Symbol("t")

_AXES = ("x", "y", "z")


# ---------------------------------------------------------------------------
# Small tools
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Rotation and angular velocity (section 5.2)
# ---------------------------------------------------------------------------


def euler_angles_of_time() -> tuple:
    """Roll, pitch and yaw as undefined functions of time: ``(phi(t), theta(t), psi(t))``."""
    return tuple(functions_of_time("phi", "theta", "psi"))


def euler_angle_symbols() -> tuple:
    """Roll, pitch and yaw as plain symbols ``(phi, theta, psi)`` (for lambdify)."""
    return sp.symbols("phi theta psi")


def elementary_rotations(phi, theta, psi) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """The three single-axis rotations ``(Rx(phi), Ry(theta), Rz(psi))``."""
    c, s = sp.cos, sp.sin
    rx = sp.Matrix([[1, 0, 0], [0, c(phi), -s(phi)], [0, s(phi), c(phi)]])
    ry = sp.Matrix([[c(theta), 0, s(theta)], [0, 1, 0], [-s(theta), 0, c(theta)]])
    rz = sp.Matrix([[c(psi), -s(psi), 0], [s(psi), c(psi), 0], [0, 0, 1]])
    return rx, ry, rz


def rotation_matrix(phi, theta, psi) -> sp.Matrix:
    """Body-to-GCS rotation ``R = Rz(psi) Ry(theta) Rx(phi)`` (eq-rotation-matrix).

    The symbolic twin of :func:`rbtutor.rotation_matrix`.

    Parameters
    ----------
    phi, theta, psi : sympy expressions
        Plain symbols (:func:`euler_angle_symbols`) or functions of time
        (:func:`euler_angles_of_time`).

    Returns
    -------
    sympy.Matrix, shape (3, 3)

    Examples
    --------
    >>> import sympy as sp
    >>> rotation_matrix(0, 0, sp.pi / 2) * sp.Matrix([1, 0, 0])
    Matrix([
    [0],
    [1],
    [0]])
    """
    rx, ry, rz = elementary_rotations(phi, theta, psi)
    return sp.expand(rz * ry * rx)


def printed_rotation_matrix(phi, theta, psi) -> sp.Matrix:
    """The rotation matrix as the chapter writes it out with ``s_i``, ``c_i`` (section 5.2)."""
    sin, cos = sp.sin, sp.cos
    first_row = [
        cos(theta) * cos(psi),
        sin(phi) * sin(theta) * cos(psi) - cos(phi) * sin(psi),
        cos(phi) * sin(theta) * cos(psi) + sin(phi) * sin(psi),
    ]
    second_row = [
        cos(theta) * sin(psi),
        sin(phi) * sin(theta) * sin(psi) + cos(phi) * cos(psi),
        cos(phi) * sin(theta) * sin(psi) - sin(phi) * cos(psi),
    ]
    third_row = [-sin(theta), sin(phi) * cos(theta), cos(phi) * cos(theta)]
    return sp.Matrix([first_row, second_row, third_row])


def body_angular_velocity() -> sp.Matrix:
    """Body angular velocity from the Euler rates (eq-ang-vel-bcs-repeat).

    Built from the three elementary rotations: the yaw rate acts about the
    GCS z axis, the pitch rate about the once-turned y axis and the roll rate
    about the body x axis, each brought into body components.

    Returns
    -------
    sympy.Matrix, shape (3, 1)
        ``[p, q, r]`` in terms of ``phi(t), theta(t), psi(t)`` and their derivatives.
    """
    phi, theta, psi = euler_angles_of_time()
    rx, ry, _ = elementary_rotations(phi, theta, psi)
    roll = sp.Matrix([phi.diff(TIME), 0, 0])
    pitch = rx.T * sp.Matrix([0, theta.diff(TIME), 0])
    yaw = (ry * rx).T * sp.Matrix([0, 0, psi.diff(TIME)])
    return trig_reduce(roll + pitch + yaw)


def printed_body_angular_velocity() -> sp.Matrix:
    """Transcription of eq-ang-vel-bcs-repeat as printed in the chapter."""
    phi, theta, psi = euler_angles_of_time()
    phid, thetad, psid = (a.diff(TIME) for a in (phi, theta, psi))
    s1, c1, s2, c2 = sp.sin(phi), sp.cos(phi), sp.sin(theta), sp.cos(theta)
    return sp.Matrix([phid - s2 * psid, c1 * thetad + s1 * c2 * psid, -s1 * thetad + c1 * c2 * psid])


def angular_velocity_from_rotation() -> sp.Matrix:
    """Body angular velocity read off ``S(omega) = R^T Rdot`` (the time functions of R).

    Returns
    -------
    sympy.Matrix, shape (3, 1)
    """
    rot = rotation_matrix(*euler_angles_of_time())
    return unskew(trig_reduce(rot.T * rot.diff(TIME)))


def global_angular_velocity() -> sp.Matrix:
    """Angular velocity in GCS components ``omega0 = R omega``, reduced (eq-ang-vel-gcs).

    Returns
    -------
    sympy.Matrix, shape (3, 1)
    """
    rot = rotation_matrix(*euler_angles_of_time())
    return trig_reduce(rot * body_angular_velocity())


def printed_global_angular_velocity() -> sp.Matrix:
    """Transcription of the right-hand side of eq-ang-vel-gcs as printed in the chapter."""
    phi, theta, psi = euler_angles_of_time()
    phid, thetad, psid = (a.diff(TIME) for a in (phi, theta, psi))
    s2, c2, s3, c3 = sp.sin(theta), sp.cos(theta), sp.sin(psi), sp.cos(psi)
    return sp.Matrix([-s3 * thetad + c2 * c3 * phid, s3 * c2 * phid + c3 * thetad, -s2 * phid + psid])


def rdot_rt() -> tuple[sp.Matrix, sp.Matrix]:
    """``Rdot R^T`` reduced, and the skew matrix of ``omega0`` (eq-RdotRT-compact-1).

    Returns
    -------
    (sympy.Matrix, sympy.Matrix), shapes (3, 3)
        ``trig_reduce(Rdot R^T)`` and ``S(omega0)`` with ``omega0`` from
        :func:`global_angular_velocity`. The chapter states that they are equal.
    """
    rot = rotation_matrix(*euler_angles_of_time())
    return trig_reduce(rot.diff(TIME) * rot.T), skew(global_angular_velocity())


def printed_rdot_rt() -> sp.Matrix:
    """Transcription of the matrix printed in eq-RdotRT-compact-1."""
    phi, theta, psi = euler_angles_of_time()
    phid, thetad, psid = (a.diff(TIME) for a in (phi, theta, psi))
    s2, c2, s3, c3 = sp.sin(theta), sp.cos(theta), sp.sin(psi), sp.cos(psi)
    return sp.Matrix([
        [0, s2 * phid - psid, s3 * c2 * phid + c3 * thetad],
        [-s2 * phid + psid, 0, s3 * thetad - c3 * c2 * phid],
        [-s3 * c2 * phid - c3 * thetad, -s3 * thetad + c3 * c2 * phid, 0],
    ])


def euler_rate_jacobian(phi, theta) -> sp.Matrix:
    """Matrix E with ``omega = E [phi_dot, theta_dot, psi_dot]`` (eq-ang-vel-bcs-repeat).

    The symbolic twin of :func:`rbtutor.angular_velocity_from_euler_rates`.

    Returns
    -------
    sympy.Matrix, shape (3, 3)
    """
    s1, c1, s2, c2 = sp.sin(phi), sp.cos(phi), sp.sin(theta), sp.cos(theta)
    return sp.Matrix([[1, 0, -s2], [0, c1, s1 * c2], [0, -s1, c1 * c2]])


def euler_rate_matrix(phi, theta) -> sp.Matrix:
    """``J2 = E^-1`` with ``[phi_dot, theta_dot, psi_dot] = J2 omega`` (eq-euler-rates).

    The symbolic twin of :func:`rbtutor.euler_rate_matrix`; it is singular
    where ``cos(theta) = 0``.

    Returns
    -------
    sympy.Matrix, shape (3, 3)
    """
    return sp.simplify(euler_rate_jacobian(phi, theta).inv())


def kinematic_transform(phi, theta, psi) -> sp.Matrix:
    """Block matrix ``J(eta2) = diag(R, J2)`` with ``eta_dot = J nu`` (eq-kinematics-dynamics).

    Returns
    -------
    sympy.Matrix, shape (6, 6)
    """
    return sp.diag(rotation_matrix(phi, theta, psi), euler_rate_matrix(phi, theta))


# ---------------------------------------------------------------------------
# Cross products and vectors in a rotating frame (section 5.2)
# ---------------------------------------------------------------------------


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


def cog_vector() -> sp.Matrix:
    """``r_G = [x_G, y_G, z_G]``: G from O in BCS components (eq-cog-vec-bcs)."""
    return sp.Matrix(sp.symbols("x_G y_G z_G"))


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


# ---------------------------------------------------------------------------
# Inertia (section 5.3)
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# The rigid body's symbols and equations (sections 5.3 to 5.5)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RigidBodySymbols:
    """The symbols of the equations of motion about O.

    Attributes
    ----------
    mass : Symbol ``m``
    r_g : Matrix (3, 1), ``[x_G, y_G, z_G]``
    inertia_o : Matrix (3, 3) of the symbols ``I_x^O`` ... (independent symbols)
    inertia_g : Matrix (3, 3) of the symbols ``I_x^G`` ...
    nu : Matrix (6, 1), ``[u, v, w, p, q, r]``
    nu_dot : Matrix (6, 1), the dotted symbols
    tau : Matrix (6, 1), ``[X, Y, Z, K, M, N]``
    """

    mass: sp.Symbol
    r_g: sp.Matrix
    inertia_o: sp.Matrix
    inertia_g: sp.Matrix
    nu: sp.Matrix
    nu_dot: sp.Matrix
    tau: sp.Matrix

    @property
    def linear_velocity(self) -> sp.Matrix:
        """``v = nu1 = [u, v, w]`` (eq-vel-bcs)."""
        return self.nu[:3, :]

    @property
    def angular_velocity(self) -> sp.Matrix:
        """``omega = nu2 = [p, q, r]`` (eq-ang-vel-bcs)."""
        return self.nu[3:, :]

    @property
    def linear_acceleration(self) -> sp.Matrix:
        """``v_dot = [u_dot, v_dot, w_dot]``."""
        return self.nu_dot[:3, :]

    @property
    def angular_acceleration(self) -> sp.Matrix:
        """``alpha = omega_dot = [p_dot, q_dot, r_dot]``."""
        return self.nu_dot[3:, :]

    @property
    def force(self) -> sp.Matrix:
        """``F = [X, Y, Z]``."""
        return self.tau[:3, :]

    @property
    def moment(self) -> sp.Matrix:
        """``M = [K, M, N]`` about O."""
        return self.tau[3:, :]


def rigid_body_symbols() -> RigidBodySymbols:
    """The symbols of :class:`RigidBodySymbols`, named as in the chapter.

    Examples
    --------
    >>> body = rigid_body_symbols()
    >>> body.nu.T
    Matrix([[u, v, w, p, q, r]])
    """
    names = ("u", "v", "w", "p", "q", "r")
    return RigidBodySymbols(
        mass=sp.Symbol("m"),
        r_g=cog_vector(),
        inertia_o=symbolic_inertia("O"),
        inertia_g=symbolic_inertia("G"),
        nu=sp.Matrix(sp.symbols(names)),
        nu_dot=sp.Matrix([sp.Symbol(rf"\dot{{{n}}}") for n in names]),
        tau=sp.Matrix(sp.symbols("X Y Z K M N")),
    )


def point_acceleration(r_p, body: RigidBodySymbols | None = None) -> sp.Matrix:
    """Acceleration of the body point ``r_p``: ``v_dot + w x v + w_dot x r_p + w x (w x r_p)``.

    eq-newtons-eom-2 divided by m, with ``r_G`` replaced by any body point;
    the symbolic twin of :func:`rbtutor.point_acceleration`.

    Returns
    -------
    sympy.Matrix, shape (3, 1)
    """
    b = body or rigid_body_symbols()
    r = sp.Matrix(r_p)
    v, w = b.linear_velocity, b.angular_velocity
    return b.linear_acceleration + w.cross(v) + b.angular_acceleration.cross(r) + w.cross(w.cross(r))


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


def translational_equations(body: RigidBodySymbols | None = None) -> sp.Matrix:
    """Left-hand side of eq-newtons-eom-final: ``m [v_dot + w x v + w_dot x r_G + w x (w x r_G)]``."""
    b = body or rigid_body_symbols()
    return b.mass * point_acceleration(b.r_g, b)


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


def linearised_equations(body: RigidBodySymbols | None = None) -> dict[str, sp.Matrix]:
    """Small-motion form of the equations of motion (eq-eom-matrix-form-linear).

    Every velocity and acceleration is scaled by a small ``epsilon``; the
    left-hand side ``M_RB nu_dot + C_RB(nu) nu`` is then a polynomial in
    ``epsilon`` and is split by powers.

    Returns
    -------
    dict
        ``"epsilon"``: the symbol; ``"scaled"``: the scaled left-hand side;
        ``"first_order"``: its coefficient of ``epsilon``; ``"second_order"``:
        its coefficient of ``epsilon**2`` (the neglected part);
        ``"linear"``: ``M_RB nu_dot``, which the first-order part equals.
    """
    b = body or rigid_body_symbols()
    eps = sp.Symbol("epsilon", positive=True)
    scale = {s: eps * s for s in list(b.nu) + list(b.nu_dot)}
    scaled = sp.expand(matrix_form(b).xreplace(scale))
    return {
        "epsilon": eps,
        "scaled": scaled,
        "first_order": scaled.applyfunc(lambda e: e.coeff(eps, 1)),
        "second_order": scaled.applyfunc(lambda e: e.coeff(eps, 2)),
        "linear": mass_matrix(b) * b.nu_dot,
    }


def linearised_kinematics() -> dict[str, sp.Matrix]:
    """Small-motion form of ``eta_dot = J(eta2) nu`` (eq-kinematics-dynamics-linear).

    Angles and velocities are scaled by ``epsilon`` and ``J(eta2) nu`` is
    expanded in ``epsilon`` up to second order.

    Returns
    -------
    dict
        ``"epsilon"``; ``"first_order"``: coefficient of ``epsilon`` (equal to
        ``nu``); ``"second_order"``: coefficient of ``epsilon**2``; ``"nu"``.
    """
    eps = sp.Symbol("epsilon", positive=True)
    phi, theta, psi = euler_angle_symbols()
    nu = sp.Matrix(sp.symbols("u v w p q r"))
    small = {phi: eps * phi, theta: eps * theta, psi: eps * psi}
    rates = kinematic_transform(phi, theta, psi).xreplace(small) * (eps * nu)
    series = rates.applyfunc(lambda e: sp.expand(sp.series(e, eps, 0, 3).removeO()))
    return {
        "epsilon": eps,
        "first_order": series.applyfunc(lambda e: e.coeff(eps, 1)),
        "second_order": series.applyfunc(lambda e: e.coeff(eps, 2)),
        "nu": nu,
    }


def linearised_coriolis_matrix(body: RigidBodySymbols | None = None, speed=None) -> sp.Matrix:
    """``C_lin``: the Jacobian of ``C_RB(nu) nu`` at steady forward speed (eq-eom-linear-forward-speed).

    The steady motion is ``nu0 = [U, 0, 0, 0, 0, 0]``. Because ``C_RB(nu) nu`` is
    quadratic in ``nu``, its first-order change under ``nu = nu0 + dnu`` is
    ``C_RB(nu0) dnu + C_RB(dnu) nu0 = C_lin dnu``, and the perturbation equations read
    ``M_RB d(dnu)/dt + C_lin dnu = dtau``.

    Parameters
    ----------
    body : RigidBodySymbols, optional
    speed : sympy expression, optional
        The forward speed; the symbol ``U`` when omitted.

    Returns
    -------
    sympy.Matrix, shape (6, 6)
        Non-zero entries ``m U`` (sway, r), ``-m U`` (heave, q),
        ``-m U y_G`` and ``-m U z_G`` (roll, q and r), ``m U x_G`` (pitch, q)
        and ``m U x_G`` (yaw, r); the inertia about O does not enter.

    Examples
    --------
    >>> body = rigid_body_symbols()
    >>> linearised_coriolis_matrix(body)[1, 5]
    U*m
    """
    b = body or rigid_body_symbols()
    u_speed = sp.Symbol("U") if speed is None else sp.sympify(speed)
    steady = {b.nu[0]: u_speed, **{s: 0 for s in b.nu[1:]}}
    forces = coriolis_matrix(b) * b.nu
    return sp.expand(forces.jacobian(b.nu).xreplace(steady))


def linearised_about_forward_speed(body: RigidBodySymbols | None = None) -> dict:
    """The steps of the linearisation about steady forward speed (eq-eom-linear-forward-speed).

    The velocity is written ``nu = nu0 + epsilon dnu`` with ``nu0 = [U, 0, 0, 0, 0, 0]``
    and the perturbation ``dnu = [du, dv, dw, dp, dq, dr]``; ``C_RB(nu) nu`` is then
    expanded in ``epsilon``.

    Returns
    -------
    dict
        ``"U"``, ``"epsilon"``: the symbols; ``"nu0"``, ``"dnu"``: Matrices (6, 1);
        ``"substituted"``: ``C_RB(nu) nu`` with ``nu = nu0 + epsilon dnu``, expanded;
        ``"zeroth_order"``: ``C_RB(nu0) nu0`` (the zero vector: a straight steady run
        needs no force on the rigid body); ``"first_order"``: the coefficient of
        ``epsilon``; ``"second_order"``: the coefficient of ``epsilon**2``, equal to
        ``C_RB(dnu) dnu``; ``"from_steady"``: ``C_RB(nu0) dnu``;
        ``"from_perturbation"``: ``C_RB(dnu) nu0``; ``"C_lin"``: the matrix of
        :func:`linearised_coriolis_matrix`, with ``C_lin dnu`` equal to the first order.
    """
    b = body or rigid_body_symbols()
    u_speed = sp.Symbol("U")
    eps = sp.Symbol("epsilon", positive=True)
    names = ("u", "v", "w", "p", "q", "r")
    dnu = sp.Matrix([sp.Symbol(rf"\delta {n}") for n in names])
    nu0 = sp.Matrix([u_speed, 0, 0, 0, 0, 0])

    def coriolis_at(velocity):
        return coriolis_matrix(b).xreplace(dict(zip(b.nu, velocity, strict=True)))

    total = nu0 + eps * dnu
    substituted = sp.expand(coriolis_at(total) * total)
    return {
        "U": u_speed,
        "epsilon": eps,
        "nu0": nu0,
        "dnu": dnu,
        "substituted": substituted,
        "zeroth_order": substituted.applyfunc(lambda e: e.coeff(eps, 0)),
        "first_order": substituted.applyfunc(lambda e: e.coeff(eps, 1)),
        "second_order": substituted.applyfunc(lambda e: e.coeff(eps, 2)),
        "from_steady": sp.expand(coriolis_at(nu0) * dnu),
        "from_perturbation": sp.expand(coriolis_at(dnu) * nu0),
        "C_lin": linearised_coriolis_matrix(b, u_speed),
    }
