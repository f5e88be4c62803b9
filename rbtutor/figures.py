"""Schematic figures of the physics, drawn from the library's data (presentation only).

Step: none of the grading pipeline; the book calls these functions to draw the
pictures of its chapters, so each picture is computed from the same vessel,
load and box data as the answers and changes with them.

Every function returns a :class:`matplotlib.figure.Figure`. The artists that
carry data (points, arrows, arcs) have a ``gid`` (``"G"``, ``"r_G"``,
``"arc-p"``, ...) so a test can read back where they were drawn; arrows are
:class:`matplotlib.text.Annotation` objects whose ``xyann`` is the tail and
``xy`` the head, in data coordinates (metres unless the axis says otherwise).

Conventions as everywhere in rbtutor: BCS with origin O at midship, on the
centreline, in the waterline; x forward, y to port, z up. The side views look
at the starboard side (x to the right, z up, y into the page); the section view
of the heel looks from astern (port on the left, z up, x into the page).

matplotlib is imported inside the functions, so ``import rbtutor`` does not pay
for it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._checks import as_array, as_positive
from .inertia import box_inertia
from .kinematics import rotation_matrix
from .rigid_body import RigidBody

__all__ = ["COURSE_HULL", "Hull", "frames_figure", "heel_couple_figure", "project", "rotation_arc",
           "six_motions_figure", "towline_figure", "tumbling_box_figure"]


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
# GCS position of O (m) and heading (rad) of the hull in the plan view of frames_figure.
_EXAMPLE_POSE = (70.0, 45.0, math.radians(30.0))


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


# --------------------------------------------------------------------------- figures


def frames_figure(body, hull=COURSE_HULL, pose=_EXAMPLE_POSE):
    """The body frame (BCS) and the global frame (GCS), with O, G and r_G to scale.

    Three panels: (a) the hull from starboard with the BCS axes x and z at O and
    the centre of gravity G at the end of the arrow r_G; (b) a plan view of the
    GCS with the hull placed at an example position and heading; (c) the
    neighbourhood of O enlarged, still with equal scales on both axes, so that
    the components x_G and z_G of r_G (eq-parallel-axes-theorem uses the same
    vector) can be read.

    Parameters
    ----------
    body : RigidBody
        Supplies ``r_g``, the position of G relative to O in the BCS, m.
    hull : Hull, optional
        Outline dimensions, m.
    pose : tuple of float, optional
        ``(x_0, y_0, psi)``: GCS position of O (m) and heading (rad) used for panel (b).

    Returns
    -------
    matplotlib.figure.Figure
        Arrows ``"r_G"``, ``"r_G-plan"`` and ``"r_G-detail"``, points ``"O"`` and
        ``"G"`` (and ``"-plan"``/``"-detail"`` variants), arrows ``"eta1"``, ``"x"``,
        ``"z"``, ``"x0"``, ``"y0"``, ``"x-plan"``, ``"y-plan"``.

    Examples
    --------
    >>> from rbtutor.problems import load_data, vessel
    >>> fig = frames_figure(vessel(load_data()))
    >>> [a.get_gid() for a in fig.axes[0].texts if a.get_gid() == "r_G"]
    ['r_G']
    """
    import matplotlib.pyplot as plt

    body, hull = as_rigid_body(body), as_hull(hull)
    x0, y0, psi = (float(v) for v in as_array("pose", pose, (3,)))
    r_g = body.r_g
    half = hull.length / 2.0

    fig = plt.figure(figsize=(9.0, 6.6), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1.0, 2.0])
    side = fig.add_subplot(grid[0, :])
    plan = fig.add_subplot(grid[1, 0])
    detail = fig.add_subplot(grid[1, 1])

    # (a) side view, to scale
    top = hull.depth - hull.draught
    side.axhspan(-hull.draught - 3.0, 0.0, color="tab:cyan", alpha=0.15, lw=0)
    side.axhline(0.0, color="tab:cyan", lw=1.0)
    side.fill(*profile_outline(hull).T, facecolor="0.88", edgecolor="k", lw=1.2)
    axis_len = 0.2 * hull.length
    draw_arrow(side, (0.0, 0.0), (axis_len, 0.0), "x", color=AXIS_COLOURS[0])
    draw_arrow(side, (0.0, 0.0), (0.0, top + 6.0), "z", color=AXIS_COLOURS[2])
    side.text(axis_len + 1.0, 0.6, "$x$ (forward)", color=AXIS_COLOURS[0])
    side.text(1.0, top + 5.0, "$z$ (up)", color=AXIS_COLOURS[2])
    side.text(-4.5, 1.2, r"$y\otimes$ (to port," "\ninto the page)", color=AXIS_COLOURS[1],
              ha="right", fontsize=8)
    draw_arrow(side, (0.0, 0.0), r_g[[0, 2]], "r_G", color="tab:purple", lw=1.4)
    draw_point(side, (0.0, 0.0), "O", size=4)
    draw_point(side, r_g[[0, 2]], "G", marker="o", color="tab:purple", size=4)
    side.text(0.8, -1.3, "$O$", va="top")
    side.text(r_g[0] - 0.8, r_g[2], "$G$", ha="right", va="center", color="tab:purple")
    side.text(-half + 1.0, -1.2, "waterline", color="tab:cyan", fontsize=8, va="top")
    side.set(xlim=(-half - 4.0, half + 6.0), ylim=(-hull.draught - 3.0, top + 8.0), aspect="equal",
             xlabel="$x$ (m)", ylabel="$z$ (m)")
    side.set_title(f"(a) BCS seen from starboard, to scale ({hull.length:g} m hull)", fontsize=10)

    # (b) plan view in the GCS
    rot = rotation_matrix(0.0, 0.0, psi)[:2, :2]
    origin = np.array([x0, y0])
    outline = plan_outline(hull) @ rot.T + origin
    plan.fill(*outline.T, facecolor="0.88", edgecolor="k", lw=1.0)
    gcs_len = 0.35 * hull.length
    draw_arrow(plan, (0.0, 0.0), (gcs_len, 0.0), "x0")
    draw_arrow(plan, (0.0, 0.0), (0.0, gcs_len), "y0")
    plan.text(gcs_len, -3.0, "$x_0$", va="top", ha="center")
    plan.text(-3.0, gcs_len, "$y_0$", ha="right", va="center")
    plan.text(-3.0, -3.0, r"$z_0\odot$", ha="right", va="top", fontsize=9)
    draw_arrow(plan, (0.0, 0.0), origin, "eta1", color="0.4", lw=1.0, linestyle="--")
    plan.text(*(0.5 * origin + [2.0, -6.0]), r"$\eta_1$", color="0.3")
    body_len = 0.3 * hull.length
    draw_arrow(plan, origin, origin + rot @ [body_len, 0.0], "x-plan", color=AXIS_COLOURS[0])
    draw_arrow(plan, origin, origin + rot @ [0.0, body_len], "y-plan", color=AXIS_COLOURS[1])
    plan.text(*(origin + rot @ [body_len + 4.0, 0.0]), "$x$", color=AXIS_COLOURS[0], va="center")
    plan.text(*(origin + rot @ [0.0, body_len + 4.0]), "$y$", color=AXIS_COLOURS[1], ha="center")
    plan.plot([x0, x0 + 0.45 * hull.length], [y0, y0], color="0.5", lw=0.8, ls=":")
    heading = np.linspace(0.0, psi, 30)
    plan.plot(x0 + 0.4 * hull.length * np.cos(heading), y0 + 0.4 * hull.length * np.sin(heading),
              color="0.3", lw=1.0)
    plan.text(x0 + 0.43 * hull.length * math.cos(psi / 2), y0 + 0.43 * hull.length * math.sin(psi / 2),
              r"$\psi$", va="center")
    g_plan = origin + rot @ r_g[:2]
    draw_arrow(plan, origin, g_plan, "r_G-plan", color="tab:purple", lw=1.2)
    draw_point(plan, origin, "O-plan", size=3)
    draw_point(plan, g_plan, "G-plan", color="tab:purple", size=3)
    span = np.vstack([outline, [[0.0, 0.0], [gcs_len, gcs_len]]])
    low, high = span.min(axis=0) - 10.0, span.max(axis=0) + 10.0
    plan.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), aspect="equal",
             xlabel="$x_0$ (m)", ylabel="$y_0$ (m)")
    plan.set_title(f"(b) GCS from above, heading $\\psi$ = {math.degrees(psi):.0f}°", fontsize=10)

    # (c) the neighbourhood of O, to scale
    pad = 1.5
    detail.axhline(0.0, color="tab:cyan", lw=1.0)
    draw_arrow(detail, (0.0, 0.0), r_g[[0, 2]], "r_G-detail", color="tab:purple", lw=1.8)
    detail.plot([0.0, r_g[0], r_g[0]], [0.0, 0.0, r_g[2]], color="0.5", lw=0.8, ls="--")
    draw_point(detail, (0.0, 0.0), "O-detail")
    draw_point(detail, r_g[[0, 2]], "G-detail", color="tab:purple")
    detail.text(0.15, 0.15, "$O$")
    detail.text(r_g[0] + 0.15, r_g[2] + 0.15, "$G$", color="tab:purple")
    detail.text(r_g[0] / 2.0, 0.12, f"$x_G$ = {r_g[0]:+.2f} m", ha="center", va="bottom", fontsize=9)
    detail.text(r_g[0] - 0.1, r_g[2] / 2.0, f"$z_G$ = {r_g[2]:+.2f} m", ha="right", va="center",
                fontsize=9)
    detail.text(0.5 * r_g[0] + 0.2, 0.5 * r_g[2] - 0.2, r"$\vec r_G$", color="tab:purple",
                ha="left", va="top")
    if r_g[1] != 0.0:
        detail.text(0.02, 0.02, f"$y_G$ = {r_g[1]:+.2f} m (normal to the page)",
                    transform=detail.transAxes, fontsize=8)
    xs, zs = [0.0, r_g[0]], [0.0, r_g[2]]
    detail.set(xlim=(min(xs) - pad - 1.5, max(xs) + pad), ylim=(min(zs) - pad, max(zs) + pad),
               aspect="equal", xlabel="$x$ (m)", ylabel="$z$ (m)")
    detail.set_title("(c) around O, enlarged (equal scales)", fontsize=10)
    for ax in (side, plan, detail):
        ax.grid(True, alpha=0.25)
    return fig


def six_motions_figure(body, hull=COURSE_HULL, length_scale=None):
    """The six motions of the BCS: surge, sway, heave along x, y, z and roll, pitch, yaw about them.

    The hull outline (deck, waterline and keel) is drawn in an oblique view; each
    axis carries a straight arrow for the velocity along it (u, v, w) and an arc
    for the rate about it (p, q, r) turning in the positive, right-hand sense:
    with the thumb along the axis, the fingers curl the way the arc runs. G is
    marked at ``body.r_g``.

    Parameters
    ----------
    body : RigidBody
    hull : Hull, optional
    length_scale : float, optional
        Factor applied to every x coordinate before drawing, so that a long hull
        leaves room for the other two axes; by default ``2.5 * beam / length``
        (at most 1). Use 1 for true proportions.

    Returns
    -------
    matplotlib.figure.Figure
        Arrows ``"u"``, ``"v"``, ``"w"``; arcs ``"arc-p"``, ``"arc-q"``, ``"arc-r"``
        (with heads ``"arc-p-head"``...); points ``"O"`` and ``"G"``. Drawing
        coordinates are :func:`project` of ``[length_scale * x, y, z]`` in m.

    Examples
    --------
    >>> from rbtutor.problems import load_data, vessel
    >>> fig = six_motions_figure(vessel(load_data()))
    >>> sorted(t.get_gid() for t in fig.axes[0].texts if t.get_gid() in ("u", "v", "w"))
    ['u', 'v', 'w']
    """
    import matplotlib.pyplot as plt

    body, hull = as_rigid_body(body), as_hull(hull)
    if length_scale is None:
        length_scale = min(1.0, 2.5 * hull.beam / hull.length)
    squash = np.diag([as_positive("length_scale", length_scale), 1.0, 1.0])

    def drawn(points):
        return project(np.asarray(points, dtype=float) @ squash.T)

    fig, ax = plt.subplots(figsize=(8.0, 5.0), layout="constrained")
    plan = plan_outline(hull)
    top = hull.depth - hull.draught
    for z, style, colour in [(-hull.draught, "-", "0.6"), (0.0, "--", "tab:cyan"), (top, "-", "k")]:
        ring = np.column_stack([plan, np.full(len(plan), z)])
        ring = drawn(np.vstack([ring, ring[:1]]))
        ax.plot(ring[:, 0], ring[:, 1], style, color=colour, lw=1.0)
    for corner in plan:
        post = drawn([[corner[0], corner[1], -hull.draught], [corner[0], corner[1], top]])
        ax.plot(post[:, 0], post[:, 1], color="0.6", lw=0.8)

    half = 0.5 * hull.length * length_scale
    reach = np.array([(half + 0.6 * hull.beam) / length_scale, hull.beam + 10.0, top + 16.0])
    radius = 0.2 * hull.beam
    names = [("surge", "u", "roll", "p"), ("sway", "v", "pitch", "q"), ("heave", "w", "yaw", "r")]
    for k, (move, vel, turn, rate) in enumerate(names):
        colour = AXIS_COLOURS[k]
        e = np.eye(3)[k]
        ax.plot(*drawn([np.zeros(3), reach[k] * e]).T, color=colour, lw=0.8, ls=":")
        near_end, far_end = (0.3, 0.55) if k == 1 else (0.6, 0.85)
        tail, head = drawn(near_end * reach[k] * e), drawn(far_end * reach[k] * e)
        draw_arrow(ax, tail, head, vel, color=colour, lw=2.4)
        arc = rotation_arc(k, reach[k], radius)
        draw_arc_with_head(ax, drawn(arc), f"arc-{rate}", colour)
        end = drawn(reach[k] * e)
        letter = {0: [0.3 * radius, 0.3 * radius], 1: [-0.5 * radius, 0.2 * radius], 2: [0.0, 0.8 * radius]}[k]
        ax.text(*(end + letter), "xyz"[k], color=colour, fontsize=12, fontweight="bold",
                ha={0: "left", 1: "right", 2: "center"}[k], va="bottom" if k == 2 else "baseline")
        if k == 0:
            ax.text(*(0.5 * (tail + head) + [0.0, -0.4 * radius]), f"{move} ${vel}$", color=colour,
                    ha="center", va="top")
            ax.text(*(end + [0.0, -1.3 * radius]), f"{turn} ${rate}$", color=colour, ha="center", va="top")
        elif k == 1:
            ax.text(*(0.5 * (tail + head) + [0.5 * radius, -0.2 * radius]), f"{move} ${vel}$",
                    color=colour, ha="left", va="top")
            ax.text(*(end + [1.3 * radius, 0.0]), f"{turn} ${rate}$", color=colour, ha="left",
                    va="center")
        else:
            ax.text(*(0.5 * (tail + head) + [-0.3 * radius, 0.0]), f"{move} ${vel}$", color=colour,
                    ha="right", va="center")
            ax.text(*(end + [-1.3 * radius, 0.0]), f"{turn} ${rate}$", color=colour, ha="right",
                    va="center")
    draw_point(ax, drawn(np.zeros(3)), "O", size=5)
    draw_point(ax, drawn(body.r_g), "G", color="tab:purple", size=5)
    ax.text(*(drawn(np.zeros(3)) + [0.8, 0.8]), "$O$")
    ax.text(*(drawn(body.r_g) + [-0.8, -0.8]), "$G$", color="tab:purple", ha="right", va="top")
    ax.text(*(drawn([-hull.length / 2, -hull.beam / 2, -hull.draught]) + [0.0, -1.0]),
            "stern", ha="center", va="top", fontsize=8, color="0.35")
    ax.text(*(drawn([hull.length / 2, 0.0, top]) + [1.0, 1.0]), "bow", fontsize=8, color="0.35")
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_axis_off()
    ax.set_title("The six motions in the body frame, positive senses (oblique view)", fontsize=10,
                 pad=22)
    scale_note = "" if length_scale == 1.0 else f"; hull length drawn x{length_scale:.2f}"
    ax.text(1.0, 0.0, f"arcs turn by the right-hand rule{scale_note}", transform=ax.transAxes,
            fontsize=8, color="0.35", ha="right")
    return fig


def towline_figure(body, tau, hull=COURSE_HULL):
    """Problem 6: a surge force, where it acts, and its moments about O and about G.

    The line of action of the load ``tau = [F, M_O]`` is the set of points
    ``F x M_O / |F|^2 + s F`` (the moment about any point on it is parallel to
    F); the force is drawn where that line leaves the bow. Its moment about G is
    ``M_G = M_O - r_G x F`` (eq-ext-moment); for a tow along x through O the
    moment about O is zero, and about G it is the pull times the height of the
    line above G, which pitches the bow down.

    Parameters
    ----------
    body : RigidBody
    tau : array_like, shape (6,)
        ``[X, Y, Z, K, M, N]`` about O, N and N m; the drawing is the x-z plane,
        so Y, K and N must be zero and X non-zero.
    hull : Hull, optional

    Returns
    -------
    matplotlib.figure.Figure
        Arrow ``"force"`` (tail at the point of application), points ``"O"``,
        ``"G"``, ``"A"`` (the point of application); arc ``"arc-M_G"`` with head,
        turning in the sense of the pitch moment about G; line ``"lever"`` from G
        square to the line of action.

    Examples
    --------
    >>> from rbtutor.problems import load_data, vessel
    >>> data = load_data()
    >>> fig = towline_figure(vessel(data), data["tow"]["tau"])
    >>> [t.get_gid() for t in fig.axes[0].texts if t.get_gid() == "force"]
    ['force']
    """
    import matplotlib.pyplot as plt

    body, hull = as_rigid_body(body), as_hull(hull)
    tau = as_array("tau", tau, (6,))
    force, moment_o = tau[:3], tau[3:]
    if force[1] != 0.0 or moment_o[0] != 0.0 or moment_o[2] != 0.0:
        raise ValueError(f"expected a load in the x-z plane (Y = K = N = 0), got {tau.tolist()}")
    if force[0] == 0.0:
        raise ValueError(f"expected a non-zero surge force X, got {tau.tolist()}")
    r_g = body.r_g
    on_line = np.cross(force, moment_o) / float(force @ force)
    half = hull.length / 2.0
    point = on_line + (half - on_line[0]) / force[0] * force
    moment_g = moment_o - np.cross(r_g, force)
    unit = force / np.linalg.norm(force)
    foot = on_line + float((r_g - on_line) @ unit) * unit  # nearest point of the line to G

    fig, (ax, near) = plt.subplots(2, 1, figsize=(9.0, 6.4), layout="constrained",
                                   gridspec_kw={"height_ratios": [1.0, 1.3]})
    top = hull.depth - hull.draught
    right = half + 0.35 * hull.length
    line_x = np.array([-half - 4.0, right])
    line_z = on_line[2] + (line_x - on_line[0]) * force[2] / force[0]
    for panel, fill in ((ax, "0.88"), (near, "0.96")):
        panel.axhspan(-hull.draught - 3.0, 0.0, color="tab:cyan", alpha=0.15, lw=0)
        panel.axhline(0.0, color="tab:cyan", lw=1.0)
        panel.fill(*profile_outline(hull).T, facecolor=fill, edgecolor="k", lw=1.2, alpha=0.8)
        panel.plot(line_x, line_z, color="tab:red", lw=0.9, ls="--")
        panel.grid(True, alpha=0.25)

    # (a) the whole ship, to scale
    length = 0.25 * hull.length
    draw_arrow(ax, point[[0, 2]], (point + length * unit)[[0, 2]], "force", color="tab:red", lw=2.4)
    ax.text(*(point + 0.5 * length * unit)[[0, 2]] + [0.0, 0.8],
            f"towline pull $X$ = {force[0]:.2e} N", color="tab:red", ha="center", va="bottom", fontsize=9)
    draw_point(ax, point[[0, 2]], "A", color="tab:red", size=5)
    ax.text(point[0] - 1.0, point[2] - 0.9, "$A$", color="tab:red", ha="right", va="top")
    draw_point(ax, (0.0, 0.0), "O", size=4)
    draw_point(ax, r_g[[0, 2]], "G", color="tab:purple", size=4)
    ax.text(-half - 3.0, line_z[0] + 0.4, "line of action", color="tab:red", fontsize=8, va="bottom")
    ax.set(xlim=(-half - 4.0, right), ylim=(-hull.draught - 3.0, top + 6.0), aspect="equal",
           xlabel="$x$ (m)", ylabel="$z$ (m)")
    ax.set_title("(a) Problem 6: towline along $x$, seen from starboard, to scale", fontsize=10)

    # (b) around O and G, enlarged: the lever arm and the moments
    draw_point(near, (0.0, 0.0), "O-detail", size=6)
    draw_point(near, r_g[[0, 2]], "G-detail", color="tab:purple", size=6)
    near.text(0.25, 0.25, "$O$", va="bottom")
    near.text(r_g[0] - 0.3, r_g[2] - 0.2, "$G$", ha="right", va="top", color="tab:purple")
    (lever,) = near.plot([r_g[0], foot[0]], [r_g[2], foot[2]], color="tab:purple", lw=1.2)
    lever.set_gid("lever")
    arm = float(np.linalg.norm(foot - r_g))
    if arm > 0.0:
        near.text(r_g[0] + 0.25, 0.5 * (r_g[2] + foot[2]), f"lever arm $d$ = {arm:.2f} m",
                  color="tab:purple", va="center", fontsize=9)
    # pitch moment about G: positive about y (into the page) turns x towards -z, clockwise here
    pitch = float(moment_g[1])
    radius = 0.9
    if pitch != 0.0:
        sweep = np.linspace(0.0, 1.4 * math.pi, 50) * (-1.0 if pitch > 0 else 1.0) + math.pi
        arc = np.column_stack([r_g[0] + radius * np.cos(sweep), r_g[2] + radius * np.sin(sweep)])
        draw_arc_with_head(near, arc, "arc-M_G", "tab:purple")
        sense = "bow down" if pitch > 0 else "bow up"
        near.text(r_g[0] - radius - 0.3, r_g[2], f"$M_G = X d$\n({sense})", color="tab:purple",
                  ha="right", va="center", fontsize=9)
    moment_o_text = ("$M_O$ = 0: the line of action\npasses through $O$" if not np.any(moment_o)
                     else f"$M_O$ = {moment_o[1]:.2e} N m about $y$")
    near.text(0.98, 0.95, moment_o_text, transform=near.transAxes, ha="right", va="top", fontsize=9)
    draw_arrow(near, (1.5, on_line[2] + 1.5 * force[2] / force[0]), (3.5, on_line[2] + 3.5 * force[2] / force[0]),
           "force-detail", color="tab:red", lw=2.0)
    near.text(3.6, on_line[2] + 0.15, "$X$", color="tab:red", va="bottom")
    xs = [0.0, r_g[0], foot[0]]
    zs = [0.0, r_g[2], foot[2]]
    near.set(xlim=(min(xs) - 4.0, max(xs) + 4.5), ylim=(min(zs) - 1.5, max(zs) + 1.5), aspect="equal",
             xlabel="$x$ (m)", ylabel="$z$ (m)")
    near.set_title("(b) around $O$ and $G$, enlarged (equal scales)", fontsize=10)
    return fig


def heel_couple_figure(body, nu, gm, g=9.81, hull=COURSE_HULL, min_heel_deg=20.0):
    """Problem 3: the couple that heels a ship in a steady turn, in a midship section.

    Seen from astern (port on the left). The turn needs a sideways force towards
    its centre; in the rigid-body model it is the sway entry Y of ``C_RB(nu) nu``,
    applied at O on the waterline, and the mass, concentrated at G, answers with
    an equal force the other way. The two are ``|z_G|`` apart, and their couple is balanced
    by weight at G and buoyancy through the metacentre M, a distance GM above G,
    at the heel ``phi`` of :func:`rbtutor.problems.steady_heel`.

    Parameters
    ----------
    body : RigidBody
    nu : array_like, shape (6,)
        The steady motion, m/s and rad/s.
    gm : float, m
        Metacentric height (positive: a stable ship).
    g : float, m/s^2
    hull : Hull, optional
    min_heel_deg : float, deg
        The section is drawn heeled by at least this much, in the direction of the
        computed heel, so the angle can be seen (a heel of about one degree
        cannot); zero draws the true angle.

    Returns
    -------
    matplotlib.figure.Figure
        Points ``"O"``, ``"G"``, ``"M"``, ``"B"``; arrows ``"weight"`` (down from G),
        ``"buoyancy"`` (up through B), ``"turning-force"`` (at O), ``"reaction"``
        (at G); lines ``"centreline"`` (heeled) and ``"vertical"``. Drawing
        coordinates: horizontal ``-y`` (to starboard), vertical ``z``, m.

    Examples
    --------
    >>> from rbtutor.problems import load_data, vessel
    >>> data = load_data()
    >>> fig = heel_couple_figure(vessel(data), data["turn"]["nu"], data["turn"]["gm"])
    >>> sorted(l.get_gid() for l in fig.axes[0].lines if l.get_gid() in ("G", "M"))
    ['G', 'M']
    """
    import matplotlib.pyplot as plt

    from .problems import steady_heel

    body, hull = as_rigid_body(body), as_hull(hull)
    nu = as_array("nu", nu, (6,))
    gm, g = as_positive("gm", gm), as_positive("g", g)
    _, phi = steady_heel(body, nu, gm, g)
    floor = math.radians(float(min_heel_deg))
    drawn = 0.0 if phi == 0.0 else math.copysign(max(abs(phi), floor), phi)
    turning = float(body.coriolis_forces(nu)[1])  # Y at O: towards port when positive
    c, s = math.cos(drawn), math.sin(drawn)

    def view(y, z):
        """Body (y, z) heeled by the drawn angle about x, as drawing (-y, z)."""
        return np.array([-(c * y - s * z), s * y + c * z])

    r_g = body.r_g
    g_pt = view(r_g[1], r_g[2])
    m_pt = view(r_g[1], r_g[2] + gm)
    b_pt = np.array([m_pt[0], -0.45 * hull.draught])
    section = np.array([view(y, z) for y, z in section_outline(hull)])

    fig, ax = plt.subplots(figsize=(7.0, 5.4), layout="constrained")
    b, top = hull.beam / 2.0, hull.depth - hull.draught
    ax.axhspan(-hull.draught - 4.0, 0.0, color="tab:cyan", alpha=0.15, lw=0)
    ax.axhline(0.0, color="tab:cyan", lw=1.0)
    ax.fill(*section.T, facecolor="0.9", edgecolor="k", lw=1.2, zorder=1)
    (vertical,) = ax.plot([0.0, 0.0], [-hull.draught - 2.0, top + 5.0], color="0.4", lw=0.8, ls=":")
    vertical.set_gid("vertical")
    ends = np.array([view(0.0, -hull.draught - 2.0), view(0.0, top + 5.0)])
    (centre,) = ax.plot(*ends.T, color="k", lw=0.9, ls="-.")
    centre.set_gid("centreline")
    if drawn != 0.0:
        # the heeled centreline points at angle pi/2 - phi in the drawing (x = -y)
        sweep = np.linspace(math.pi / 2.0, math.pi / 2.0 - drawn, 20)
        rad = top + 3.5
        (heel_arc,) = ax.plot(rad * np.cos(sweep), rad * np.sin(sweep), color="k", lw=1.0)
        heel_arc.set_gid("heel-arc")
        mid = math.pi / 2.0 - drawn / 2.0
        ax.text(1.15 * rad * math.cos(mid), 1.08 * rad * math.sin(mid), r"$\phi$", ha="center",
                va="bottom", fontsize=12)

    force_len = 0.35 * hull.beam
    vertical_len = min(2.5, 0.4 * hull.draught)
    # weight and buoyancy: equal and opposite, GZ = GM sin(phi) apart (the righting couple)
    away = math.copysign(1.0, g_pt[0] - m_pt[0]) if g_pt[0] != m_pt[0] else 1.0
    draw_arrow(ax, g_pt, g_pt + [0.0, -vertical_len], "weight", color="k", lw=2.0)
    ax.text(g_pt[0] + away * 0.4, g_pt[1] - vertical_len, "$mg$", va="center",
            ha="left" if away > 0 else "right", fontsize=10)
    draw_arrow(ax, b_pt - [0.0, vertical_len], b_pt, "buoyancy", color="tab:blue", lw=2.0)
    ax.text(b_pt[0] - away * 0.4, b_pt[1] - vertical_len, r"buoyancy $\rho g \nabla = mg$",
            color="tab:blue", va="center", ha="right" if away > 0 else "left", fontsize=9)
    ax.plot([b_pt[0], m_pt[0]], [b_pt[1], m_pt[1]], color="tab:blue", lw=0.7, ls="--")
    if turning != 0.0:
        side = -math.copysign(1.0, turning)  # drawing x is -y: a force to port points left
        draw_arrow(ax, (0.0, 0.0), (side * force_len, 0.0), "turning-force", color="tab:red", lw=2.0)
        ax.text(side * force_len, 0.5, "$Y$ at $O$\n(towards the turn centre)", color="tab:red",
                ha="center", va="bottom", fontsize=8)
        draw_arrow(ax, g_pt, g_pt + [-side * force_len, 0.0], "reaction", color="tab:orange", lw=2.0)
        ax.text(g_pt[0] - side * force_len, g_pt[1] - 0.6, "$-Y$ at $G$\n(inertial reaction)",
                color="tab:orange", ha="center", va="top", fontsize=8)
    draw_point(ax, (0.0, 0.0), "O", size=5)
    draw_point(ax, g_pt, "G", color="tab:purple", size=6)
    draw_point(ax, m_pt, "M", marker="^", color="tab:blue", size=6)
    draw_point(ax, b_pt, "B", marker="s", color="tab:blue", size=5)
    ax.text(-0.5, 0.4, "$O$", ha="right", va="bottom")
    ax.text(g_pt[0] - 0.6, g_pt[1], "$G$", ha="right", va="center", color="tab:purple")
    ax.text(m_pt[0] + 0.6, m_pt[1], "$M$", ha="left", va="center", color="tab:blue")
    ax.text(b_pt[0] - 0.6, b_pt[1], "$B$", ha="right", va="center", color="tab:blue")
    ax.text(-b - 3.0, top + 4.0, "port", ha="left", fontsize=9)
    ax.text(b + 3.0, top + 4.0, "starboard", ha="right", fontsize=9)
    true = f"true heel {math.degrees(phi):+.2f}°" if drawn == phi else "heel exaggerated for visibility"
    ax.text(0.01, 0.01, f"seen from astern; arrow lengths not to scale; {true}",
            transform=ax.transAxes, fontsize=8, color="0.35")
    ax.set(xlim=(-b - 4.0, b + 4.0), ylim=(-hull.draught - 4.0, top + 7.0), aspect="equal",
           xlabel="$-y$, towards starboard (m)", ylabel="$z$ (m)")
    ax.set_title("Problem 3: heeling couple in a steady turn, midship section", fontsize=10)
    return fig


def tumbling_box_figure(mass, dimensions, spin_axis=1):
    """Problem 8: the box, its principal axes through G, its dimensions and the spin.

    The principal axes of a uniform box are its edge directions, and the moment
    of inertia about an axis grows with the size of the box across it; the axes
    are labelled smallest, intermediate and largest from :func:`rbtutor.box_inertia`.

    Parameters
    ----------
    mass : float, kg
    dimensions : array_like, shape (3,), m
        Edge lengths along x, y and z.
    spin_axis : {0, 1, 2}
        Axis of the initial spin, drawn as an arc in the positive sense.

    Returns
    -------
    matplotlib.figure.Figure
        Line ``"box"`` through the projected corners (:func:`project`); arrows
        ``"axis-x"``, ``"axis-y"``, ``"axis-z"``; texts ``"dim-x"``...; arc
        ``"spin"`` with head; point ``"G"``.

    Examples
    --------
    >>> fig = tumbling_box_figure(4.5e4, [6.0, 3.0, 2.0])
    >>> fig.axes[0].get_title()
    'Problem 8: the module and its principal axes (oblique view)'
    """
    import matplotlib.pyplot as plt

    dims = as_array("dimensions", dimensions, (3,))
    moments = box_inertia(mass, dims).diagonal()
    if spin_axis not in (0, 1, 2):
        raise ValueError(f"expected spin_axis in (0, 1, 2), got {spin_axis!r}")
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * dims / 2
    edges = [(i, j) for i in range(8) for j in range(i + 1, 8)
             if np.count_nonzero(corners[i] != corners[j]) == 1]
    path = []
    for i, j in edges:
        path += [corners[i], corners[j], [np.nan] * 3]
    drawn = project(np.array(path))

    fig, ax = plt.subplots(figsize=(7.0, 5.0), layout="constrained")
    (box,) = ax.plot(drawn[:, 0], drawn[:, 1], color="k", lw=1.2)
    box.set_gid("box")
    rank = {int(k): name for k, name in zip(np.argsort(moments, kind="stable"),
                                             ["smallest", "intermediate", "largest"], strict=True)}
    extent = float(dims.max())
    for k in range(3):
        e = np.eye(3)[k]
        reach = dims[k] / 2.0 + 0.45 * extent
        draw_arrow(ax, project(np.zeros(3)), project(reach * e), f"axis-{'xyz'[k]}", color=AXIS_COLOURS[k])
        ax.text(*(project(1.04 * reach * e) + [0.1, 0.05]), f"${'xyz'[k]}$: {rank[k]} $I$",
                color=AXIS_COLOURS[k], fontsize=9)
    # dimension labels along three edges that meet at the front lower corner
    base = np.array([-1.0, -1.0, -1.0]) * dims / 2.0
    shifts = [(0.0, -0.35), (0.15, -0.3), (-0.2, 0.0)]
    for k in range(3):
        far = base.copy()
        far[k] += dims[k]
        label = ax.text(*(project(0.5 * (base + far)) + shifts[k]), f"{dims[k]:g} m",
                        ha="right" if k == 2 else "center", va="center", fontsize=9)
        label.set_gid(f"dim-{'xyz'[k]}")
    arc = rotation_arc(spin_axis, dims[spin_axis] / 2.0 + 0.3 * extent, 0.18 * extent)
    draw_arc_with_head(ax, project(arc), "spin", AXIS_COLOURS[spin_axis])
    ax.text(*(project(arc[0]) + [0.15, 0.0]), r"initial spin $\omega_0$", color=AXIS_COLOURS[spin_axis],
            fontsize=9, va="bottom")
    draw_point(ax, project(np.zeros(3)), "G", color="tab:purple", size=5)
    ax.text(*(project(np.zeros(3)) + [-0.15, -0.15]), "$G$", color="tab:purple", ha="right", va="top")
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_axis_off()
    ax.set_title("Problem 8: the module and its principal axes (oblique view)", pad=18)
    return fig
