"""Step 2: orientation and angular velocity (section 5.2).

The z-y-x rotation matrix built from three single-axis turns, the body and
global angular velocities obtained from the Euler rates and from ``R^T Rdot``,
the matrix ``Rdot R^T``, the Euler-rate matrices and the 6x6 kinematic
transform. Each derived form has a ``printed_*`` twin that copies the chapter.
"""

from __future__ import annotations

import sympy as sp

from rbtutor.symbolic.algebra import TIME, functions_of_time, skew, trig_reduce, unskew


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
