"""Kinematics: the skew-symmetric matrix, the z-y-x rotation and the Euler rates.

Conventions (stated once for the whole package)
-----------------------------------------------
* GCS is the inertial frame; the BCS is fixed to the hull with origin O at
  midship, on the centreline, at the waterline: x forward, y to port, z up.
* The state is ``x = [u, v, w, p, q, r, x, y, z, phi, theta, psi]`` in SI units;
  ``nu = x[:6]`` (body-frame velocities) and ``eta = x[6:]`` (pose in the GCS).
* Angles are radians in every function. Euler angles are z-y-x:
  ``R = Rz(psi) @ Ry(theta) @ Rx(phi)`` maps body components to GCS components.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import as_array, as_scalar

#: standard gravity, m/s^2, the value the course's problems use
STANDARD_GRAVITY = 9.81

#: ``euler_rate_matrix`` refuses attitudes with ``|cos(theta)|`` below this.
GIMBAL_LOCK_TOLERANCE = 1e-3


class GimbalLockError(ValueError):
    """The Euler-rate matrix is singular: pitch is at (or very near) +/-90 degrees."""


def skew(a) -> np.ndarray:
    """Skew-symmetric matrix S(a) with ``S(a) @ b == np.cross(a, b)`` (eq-cross-product-matrix).

    Parameters
    ----------
    a : array_like, shape (3,)

    Returns
    -------
    ndarray, shape (3, 3)

    Examples
    --------
    >>> skew([1.0, 2.0, 3.0]) @ [0.0, 0.0, 1.0]
    array([ 2., -1.,  0.])
    """
    a1, a2, a3 = as_array("a", a, (3,))
    return np.array([[0.0, -a3, a2], [a3, 0.0, -a1], [-a2, a1, 0.0]])


def cross3(a, b) -> np.ndarray:
    """``a x b`` for 3-vectors, written out: much quicker than ``np.cross`` on short arrays."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def rotation_matrix(phi, theta, psi) -> np.ndarray:
    """Rotation matrix R from body to GCS for z-y-x Euler angles (eq-rotation-matrix).

    Parameters
    ----------
    phi, theta, psi : float
        Roll, pitch and yaw in radians.

    Returns
    -------
    ndarray, shape (3, 3)
        ``R = Rz(psi) Ry(theta) Rx(phi)``; a body vector ``b`` is ``R @ b`` in the GCS.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(rotation_matrix(0.0, 0.0, np.pi / 2) @ [1.0, 0.0, 0.0], 12)
    array([0., 1., 0.])
    """
    return rotation_matrix_unchecked(as_scalar("phi", phi), as_scalar("theta", theta), as_scalar("psi", psi))


def rotation_matrix_unchecked(phi: float, theta: float, psi: float) -> np.ndarray:
    cos_roll, sin_roll = math.cos(phi), math.sin(phi)
    cos_pitch, sin_pitch = math.cos(theta), math.sin(theta)
    cos_yaw, sin_yaw = math.cos(psi), math.sin(psi)
    return np.array([
        [cos_pitch * cos_yaw, sin_roll * sin_pitch * cos_yaw - cos_roll * sin_yaw,
         cos_roll * sin_pitch * cos_yaw + sin_roll * sin_yaw],
        [cos_pitch * sin_yaw, sin_roll * sin_pitch * sin_yaw + cos_roll * cos_yaw,
         cos_roll * sin_pitch * sin_yaw - sin_roll * cos_yaw],
        [-sin_pitch, sin_roll * cos_pitch, cos_roll * cos_pitch],
    ])


def euler_rate_matrix(phi, theta) -> np.ndarray:
    """Matrix J2 with ``d/dt [phi, theta, psi] = J2 @ [p, q, r]`` (eq-euler-rates).

    Parameters
    ----------
    phi, theta : float
        Roll and pitch in radians.

    Returns
    -------
    ndarray, shape (3, 3)

    Raises
    ------
    GimbalLockError
        When ``|cos(theta)| < GIMBAL_LOCK_TOLERANCE``: at pitch +/-90 degrees the
        Euler angles cannot follow the body. Use Euler parameters instead
        (:mod:`rbtutor.euler_parameters`, or ``simulate(..., attitude="euler_parameters")``).

    Examples
    --------
    >>> euler_rate_matrix(0.0, 0.0)
    array([[ 1.,  0.,  0.],
           [ 0.,  1., -0.],
           [ 0.,  0.,  1.]])
    """
    return euler_rate_matrix_unchecked(as_scalar("phi", phi), as_scalar("theta", theta))


def euler_rate_matrix_unchecked(phi: float, theta: float) -> np.ndarray:
    c1, s1 = math.cos(phi), math.sin(phi)
    c2 = math.cos(theta)
    if abs(c2) < GIMBAL_LOCK_TOLERANCE:
        raise GimbalLockError(
            f"Euler angles are singular at theta = {math.degrees(theta):.4f} deg "
            "(pitch at +/-90 deg): the Euler-rate matrix has no finite value there; "
            "integrate Euler parameters instead (attitude='euler_parameters')"
        )
    t2 = math.tan(theta)
    return np.array([
        [1.0, s1 * t2, c1 * t2],
        [0.0, c1, -s1],
        [0.0, s1 / c2, c1 / c2],
    ])


def angular_velocity_from_euler_rates(phi, theta, rates) -> np.ndarray:
    """Body angular velocity ``[p, q, r]`` from Euler-angle rates (eq-ang-vel-bcs-repeat).

    Valid at every attitude (this direction has no singularity).

    Examples
    --------
    >>> angular_velocity_from_euler_rates(0.0, 0.0, [0.0, 0.0, 0.5])
    array([0. , 0. , 0.5])
    """
    phid, thetad, psid = as_array("rates", rates, (3,))
    phi, theta = as_scalar("phi", phi), as_scalar("theta", theta)
    c1, s1 = math.cos(phi), math.sin(phi)
    c2, s2 = math.cos(theta), math.sin(theta)
    return np.array([phid - s2 * psid, c1 * thetad + s1 * c2 * psid, -s1 * thetad + c1 * c2 * psid])


def euler_angles_from_matrix(rot) -> np.ndarray:
    """z-y-x Euler angles ``[phi, theta, psi]`` of a rotation matrix, theta in [-pi/2, pi/2].

    Examples
    --------
    >>> import numpy as np
    >>> np.round(euler_angles_from_matrix(rotation_matrix(0.1, -0.2, 3.0)), 12)
    array([ 0.1, -0.2,  3. ])
    """
    m = as_array("rot", rot, (3, 3))
    return angles_from_entries(m[0, 0], m[1, 0], m[2, 0], m[2, 1], m[2, 2])


def angles_from_entries(r00, r10, r20, r21, r22):
    """``[phi, theta, psi]`` from the five entries of R that fix them (scalars or arrays)."""
    theta = np.arctan2(-r20, np.hypot(r00, r10))
    return np.stack([np.arctan2(r21, r22), theta, np.arctan2(r10, r00)], axis=-1)


def point_acceleration(r_p, nu, nu_dot) -> np.ndarray:
    """Acceleration of a body point P in BCS components (Problem 2, eq-newtons-eom-1 generalised).

    ``a_P = v_dot + w x v + w_dot x r_P + w x (w x r_P)``.

    Parameters
    ----------
    r_p : array_like, shape (3,), m
        Position of P from O in the BCS.
    nu, nu_dot : array_like, shape (6,)
        ``[u, v, w, p, q, r]`` and its time derivative.

    Returns
    -------
    ndarray, shape (3,), m/s^2

    Examples
    --------
    >>> point_acceleration([1.0, 0.0, 0.0], [0, 0, 0, 0, 0, 1.0], [0.0] * 6)
    array([-1.,  0.,  0.])
    """
    r_p = as_array("r_p", r_p, (3,))
    nu = as_array("nu", nu, (6,))
    nu_dot = as_array("nu_dot", nu_dot, (6,))
    v, w = nu[:3], nu[3:]
    return nu_dot[:3] + np.cross(w, v) + np.cross(nu_dot[3:], r_p) + np.cross(w, np.cross(w, r_p))


def specific_force(r_p, nu, nu_dot, attitude, g: float = STANDARD_GRAVITY) -> np.ndarray:
    """What an accelerometer at the body point P reads: the specific force, BCS components (eq-specific-force).

    An accelerometer cannot tell gravity from acceleration: it senses ``f_P = a_P - g_b``, the
    acceleration of its point (:func:`point_acceleration`) less gravity, with gravity
    ``[0, 0, -g]`` in the GCS (z up) turned into body components, ``g_b = R^T [0, 0, -g]``. A
    sensor at rest on a level hull reads ``[0, 0, +g]``.

    Parameters
    ----------
    r_p : array_like, shape (3,), m
        Position of P from O in the BCS.
    nu, nu_dot : array_like, shape (6,)
        ``[u, v, w, p, q, r]`` and its time derivative.
    attitude : array_like, shape (3,), rad
        Euler angles ``[phi, theta, psi]`` of the hull.
    g : float, m/s^2

    Returns
    -------
    ndarray, shape (3,), m/s^2

    Examples
    --------
    >>> specific_force([0.0, 0.0, 0.0], [0.0] * 6, [0.0] * 6, [0.0, 0.0, 0.0])
    array([0.  , 0.  , 9.81])
    """
    phi, theta, psi = as_array("attitude", attitude, (3,))
    gravity_body = rotation_matrix(phi, theta, psi).T @ np.array([0.0, 0.0, -as_scalar("g", g)])
    return point_acceleration(r_p, nu, nu_dot) - gravity_body
