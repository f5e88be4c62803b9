"""Step 5: the plain symbols of the equations of motion about O (sections 5.3 to 5.5).

:class:`RigidBodySymbols` gathers mass, centre of gravity, both inertia
tensors, velocities, accelerations and loads under the chapter's names; every
later step takes one of these (or builds the default). The acceleration of any
body point sits here as well; the translational step evaluates it at G.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from rbtutor.symbolic.frames import cog_vector
from rbtutor.symbolic.inertia import symbolic_inertia


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
