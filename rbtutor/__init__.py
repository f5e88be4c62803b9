"""rbtutor: the rigid-body dynamics of ships, once, for the course book and its grading.

Conventions are stated in :mod:`rbtutor.kinematics` (frames, state vector, Euler
angles) and :mod:`rbtutor.euler_parameters` (scalar-first unit quaternions).
``rbtutor.symbolic`` (sympy), ``rbtutor.problems`` and ``rbtutor.figures`` (the
book's schematics; matplotlib only when a figure is drawn) load on first use, so
that ``import rbtutor`` stays light.
"""

from __future__ import annotations

import importlib

from . import euler_parameters
from .inertia import (
    box_inertia,
    check_inertia,
    inertia_from_gyration,
    inertia_tensor,
    parallel_axis,
    products_of_inertia,
)
from .kinematics import (
    GimbalLockError,
    angular_velocity_from_euler_rates,
    euler_angles_from_matrix,
    euler_rate_matrix,
    point_acceleration,
    rotation_matrix,
    skew,
    specific_force,
)
from .rigid_body import RigidBody, shift_load, shift_velocity
from .simulation import SimulationResult, simulate
from .torque_free import euler_equations, integrate_spin, sign_change_count, sign_change_times, spin_stability

__all__ = [
    "GimbalLockError",
    "RigidBody",
    "SimulationResult",
    "angular_velocity_from_euler_rates",
    "box_inertia",
    "check_inertia",
    "euler_angles_from_matrix",
    "euler_equations",
    "euler_parameters",
    "euler_rate_matrix",
    "figures",
    "inertia_from_gyration",
    "inertia_tensor",
    "integrate_spin",
    "parallel_axis",
    "point_acceleration",
    "problems",
    "products_of_inertia",
    "rotation_matrix",
    "shift_load",
    "shift_velocity",
    "sign_change_count",
    "sign_change_times",
    "simulate",
    "skew",
    "specific_force",
    "spin_stability",
    "symbolic",
]

_LAZY = {"symbolic", "problems", "figures"}


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
