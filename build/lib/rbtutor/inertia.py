"""Inertia tensors: building them, checking them and moving them between points.

The tensor carries the products of inertia with a minus sign off the diagonal,
as in the chapter::

    I = [[ Ix, -Ixy, -Ixz],
         [-Ixy,  Iy, -Iyz],
         [-Ixz, -Iyz,  Iz]]

Every tensor says its point: ``inertia_g`` is about the centre of gravity G,
``inertia_o`` about the BCS origin O; both use axes parallel to the BCS.
"""

from __future__ import annotations

import numpy as np

from ._checks import as_array, as_positive
from .kinematics import skew

_REL_TOL = 1e-9


def inertia_tensor(i_x, i_y, i_z, i_xy=0.0, i_xz=0.0, i_yz=0.0) -> np.ndarray:
    """Assemble the 3x3 tensor from moments and products of inertia (eq-inertia-tensor).

    Parameters
    ----------
    i_x, i_y, i_z : float, kg m^2
        Moments of inertia.
    i_xy, i_xz, i_yz : float, kg m^2
        Products of inertia; they enter the tensor with a minus sign.

    Returns
    -------
    ndarray, shape (3, 3), kg m^2

    Examples
    --------
    >>> inertia_tensor(2.0, 3.0, 4.0, i_xz=0.5)
    array([[ 2. ,  0. , -0.5],
           [ 0. ,  3. ,  0. ],
           [-0.5,  0. ,  4. ]])
    """
    values = as_array("moments and products of inertia", [i_x, i_y, i_z, i_xy, i_xz, i_yz], (6,))
    ix, iy, iz, ixy, ixz, iyz = values
    return np.array([[ix, -ixy, -ixz], [-ixy, iy, -iyz], [-ixz, -iyz, iz]]) + 0.0  # no -0.0


def products_of_inertia(inertia) -> dict[str, float]:
    """Read ``{"xy": I_xy, "xz": I_xz, "yz": I_yz}`` back from a tensor (signs undone).

    Examples
    --------
    >>> products_of_inertia(inertia_tensor(2.0, 3.0, 4.0, i_xz=0.5))
    {'xy': 0.0, 'xz': 0.5, 'yz': 0.0}
    """
    t = as_array("inertia", inertia, (3, 3))
    return {"xy": float(-t[0, 1]) + 0.0, "xz": float(-t[0, 2]) + 0.0, "yz": float(-t[1, 2]) + 0.0}


def inertia_from_gyration(mass, radii, i_xy=0.0, i_xz=0.0, i_yz=0.0) -> np.ndarray:
    """Tensor about G from radii of gyration ``I_i = m k_i^2`` and given products (Problem 1).

    Examples
    --------
    >>> inertia_from_gyration(2.0, [1.0, 2.0, 3.0])
    array([[ 2.,  0.,  0.],
           [ 0.,  8.,  0.],
           [ 0.,  0., 18.]])
    """
    m = as_positive("mass", mass)
    k = as_array("radii", radii, (3,))
    return inertia_tensor(*(m * k**2), i_xy, i_xz, i_yz)


def box_inertia(mass, dimensions) -> np.ndarray:
    """Tensor of a uniform rectangular box about its centre, edges along the axes (Problem 8).

    Parameters
    ----------
    mass : float, kg
    dimensions : array_like, shape (3,), m
        Side lengths along x, y and z.

    Examples
    --------
    >>> box_inertia(12.0, [1.0, 2.0, 3.0]).diagonal()
    array([13., 10.,  5.])
    """
    m = as_positive("mass", mass)
    a, b, c = as_array("dimensions", dimensions, (3,))
    if min(a, b, c) <= 0.0:
        raise ValueError(f"expected positive box dimensions, got {[a, b, c]}")
    return np.diag([m * (b * b + c * c) / 12.0, m * (a * a + c * c) / 12.0, m * (a * a + b * b) / 12.0])


def check_inertia(name: str, inertia) -> np.ndarray:
    """Return ``inertia`` (symmetrised) after checking that a rigid body could have it.

    Raises
    ------
    ValueError
        If it is not 3x3 and finite, not symmetric, not positive definite, or its
        principal moments break the triangle inequality ``I1 <= I2 + I3``.
    """
    t = as_array(name, inertia, (3, 3))
    scale = np.max(np.abs(t))
    asym = np.max(np.abs(t - t.T))
    if asym > _REL_TOL * scale:
        raise ValueError(f"expected {name} to be symmetric, got a largest asymmetry of {asym:.3g}")
    principal = np.linalg.eigvalsh(t)
    if principal[0] <= _REL_TOL * scale:
        raise ValueError(
            f"expected {name} to be positive definite, got principal moments {principal.tolist()}"
        )
    if principal[2] > (principal[0] + principal[1]) * (1.0 + _REL_TOL):
        raise ValueError(
            f"expected the principal moments of {name} to satisfy the triangle inequality "
            f"I1 <= I2 + I3, got {principal.tolist()}"
        )
    return 0.5 * (t + t.T)


def parallel_axis(inertia_g, mass, r_g) -> np.ndarray:
    """Tensor about O from the tensor about G: ``I_O = I_G - m S(r_G) S(r_G)`` (eq-parallel-axes-theorem).

    Parameters
    ----------
    inertia_g : array_like, shape (3, 3), kg m^2
        Tensor about G (axes parallel to the BCS).
    mass : float, kg
    r_g : array_like, shape (3,), m
        Position of G from O in the BCS.

    Returns
    -------
    ndarray, shape (3, 3), kg m^2

    Examples
    --------
    >>> parallel_axis([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]], 2.0, [0.0, 0.0, 1.0])
    array([[3., 0., 0.],
           [0., 3., 0.],
           [0., 0., 1.]])
    """
    t = as_array("inertia_g", inertia_g, (3, 3))
    s = skew(r_g)
    return t - as_positive("mass", mass) * (s @ s)
