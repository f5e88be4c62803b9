"""The 12-state model integrated in time (eq-kinematics-dynamics), with either attitude.

``x_dot = [M_RB^-1 (tau - C_RB(nu) nu), R(eta2) nu1, J2(eta2) nu2]``

With ``attitude="euler_parameters"`` the three Euler angles are replaced by the
four Euler parameters, whose rates ``theta_dot = G_body^T omega / 4`` have no
singularity. The unit-norm constraint is kept in three ways: the rates satisfy
the velocity-level constraint ``theta . theta_dot = 0`` exactly (``G theta = 0``),
so only truncation error moves the norm; a stabilising term
``gain * (1 - theta.theta) * theta`` pulls the norm back to 1 (``constraint_gain``,
in 1/s, small by default because a large gain makes the equations stiff and
shortens the steps; zero lets the norm drift freely); and the rotation matrix
is always computed from the normalised parameters. The work of the load is integrated as
an extra state, so the energy identity ``T(t) - T(0) = int nu.tau dt`` can be
checked (Problem 10).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from ._checks import as_array, as_positive
from .euler_parameters import (
    euler_angles_of_quaternions,
    from_euler_angles,
    g_matrix_body_unchecked,
    rotation_matrix_ep_unchecked,
)
from .kinematics import GimbalLockError, euler_rate_matrix_unchecked, rotation_matrix_unchecked
from .rigid_body import RigidBody

ATTITUDES = ("euler_angles", "euler_parameters")


@dataclass(frozen=True)
class SimulationResult:
    """Time histories of a simulation, one row per output time.

    Attributes
    ----------
    t : ndarray, shape (n,), s
    nu : ndarray, shape (n, 6)
        ``[u, v, w, p, q, r]`` in m/s and rad/s.
    eta : ndarray, shape (n, 6)
        ``[x, y, z, phi, theta, psi]`` in m and rad. With Euler parameters the
        angles are recovered from them and unwrapped in time.
    kinetic_energy : ndarray, shape (n,), J
    work : ndarray, shape (n,), J
        Work done by the load since t = 0, ``int nu.tau dt``.
    attitude : str
    euler_parameters : ndarray, shape (n, 4), or None
        The integrated parameters (only for ``attitude="euler_parameters"``).
    """

    t: np.ndarray
    nu: np.ndarray
    eta: np.ndarray
    kinetic_energy: np.ndarray
    work: np.ndarray
    attitude: str
    euler_parameters: np.ndarray | None = None

    @property
    def position(self) -> np.ndarray:
        """GCS position of O, shape (n, 3), m."""
        return self.eta[:, :3]

    @property
    def final_state(self) -> np.ndarray:
        """The 12-state ``[nu, eta]`` at the last time, shape (12,)."""
        return np.concatenate([self.nu[-1], self.eta[-1]])

    @property
    def energy_residual(self) -> np.ndarray:
        """``T(t) - T(0) - work(t)``, shape (n,), J; zero for an exact solution."""
        return self.kinetic_energy - self.kinetic_energy[0] - self.work

    @property
    def quaternion_norm_error(self) -> np.ndarray | None:
        """``|theta| - 1`` over time, or None for Euler angles."""
        if self.euler_parameters is None:
            return None
        return np.linalg.norm(self.euler_parameters, axis=1) - 1.0

    def plot_trajectory(self, ax=None):
        """Plan view of the track of O in the GCS (x0 to the right, y0 up)."""
        # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(5, 5))
        ax.plot(self.eta[:, 0], self.eta[:, 1])
        ax.plot(*self.eta[0, :2], "o", label="start")
        ax.plot(*self.eta[-1, :2], "s", label=f"t = {self.t[-1]:g} s")
        ax.set(xlabel="$x_0$ (m)", ylabel="$y_0$ (m)", aspect="equal", title="Track of O, plan view")
        ax.legend()
        return ax.figure

    def plot_motion(self):
        """Attitude (degrees) and body velocities against time, in three panels."""
        # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
        for k, name in enumerate([r"$\phi$", r"$\theta$", r"$\psi$"]):
            axes[0].plot(self.t, np.degrees(self.eta[:, 3 + k]), label=name)
        for k, name in enumerate(["u", "v", "w"]):
            axes[1].plot(self.t, self.nu[:, k], label=f"${name}$")
        for k, name in enumerate(["p", "q", "r"]):
            axes[2].plot(self.t, self.nu[:, 3 + k], label=f"${name}$")
        axes[0].set_ylabel("angle (deg)")
        axes[1].set_ylabel("velocity (m/s)")
        axes[2].set_ylabel("rate (rad/s)")
        axes[2].set_xlabel("t (s)")
        for ax in axes:
            ax.legend(loc="best", ncol=3)
            ax.grid(True, alpha=0.3)
        return fig

    def relative_energy_residual(self) -> tuple[np.ndarray, float]:
        """``|T(t) - T(0) - work(t)|`` divided by a scale, with round-off made visible.

        The scale is the largest ``|work|`` (or, with no work, the largest kinetic
        energy; 1 J when both are zero). Differences that are exactly zero, such as
        the one at t = 0, become NaN (a log axis has no place for them); the others
        are raised to at least machine epsilon, below which a difference of two
        rounded numbers of this size carries no information.

        Returns
        -------
        relative : ndarray, shape (n,)
        scale : float, J
        """
        scale = float(np.max(np.abs(self.work)))
        if scale == 0.0:
            scale = float(np.max(np.abs(self.kinetic_energy))) or 1.0
        relative = np.abs(self.energy_residual) / scale
        floor = np.finfo(float).eps
        return np.where(relative > 0.0, np.maximum(relative, floor), np.nan), scale

    def plot_energy(self):
        """``T(t) - T(0)`` against the work of the load, and their difference on a log scale.

        The lower panel shows :meth:`relative_energy_residual`; its axis starts at
        the decade below machine epsilon, so it never reaches down to meaningless
        values such as 1e-300.
        """
        # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
        import matplotlib.pyplot as plt

        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
        top.plot(self.t, self.kinetic_energy - self.kinetic_energy[0], label="$T(t) - T(0)$")
        top.plot(self.t, self.work, "--", label=r"$\int_0^t \nu^T \tau\,dt$")
        top.set_ylabel("energy (J)")
        top.legend()
        relative, _ = self.relative_energy_residual()
        floor = np.finfo(float).eps
        bottom.semilogy(self.t, relative, label="relative difference")
        bottom.axhline(floor, color="k", lw=0.8, ls=":", label="machine epsilon")
        largest = float(np.nanmax(relative)) if np.any(np.isfinite(relative)) else floor
        low = 10.0 ** math.floor(math.log10(floor))
        high = 10.0 ** math.ceil(math.log10(max(largest, 100.0 * floor)) + 0.5)
        bottom.set_ylim(low, high)
        bottom.set_ylabel("|difference| / max |work| (-)")
        bottom.set_xlabel("t (s)")
        bottom.legend(loc="upper left", fontsize=8)
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
        return fig


def _load_function(tau) -> Callable[[float, np.ndarray], np.ndarray]:
    if callable(tau):
        def load(t, x):
            value = np.asarray(tau(t, x), dtype=float)
            if value.shape != (6,):
                raise ValueError(f"expected tau(t, state) of shape (6,), got {value.shape}")
            return value
        return load
    constant = as_array("tau", tau, (6,))
    return lambda t, x: constant


def simulate(body: RigidBody, tau, t_end, x0=None, *, attitude: str = "euler_angles",
             rtol: float = 1e-10, atol: float = 1e-12, t_eval=None,
             constraint_gain: float = 0.01, method: str = "DOP853") -> SimulationResult:
    """Integrate the 12-state model of a rigid body under a load (eq-kinematics-dynamics).

    Parameters
    ----------
    body : RigidBody
    tau : array_like, shape (6,), or callable
        Load ``[X, Y, Z, K, M, N]`` about O in BCS components (N, N m): a constant,
        or ``tau(t, state)`` returning one, where ``state`` is the integrated state
        (12 entries for Euler angles; 13 for Euler parameters: ``nu``, position, theta).
    t_end : float, s
    x0 : array_like, shape (12,), optional
        Initial ``[u, v, w, p, q, r, x, y, z, phi, theta, psi]``; zero when omitted.
    attitude : {"euler_angles", "euler_parameters"}
    rtol, atol : float
        Tolerances of :func:`scipy.integrate.solve_ivp`.
    t_eval : array_like, optional
        Output times; the integrator's own steps when omitted.
    constraint_gain : float, 1/s
        Stabilisation of the Euler-parameter norm (ignored for Euler angles).
    method : str
        Integrator of :func:`scipy.integrate.solve_ivp`.

    Returns
    -------
    SimulationResult

    Raises
    ------
    GimbalLockError
        With Euler angles, when pitch reaches +/-90 degrees.

    Examples
    --------
    >>> import numpy as np
    >>> body = RigidBody(1.0, [0, 0, 0], np.eye(3))
    >>> result = simulate(body, [1.0, 0, 0, 0, 0, 0], 2.0)
    >>> np.round(result.final_state[[0, 6]], 9)
    array([2., 2.])
    """
    if attitude not in ATTITUDES:
        raise ValueError(f"expected attitude in {ATTITUDES}, got {attitude!r}")
    if not isinstance(body, RigidBody):
        raise ValueError(f"expected body to be a RigidBody, got {type(body).__name__}")
    t_end = as_positive("t_end", t_end)
    x0 = np.zeros(12) if x0 is None else as_array("x0", x0, (12,))
    mass_inverse = body._mass_inverse
    coriolis = body._coriolis_forces
    gain = float(constraint_gain)

    if attitude == "euler_angles":
        load = _load_function(tau)

        def rhs(t, x):
            nu = x[:6]
            f = load(t, x[:12])
            phi, theta, psi = x[9:12]
            return np.concatenate([
                mass_inverse @ (f - coriolis(nu)),
                rotation_matrix_unchecked(phi, theta, psi) @ nu[:3],
                euler_rate_matrix_unchecked(phi, theta) @ nu[3:],
                [nu @ f],
            ])

        y0 = np.concatenate([x0, [0.0]])
    else:
        load = _load_function(tau)

        def rhs(t, x):
            nu, q = x[:6], x[9:13]
            f = load(t, x[:13])
            qq = q @ q
            return np.concatenate([
                mass_inverse @ (f - coriolis(nu)),
                rotation_matrix_ep_unchecked(q / np.sqrt(qq)) @ nu[:3],
                g_matrix_body_unchecked(q).T @ nu[3:] / 4.0 + gain * (1.0 - qq) * q,
                [nu @ f],
            ])

        y0 = np.concatenate([x0[:9], from_euler_angles(*x0[9:12]), [0.0]])

    try:
        sol = solve_ivp(rhs, (0.0, t_end), y0, method=method, rtol=rtol, atol=atol, t_eval=t_eval)
    except GimbalLockError as exc:
        raise GimbalLockError(
            f"{exc}. The Euler-angle model cannot pass pitch +/-90 deg; "
            "call simulate(..., attitude='euler_parameters')"
        ) from None
    if not sol.success:
        raise RuntimeError(f"integration failed: {sol.message}")
    y = sol.y.T
    nu = y[:, :6]
    if attitude == "euler_angles":
        eta, ep = y[:, 6:12], None
    else:
        ep = y[:, 9:13]
        angles = np.unwrap(euler_angles_of_quaternions(ep), axis=0)
        eta = np.column_stack([y[:, 6:9], angles])
    energy = 0.5 * np.einsum("ij,jk,ik->i", nu, body._mass_matrix, nu)
    return SimulationResult(sol.t, nu, eta, energy, y[:, -1], attitude, ep)
