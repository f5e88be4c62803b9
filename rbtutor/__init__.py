"""rbtutor: the rigid-body dynamics of ships, once, for the course book and its grading.

Conventions are stated in :mod:`rbtutor.kinematics` (frames, state vector, Euler
angles) and :mod:`rbtutor.euler_parameters` (scalar-first unit quaternions).
``rbtutor.symbolic`` (sympy), ``rbtutor.problems`` and ``rbtutor.figures`` (the
book's schematics; matplotlib only when a figure is drawn) load on first use, so
that ``import rbtutor`` stays light; so do the time integrations of
:mod:`rbtutor.simulation` and :mod:`rbtutor.torque_free` (SciPy's ``integrate`` and
``special``: ``rbtutor --help`` took 0.66-0.75 CPU s with them loaded at once, 0.16-0.21 s
without, 2026-12-07), whose names are here all the same.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from .simulation import SimulationResult, simulate
    from .torque_free import (
        euler_equations,
        integrate_spin,
        sign_change_count,
        sign_change_times,
        spin_stability,
    )

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
#: the names of this package that live in a module loaded on first use, and that module
_LAZY_NAMES = {"SimulationResult": "simulation", "simulate": "simulation",
               **dict.fromkeys(("euler_equations", "integrate_spin", "sign_change_count", "sign_change_times",
                                "spin_stability"), "torque_free")}


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
