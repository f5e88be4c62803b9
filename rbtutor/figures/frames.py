"""The frames and the six motions: figures of the body-fixed and inertial frames on the course hull."""

from __future__ import annotations

import math

import numpy as np

from .._checks import as_array, as_positive
from ..kinematics import rotation_matrix
from .drawing import (
    AXIS_COLOURS,
    COURSE_HULL,
    as_hull,
    as_rigid_body,
    draw_arc_with_head,
    draw_arrow,
    draw_point,
    plan_outline,
    profile_outline,
    project,
    rotation_arc,
)

# GCS position of O (m) and heading (rad) of the hull in the plan view of frames_figure.
_EXAMPLE_POSE = (70.0, 45.0, math.radians(30.0))


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
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
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
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
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
