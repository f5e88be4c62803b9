"""A body free of external loads, with its origin at G and principal axes (Problem 8).

Euler's equations (eq-euler-eom-final with r_G = 0, M = 0 and a diagonal tensor)::

    I_x p_dot = (I_y - I_z) q r
    I_y q_dot = (I_z - I_x) r p
    I_z r_dot = (I_x - I_y) p q
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ellipkinc, ellipkm1

from ._checks import as_array, as_positive

_AXES = ("x", "y", "z")


def _principal(principal_inertia) -> np.ndarray:
    inertia = as_array("principal_inertia", principal_inertia, (3,))
    if np.any(inertia <= 0.0):
        raise ValueError(f"expected positive principal moments, got {inertia.tolist()}")
    return inertia


def euler_equations(principal_inertia, omega) -> np.ndarray:
    """Angular acceleration of a torque-free body from Euler's equations.

    Parameters
    ----------
    principal_inertia : array_like, shape (3,), kg m^2
    omega : array_like, shape (3,), rad/s

    Returns
    -------
    ndarray, shape (3,), rad/s^2

    Examples
    --------
    >>> euler_equations([1.0, 2.0, 3.0], [0.0, 1.0, 1.0])
    array([-1.,  0.,  0.])
    """
    return euler_rates(_principal(principal_inertia), as_array("omega", omega, (3,)))


def euler_rates(principal_inertia: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """:func:`euler_equations` for inputs already checked: the right-hand side an integrator calls
    tens of thousands of times, where checking them again took half of Problem 8's time."""
    i_x, i_y, i_z = principal_inertia
    p, q, r = omega
    return np.array([(i_y - i_z) * q * r / i_x, (i_z - i_x) * r * p / i_y, (i_x - i_y) * p * q / i_z]) + 0.0


@dataclass(frozen=True)
class SpinStability:
    """Linearised behaviour of a small disturbance of a steady spin about one axis.

    ``kind`` is ``"oscillation"`` (bounded, ``rate`` is the angular frequency in
    rad/s) or ``"growth"`` (exponential, ``rate`` is the growth rate in 1/s).
    """

    axis: str
    kind: str
    rate: float

    @property
    def period(self) -> float:
        """Period of the oscillation in s (inf for growth)."""
        return 2.0 * np.pi / self.rate if self.kind == "oscillation" else float("inf")

    @property
    def e_folding_time(self) -> float:
        """Time for the disturbance to grow by e, in s (inf for oscillation)."""
        return 1.0 / self.rate if self.kind == "growth" else float("inf")


def spin_stability(principal_inertia, spin_rate) -> list[SpinStability]:
    """Stability of a steady spin at ``spin_rate`` about each principal axis (Problem 8c).

    Linearising about a spin Omega about axis k, the two other rates obey
    ``x_ddot = c Omega^2 x`` with ``c = (I_k - I_j)(I_i - I_k) / (I_i I_j)`` for the
    other axes i, j: oscillation at ``sqrt(-c) Omega`` when c < 0, growth at
    ``sqrt(c) Omega`` when c > 0.

    Examples
    --------
    >>> [s.kind for s in spin_stability([1.0, 2.0, 3.0], 1.0)]
    ['oscillation', 'growth', 'oscillation']
    """
    inertia = _principal(principal_inertia)
    omega = as_positive("spin_rate", spin_rate)
    result = []
    for k in range(3):
        i, j = (k + 1) % 3, (k + 2) % 3
        c = (inertia[k] - inertia[j]) * (inertia[i] - inertia[k]) / (inertia[i] * inertia[j])
        if c > 0.0:
            result.append(SpinStability(_AXES[k], "growth", float(np.sqrt(c) * omega)))
        else:
            result.append(SpinStability(_AXES[k], "oscillation", float(np.sqrt(-c) * omega)))
    return result


def integrate_spin(principal_inertia, omega0, t_end, component: int | None = None,
                   rtol: float = 1e-12, atol: float = 1e-15):
    """Integrate Euler's equations with dense output; with ``component``, watch its sign changes.

    Returns the :func:`scipy.integrate.solve_ivp` solution: ``sol.sol(t)`` is the spin at
    any time and ``sol.t_events[0]`` the sign changes of ``omega[component]``.
    """
    inertia = _principal(principal_inertia)
    w0 = as_array("omega0", omega0, (3,))
    if component not in (None, 0, 1, 2):
        raise ValueError(f"expected component 0, 1 or 2, got {component!r}")
    events = None if component is None else (lambda t, w: w[component])
    return solve_ivp(lambda t, w: euler_rates(inertia, w), (0.0, as_positive("t_end", t_end)), w0,
                     method="DOP853", rtol=rtol, atol=atol, events=events, dense_output=True)


def sign_change_times(principal_inertia, omega0, t_end, component: int = 1,
                      rtol: float = 1e-12, atol: float = 1e-15) -> np.ndarray:
    """Times at which one component of the spin changes sign (Problem 8d).

    Parameters
    ----------
    principal_inertia : array_like, shape (3,), kg m^2
    omega0 : array_like, shape (3,), rad/s
        Initial body angular velocity.
    t_end : float, s
    component : {0, 1, 2}
        Which rate to watch (1 is q, the spin about y).
    rtol, atol : float
        Tolerances; the flip times are sensitive to them, so the defaults are tight.

    Returns
    -------
    ndarray, shape (k,), s

    Examples
    --------
    >>> times = sign_change_times([1.0, 2.0, 3.0], [1e-3, 1.0, 1e-3], 60.0)
    >>> np.round(times, 2)
    array([14.91, 42.44])
    """
    if component not in (0, 1, 2):
        raise ValueError(f"expected component 0, 1 or 2, got {component!r}")
    return integrate_spin(principal_inertia, omega0, t_end, component, rtol, atol).t_events[0]


# Closer than this (a fraction of t_end, or of the energy terms at the separatrix) and the closed
# form is not trusted: sign_change_count integrates instead.
_CLOSED_FORM_MARGIN = 1e-6


def sign_change_count(principal_inertia, omega0, t_end, component: int = 1) -> int:
    """How many times one component of the spin changes sign in (0, t_end]: the count of
    :func:`sign_change_times`, without integrating.

    Away from the separatrix, Euler's equations of a torque-free body with three different
    moments are solved by Jacobi's elliptic functions (Landau and Lifshitz, *Mechanics*, section
    37): one rate follows ``sn``, one ``cn`` and one ``dn`` of ``lambda t + tau0``, so the sign
    changes are evenly spaced, ``2 K(m) / lambda`` apart. Where that form cannot be trusted (a
    rate exactly zero, two equal moments, a state at the separatrix, or a sign change within
    a millionth of ``t_end`` of either end), the count is that of :func:`sign_change_times`.

    Examples
    --------
    >>> sign_change_count([1.0, 2.0, 3.0], [1e-3, 1.0, 1e-3], 60.0)
    2
    """
    inertia = _principal(principal_inertia)
    omega = as_array("omega0", omega0, (3,))
    duration = as_positive("t_end", t_end)
    if component not in (0, 1, 2):
        raise ValueError(f"expected component 0, 1 or 2, got {component!r}")
    counted = _elliptic_count(inertia, omega, duration, component)
    if counted is None:
        return len(sign_change_times(inertia, omega, duration, component))
    return counted


def _elliptic_count(inertia: np.ndarray, omega: np.ndarray, t_end: float, component: int) -> int | None:
    """The count of :func:`sign_change_count` from the elliptic-function solution, or None."""
    if np.any(omega == 0.0) or len(set(inertia.tolist())) < 3:
        return None
    a, b, c = (int(i) for i in np.argsort(inertia))  # smallest, intermediate, largest moment
    i_a, i_b, i_c = inertia[a], inertia[b], inertia[c]
    # L^2 - 2 E I_b: its sign tells which end axis the polhode circles
    towards_c, towards_a = i_c * (i_c - i_b) * omega[c] ** 2, i_a * (i_b - i_a) * omega[a] ** 2
    side = towards_c - towards_a
    if abs(side) <= _CLOSED_FORM_MARGIN * (towards_c + towards_a):
        return None
    if side < 0.0:  # circling the smallest moment's axis: the two end axes swap their roles
        a, c = c, a
        i_a, i_c = i_c, i_a
    # now omega_a = A_a cn, omega_b = A_b sn, omega_c = +-A_c dn (tau = lambda t + tau0)
    from_a = i_b * (i_b - i_a) * omega[b] ** 2 + i_c * (i_c - i_a) * omega[c] ** 2  # L^2 - 2 E I_a
    from_c = i_a * (i_c - i_a) * omega[a] ** 2 + i_b * (i_c - i_b) * omega[b] ** 2  # 2 E I_c - L^2
    rate = np.sqrt((i_c - i_b) * from_a / (i_a * i_b * i_c))
    one_minus_m = (i_c - i_a) * side / ((i_c - i_b) * from_a)
    m = 1.0 - one_minus_m
    sn0 = omega[b] / np.sqrt(from_c / (i_b * (i_c - i_b)))
    cn0 = omega[a] / np.sqrt(from_c / (i_a * (i_c - i_a)))
    # the amplitude phi (sn = sin phi, cn = cos phi) and the way it turns, from Euler's equations
    rates = euler_rates(inertia, omega)
    turning = (rates[b] / omega[b] - rates[a] / omega[a]) * sn0 * cn0
    if abs(sn0 ** 2 + cn0 ** 2 - 1.0) > 1e-9 or abs(abs(turning) - rate * np.sqrt(1.0 - m * sn0 ** 2)) > 1e-6 * rate:
        return None  # the state does not fit the form: integrate rather than guess
    if component == c:
        return 0  # dn never vanishes
    phi0 = np.arctan2(sn0, cn0) * np.sign(turning)  # backwards in time: the zeros are symmetric
    zero = 0.0 if component == b else np.pi / 2  # sn vanishes at j pi, cn at pi/2 + j pi
    quarter = ellipkm1(one_minus_m)  # K(m)

    def elapsed(phi):  # F(phi | m), continued past +-pi/2 (F(phi + pi) = F(phi) + 2 K)
        turns = np.round(phi / np.pi)
        return 2.0 * turns * quarter + ellipkinc(phi - turns * np.pi, m)

    first = (elapsed(zero + np.pi * np.ceil((phi0 - zero) / np.pi)) - elapsed(phi0)) / rate
    spacing = 2.0 * quarter / rate
    margin = _CLOSED_FORM_MARGIN * t_end
    nearest_end = first + spacing * max(0.0, np.round((t_end - first) / spacing))
    if first < margin or abs(nearest_end - t_end) < margin:
        return None
    return 0 if first > t_end else 1 + int((t_end - first) // spacing)
