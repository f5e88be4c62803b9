"""Sphinx extension: the motion of a rigid body in 3D, in the browser, offline.

Loaded from _config.yml (``sphinx.local_extensions``). The directive

.. code-block:: markdown

   ```{motion-3d} problem10
   The caption (MyST), shown under the view.
   ```

computes one of the named scenes of :data:`SCENES` with rbtutor when the page is
read, keeps at most a few hundred frames, and writes into the page a ``<figure>``
holding

* a WebGL view (three.js) of the hull, its body frame (x red forward, y green to
  port, z blue up) and the inertial frame at the GCS origin, with z0 up;
* the controls: play/pause, a range input that scrubs through the frames and a
  speed select, each a labelled native control, so they work from the keyboard;
* a readout of the frame's time, its z-y-x Euler angles (degrees) and its
  Euler parameters (scalar first), side by side;
* the frames as JSON (``<script type="application/json">``): time, GCS position
  of O, Euler angles and Euler parameters per frame, all from rbtutor, so the
  script only interpolates and displays;
* the caption, and a description for screen readers built from the data (what
  moves, for how long, the range of each angle);
* a still image for print, drawn with matplotlib's 3D axes from the same frames
  and shown only by the print stylesheet (the view and its controls are hidden
  there).

The viewer is our ``static/motion3d.js``; it imports three.js and its
OrbitControls from the npm registry copy in ``.node/motion3d`` (``make bootstrap``
or ``make book`` installs it, pinned in the Makefile), and esbuild from the same
copy bundles the three into one classic script, ``_static/motion3d.bundle.js``,
when the book is written. A classic script, not an ES module, because the book
is read from ``file://`` too, where browsers refuse to load module scripts. The
build fails when that copy is missing: the book must be complete.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
ROOT = HERE.parents[1]
NODE = ROOT / ".node" / "motion3d" / "node_modules"
THREE = NODE / "three" / "build" / "three.module.js"
ESBUILD = NODE / ".bin" / "esbuild"
BUNDLE = "motion3d.bundle.js"
STYLESHEET = "motion3d.css"
MISSING = ("motion3d: three.js and esbuild from the npm registry are missing ({}): install npm "
           "(apt-get install npm) and run `make bootstrap`")

# Frames kept per scene: enough for a smooth view (the script interpolates between
# them), few enough to keep the page light.
MAX_FRAMES = 301


# --------------------------------------------------------------------------- scenes


@dataclass(frozen=True)
class Scene:
    """The frames of one motion, in SI units and radians.

    ``position`` is the GCS position of O, shape (n, 3), m; ``angles`` the z-y-x
    Euler angles ``[phi, theta, psi]``, shape (n, 3), rad; ``parameters`` the
    Euler parameters ``[theta0, theta1, theta2, theta3]``, shape (n, 4), of the
    same rotations, with signs chosen so that neighbouring frames are close.
    ``vertices`` (m, BCS) and ``faces`` (vertex indices) are the closed surface
    of the body.
    """

    name: str
    what: str            # "the supply vessel of Problem 10 under ..." for the description
    body: str            # "hull" or "box", for the description
    t: np.ndarray
    position: np.ndarray
    angles: np.ndarray
    parameters: np.ndarray
    vertices: np.ndarray
    faces: np.ndarray
    axis_length: float

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "t": self.t.tolist(),
            "position": self.position.tolist(),
            "angles": self.angles.tolist(),
            "parameters": self.parameters.tolist(),
            "vertices": self.vertices.tolist(),
            "faces": self.faces.tolist(),
            "axisLength": self.axis_length,
        }


def frame_times(t_end: float, frames: int) -> np.ndarray:
    """``frames`` equally spaced times from 0 to t_end, at most :data:`MAX_FRAMES`."""
    if not 2 <= frames <= MAX_FRAMES:
        raise ValueError(f"expected 2 to {MAX_FRAMES} frames, got {frames}")
    return np.linspace(0.0, float(t_end), frames)


def continuous_signs(parameters: np.ndarray) -> np.ndarray:
    """Flip q to -q (the same rotation) where a frame would jump away from the one before."""
    q = np.array(parameters, dtype=float)
    for k in range(1, len(q)):
        if q[k] @ q[k - 1] < 0.0:
            q[k] = -q[k]
    return q


def wrap_angles(angles: np.ndarray) -> np.ndarray:
    """Angles in (-pi, pi]; the z-y-x pitch from rbtutor already lies in [-pi/2, pi/2]."""
    return np.pi - np.mod(np.pi - np.asarray(angles, dtype=float), 2.0 * np.pi)


def hull_mesh(length: float, beam: float, draught: float, depth: float) -> tuple[np.ndarray, np.ndarray]:
    """A closed hull in the BCS: the plan outline (parallel body, pointed bow) from keel to deck.

    O lies midship, on the centreline, in the waterline: the keel at z = -draught,
    the deck at z = depth - draught. Returns vertices (10, 3) in m and triangles (16, 3).
    """
    half, b = length / 2.0, beam / 2.0
    shoulder = half - 0.15 * length
    plan = [(-half, -b), (shoulder, -b), (half, 0.0), (shoulder, b), (-half, b)]
    keel, deck = -draught, depth - draught
    vertices = np.array([(x, y, keel) for x, y in plan] + [(x, y, deck) for x, y in plan])
    return vertices, _prism_faces(len(plan))


def box_mesh(dimensions) -> tuple[np.ndarray, np.ndarray]:
    """A box centred on the body origin, edges along the body axes: vertices (8, 3), triangles (12, 3)."""
    lx, ly, lz = (float(d) / 2.0 for d in dimensions)
    plan = [(-lx, -ly), (lx, -ly), (lx, ly), (-lx, ly)]
    vertices = np.array([(x, y, -lz) for x, y in plan] + [(x, y, lz) for x, y in plan])
    return vertices, _prism_faces(len(plan))


def _prism_faces(n: int) -> np.ndarray:
    """Triangles of a prism over a convex n-gon (bottom 0..n-1, top n..2n-1), outward normals."""
    faces = []
    for k in range(1, n - 1):
        faces.append((0, k + 1, k))              # bottom, seen from below
        faces.append((n, n + k, n + k + 1))      # top, seen from above
    for k in range(n):
        j = (k + 1) % n
        faces += [(k, j, n + j), (k, n + j, n + k)]
    return np.array(faces, dtype=int)


def _prism_polygons(n: int) -> list[list[int]]:
    """The faces of a prism over an n-gon as polygons (bottom, top, n quads), for drawing its edges."""
    return [list(range(n)), list(range(n, 2 * n))] + [[k, (k + 1) % n, n + (k + 1) % n, n + k] for k in range(n)]


def _scene(name, what, body, result, mesh, axis_length, attitude_from) -> Scene:
    if attitude_from == "angles":
        from rbtutor import euler_parameters as ep

        angles = result.eta[:, 3:6]
        parameters = np.array([ep.from_euler_angles(*a) for a in angles])
    else:
        from rbtutor.euler_parameters import euler_angles_of_quaternions

        parameters = result.euler_parameters / np.linalg.norm(result.euler_parameters, axis=1, keepdims=True)
        angles = euler_angles_of_quaternions(parameters)
    vertices, faces = mesh
    return Scene(
        name=name, what=what, body=body,
        t=np.round(result.t, 6),
        position=np.round(result.position, 4),
        angles=np.round(wrap_angles(angles), 7),
        parameters=np.round(continuous_signs(parameters), 7),
        vertices=np.round(vertices, 4), faces=faces, axis_length=float(axis_length),
    )


def problem10_scene(frames: int = 241) -> Scene:
    """Problem 10: the 12-state model of the supply vessel, as book/problems/simulation.md runs it."""
    from rbtutor import simulate
    from rbtutor.figures import COURSE_HULL
    from rbtutor.problems import load_data, vessel

    data = load_data()
    tau, t_end = np.array(data["simulation"]["tau"]), data["simulation"]["t_end"]
    result = simulate(vessel(data), tau, t_end, t_eval=frame_times(t_end, frames))
    hull = COURSE_HULL
    return _scene("problem10", "the supply vessel of Problem 10, pushed by a constant thrust and yaw moment",
                  "hull", result, hull_mesh(hull.length, hull.beam, hull.draught, hull.depth),
                  0.65 * hull.length, "angles")


def _module_box():
    from rbtutor import RigidBody, box_inertia
    from rbtutor.problems import load_data

    module = load_data()["module"]
    box = RigidBody(module["mass"], [0.0, 0.0, 0.0], box_inertia(module["mass"], module["dimensions"]))
    start = np.zeros(12)
    start[3:6] = module["omega0"]
    return module, box, start


def tumbling_scene(frames: int = 301) -> Scene:
    """Problem 8: the free module for its whole run, as book/problems/tumbling.md integrates it."""
    from rbtutor import simulate

    module, box, start = _module_box()
    t_end = module["t_end"]
    result = simulate(box, np.zeros(6), t_end, start, attitude="euler_parameters",
                      t_eval=frame_times(t_end, frames))
    return _scene("tumbling", "the subsea module of Problem 8, spinning freely about its intermediate axis",
                  "box", result, box_mesh(module["dimensions"]), 0.75 * max(module["dimensions"]), "parameters")


def euler_example_scene(frames: int = 201) -> Scene:
    """The free module over its first 4 s, through pitch 90 degrees (book/euler/index.md)."""
    from rbtutor import simulate

    module, box, start = _module_box()
    result = simulate(box, np.zeros(6), 4.0, start, attitude="euler_parameters", t_eval=frame_times(4.0, frames))
    return _scene("euler-example", "the subsea module of Problem 8 in its first seconds, pitching through 90 degrees",
                  "box", result, box_mesh(module["dimensions"]), 0.75 * max(module["dimensions"]), "parameters")


SCENES = {
    "problem10": problem10_scene,
    "tumbling": tumbling_scene,
    "euler-example": euler_example_scene,
}

_cache: dict[str, Scene] = {}


def compute_scene(name: str) -> Scene:
    """The frames of the named scene (computed once per process)."""
    if name not in SCENES:
        raise ValueError(f"expected a scene name in {sorted(SCENES)}, got {name!r}")
    if name not in _cache:
        _cache[name] = SCENES[name]()
    return _cache[name]


# --------------------------------------------------------------------------- text


ANGLE_NAMES = (("roll", "φ"), ("pitch", "θ"), ("yaw", "ψ"))


def _num(value: float, digits: int) -> str:
    """A rounded number for the text, with a minus sign (U+2212) and no negative zero."""
    text = f"{value:.{digits}f}"
    if float(text) == 0.0:
        text = text.lstrip("-")
    return text.replace("-", "\u2212")


def describe(scene: Scene) -> tuple[str, str]:
    """A plain-text description of the motion, built from the frames: what the view shows (open, the
    view's description for screen readers) and the numbers of the motion (shown folded, like every
    answer in the book: where O ends and the angles reached are graded answers of Problem 10)."""
    t_end = scene.t[-1]
    start, end = scene.position[0], scene.position[-1]
    travel = float(np.linalg.norm(end - start))
    if travel < 0.01:
        place = "Its origin stays at the origin of the inertial frame."
    else:
        low, high = scene.position.min(axis=0), scene.position.max(axis=0)
        spans = ", ".join(f"{axis} between {_num(lo, 0)} and {_num(hi, 0)} m"
                          for axis, lo, hi in zip(("x0 (north)", "y0 (west)", "z0 (up)"), low, high, strict=True))
        place = (f"Its origin O ends {travel:.0f} m from where it starts; on the way it stays within "
                 f"{spans}.")
    degrees = np.degrees(scene.angles)
    ranges = "; ".join(f"{name} {symbol} between {_num(lo, 0)} and {_num(hi, 0)}"
                       for (name, symbol), lo, hi in zip(ANGLE_NAMES, degrees.min(axis=0), degrees.max(axis=0),
                                                         strict=True))
    params = "; ".join(f"θ{k} between {_num(lo, 2)} and {_num(hi, 2)}"
                       for k, (lo, hi) in enumerate(zip(scene.parameters.min(axis=0), scene.parameters.max(axis=0),
                                                        strict=True)))
    if scene.body == "hull":
        shape = "the hull, with a pointed bow, with its body axes (x red, forward; y green, to port; z blue, up)"
    else:
        shape = "the box with its body axes along its edges (x red, along the longest; y green; z blue)"
    overview = (f"A three-dimensional view of {scene.what}, over {t_end:g} s in {len(scene.t)} frames. "
                f"It shows {shape} and the axes of the inertial frame at its origin (z0 up). The readout "
                f"below the view gives the time and both attitudes of the frame shown; the play button, "
                f"the time slider and the speed menu control the view; the numbers of the motion are "
                f"under the view, folded.")
    numbers = (f"{place} Over the run the z-y-x Euler angles, in degrees, stay within: {ranges}. "
               f"The Euler parameters stay within: {params}.")
    return overview, numbers


# --------------------------------------------------------------------------- still for print


def still_times(scene: Scene) -> list[int]:
    """The frames drawn in the print still: several along a track, one pose at mid-run for a body in place."""
    n = len(scene.t)
    if float(np.linalg.norm(scene.position[-1] - scene.position[0])) > 0.01:
        return [0, (n - 1) // 2, n - 1]
    return [n // 2]


def render_still(scene: Scene, path: Path) -> list[int]:
    """Draw the print still (matplotlib 3D axes, z0 up) into ``path`` (PNG); return the frames drawn."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    from rbtutor.euler_parameters import rotation_matrix_ep

    chosen = still_times(scene)
    fig = plt.figure(figsize=(6.4, 4.6), dpi=110)
    ax = fig.add_subplot(projection="3d")
    moving = len(chosen) > 1
    if moving:
        ax.plot(*scene.position.T, color="0.5", lw=1.0, label="track of O")
    points = [scene.position]
    for rank, k in enumerate(chosen):
        rot = rotation_matrix_ep(scene.parameters[k])
        world = scene.vertices @ rot.T + scene.position[k]
        points.append(world)
        shade = 0.35 + 0.5 * (rank + 1) / len(chosen)
        ax.add_collection3d(Poly3DCollection([world[face] for face in _prism_polygons(len(world) // 2)],
                                             facecolor=(0.55, 0.65, 0.8, 0.25 + 0.3 * shade),
                                             edgecolor=(0.1, 0.1, 0.2, 0.8), lw=0.6))
        if k == chosen[-1] or not moving:
            for axis, (colour, name) in enumerate(zip(("tab:red", "tab:green", "tab:blue"), "xyz", strict=True)):
                tip = scene.position[k] + rot[:, axis] * scene.axis_length
                ax.plot(*np.column_stack([scene.position[k], tip]), color=colour, lw=2.0)
                ax.text(*tip, name, color=colour, fontsize=8)
        ax.text(*(scene.position[k] + [0.0, 0.0, 0.35 * scene.axis_length]), f"t = {scene.t[k]:g} s", fontsize=7)
    if not moving:
        # The path of the tip of the body x axis over the run shows how the body turned.
        tips = np.array([rotation_matrix_ep(q)[:, 0] for q in scene.parameters]) * scene.axis_length
        ax.plot(*(tips + scene.position).T, color="tab:red", lw=0.7, alpha=0.5, label="path of the body x-axis tip")
    gcs = scene.axis_length
    for axis, (colour, label) in enumerate(zip(("darkred", "darkgreen", "darkblue"), ("x0", "y0", "z0"), strict=True)):
        tip = np.zeros(3)
        tip[axis] = gcs
        ax.plot(*np.column_stack([np.zeros(3), tip]), color=colour, lw=1.2, ls="--")
        ax.text(*tip, label, color=colour, fontsize=8)
    allpoints = np.vstack(points)
    low = allpoints.min(axis=0) - 0.15 * gcs
    high = allpoints.max(axis=0) + 0.15 * gcs
    # Equal scales on the three axes: each box side as long as its range.
    ax.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), zlim=(low[2], high[2]),
           xlabel="x0 (m)", ylabel="y0 (m)", zlabel="z0 (m)")
    ax.set_box_aspect(tuple(high - low))
    ax.locator_params(axis="z", nbins=3)
    ax.view_init(elev=35.0 if moving else 22.0, azim=-120.0)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    return chosen


# --------------------------------------------------------------------------- the node


class motion3d_node(nodes.General, nodes.Element):
    """The figure: its children are the caption; the scene travels in the attributes."""


class MotionDirective(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec: ClassVar[dict] = {"name": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        if name not in SCENES:
            raise self.error(f"motion-3d: unknown scene {name!r}; the scenes are {', '.join(sorted(SCENES))}")
        scene = compute_scene(name)
        node = motion3d_node()
        node["scene"] = name
        node["data"] = json.dumps(scene.to_json(), separators=(",", ":"))
        node["description"], node["numbers"] = describe(scene)
        node["uid"] = f"motion3d-{name}-{self.env.new_serialno('motion3d')}"
        self.set_source_info(node)
        if self.content:
            self.state.nested_parse(self.content, self.content_offset, node)
        if "name" in self.options:
            self.add_name(node)
        return [node]


DASH = "\u2013"   # shown in the readout until the script fills it
SPEEDS = ("0.25", "0.5", "1", "2", "4", "8")
_rendered: set[Path] = set()


def visit_html(self, node: motion3d_node) -> None:
    uid = node["uid"]
    scene = compute_scene(node["scene"])
    png = f"{node['scene']}-still.png"
    outdir = Path(self.builder.outdir) / self.builder.imagedir
    if (outdir / png) not in _rendered:
        render_still(scene, outdir / png)
        _rendered.add(outdir / png)
    chosen = still_times(scene)
    when = ", ".join(f"{scene.t[k]:g}" for k in chosen)
    alt = (f"Still of the motion for print: the {'hull' if scene.body == 'hull' else 'box'} at t = {when} s, "
           f"with its body axes and the inertial axes.")
    n = len(scene.t)
    speed_options = "".join(f'<option value="{s}"{" selected" if s == "1" else ""}>{s}×</option>' for s in SPEEDS)
    ep_heads = "".join(f'<th scope="col">θ<sub>{k}</sub></th>' for k in range(4))
    ep_cells = "".join(f'<td data-q="{k}">{DASH}</td>' for k in range(4))
    data = node["data"].replace("</", "<\\/")
    self.body.append(
        f'<figure class="rbtutor-motion3d" id="{uid}" data-scene="{html.escape(node["scene"])}">\n'
        f'<div class="rbtutor-motion3d-view" role="img" aria-label="Three-dimensional view of the motion" '
        f'aria-describedby="{uid}-description"></div>\n'
        f'<div class="rbtutor-motion3d-controls">'
        f'<button type="button" class="rbtutor-motion3d-play" aria-controls="{uid}">Play</button> '
        f'<label for="{uid}-time">Time</label> '
        f'<input type="range" id="{uid}-time" class="rbtutor-motion3d-time" min="0" max="{n - 1}" step="1" '
        f'value="0" aria-valuetext="t = 0 s"> '
        f'<label for="{uid}-speed">Speed</label> '
        f'<select id="{uid}-speed" class="rbtutor-motion3d-speed">{speed_options}</select>'
        f'</div>\n'
        f'<div class="rbtutor-motion3d-readout-box"><table class="rbtutor-motion3d-readout" aria-live="polite">'
        f'<caption class="rbtutor-visually-hidden">Time and attitude of the frame shown</caption>'
        f'<thead><tr><td></td><th scope="colgroup" colspan="3">Euler angles, z-y-x</th>'
        f'<th scope="colgroup" colspan="4">Euler parameters</th></tr>'
        f'<tr><th scope="col">t (s)</th><th scope="col">φ (°)</th><th scope="col">θ (°)</th>'
        f'<th scope="col">ψ (°)</th>{ep_heads}</tr></thead>'
        f'<tbody><tr><td data-t>{DASH}</td><td data-angle="0">{DASH}</td><td data-angle="1">{DASH}</td>'
        f'<td data-angle="2">{DASH}</td>{ep_cells}</tr></tbody></table></div>\n'
        f'<img class="rbtutor-motion3d-still" src="{self.builder.imgpath}/{png}" alt="{html.escape(alt)}">\n'
        f'<p class="rbtutor-visually-hidden" id="{uid}-description">{html.escape(node["description"])}</p>\n'
        f'<details class="rbtutor-motion3d-numbers"><summary>The numbers of this motion</summary>'
        f'<p>{html.escape(node["numbers"])}</p></details>\n'
        f'<script type="application/json" class="rbtutor-motion3d-data">{data}</script>\n'
        f'<figcaption>'
    )


def depart_html(self, node: motion3d_node) -> None:
    scene = compute_scene(node["scene"])
    when = ", ".join(f"{scene.t[k]:g}" for k in still_times(scene))
    self.body.append(
        f'<p class="rbtutor-motion3d-print-note">The still shows the motion at t = {when} s; the online book '
        'shows it in 3D, where it can be played, paused and scrubbed.</p>'
        '</figcaption>\n</figure>\n'
    )


def skip(self, node) -> None:
    raise nodes.SkipNode


# --------------------------------------------------------------------------- assets


def check_tools(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    missing = [str(p.relative_to(ROOT)) for p in (THREE, ESBUILD) if not p.exists()]
    if missing:
        raise ExtensionError(MISSING.format(", ".join(missing)))


def add_page_assets(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if doctree is not None and next(iter(doctree.findall(motion3d_node)), None) is not None:
        app.add_js_file(BUNDLE, defer="defer")
        app.add_css_file(STYLESHEET)


def bundle(app: Sphinx, exception) -> None:
    """Bundle static/motion3d.js with three.js into one classic script in _static (esbuild)."""
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / BUNDLE
    argv = [str(ESBUILD), str(STATIC / "motion3d.js"), "--bundle", "--format=iife", "--minify",
            "--target=es2019", "--log-level=warning", f"--outfile={target}"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "NODE_PATH": str(NODE)})
    if proc.returncode != 0:
        raise ExtensionError(f"motion3d: esbuild failed ({proc.returncode}): {proc.stderr.strip()}")


def add_static_path(app: Sphinx, config) -> None:
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    # no singlehtml= here: a handler under a builder's own name makes Sphinx ignore every node's html
    # handlers for that builder (registry.create_translator), and the PDF's single page then fails
    app.add_node(motion3d_node, html=(visit_html, depart_html),
                 latex=(skip, None), text=(skip, None), man=(skip, None), texinfo=(skip, None))
    app.add_directive("motion-3d", MotionDirective)
    app.connect("config-inited", add_static_path)
    app.connect("builder-inited", check_tools)
    app.connect("html-page-context", add_page_assets)
    app.connect("build-finished", bundle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
