"""Loads on the hull: the towline and the heeling couple, drawn on the course hull."""

from __future__ import annotations

import math

import numpy as np

from .._checks import as_array, as_positive
from ..problems import steady_heel
from .drawing import (
    COURSE_HULL,
    as_hull,
    as_rigid_body,
    draw_arc_with_head,
    draw_arrow,
    draw_point,
    profile_outline,
    section_outline,
)


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
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
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
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
    import matplotlib.pyplot as plt


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
