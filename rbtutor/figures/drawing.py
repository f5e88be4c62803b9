"""The figures' common ground: the course hull, the oblique projection, arrows, points and arcs
that a test can find by ``gid``, the hull's outlines."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._checks import as_positive
from ..rigid_body import RigidBody

__all__ = ["AXIS_COLOURS", "COURSE_HULL", "Hull", "as_hull", "as_rigid_body", "draw_arc_with_head", "draw_arrow",
           "draw_point", "plan_outline", "profile_outline", "project", "rotation_arc", "section_outline"]


class Hull(NamedTuple):
    """Main dimensions of the hull outline drawn in the schematics, in m.

    The defaults are the platform supply vessel of the problems (length 85 m,
    beam 20 m, draught 6.5 m); the depth (keel to deck) is an assumed 9 m, as
    the chapter does not give it. Only the outline uses these numbers; the
    mechanics come from the :class:`~rbtutor.RigidBody`.
    """

    length: float = 85.0
    beam: float = 20.0
    draught: float = 6.5
    depth: float = 9.0


COURSE_HULL = Hull()

# Oblique projection used by the 3-D sketches: x to the right, z up, y into the
# page drawn up and to the right at 40 degrees, shortened to 0.55 (a cabinet
# projection seen from starboard, a little from above and abaft).
_OBLIQUE = np.array([[1.0, 0.55 * math.cos(math.radians(40.0)), 0.0],
                     [0.0, 0.55 * math.sin(math.radians(40.0)), 1.0]])

AXIS_COLOURS = ("tab:red", "tab:green", "tab:blue")


def project(points) -> np.ndarray:
    """Drawing coordinates of BCS points in the oblique view of the 3-D sketches.

    Parameters
    ----------
    points : array_like, shape (3,) or (n, 3), m

    Returns
    -------
    ndarray, shape (2,) or (n, 2)
        Horizontal and vertical drawing coordinates, m.

    Examples
    --------
    >>> project([1.0, 0.0, 2.0])
    array([1., 2.])
    """
    pts = np.asarray(points, dtype=float)
    return pts @ _OBLIQUE.T


def rotation_arc(axis: int, centre_distance: float, radius: float, turn: float = 1.5 * math.pi,
                 n: int = 61) -> np.ndarray:
    """Points of an arc around BCS axis ``axis`` in its positive (right-hand) sense.

    The arc lies in the plane normal to the axis at ``centre_distance`` from O and
    runs from the next axis towards the one after it (y to z about x, z to x
    about y, x to y about z), so ``(point - centre) x tangent`` points along
    the axis.

    Parameters
    ----------
    axis : {0, 1, 2}
    centre_distance, radius : float, m
    turn : float, rad
        Angle swept.
    n : int
        Number of points.

    Returns
    -------
    ndarray, shape (n, 3), m
    """
    if axis not in (0, 1, 2):
        raise ValueError(f"expected axis in (0, 1, 2), got {axis!r}")
    e = np.eye(3)
    a, b = e[(axis + 1) % 3], e[(axis + 2) % 3]
    angle = np.linspace(0.0, turn, n)[:, None]
    return centre_distance * e[axis] + radius * (np.cos(angle) * a + np.sin(angle) * b)


# --------------------------------------------------------------------------- helpers


def draw_arrow(ax, tail, head, gid: str, color="k", lw=1.6, style="-|>", **kw):
    """An arrow from ``tail`` to ``head`` (data coordinates) that a test can find by ``gid``."""
    arrow = ax.annotate("", xy=tuple(map(float, head)), xytext=tuple(map(float, tail)),
                        annotation_clip=False, arrowprops={"arrowstyle": style, "color": color, "lw": lw,
                                    "shrinkA": 0, "shrinkB": 0, "mutation_scale": 14, **kw})
    arrow.set_gid(gid)
    ax.update_datalim([tuple(map(float, tail)), tuple(map(float, head))])
    return arrow


def draw_point(ax, xy, gid: str, marker="o", color="k", size=6, **kw):
    (line,) = ax.plot([float(xy[0])], [float(xy[1])], marker, color=color, ms=size, zorder=5, **kw)
    line.set_gid(gid)
    return line


def draw_arc_with_head(ax, points_2d, gid: str, color):
    """Draw a polyline and an arrow head at its last point, both tagged ``gid``."""
    (line,) = ax.plot(points_2d[:, 0], points_2d[:, 1], color=color, lw=1.6)
    line.set_gid(gid)
    draw_arrow(ax, points_2d[-3], points_2d[-1], gid + "-head", color=color)
    return line


def profile_outline(hull: Hull) -> np.ndarray:
    """Side-view outline of the hull (x, z) in m: transom stern, flat keel, raked stem."""
    half, t, top = hull.length / 2.0, hull.draught, hull.depth - hull.draught
    return np.array([
        [-half, top], [-half, -0.45 * t], [-half + 0.1 * hull.length, -t],
        [half - 0.16 * hull.length, -t], [half - 0.04 * hull.length, -0.35 * t],
        [half, top],
    ])


def plan_outline(hull: Hull) -> np.ndarray:
    """Plan-view outline (x, y) in m: parallel body with a pointed bow."""
    half, b = hull.length / 2.0, hull.beam / 2.0
    shoulder = half - 0.15 * hull.length
    return np.array([[-half, -b], [shoulder, -b], [half, 0.0], [shoulder, b], [-half, b]])


def section_outline(hull: Hull) -> np.ndarray:
    """Midship section (y, z) in m, with rounded bilges."""
    b, t, top = hull.beam / 2.0, hull.draught, hull.depth - hull.draught
    bilge = 0.2 * min(b, t)
    k = np.linspace(0.0, math.pi / 2.0, 8)
    starboard_bilge = np.column_stack([-b + bilge * (1 - np.cos(k)), -t + bilge * (1 - np.sin(k))])
    port_bilge = np.column_stack([b - bilge * (1 - np.sin(k)), -t + bilge * (1 - np.cos(k))])
    return np.vstack([[[-b, top]], starboard_bilge, port_bilge, [[b, top]]])


def as_hull(hull) -> Hull:
    hull = Hull(*hull)
    for name, value in hull._asdict().items():
        as_positive(f"hull.{name}", value)
    if hull.depth <= hull.draught:
        raise ValueError(f"expected hull.depth > hull.draught, got {hull.depth} <= {hull.draught}")
    return hull


def as_rigid_body(body) -> RigidBody:
    if not isinstance(body, RigidBody):
        raise ValueError(f"expected body to be a RigidBody, got {type(body).__name__}")
    return body
