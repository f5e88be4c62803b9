"""The rigid body about the BCS origin O: mass matrix, Coriolis matrix and dynamics.

Equation of motion (eq-eom-matrix-form)::

    M_RB @ nu_dot + C_RB(nu) @ nu = tau_RB

with ``nu = [u, v, w, p, q, r]`` and ``tau_RB = [X, Y, Z, K, M, N]`` (forces in N
at O, moments in N m about O, all in BCS components).
"""

from __future__ import annotations

import numpy as np

from ._checks import as_array, as_positive
from .inertia import check_inertia, parallel_axis
from .kinematics import cross3, point_acceleration, skew


def shift_velocity(nu, offset) -> np.ndarray:
    """Velocity vector of the body referred to the point ``offset`` instead of O.

    ``[v + w x d, w]``; the same formula moves ``nu_dot`` because ``d`` is fixed
    in the body.

    Examples
    --------
    >>> shift_velocity([0, 0, 0, 0, 0, 1.0], [1.0, 0, 0])
    array([0., 1., 0., 0., 0., 1.])
    """
    nu = as_array("nu", nu, (6,))
    d = as_array("offset", offset, (3,))
    return np.concatenate([nu[:3] + np.cross(nu[3:], d), nu[3:]])


def shift_load(tau, offset) -> np.ndarray:
    """Load vector referred to the point ``offset``: ``[F, M - d x F]`` (eq-ext-moment).

    Examples
    --------
    >>> shift_load([0, 1.0, 0, 0, 0, 0], [1.0, 0, 0])
    array([ 0.,  1.,  0.,  0.,  0., -1.])
    """
    tau = as_array("tau", tau, (6,))
    d = as_array("offset", offset, (3,))
    return np.concatenate([tau[:3], tau[3:] - np.cross(d, tau[:3])])


class RigidBody:
    """A rigid body described in a body-fixed frame with origin O.

    Parameters
    ----------
    mass : float, kg
        Must be positive.
    r_g : array_like, shape (3,), m
        Centre of gravity G relative to O, in BCS components.
    inertia_g : array_like, shape (3, 3), kg m^2
        Inertia tensor about G with axes parallel to the BCS (products with a
        minus sign off the diagonal). Must be symmetric, positive definite and
        satisfy the triangle inequality.

    Examples
    --------
    >>> body = RigidBody(2.0, [0.0, 0.0, -1.0], [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    >>> body.inertia_o.diagonal()
    array([3., 3., 1.])
    >>> body.accelerations([0.0] * 6, [2.0, 0, 0, 0, 0, 0]).round(12)
    array([3., 0., 0., 0., 2., 0.])
    """

    def __init__(self, mass, r_g, inertia_g):
        self.mass = as_positive("mass", mass)
        self.r_g = as_array("r_g", r_g, (3,))
        self.inertia_g = check_inertia("inertia_g", inertia_g)
        self.inertia_o = parallel_axis(self.inertia_g, self.mass, self.r_g)
        self._mass_matrix = self._assemble_mass_matrix()
        self._mass_inverse = np.linalg.inv(self._mass_matrix)

    def __repr__(self) -> str:
        return f"RigidBody(mass={self.mass!r}, r_g={self.r_g.tolist()!r}, inertia_g={self.inertia_g.tolist()!r})"

    def _assemble_mass_matrix(self) -> np.ndarray:
        m_s = self.mass * skew(self.r_g)
        return np.block([[self.mass * np.eye(3), -m_s], [m_s, self.inertia_o]]) + 0.0  # no -0.0

    def mass_matrix(self) -> np.ndarray:
        """Rigid-body mass matrix M_RB about O (eq-mass-matrix).

        Returns
        -------
        ndarray, shape (6, 6), kg and kg m (coupling) and kg m^2
        """
        return self._mass_matrix.copy()

    def coriolis_matrix(self, nu) -> np.ndarray:
        """Coriolis-centripetal matrix C_RB(nu), parameterised by M_RB (eq-coriolis-mass-param).

        Parameters
        ----------
        nu : array_like, shape (6,)

        Returns
        -------
        ndarray, shape (6, 6), skew-symmetric
        """
        nu = as_array("nu", nu, (6,))
        m = self._mass_matrix
        a = m[:3, :3] @ nu[:3] + m[:3, 3:] @ nu[3:]
        b = m[3:, :3] @ nu[:3] + m[3:, 3:] @ nu[3:]
        s_a = skew(a)
        return np.block([[np.zeros((3, 3)), -s_a], [-s_a, -skew(b)]])

    def coriolis_forces(self, nu) -> np.ndarray:
        """``C_RB(nu) @ nu`` without forming the matrix: ``[w x a, v x a + w x b]``.

        Here ``a = m (v + w x r_G)`` is the linear momentum and
        ``b = m r_G x v + I_O w`` the angular momentum about O.
        """
        return self._coriolis_forces(as_array("nu", nu, (6,)))

    def _coriolis_forces(self, nu: np.ndarray) -> np.ndarray:
        v, w = nu[:3], nu[3:]
        a = self.mass * (v + cross3(w, self.r_g))
        b = self.mass * cross3(self.r_g, v) + self.inertia_o @ w
        return np.concatenate([cross3(w, a), cross3(v, a) + cross3(w, b)])

    def kinetic_energy(self, nu) -> float:
        """Kinetic energy ``T = nu^T M_RB nu / 2`` in J (Problem 1c)."""
        nu = as_array("nu", nu, (6,))
        return 0.5 * float(nu @ self._mass_matrix @ nu)

    def accelerations(self, nu, tau) -> np.ndarray:
        """Forward dynamics: ``nu_dot = M_RB^-1 (tau - C_RB(nu) nu)`` (eq-kinematics-dynamics).

        Parameters
        ----------
        nu : array_like, shape (6,)
        tau : array_like, shape (6,), N and N m
            ``[X, Y, Z, K, M, N]`` about O in BCS components.

        Returns
        -------
        ndarray, shape (6,), m/s^2 and rad/s^2
        """
        tau = as_array("tau", tau, (6,))
        return self._mass_inverse @ (tau - self._coriolis_forces(as_array("nu", nu, (6,))))

    def forces(self, nu, nu_dot) -> np.ndarray:
        """Inverse dynamics: ``tau = M_RB nu_dot + C_RB(nu) nu`` (eq-eom-matrix-form)."""
        nu_dot = as_array("nu_dot", nu_dot, (6,))
        return self._mass_matrix @ nu_dot + self.coriolis_forces(nu)

    def point_acceleration(self, r_p, nu, nu_dot) -> np.ndarray:
        """Acceleration of the body point at ``r_p`` (BCS), see :func:`rbtutor.kinematics.point_acceleration`."""
        return point_acceleration(r_p, nu, nu_dot)

    def moved_to(self, origin) -> RigidBody:
        """The same body described with the BCS origin moved to ``origin`` (axes unchanged).

        Parameters
        ----------
        origin : array_like, shape (3,), m
            New origin in the current BCS. Use :meth:`at_g` for the centre of gravity.

        Examples
        --------
        >>> body = RigidBody(2.0, [1.0, 0.0, 0.0], [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
        >>> body.moved_to([1.0, 0.0, 0.0]).r_g
        array([0., 0., 0.])
        """
        return RigidBody(self.mass, self.r_g - as_array("origin", origin, (3,)), self.inertia_g)

    def at_g(self) -> RigidBody:
        """The same body with the BCS origin at its centre of gravity (Problems 1d, 7c)."""
        return self.moved_to(self.r_g)

    def with_point_masses(self, masses, positions) -> RigidBody:
        """The combined body after rigidly attaching point masses (Problem 9).

        Parameters
        ----------
        masses : array_like, shape (n,), kg
        positions : array_like, shape (n, 3), m
            Positions of the point masses from O in the BCS.

        Returns
        -------
        RigidBody
            Same origin O; new mass, centre of gravity and tensor about the new G,
            from the parallel-axis theorem applied to each part.
        """
        ms = np.atleast_1d(as_array("masses", masses))
        if ms.ndim != 1 or np.any(ms <= 0.0):
            raise ValueError(f"expected positive point masses of shape (n,), got {ms.tolist()}")
        rs = as_array("positions", positions, (ms.size, 3))
        total = self.mass + ms.sum()
        r_g = (self.mass * self.r_g + ms @ rs) / total
        inertia_g = parallel_axis(self.inertia_g, self.mass, self.r_g - r_g)
        for m_k, r_k in zip(ms, rs, strict=True):
            inertia_g = inertia_g + parallel_axis(np.zeros((3, 3)), m_k, r_k - r_g)
        return RigidBody(total, r_g, inertia_g)
