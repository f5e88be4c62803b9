"""Step 11: small motions, and motions about a steady forward run (the Linearised page).

Velocities, accelerations and angles are scaled by a small ``epsilon`` and the
equations split by its powers: the linear equations of motion, the linear
kinematics, and the Jacobian ``C_lin`` of the Coriolis forces at speed ``U``.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.body import RigidBodySymbols, rigid_body_symbols
from rbtutor.symbolic.coriolis import coriolis_matrix, matrix_form
from rbtutor.symbolic.mass_matrix import mass_matrix
from rbtutor.symbolic.rotation import euler_angle_symbols, kinematic_transform


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
