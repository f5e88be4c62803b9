"""Euler parameters (unit quaternions): attitude without the pitch singularity.

Convention: scalar first, ``theta = [theta0, theta1, theta2, theta3]`` with
``theta @ theta == 1``; ``theta`` and ``-theta`` are the same rotation. The
rotation matrix maps body components to GCS components, like
:func:`rbtutor.rotation_matrix`. The angular velocity follows from the
parameter rates through the G matrices (eq-noderigidbodyep-gm)::

    omega_global = G_global(theta) @ theta_dot
    omega_body   = G_body(theta)   @ theta_dot

Four parameters describe three rotations, so they obey one constraint, on the
position level ``theta @ theta - 1 = 0`` and on the velocity level
``2 theta @ theta_dot = 0``.

The node's mini example: a body spun at pi/2 rad/s about z has turned pi/2
about z after one second.

>>> import numpy as np
>>> from rbtutor import RigidBody, simulate, box_inertia
>>> box = RigidBody(8.0, [0.0, 0.0, 0.0], box_inertia(8.0, [0.4, 0.2, 0.1]))
>>> result = simulate(box, np.zeros(6), 1.0, x0=[0, 0, 0, 0, 0, np.pi / 2] + [0.5, 0.2, 0.1, 0, 0, 0],
...                   attitude="euler_parameters")
>>> out = node_outputs(result.position[-1], result.euler_parameters[-1])
>>> round(float(out.rotation[2]), 9) == round(np.pi / 2, 9)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._checks import as_array
from .kinematics import angles_from_entries, euler_angles_from_matrix

#: how far ``|theta|`` may be from 1 where a unit quaternion is required
UNIT_TOLERANCE = 1e-6


def as_unit_quaternion(name: str, theta) -> np.ndarray:
    """Return ``theta`` as an array of shape (4,), refusing one that is not of unit norm."""
    q = as_array(name, theta, (4,))
    norm = math.sqrt(float(q @ q))
    if abs(norm - 1.0) > UNIT_TOLERANCE:
        raise ValueError(f"expected {name} to be a unit quaternion (norm 1), got norm {norm:.9g}")
    return q


def rotation_matrix_ep(theta) -> np.ndarray:
    """Rotation matrix (body to GCS) of a unit quaternion (eq-noderigidbodyep-rotation).

    Examples
    --------
    >>> import numpy as np
    >>> c = np.cos(np.pi / 4)
    >>> np.round(rotation_matrix_ep([c, 0.0, 0.0, c]) @ [1.0, 0.0, 0.0], 12) + 0.0
    array([0., 1., 0.])
    """
    return rotation_matrix_ep_unchecked(as_unit_quaternion("theta", theta))


def rotation_matrix_ep_unchecked(theta: np.ndarray) -> np.ndarray:
    t0, t1, t2, t3 = theta
    return np.array([
        [1 - 2 * (t2 * t2 + t3 * t3), 2 * (t1 * t2 - t0 * t3), 2 * (t1 * t3 + t0 * t2)],
        [2 * (t1 * t2 + t0 * t3), 1 - 2 * (t1 * t1 + t3 * t3), 2 * (t2 * t3 - t0 * t1)],
        [2 * (t1 * t3 - t0 * t2), 2 * (t2 * t3 + t0 * t1), 1 - 2 * (t1 * t1 + t2 * t2)],
    ])


def g_matrix_global(theta) -> np.ndarray:
    """G with ``omega_global = G @ theta_dot`` (eq-noderigidbodyep-gm), shape (3, 4)."""
    t0, t1, t2, t3 = as_array("theta", theta, (4,))
    return 2.0 * np.array([[-t1, t0, -t3, t2], [-t2, t3, t0, -t1], [-t3, -t2, t1, t0]])


def g_matrix_body(theta) -> np.ndarray:
    """G with ``omega_body = G @ theta_dot`` (eq-noderigidbodyep-gm), shape (3, 4)."""
    return g_matrix_body_unchecked(as_array("theta", theta, (4,)))


def g_matrix_body_unchecked(theta: np.ndarray) -> np.ndarray:
    t0, t1, t2, t3 = theta
    return 2.0 * np.array([[-t1, t0, t3, -t2], [-t2, -t3, t0, t1], [-t3, t2, -t1, t0]])


def rates_from_angular_velocity(theta, omega, frame: str = "body") -> np.ndarray:
    """Parameter rates ``theta_dot = G^T omega / 4`` of a unit quaternion.

    They satisfy the velocity-level constraint ``theta @ theta_dot = 0``.

    Parameters
    ----------
    theta : array_like, shape (4,)
    omega : array_like, shape (3,), rad/s
    frame : {"body", "global"}
        The frame whose components ``omega`` holds.

    Examples
    --------
    >>> rates_from_angular_velocity([1.0, 0, 0, 0], [0.0, 0.0, 2.0])
    array([0., 0., 0., 1.])
    """
    q = as_unit_quaternion("theta", theta)
    w = as_array("omega", omega, (3,))
    if frame == "body":
        g = g_matrix_body(q)
    elif frame == "global":
        g = g_matrix_global(q)
    else:
        raise ValueError(f"expected frame 'body' or 'global', got {frame!r}")
    return g.T @ w / 4.0


def constraint_residuals(theta, theta_dot=None) -> tuple[float, float]:
    """Position- and velocity-level constraint residuals ``(theta.theta - 1, 2 theta.theta_dot)``."""
    q = as_array("theta", theta, (4,))
    qd = np.zeros(4) if theta_dot is None else as_array("theta_dot", theta_dot, (4,))
    return float(q @ q - 1.0), float(2.0 * q @ qd)


def from_euler_angles(phi, theta, psi) -> np.ndarray:
    """Unit quaternion of the z-y-x Euler angles, scalar first, with ``theta0 >= 0``.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(from_euler_angles(0.0, 0.0, np.pi), 12)
    array([0., 0., 0., 1.])
    """
    h = as_array("euler angles", [phi, theta, psi], (3,)) / 2.0
    (c1, c2, c3), (s1, s2, s3) = np.cos(h), np.sin(h)
    q = np.array([
        c1 * c2 * c3 + s1 * s2 * s3,
        s1 * c2 * c3 - c1 * s2 * s3,
        c1 * s2 * c3 + s1 * c2 * s3,
        c1 * c2 * s3 - s1 * s2 * c3,
    ])
    return q if q[0] >= 0.0 else -q


def from_rotation_matrix(rot) -> np.ndarray:
    """Unit quaternion of a rotation matrix (Shepperd's method), with ``theta0 >= 0``."""
    m = as_array("rot", rot, (3, 3))
    trace = np.trace(m)
    candidates = [trace, m[0, 0], m[1, 1], m[2, 2]]
    k = int(np.argmax(candidates))
    if k == 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = [s / 4, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif k == 1:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif k == 2:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0.0 else -q


def euler_angles_of_quaternions(thetas) -> np.ndarray:
    """z-y-x Euler angles of many quaternions at once: shape (n, 4) to shape (n, 3).

    The quaternions are normalised first, so slightly drifted ones are accepted.
    """
    q = as_array("thetas", thetas)
    if q.ndim != 2 or q.shape[1] != 4:
        raise ValueError(f"expected thetas of shape (n, 4), got {q.shape}")
    t0, t1, t2, t3 = (q / np.linalg.norm(q, axis=1, keepdims=True)).T

    return angles_from_entries(1 - 2 * (t2 * t2 + t3 * t3), 2 * (t1 * t2 + t0 * t3), 2 * (t1 * t3 - t0 * t2),
                                2 * (t2 * t3 + t0 * t1), 1 - 2 * (t1 * t1 + t2 * t2))


def to_euler_angles(theta) -> np.ndarray:
    """z-y-x Euler angles ``[phi, theta, psi]`` of a unit quaternion."""

    return euler_angles_from_matrix(rotation_matrix_ep(theta))


def tait_bryan_xyz(rot) -> np.ndarray:
    """Angles ``[phi0, phi1, phi2]`` with ``R = Rx(phi0) Ry(phi1) Rz(phi2)``: the node's ``Rotation`` output."""
    m = as_array("rot", rot, (3, 3))
    phi1 = math.atan2(m[0, 2], math.hypot(m[1, 2], m[2, 2]))
    return np.array([math.atan2(-m[1, 2], m[2, 2]), phi1, math.atan2(-m[0, 1], m[0, 0])])


@dataclass(frozen=True)
class NodeOutputs:
    """What the Euler-parameter node reports, in SI units (reference 003's output variables).

    ``rotation_matrix`` is row-major with 9 entries; ``rotation`` holds the x-y-z
    Tait-Bryan angles; ``angular_velocity`` and ``angular_acceleration`` are in the
    GCS, ``angular_velocity_local`` in the body frame.
    """

    position: np.ndarray
    displacement: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    rotation_matrix: np.ndarray
    rotation: np.ndarray
    angular_velocity: np.ndarray
    angular_velocity_local: np.ndarray
    angular_acceleration: np.ndarray


def node_outputs(position, theta, velocity=None, theta_dot=None, acceleration=None,
                 theta_ddot=None, reference_position=None) -> NodeOutputs:
    """Evaluate the node's output variables from its coordinates and their derivatives.

    Parameters
    ----------
    position : array_like, shape (3,), m
        Global position of the node (reference point).
    theta : array_like, shape (4,)
        Unit quaternion.
    velocity, acceleration : array_like, shape (3,), optional
        Global velocity and acceleration (zero when omitted).
    theta_dot, theta_ddot : array_like, shape (4,), optional
        First and second time derivatives of the parameters (zero when omitted).
    reference_position : array_like, shape (3,), optional
        Reference position; the displacement is measured from it (origin when omitted).

    Notes
    -----
    The angular acceleration is ``G_global @ theta_ddot``: the other term,
    ``G_global(theta_dot) @ theta_dot``, vanishes identically.
    """
    zeros3, zeros4 = np.zeros(3), np.zeros(4)
    p = as_array("position", position, (3,))
    q = as_unit_quaternion("theta", theta)
    qd = zeros4 if theta_dot is None else as_array("theta_dot", theta_dot, (4,))
    qdd = zeros4 if theta_ddot is None else as_array("theta_ddot", theta_ddot, (4,))
    ref = zeros3 if reference_position is None else as_array("reference_position", reference_position, (3,))
    rot = rotation_matrix_ep(q)
    return NodeOutputs(
        position=p,
        displacement=p - ref,
        velocity=zeros3 if velocity is None else as_array("velocity", velocity, (3,)),
        acceleration=zeros3 if acceleration is None else as_array("acceleration", acceleration, (3,)),
        rotation_matrix=rot.reshape(9),
        rotation=tait_bryan_xyz(rot),
        angular_velocity=g_matrix_global(q) @ qd,
        angular_velocity_local=g_matrix_body(q) @ qd,
        angular_acceleration=g_matrix_global(q) @ qdd,
    )
