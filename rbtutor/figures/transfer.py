"""Moving a velocity and a moment from O to another point of the body: two figures on the course hull.

:func:`point_velocity_figure` draws the velocity of a body point P, ``v_P = v_O + omega x r_P``, in a plan
view; :func:`moment_transfer_figure` draws a force, its moments about O and about G and the term
``r_G x F`` between them, in a side view.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import as_array, as_positive
from ..kinematics import cross3
from ..rigid_body import shift_load, shift_velocity
from .drawing import (
    COURSE_HULL,
    as_hull,
    as_rigid_body,
    draw_arc_with_head,
    draw_arrow,
    draw_point,
    plan_outline,
    profile_outline,
)

# Colours of the three velocity arrows and of the two moments.
_V_O, _SPIN, _V_P = "tab:blue", "tab:orange", "tab:red"
_AT_O, _AT_G = "k", "tab:purple"


def _in_units(value: float, unit: str) -> str:
    """``value`` with a prefix that leaves at most three digits before the point: -58.86 MN m."""
    size = abs(value)
    factor, prefix = next(((f, p) for f, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")) if size >= f), (1.0, ""))
    return f"{value / factor:.4g} {prefix}{unit}"


def point_velocity_figure(nu, r_p, hull=COURSE_HULL, scale=None):
    """The velocity of a point P of the hull as the sum ``v_P = v_O + omega x r_P``, seen from above.

    Illustrates eq-vel-triangle-law-2 resolved in the body frame: every point of
    the rigid hull moves with O and, in addition, turns about O. The plan view
    has x forward to the right and y to port upwards, so z points at the reader
    and a positive yaw rate turns counter-clockwise. The velocities are drawn
    as arrows in the same metres as the hull, ``scale`` metres for each m/s: at
    O the velocity ``v_O``; at P the same ``v_O`` (light), the turning part
    ``omega x r_P`` from its head, and their sum ``v_P`` from P, so the three
    close a triangle, and each arrow has a text ``"label-<gid>"`` with its
    components. Only the horizontal components can be drawn; a vertical
    component of ``v_P`` is printed on the figure instead.

    Parameters
    ----------
    nu : array_like, shape (6,)
        ``[u, v, w, p, q, r]``, m/s and rad/s.
    r_p : array_like, shape (3,), m
        The point P in BCS components.
    hull : Hull, optional
    scale : float, optional
        Metres of drawing for 1 m/s. By default the longest horizontal arrow is
        drawn 0.3 hull lengths long.

    Returns
    -------
    matplotlib.figure.Figure
        Points ``"O"`` and ``"P"``; arrows ``"r_P"`` (O to P, in m), ``"v_O"``
        (tail at O), ``"v_O-at-P"`` (tail at P), ``"omega_x_r_P"`` (tail at the
        head of ``"v_O-at-P"``) and ``"v_P"`` (tail at P), their drawn lengths
        ``scale`` times the (x, y) components in m/s; arc ``"arc-r"`` about O,
        turning with the yaw rate, when r is not zero. ``fig.scale`` is the
        scale used, m per m/s.

    Examples
    --------
    >>> fig = point_velocity_figure([5.0, 0, 0, 0, 0, 0.02], [50.0, 0.0, 5.0])
    >>> [t.get_gid() for t in fig.axes[0].texts if t.get_gid() == "v_P"]
    ['v_P']
    """
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
    import matplotlib.pyplot as plt

    hull = as_hull(hull)
    nu = as_array("nu", nu, (6,))
    r_p = as_array("r_p", r_p, (3,))
    v_o, omega = nu[:3], nu[3:]
    turning = cross3(omega, r_p)                    # omega x r_P
    v_p = shift_velocity(nu, r_p)[:3]               # v_O + omega x r_P
    longest = max(float(np.linalg.norm(vec[:2])) for vec in (v_o, turning, v_p))
    if scale is None:
        if longest == 0.0:
            raise ValueError(f"expected a horizontal motion to draw, got nu = {nu.tolist()}")
        scale = 0.3 * hull.length / longest
    scale = as_positive("scale", scale)

    fig, ax = plt.subplots(figsize=(9.0, 4.8), layout="constrained")
    ax.fill(*plan_outline(hull).T, facecolor="0.9", edgecolor="k", lw=1.2, zorder=0)
    origin, p_xy = np.zeros(2), r_p[:2]
    draw_arrow(ax, origin, p_xy, "r_P", color="0.45", lw=1.0, linestyle="--")
    ax.text(*(0.5 * p_xy + [0.0, -0.04 * hull.beam]), r"$\vec r_P$", color="0.35", ha="center", va="top")
    draw_arrow(ax, origin, scale * v_o[:2], "v_O", color=_V_O, lw=2.2)
    draw_arrow(ax, p_xy, p_xy + scale * v_o[:2], "v_O-at-P", color=_V_O, lw=1.4, alpha=0.45)
    tip = p_xy + scale * v_o[:2]
    draw_arrow(ax, tip, tip + scale * turning[:2], "omega_x_r_P", color=_SPIN, lw=2.2)
    draw_arrow(ax, p_xy, p_xy + scale * v_p[:2], "v_P", color=_V_P, lw=2.6)
    draw_point(ax, origin, "O", size=5)
    draw_point(ax, p_xy, "P", color=_V_P, size=6)
    ax.text(-0.02 * hull.length, -0.05 * hull.beam, "$O$", ha="right", va="top")
    ax.text(p_xy[0] - 0.01 * hull.length, p_xy[1] + 0.05 * hull.beam, "$P$", ha="right", va="bottom", color=_V_P)

    def speed(vec):
        return f"[{vec[0]:.3g}, {vec[1]:.3g}] m/s"

    legend = [("v_O", r"$\vec v_O$ = " + speed(v_o) + " (at $O$, and again at $P$, light)", _V_O),
              ("omega_x_r_P", r"$\vec\omega\times\vec r_P$ = " + speed(turning), _SPIN),
              ("v_P", r"$\vec v_P = \vec v_O + \vec\omega\times\vec r_P$ = " + speed(v_p), _V_P)]
    for k, (gid, text, color) in enumerate(legend):
        ax.text(0.01, 0.98 - 0.07 * k, text, transform=ax.transAxes, color=color, fontsize=9,
                va="top").set_gid("label-" + gid)
    notes = [f"velocity arrows: 1 m/s drawn as {scale:.3g} m",
             f"$P$ = [{r_p[0]:.3g}, {r_p[1]:.3g}, {r_p[2]:.3g}] m"]
    if v_p[2] != 0.0:
        notes.append(f"vertical component of $\\vec v_P$ (not drawn): {v_p[2]:.3g} m/s")
    ax.text(0.01, 0.02, "\n".join(notes), transform=ax.transAxes, fontsize=8, color="0.3", va="bottom")

    yaw = float(omega[2])
    if yaw != 0.0:
        radius = 0.12 * hull.beam
        sweep = np.linspace(-0.75 * math.pi, 0.5 * math.pi, 40) * math.copysign(1.0, yaw)
        arc = np.column_stack([radius * np.cos(sweep), radius * np.sin(sweep)])
        draw_arc_with_head(ax, arc, "arc-r", _SPIN)
        ax.text(-1.3 * radius, 1.1 * radius, f"$r$ = {yaw:.3g} rad/s", color=_SPIN, ha="right", va="bottom",
                fontsize=9)

    half = hull.length / 2.0
    ends = np.array([origin, p_xy, scale * v_o[:2], tip, tip + scale * turning[:2], p_xy + scale * v_p[:2]])
    low = np.minimum(ends.min(axis=0), [-half, -hull.beam / 2.0]) - [0.04 * hull.length, 0.6 * hull.beam]
    high = np.maximum(ends.max(axis=0), [half, hull.beam / 2.0]) + [0.35 * hull.length, 0.9 * hull.beam]
    ax.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), aspect="equal",
           xlabel="$x$, forward (m)", ylabel="$y$, to port (m)")
    ax.grid(True, alpha=0.25)
    ax.set_title(r"Velocity of a point of the hull, $\vec v_P = \vec v_O + \vec\omega\times\vec r_P$, "
                 "seen from above", fontsize=10)
    fig.scale = scale
    return fig


def moment_transfer_figure(body, force, point, hull=COURSE_HULL):
    """A force on the hull and its moments about O and about G, seen from starboard.

    Illustrates eq-ext-moment: the moment about G of a force F acting at P is
    ``M_G = M_O - r_G x F``, so ``M_O = M_G + r_G x F``. The view is the x-z
    plane (x to the right, z up, y into the page), so the force must lie in
    that plane and P and G on the centreline; the moments are then about y,
    and a positive one (bow down) turns clockwise. Panel (a) is the hull to
    scale with the force (its arrow of a fixed length along F), its line of
    action and the lever arms from O and from G; panel (b) enlarges the
    neighbourhood of O and G, with ``r_G`` and an arc about each point whose
    radius is proportional to the moment about it.

    Parameters
    ----------
    body : RigidBody
        Its ``r_g`` must have ``y_G = 0``.
    force : array_like, shape (3,), N
        ``[X, 0, Z]``, not zero.
    point : array_like, shape (3,), m
        The point of application ``[x_P, 0, z_P]``.
    hull : Hull, optional

    Returns
    -------
    matplotlib.figure.Figure
        Panel (a): points ``"O"``, ``"G"``, ``"P"``; arrow ``"F"`` (tail at P,
        along F); lines ``"lever-O"`` and ``"lever-G"`` from O and from G square
        to the line of action. Panel (b): points ``"O-detail"``, ``"G-detail"``;
        arrow ``"r_G"`` (O to G); arcs ``"arc-M_O"`` and ``"arc-M_G"`` with
        heads, clockwise for a positive moment about y, of radius
        ``fig.arc_scale`` times the moment (m per N m); no arc for a zero
        moment. Texts ``"M_O"``, ``"M_G"`` and ``"r_G x F"`` print the moments.

    Examples
    --------
    >>> from rbtutor.problems import load_data, vessel
    >>> fig = moment_transfer_figure(vessel(load_data()), [0.0, 0.0, -1.0e6], [-30.0, 0.0, 2.5])
    >>> sorted(a.get_gid() for a in fig.axes[1].lines if a.get_gid() in ("arc-M_O", "arc-M_G"))
    ['arc-M_G', 'arc-M_O']
    """
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
    import matplotlib.pyplot as plt

    body, hull = as_rigid_body(body), as_hull(hull)
    force = as_array("force", force, (3,))
    point = as_array("point", point, (3,))
    r_g = body.r_g
    if force[1] != 0.0 or point[1] != 0.0 or r_g[1] != 0.0:
        raise ValueError("expected a load in the x-z plane (force y = 0, point y = 0, y_G = 0), got force "
                         f"{force.tolist()}, point {point.tolist()}, r_g {r_g.tolist()}")
    if not np.any(force):
        raise ValueError(f"expected a non-zero force, got {force.tolist()}")
    moment_o = cross3(point, force)                                   # about O
    moment_g = shift_load(np.concatenate([force, moment_o]), r_g)[3:]  # M_O - r_G x F
    transfer = cross3(r_g, force)                                     # r_G x F
    unit = force / np.linalg.norm(force)

    def foot(centre):
        """The point of the line of action nearest to ``centre``."""
        return point + float((centre - point) @ unit) * unit

    fig, (ax, near) = plt.subplots(2, 1, figsize=(9.0, 7.0), layout="constrained",
                                   gridspec_kw={"height_ratios": [1.0, 1.1]})
    top, half = hull.depth - hull.draught, hull.length / 2.0
    for panel, fill in ((ax, "0.88"), (near, "0.96")):
        panel.axhspan(-hull.draught - 40.0, 0.0, color="tab:cyan", alpha=0.15, lw=0)
        panel.axhline(0.0, color="tab:cyan", lw=1.0)
        panel.fill(*profile_outline(hull).T, facecolor=fill, edgecolor="k", lw=1.2, alpha=0.8)
        panel.grid(True, alpha=0.25)

    # (a) the whole hull, to scale
    length = 0.15 * hull.length
    reach = np.array([point - 3.0 * hull.length * unit, point + 3.0 * hull.length * unit])
    ax.plot(reach[:, 0], reach[:, 2], color="tab:red", lw=0.8, ls="--")
    draw_arrow(ax, point[[0, 2]], (point + length * unit)[[0, 2]], "F", color="tab:red", lw=2.4)
    ax.text(*(point + 1.05 * length * unit)[[0, 2]] + [1.0, 0.0],
            f"$F$ = [{_in_units(force[0], 'N')}, {_in_units(force[2], 'N')}]\n(arrow not to scale)",
            color="tab:red", fontsize=9, ha="left", va="center")
    for centre, gid, color in ((np.zeros(3), "lever-O", _AT_O), (r_g, "lever-G", _AT_G)):
        end = foot(centre)
        (lever,) = ax.plot([centre[0], end[0]], [centre[2], end[2]], color=color, lw=1.2, ls=":")
        lever.set_gid(gid)
    draw_point(ax, point[[0, 2]], "P", color="tab:red", size=5)
    draw_point(ax, (0.0, 0.0), "O", size=4)
    draw_point(ax, r_g[[0, 2]], "G", color=_AT_G, size=4)
    ax.text(point[0] + 1.0, point[2] + 0.6, "$P$", color="tab:red", va="bottom")
    ax.text(1.0, 0.6, "$O$", va="bottom")
    ax.text(r_g[0] - 1.0, r_g[2] - 0.6, "$G$", color=_AT_G, ha="right", va="top")
    spots = np.array([[0.0, 0.0], r_g[[0, 2]], point[[0, 2]], (point + length * unit)[[0, 2]]])
    ax.set(xlim=(min(-half, spots[:, 0].min()) - 5.0, max(half, spots[:, 0].max()) + 0.3 * hull.length),
           ylim=(min(-hull.draught, spots[:, 1].min()) - 4.0, max(top, spots[:, 1].max()) + 4.0),
           aspect="equal", xlabel="$x$ (m)", ylabel="$z$ (m)")
    ax.set_title("(a) the force at $P$, its line of action and the lever arms from $O$ and $G$, to scale",
                 fontsize=10)

    # (b) around O and G, enlarged: r_G and the two moments
    spread = max(float(np.linalg.norm(r_g)), 1.0)
    largest = max(abs(moment_o[1]), abs(moment_g[1]))
    arc_scale = 0.4 * spread / largest if largest > 0.0 else 0.0
    draw_point(near, (0.0, 0.0), "O-detail", size=6)
    draw_point(near, r_g[[0, 2]], "G-detail", color=_AT_G, size=6)
    if np.any(r_g):
        draw_arrow(near, (0.0, 0.0), r_g[[0, 2]], "r_G", color=_AT_G, lw=1.4)
    near.text(0.1 * spread, 0.1 * spread, "$O$", va="bottom")
    near.text(r_g[0] + 0.1 * spread, r_g[2] - 0.1 * spread, "$G$", color=_AT_G, va="top")
    for centre, moment, name, color in ((np.zeros(3), moment_o[1], "M_O", _AT_O),
                                        (r_g, moment_g[1], "M_G", _AT_G)):
        if moment == 0.0:
            continue
        radius = arc_scale * abs(moment)
        # positive about y (into the page) is clockwise in this view
        sweep = math.pi / 2.0 - math.copysign(1.0, moment) * np.linspace(0.0, 1.5 * math.pi, 60)
        arc = np.column_stack([centre[0] + radius * np.cos(sweep), centre[2] + radius * np.sin(sweep)])
        draw_arc_with_head(near, arc, "arc-" + name, color)
    sense = {True: "bow down", False: "bow up"}
    lines = [(moment_o[1], "M_O", r"$M_O = (\vec r_P\times\vec F)_y$", _AT_O),
             (transfer[1], "r_G x F", r"$(\vec r_G\times\vec F)_y$", _AT_G),
             (moment_g[1], "M_G", r"$M_G = M_O - (\vec r_G\times\vec F)_y$", _AT_G)]
    for k, (value, gid, text, color) in enumerate(lines):
        what = f" ({sense[value > 0]})" if gid != "r_G x F" and value != 0.0 else ""
        near.text(0.99, 0.97 - 0.09 * k, f"{text} = {_in_units(value, 'N m')}{what}",
                  transform=near.transAxes, color=color, ha="right", va="top", fontsize=9).set_gid(gid)
    near.text(0.01, 0.02, "arc radius proportional to the moment; clockwise = positive about $y$ (bow down)",
              transform=near.transAxes, fontsize=8, color="0.3")
    reach_b = 0.45 * spread
    xs, zs = [0.0, r_g[0]], [0.0, r_g[2]]
    near.set(xlim=(min(xs) - 2.5 * reach_b, max(xs) + 5.0 * reach_b),
             ylim=(min(zs) - 1.6 * reach_b, max(*zs, top) + 2.0 * reach_b), aspect="equal",
             xlabel="$x$ (m)", ylabel="$z$ (m)")
    near.set_title("(b) around $O$ and $G$, enlarged (equal scales): the moment about each point", fontsize=10)
    fig.arc_scale = arc_scale
    return fig
