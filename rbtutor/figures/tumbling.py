"""The tumbling box: torque-free rotation about each principal axis."""

from __future__ import annotations

import numpy as np

from .._checks import as_array
from ..inertia import box_inertia
from .drawing import AXIS_COLOURS, draw_arc_with_head, draw_arrow, draw_point, project, rotation_arc


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
    # deferred: matplotlib.pyplot takes 616 ms to import (-X importtime, 2026-12-06); only plots need it
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
