"""The schematic figures follow the data they are drawn from, and every book figure is described.

Layer (3) of the test plan, two ways: each schematic is drawn for the course data
and for a changed vessel or load, and the coordinates read back from the drawn
artists (found by their ``gid``) are compared with what the library computes
from the same data. The book pages are parsed as text: every cell that draws a
figure carries a caption, a name and alt text that describes it.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import yaml

import rbtutor
from rbtutor import RigidBody, box_inertia, rotation_matrix, simulate
from rbtutor import figures as F
from rbtutor.problems import load_data, steady_heel, vessel

ROOT = Path(__file__).resolve().parents[1]
DATA = load_data()
COURSE = vessel(DATA)
# G moved forward, to port and above the waterline: every sign in the pictures changes.
MOVED = RigidBody(COURSE.mass, [3.0, 1.5, 0.8], COURSE.inertia_g)
BODIES = {"course": COURSE, "G moved": MOVED}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def one(fig, gid):
    """The single artist tagged ``gid`` in ``fig``."""
    found = fig.findobj(match=lambda a: a.get_gid() == gid)
    assert len(found) == 1, f"expected one artist {gid!r}, found {len(found)}"
    return found[0]


def arrow_ends(fig, gid):
    """(tail, head) of an arrow drawn by rbtutor.figures, in data coordinates."""
    arrow = one(fig, gid)
    return np.asarray(arrow.xyann, dtype=float), np.asarray(arrow.xy, dtype=float)


def point(fig, gid):
    return one(fig, gid).get_xydata()[0]


def turning_sense(points_2d):
    """Signed area swept about the centroid: > 0 counter-clockwise, < 0 clockwise."""
    rel = points_2d - points_2d.mean(axis=0)
    return float(np.sum(rel[:-1, 0] * rel[1:, 1] - rel[:-1, 1] * rel[1:, 0]))


def test_import_rbtutor_does_not_import_matplotlib():
    """`import rbtutor` (and rbtutor.figures) leaves matplotlib unloaded until a figure is drawn."""
    code = "import sys, rbtutor, rbtutor.figures; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- frames


@pytest.mark.parametrize("name", list(BODIES))
def test_frames_figure_draws_r_g_to_scale(name):
    """The r_G arrows end at G = r_G in the side view, the enlarged view and the plan view."""
    body = BODIES[name]
    pose = (70.0, 45.0, math.radians(30.0))
    fig = F.frames_figure(body, pose=pose)
    for suffix in ("", "-detail"):
        tail, head = arrow_ends(fig, "r_G" + suffix)
        np.testing.assert_allclose(tail, [0.0, 0.0], atol=1e-12)
        np.testing.assert_allclose(head, body.r_g[[0, 2]], atol=1e-12)
        np.testing.assert_allclose(point(fig, "G" + suffix), body.r_g[[0, 2]], atol=1e-12)
    origin = np.array(pose[:2])
    g_plan = origin + (rotation_matrix(0.0, 0.0, pose[2]) @ body.r_g)[:2]
    np.testing.assert_allclose(point(fig, "G-plan"), g_plan, atol=1e-12)
    np.testing.assert_allclose(arrow_ends(fig, "eta1")[1], origin, atol=1e-12)
    # the body x axis in the plan view points along the heading
    tail, head = arrow_ends(fig, "x-plan")
    direction = (head - tail) / np.linalg.norm(head - tail)
    np.testing.assert_allclose(direction, [math.cos(pose[2]), math.sin(pose[2])], atol=1e-12)
    for ax in fig.axes:
        assert ax.get_xlabel().endswith("(m)")
        assert ax.get_ylabel().endswith("(m)")
        assert ax.get_aspect() == 1.0


def test_frames_figure_enlarged_view_contains_g():
    """The enlarged panel is sized from r_G, so G is inside it wherever it lies."""
    for body in BODIES.values():
        fig = F.frames_figure(body)
        detail = fig.axes[2]
        x, z = body.r_g[0], body.r_g[2]
        assert detail.get_xlim()[0] < min(x, 0)
        assert max(x, 0) < detail.get_xlim()[1]
        assert detail.get_ylim()[0] < min(z, 0)
        assert max(z, 0) < detail.get_ylim()[1]


# --------------------------------------------------------------------------- six motions


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_rotation_arc_turns_by_the_right_hand_rule(axis):
    """(point - centre) x tangent points along the axis at every point of the arc."""
    arc = F.rotation_arc(axis, 10.0, 2.0)
    centre = 10.0 * np.eye(3)[axis]
    tangent = np.gradient(arc, axis=0)
    normal = np.cross(arc - centre, tangent)
    assert np.all(normal @ np.eye(3)[axis] > 0.0)
    np.testing.assert_allclose(np.linalg.norm(arc - centre, axis=1), 2.0)


@pytest.mark.parametrize("name", list(BODIES))
@pytest.mark.parametrize("length_scale", [None, 1.0])
def test_six_motions_figure_follows_conventions(name, length_scale):
    """Arrows point along +x, +y, +z; arcs are the projected right-hand arcs; G sits at r_G."""
    body = BODIES[name]
    fig = F.six_motions_figure(body, length_scale=length_scale)
    scale = min(1.0, 2.5 * F.COURSE_HULL.beam / F.COURSE_HULL.length) if length_scale is None else 1.0
    squash = np.diag([scale, 1.0, 1.0])
    np.testing.assert_allclose(point(fig, "G"), F.project(squash @ body.r_g), atol=1e-12)
    np.testing.assert_allclose(point(fig, "O"), [0.0, 0.0], atol=1e-12)
    for k, (velocity, rate) in enumerate(zip("uvw", "pqr", strict=True)):
        tail, head = arrow_ends(fig, velocity)
        along = F.project(squash @ np.eye(3)[k])
        cross = (head - tail)[0] * along[1] - (head - tail)[1] * along[0]
        assert abs(cross) < 1e-9
        assert (head - tail) @ along > 0.0
        drawn = one(fig, f"arc-{rate}").get_xydata()
        # the drawn arc is a right-hand arc about axis k, projected: recover its centre
        # distance d and radius from the first point, then compare every point
        e = np.eye(3)
        basis = np.column_stack([F.project(squash @ e[k]), F.project(squash @ e[(k + 1) % 3])])
        distance, radius = np.linalg.solve(basis, drawn[0])
        assert distance > 0.0
        assert radius > 0.0
        expected = F.project(F.rotation_arc(k, distance, radius) @ squash.T)
        np.testing.assert_allclose(drawn, expected, atol=1e-9)
        # and it turns the way the projected (e_k+1, e_k+2) pair does
        a2, b2 = F.project(squash @ e[(k + 1) % 3]), F.project(squash @ e[(k + 2) % 3])
        assert np.sign(turning_sense(drawn)) == np.sign(a2[0] * b2[1] - a2[1] * b2[0])
        # the arrow head sits at the end of the arc and points onward
        head_tail, head_tip = arrow_ends(fig, f"arc-{rate}-head")
        np.testing.assert_allclose(head_tip, drawn[-1], atol=1e-12)
        assert (head_tip - head_tail) @ (drawn[-1] - drawn[-2]) > 0.0


# --------------------------------------------------------------------------- towline


def _tow_checks(body, tau):
    fig = F.towline_figure(body, tau)
    tau = np.asarray(tau, dtype=float)
    force, moment_o = tau[:3], tau[3:]
    tail, head = arrow_ends(fig, "force")
    application = np.array([tail[0], 0.0, tail[1]])
    # the point of application is on the line of action: its moment reproduces M_O
    np.testing.assert_allclose(np.cross(application, force), moment_o, atol=1e-6 * np.abs(force).max())
    assert abs(tail[0] - F.COURSE_HULL.length / 2.0) < 1e-9
    assert (head - tail) @ force[[0, 2]] > 0.0
    np.testing.assert_allclose(point(fig, "A"), tail, atol=1e-12)
    np.testing.assert_allclose(point(fig, "G"), body.r_g[[0, 2]], atol=1e-12)
    lever = one(fig, "lever").get_xydata()
    np.testing.assert_allclose(lever[0], body.r_g[[0, 2]], atol=1e-12)
    moment_g = moment_o - np.cross(body.r_g, force)
    assert abs(np.linalg.norm(lever[1] - lever[0]) * np.linalg.norm(force) - abs(moment_g[1])) < 1e-6
    # positive pitch (about y, into the page) is clockwise in this view
    arc = one(fig, "arc-M_G").get_xydata()
    assert np.sign(turning_sense(arc)) == -np.sign(moment_g[1])
    return fig, moment_g


def test_towline_figure_course_data_pitches_bow_down():
    """The course tow acts along x through O: no moment about O, bow-down moment about G."""
    fig, moment_g = _tow_checks(COURSE, DATA["tow"]["tau"])
    assert moment_g[1] > 0.0
    texts = " ".join(t.get_text() for t in fig.findobj(plt.Text))
    assert "$M_O$ = 0" in texts
    assert "bow down" in texts


def test_towline_figure_follows_the_data():
    """With G above the line, or the line lowered below G, the drawn moment changes sense."""
    _, moment_g = _tow_checks(MOVED, DATA["tow"]["tau"])
    assert moment_g[1] < 0.0
    x = DATA["tow"]["tau"][0]
    fig, moment_g = _tow_checks(COURSE, [x, 0.0, 0.0, 0.0, -3.0 * x, 0.0])  # line 3 m below O
    assert moment_g[1] < 0.0
    np.testing.assert_allclose(point(fig, "A"), [F.COURSE_HULL.length / 2.0, -3.0], atol=1e-12)
    _, moment_g = _tow_checks(COURSE, [x, 0.0, 0.0, 0.0, 2.0 * x, 0.0])  # 2 m above O: more bow down
    assert moment_g[1] > 0.0
    with pytest.raises(ValueError, match="x-z plane"):
        F.towline_figure(COURSE, [x, 1.0, 0.0, 0.0, 0.0, 0.0])


# --------------------------------------------------------------------------- heel


@pytest.mark.parametrize("name", list(BODIES))
def test_heel_couple_figure_follows_the_data(name):
    """G and M are drawn where the heeled hull carries them; the heel and forces have the right signs."""
    body = BODIES[name]
    nu, gm, g = DATA["turn"]["nu"], DATA["turn"]["gm"], DATA["constants"]["g"]
    _, phi = steady_heel(body, nu, gm, g)
    fig = F.heel_couple_figure(body, nu, gm, g)
    drawn = math.copysign(max(abs(phi), math.radians(20.0)), phi)
    rot = rotation_matrix(drawn, 0.0, 0.0)

    def view(p):
        q = rot @ p
        return np.array([-q[1], q[2]])

    np.testing.assert_allclose(point(fig, "G"), view(body.r_g), atol=1e-12)
    np.testing.assert_allclose(point(fig, "M"), view(body.r_g + np.array([0.0, 0.0, gm])), atol=1e-12)
    assert abs(point(fig, "B")[0] - point(fig, "M")[0]) < 1e-12  # buoyancy acts through M
    # port (drawing left, negative) goes down when phi < 0: the mast leans to the low side
    top = one(fig, "centreline").get_xydata()[1]
    assert np.sign(top[0]) == np.sign(phi)
    assert np.sign(phi) == np.sign(body.r_g[2])  # phi = z_G u r / (g GM)
    # the turning force at O points to port (left), the reaction at G to starboard
    tail, head = arrow_ends(fig, "turning-force")
    np.testing.assert_allclose(tail, [0.0, 0.0], atol=1e-12)
    assert head[0] < 0.0
    tail, head = arrow_ends(fig, "reaction")
    np.testing.assert_allclose(tail, point(fig, "G"), atol=1e-12)
    assert head[0] > tail[0]
    tail, head = arrow_ends(fig, "weight")
    np.testing.assert_allclose(tail, point(fig, "G"), atol=1e-12)
    assert head[1] < tail[1]
    assert abs(head[0] - tail[0]) < 1e-12
    # the righting couple: weight and buoyancy are GM sin(phi) apart, on the side that rights the hull
    gz = point(fig, "M")[0] - point(fig, "G")[0]
    assert abs(abs(gz) - gm * abs(math.sin(drawn))) < 1e-9


def test_heel_couple_figure_true_angle_when_asked():
    """min_heel_deg=0 draws the computed heel itself."""
    nu, gm, g = DATA["turn"]["nu"], DATA["turn"]["gm"], DATA["constants"]["g"]
    _, phi = steady_heel(COURSE, nu, gm, g)
    fig = F.heel_couple_figure(COURSE, nu, gm, g, min_heel_deg=0.0)
    top = one(fig, "centreline").get_xydata()[1]
    assert abs(math.atan2(top[0], top[1]) - phi) < 1e-12
    with pytest.raises(ValueError, match="gm"):
        F.heel_couple_figure(COURSE, nu, -1.0, g)


# --------------------------------------------------------------------------- box


@pytest.mark.parametrize("dimensions", [DATA["module"]["dimensions"], [2.0, 3.0, 6.0]])
def test_tumbling_box_figure_follows_the_data(dimensions):
    """The drawn edges are the projected box; labels give the sizes and the rank of each moment."""
    mass = DATA["module"]["mass"]
    fig = F.tumbling_box_figure(mass, dimensions)
    dims = np.asarray(dimensions, dtype=float)
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * dims / 2
    drawn = one(fig, "box").get_xydata()
    drawn = drawn[np.all(np.isfinite(drawn), axis=1)]
    expected = F.project(corners)
    assert {tuple(np.round(p, 9)) for p in drawn} == {tuple(np.round(p, 9)) for p in expected}
    assert len(drawn) == 24  # twelve edges, two ends each
    lengths = np.linalg.norm(drawn[0::2] - drawn[1::2], axis=1)
    assert np.allclose(sorted(lengths), sorted(np.linalg.norm(F.project(np.diag(dims)), axis=1).repeat(4)))
    for k, axis in enumerate("xyz"):
        assert one(fig, f"dim-{axis}").get_text() == f"{dims[k]:g} m"
    moments = box_inertia(mass, dims).diagonal()
    labels = {axis: t.get_text() for axis in "xyz" for t in fig.axes[0].texts
              if t.get_text().startswith(f"${axis}$:")}
    assert "smallest" in labels["xyz"[int(np.argmin(moments))]]
    assert "largest" in labels["xyz"[int(np.argmax(moments))]]
    spin = one(fig, "spin").get_xydata()
    expected_spin = F.project(F.rotation_arc(1, dims[1] / 2 + 0.3 * dims.max(), 0.18 * dims.max()))
    np.testing.assert_allclose(spin, expected_spin, atol=1e-12)


# --------------------------------------------------------------------------- energy plot


def test_energy_plot_axis_is_honest():
    """Problem 10's energy plot: no axis below 1e-20; exact zeros masked, round-off floored at eps."""
    sim = DATA["simulation"]
    result = simulate(COURSE, sim["tau"], sim["t_end"], t_eval=np.linspace(0.0, sim["t_end"], 181))
    fig = result.plot_energy()
    bottom = fig.axes[1]
    low, high = bottom.get_ylim()
    assert low >= 1e-20
    assert low <= np.finfo(float).eps
    relative, scale = result.relative_energy_residual()
    assert scale == pytest.approx(np.abs(result.work).max())
    assert np.isnan(relative[0])  # T(0) - T(0) - 0 is exactly zero
    finite = relative[np.isfinite(relative)]
    assert finite.min() >= np.finfo(float).eps
    assert finite.max() <= high
    assert all(ax.get_ylabel() for ax in fig.axes)
    assert fig.axes[1].get_xlabel() == "t (s)"


def test_energy_plot_of_a_body_at_rest():
    """No load and no motion: every difference is exactly zero, and the plot still has sane limits."""
    body = RigidBody(1.0, [0.0, 0.0, 0.0], np.eye(3))
    result = simulate(body, np.zeros(6), 1.0, t_eval=np.linspace(0.0, 1.0, 11))
    relative, scale = result.relative_energy_residual()
    assert scale == 1.0
    assert np.all(np.isnan(relative))
    low, high = result.plot_energy().axes[1].get_ylim()
    assert 1e-20 <= low < high < 1.0


# --------------------------------------------------------------------------- the book's figure cells

FENCE = re.compile(r"^(`{3,})\{code-cell\}[^\n]*\n", re.MULTILINE)
DRAWS = re.compile(r"plt\.show\(\)|\.plot_\w+\(|_figure\(|FuncAnimation\(")


def code_cells(text):
    """(options, source) of every code cell of a MyST markdown page."""
    cells = []
    for match in FENCE.finditer(text):
        end = text.index("\n" + match.group(1), match.end())
        body = text[match.end():end + 1].splitlines()
        options = {}
        if body and body[0].strip() == "---":
            close = body.index("---", 1)
            options = yaml.safe_load("\n".join(body[1:close])) or {}
            body = body[close + 1:]
        else:  # ":key: value" lines, which MyST reads as YAML once the colons are stripped
            lines = []
            while body and body[0].startswith(":"):
                lines.append(body.pop(0)[1:])
            options = yaml.safe_load("\n".join(lines)) or {}
        cells.append((options, "\n".join(body)))
    return cells


def figure_cells():
    cells = []
    for page in sorted((ROOT / "book").rglob("*.md")):
        if "_jupyter" in page.parts or "_ext" in page.parts:
            continue
        for options, source in code_cells(page.read_text(encoding="utf-8")):
            if DRAWS.search(source):
                cells.append((page.relative_to(ROOT).as_posix(), options, source))
    return cells


def looks_like_a_path(text):
    return bool(re.search(r"\.(png|svg|jpe?g|gif)\b|/|\\|_images", text))


def test_the_book_has_figure_cells():
    """The parser finds the figures of the book (twelve plots, the animation, five schematics)."""
    cells = figure_cells()
    assert len(cells) >= 18, [c[0] for c in cells]


@pytest.mark.parametrize(("page", "options", "source"), figure_cells(),
                         ids=lambda v: v if isinstance(v, str) and v.endswith(".md") else "")
def test_every_figure_cell_is_captioned_and_described(page, options, source):
    """Caption and fig- name in mystnb.figure; alt text that is a sentence, not a file path."""
    mystnb = options.get("mystnb") or {}
    figure = mystnb.get("figure") or {}
    caption = str(figure.get("caption", "")).strip()
    assert len(caption.split()) >= 5, f"{page}: figure cell without a caption:\n{source[:200]}"
    assert str(figure.get("name", "")).startswith("fig-"), f"{page}: figure without a fig- name"
    if "FuncAnimation(" in source:
        # the animation is HTML: its alt text and slider label are put into the page by the cell
        assert re.search(r"alt=", source), page
        assert re.search(r"aria-label", source), page
        return
    alt = str((mystnb.get("image") or {}).get("alt", "")).strip()
    assert len(alt.split()) >= 12, f"{page}: alt text missing or too short: {alt!r}"
    assert not looks_like_a_path(alt), f"{page}: alt text looks like a path: {alt!r}"


def test_figure_names_are_unique():
    """Figure names are labels for cross-references, so no two may be equal."""
    names = [((o.get("mystnb") or {}).get("figure") or {}).get("name") for _, o, _ in figure_cells()]
    names = [n for n in names if n]
    assert len(names) == len(set(names)), sorted(names)


# --------------------------------------------------------------------------- point velocity, moment transfer

VELOCITY_CASES = {
    "bow, steady turn to port": ([5.0, 0.0, 0.0, 0.0, 0.0, 0.02], [50.0, 0.0, 5.0]),
    "aft to port, all six rates": ([5.0, 0.3, -0.2, 0.08, 0.03, 0.05], [-30.0, 8.0, 5.0]),
    "starboard, turning to starboard": ([3.0, -0.5, 0.0, 0.0, 0.0, -0.04], [10.0, -6.0, -2.0]),
}


@pytest.mark.parametrize("case", list(VELOCITY_CASES))
def test_point_velocity_figure_draws_the_sum(case):
    """The arrows at P are v_O, omega x r_P and v_P = v_O + omega x r_P (rbtutor), to the stated scale."""
    nu, r_p = (np.asarray(a, dtype=float) for a in VELOCITY_CASES[case])
    fig = F.point_velocity_figure(nu, r_p)
    scale = fig.scale
    v_o, turning = nu[:3], np.cross(nu[3:], r_p)
    v_p = rbtutor.shift_velocity(nu, r_p)[:3]
    np.testing.assert_allclose(v_p, v_o + turning, atol=1e-12)
    np.testing.assert_allclose(point(fig, "O"), [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(point(fig, "P"), r_p[:2], atol=1e-12)
    np.testing.assert_allclose(arrow_ends(fig, "r_P")[1], r_p[:2], atol=1e-12)
    drawn = {}
    for gid in ("v_O", "v_O-at-P", "omega_x_r_P", "v_P"):
        tail, head = arrow_ends(fig, gid)
        drawn[gid] = (tail, (head - tail) / scale)
    np.testing.assert_allclose(drawn["v_O"][0], [0.0, 0.0], atol=1e-12)
    for gid in ("v_O-at-P", "v_P"):
        np.testing.assert_allclose(drawn[gid][0], r_p[:2], atol=1e-12)
    np.testing.assert_allclose(drawn["v_O"][1], v_o[:2], atol=1e-12)
    np.testing.assert_allclose(drawn["v_O-at-P"][1], v_o[:2], atol=1e-12)
    np.testing.assert_allclose(drawn["omega_x_r_P"][1], turning[:2], atol=1e-12)
    np.testing.assert_allclose(drawn["v_P"][1], v_p[:2], atol=1e-12)
    # the three arrows close a triangle: omega x r_P starts where v_O (at P) ends, and ends where v_P ends
    np.testing.assert_allclose(drawn["omega_x_r_P"][0], arrow_ends(fig, "v_O-at-P")[1], atol=1e-12)
    np.testing.assert_allclose(arrow_ends(fig, "omega_x_r_P")[1], arrow_ends(fig, "v_P")[1], atol=1e-12)
    # plan view: x forward to the right, y to port upwards; a positive yaw rate turns counter-clockwise
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("$x$")
    assert ax.get_ylabel().startswith("$y$, to port")
    assert ax.get_aspect() == 1.0
    assert np.sign(turning_sense(one(fig, "arc-r").get_xydata())) == np.sign(nu[5])
    labels = {t.get_gid(): t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("label-")}
    assert f"[{v_p[0]:.3g}, {v_p[1]:.3g}] m/s" in labels["label-v_P"]
    note = " ".join(t.get_text() for t in ax.texts)
    assert ("not drawn" in note) == (v_p[2] != 0.0)


def test_point_velocity_figure_scale_and_errors():
    """An explicit scale is used as given; a body at rest has nothing to draw and says so."""
    fig = F.point_velocity_figure([2.0, 0.0, 0.0, 0.0, 0.0, 0.01], [40.0, 0.0, 0.0], scale=3.0)
    tail, head = arrow_ends(fig, "v_P")
    np.testing.assert_allclose(head - tail, [6.0, 1.2], atol=1e-12)
    with pytest.raises(ValueError, match="horizontal motion"):
        F.point_velocity_figure(np.zeros(6), [40.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="r_p"):
        F.point_velocity_figure([2.0, 0, 0, 0, 0, 0], [40.0, 0.0])


# G forward of O and above the waterline: the lever of the transfer term changes sign.
G_FORWARD = RigidBody(COURSE.mass, [4.0, 0.0, 1.0], COURSE.inertia_g)
MOMENT_CASES = {
    "weight aft, course vessel": (COURSE, [0.0, 0.0, -1.962e6], [-30.0, 0.0, 2.5]),
    "inclined pull at the bow, G forward": (G_FORWARD, [3.0e5, 0.0, -1.0e5], [40.0, 0.0, 1.0]),
    "push aft through O, course vessel": (COURSE, [-2.0e5, 0.0, 0.0], [42.5, 0.0, 0.0]),
}


@pytest.mark.parametrize("case", list(MOMENT_CASES))
def test_moment_transfer_figure_draws_m_o_and_m_g(case):
    """Arc radii and senses give M_O = r_P x F and M_G = M_O - r_G x F (rbtutor.shift_load); levers agree."""
    body, force, at = MOMENT_CASES[case]
    force, at = np.asarray(force, dtype=float), np.asarray(at, dtype=float)
    fig = F.moment_transfer_figure(body, force, at)
    moment_o = np.cross(at, force)
    moment_g = rbtutor.shift_load(np.concatenate([force, moment_o]), body.r_g)[3:]
    np.testing.assert_allclose(moment_o, moment_g + np.cross(body.r_g, force), atol=1e-6)
    np.testing.assert_allclose(point(fig, "P"), at[[0, 2]], atol=1e-12)
    np.testing.assert_allclose(point(fig, "G"), body.r_g[[0, 2]], atol=1e-12)
    np.testing.assert_allclose(point(fig, "O"), [0.0, 0.0], atol=1e-12)
    tail, head = arrow_ends(fig, "F")
    np.testing.assert_allclose(tail, at[[0, 2]], atol=1e-12)
    along = head - tail
    assert abs(along[0] * force[2] - along[1] * force[0]) < 1e-9 * np.linalg.norm(force)
    assert along @ force[[0, 2]] > 0.0
    tail, head = arrow_ends(fig, "r_G")
    np.testing.assert_allclose(tail, [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(head, body.r_g[[0, 2]], atol=1e-12)
    for name, centre, moment in (("O", np.zeros(3), moment_o), ("G", body.r_g, moment_g)):
        lever = one(fig, f"lever-{name}").get_xydata()
        np.testing.assert_allclose(lever[0], centre[[0, 2]], atol=1e-12)
        assert abs(np.linalg.norm(lever[1] - lever[0]) * np.linalg.norm(force) - abs(moment[1])) \
            < 1e-9 * np.abs(moment).max() + 1e-6
        arcs = fig.findobj(match=lambda a, n=name: a.get_gid() == f"arc-M_{n}")
        if moment[1] == 0.0:
            assert arcs == []
            continue
        arc = one(fig, f"arc-M_{name}").get_xydata()
        radius = np.linalg.norm(arc - centre[[0, 2]], axis=1)
        np.testing.assert_allclose(radius, fig.arc_scale * abs(moment[1]), rtol=1e-9)
        # positive about y (into the page, seen from starboard) is clockwise
        assert np.sign(turning_sense(arc)) == -np.sign(moment[1])
    texts = {t.get_gid(): t.get_text() for t in fig.axes[1].texts if t.get_gid()}
    assert set(texts) >= {"M_O", "M_G", "r_G x F"}
    side = fig.axes[0]
    assert side.get_xlabel() == "$x$ (m)"
    assert side.get_ylabel() == "$z$ (m)"
    assert all(ax.get_aspect() == 1.0 for ax in fig.axes)


def test_moment_transfer_figure_course_example_reads_bow_up():
    """A weight aft of O and of G pitches the bow up about both; the labels say so."""
    fig = F.moment_transfer_figure(COURSE, [0.0, 0.0, -1.0e6], [-30.0, 0.0, 2.5])
    texts = {t.get_gid(): t.get_text() for t in fig.axes[1].texts if t.get_gid()}
    assert "bow up" in texts["M_O"]
    assert "bow up" in texts["M_G"]
    assert "-30 MN m" in texts["M_O"]
    with pytest.raises(ValueError, match="x-z plane"):
        F.moment_transfer_figure(COURSE, [0.0, 1.0, 0.0], [-30.0, 0.0, 2.5])
    with pytest.raises(ValueError, match="x-z plane"):
        F.moment_transfer_figure(MOVED, [0.0, 0.0, -1.0], [-30.0, 0.0, 2.5])
    with pytest.raises(ValueError, match="non-zero force"):
        F.moment_transfer_figure(COURSE, [0.0, 0.0, 0.0], [-30.0, 0.0, 2.5])
