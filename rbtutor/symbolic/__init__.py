"""The chapter's derivations in SymPy: every step the book checks, as a function.

Each public function builds one relation of the rigid-body chapter and returns
SymPy objects (usually the two sides of the relation, or the stages of a chain
of equalities), so that a book page or a test can display them and confirm
that their difference vanishes. Nothing here prints or asserts. The docstrings
name the chapter's equation labels (``eq-...``), which the book uses as well.

The package has one module per derivation step, in the order the chapter
takes them; each module imports only the steps before it. Import the names
from ``rbtutor.symbolic`` itself: they are all re-exported here, so the
modules can be regrouped without breaking a page or a test.

====================  =============================================================
module                step
====================  =============================================================
``algebra``           0. tools: ``TIME``, :func:`trig_reduce`, :func:`is_identity`,
                      :func:`term_difference`, :func:`dot_notation`, :func:`skew`,
                      :func:`unskew`, :func:`vector`, :func:`functions_of_time`
``frames``            1. position vectors of O and G (:func:`cog_vector`)
``rotation``          2. rotation matrix, angular velocity, Euler-rate matrices,
                      kinematic transform (Translational page)
``cross_products``    3. cross products as matrices, rates in a turning frame
``inertia``           4. inertia tensor, parallel-axis theorem (Rotational page)
``body``              5. :class:`RigidBodySymbols`, :func:`point_acceleration`
``translational``     6. acceleration of G, Newton's equations in the body frame
``rotational``        7. moment transfer, Euler's equations about G and about O
``expanded``          8. the six scalar equations (Complete page)
``mass_matrix``       9. ``M_RB``
``coriolis``          10. ``C_RB(nu)`` and the matrix form
``linearised``        11. small motions, steady forward speed (Linearised page)
====================  =============================================================

Conventions are those of :mod:`rbtutor.kinematics`: BCS x forward, y to port,
z up; ``R = Rz(psi) Ry(theta) Rx(phi)`` maps body components to GCS
components; the inertia tensor carries ``-I_xy`` etc. off its diagonal.

Two kinds of symbols are used:

* derivations in time (``rdot_rt``, ``body_frame_derivative``, ...) use the
  Euler angles and the velocities as undefined functions of :data:`TIME`, so
  that ``sympy.diff`` can differentiate them; :func:`dot_notation` rewrites the
  results with dotted symbols for display;
* the equations of motion use plain symbols, collected in
  :class:`RigidBodySymbols` (:func:`rigid_body_symbols`).

Expressions that are polynomials in sines and cosines are compared with
:func:`trig_reduce`, which brings them to a canonical form modulo
``sin^2 + cos^2 = 1``; it is much faster than ``sympy.simplify`` and exact.

SymPy is imported by this package only; ``import rbtutor`` does not load it.
"""

from __future__ import annotations

from rbtutor.symbolic import algebra
from rbtutor.symbolic.algebra import (
    dot_notation,
    functions_of_time,
    is_identity,
    skew,
    term_difference,
    trig_reduce,
    unskew,
    vector,
)
from rbtutor.symbolic.body import RigidBodySymbols, point_acceleration, rigid_body_symbols
from rbtutor.symbolic.coriolis import coriolis_matrix, matrix_form
from rbtutor.symbolic.cross_products import (
    body_frame_derivative,
    cross_product_as_matrix,
    jacobi_identity,
    rotated_cross_product,
    skew_square_identity,
)
from rbtutor.symbolic.expanded import expanded_equations, printed_expanded_equations
from rbtutor.symbolic.frames import cog_vector, printed_position_vectors
from rbtutor.symbolic.inertia import (
    inertia_symbols,
    inertia_tensor,
    parallel_axis,
    parallel_axis_components,
    parallel_axis_from_point_masses,
    point_mass_inertia,
    symbolic_inertia,
)
from rbtutor.symbolic.linearised import (
    linearised_about_forward_speed,
    linearised_coriolis_matrix,
    linearised_equations,
    linearised_kinematics,
)
from rbtutor.symbolic.mass_matrix import mass_matrix, printed_mass_matrix
from rbtutor.symbolic.rotation import (
    angular_velocity_from_rotation,
    body_angular_velocity,
    elementary_rotations,
    euler_angle_symbols,
    euler_angles_of_time,
    euler_rate_jacobian,
    euler_rate_matrix,
    global_angular_velocity,
    kinematic_transform,
    printed_body_angular_velocity,
    printed_global_angular_velocity,
    printed_rdot_rt,
    printed_rotation_matrix,
    rdot_rt,
    rotation_matrix,
)
from rbtutor.symbolic.rotational import (
    angular_acceleration_terms,
    gyroscopic_terms,
    moment_transfer,
    rotational_equations,
    rotational_equations_about_g,
)
from rbtutor.symbolic.translational import acceleration_of_g, acceleration_of_g_gcs, translational_equations

#: The time variable of every time-dependent derivation (defined in ``algebra``).
TIME = algebra.TIME

# In the order of the steps above; the API page documents exactly these names.
__all__ = [
    # 0. algebra
    "TIME", "trig_reduce", "is_identity", "term_difference", "dot_notation", "skew", "unskew",
    "vector", "functions_of_time",
    # 1. frames
    "cog_vector", "printed_position_vectors",
    # 2. rotation
    "euler_angles_of_time", "euler_angle_symbols", "elementary_rotations", "rotation_matrix",
    "printed_rotation_matrix", "body_angular_velocity", "printed_body_angular_velocity",
    "angular_velocity_from_rotation", "global_angular_velocity", "printed_global_angular_velocity",
    "rdot_rt", "printed_rdot_rt", "euler_rate_jacobian", "euler_rate_matrix", "kinematic_transform",
    # 3. cross_products
    "cross_product_as_matrix", "skew_square_identity", "jacobi_identity", "rotated_cross_product",
    "body_frame_derivative",
    # 4. inertia
    "inertia_tensor", "inertia_symbols", "symbolic_inertia", "parallel_axis", "parallel_axis_components",
    "point_mass_inertia", "parallel_axis_from_point_masses",
    # 5. body
    "RigidBodySymbols", "rigid_body_symbols", "point_acceleration",
    # 6. translational
    "acceleration_of_g_gcs", "acceleration_of_g", "translational_equations",
    # 7. rotational
    "moment_transfer", "angular_acceleration_terms", "gyroscopic_terms", "rotational_equations",
    "rotational_equations_about_g",
    # 8. expanded
    "expanded_equations", "printed_expanded_equations",
    # 9. mass_matrix
    "mass_matrix", "printed_mass_matrix",
    # 10. coriolis
    "coriolis_matrix", "matrix_form",
    # 11. linearised
    "linearised_equations", "linearised_kinematics", "linearised_coriolis_matrix",
    "linearised_about_forward_speed",
]
