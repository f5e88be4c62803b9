"""The course's renderer: the locked cells of the assignment notebooks that come from the course.

Two locked cells of every source notebook in ``exercises/problemNN/`` are written
here, never by hand:

* ``course_helpers`` defines ``check_form`` (shape, finiteness and structure of an
  answer, in the student's kernel, for Validate) and ``hand_in`` (passes the value
  to the grader as a ``application/vnd.rbtutor.answer+json`` output; nothing is
  judged in the student's kernel), and the ``AUTOGRADING`` flag;
* ``problem_data`` holds the numbers of the problem, from :mod:`rbtutor.problems`.

``python -m rbtutor.course render [--data FILE]`` rewrites both cells in
every notebook, so that the notebooks and the grader's reference values come
from the same data. With ``--data`` the merged data is also saved to
``exercises/problem_data.yaml``, which the grader reads; without it that file is
removed and the reference data applies.
"""

from __future__ import annotations

from pathlib import Path

from ..grading.protocol import DATA_ID, HELPERS_ID

CELL_MARKER = "# --- notebook cell ---\n"


def helpers_source() -> str:
    """Source of the locked ``course_helpers`` cell: :mod:`rbtutor.grading.student` below its marker."""
    from importlib.resources import files

    text = files("rbtutor.grading").joinpath("student.py").read_text(encoding="utf-8")
    return text.split(CELL_MARKER, 1)[1].rstrip("\n")


# What each problem's data cell defines: (variable, path in the problem data, unit, meaning).
_VESSEL = [
    ("m", "vessel.mass", "kg", "mass of the vessel"),
    ("r_G", "vessel.r_g", "m", "centre of gravity G from O, BCS components"),
    ("k_G", "vessel.radii_of_gyration", "m", "radii of gyration about G (x, y, z)"),
    ("I_xy_G", "vessel.products_of_inertia_g.xy", "kg m^2", "product of inertia about G"),
    ("I_xz_G", "vessel.products_of_inertia_g.xz", "kg m^2", "product of inertia about G"),
    ("I_yz_G", "vessel.products_of_inertia_g.yz", "kg m^2", "product of inertia about G"),
]
_G = [("g", "constants.g", "m/s^2", "gravitational acceleration")]
_TURN = [("nu_turn", "turn.nu", "m/s, rad/s", "steady turn [u, v, w, p, q, r]")]
DATA_CELLS: dict[int, list[tuple[str, str, str, str]]] = {
    1: _VESSEL,
    2: _VESSEL + _G + [
        ("r_P", "sensor.r_p", "m", "position of the motion sensor, BCS"),
        ("nu", "sensor.nu", "m/s, rad/s", "[u, v, w, p, q, r] at the instant"),
        ("nu_dot", "sensor.nu_dot", "m/s^2, rad/s^2", "their rates"),
        ("u_turn", "sensor.turn_u", "m/s", "surge speed in part (d)"),
        ("r_turn", "sensor.turn_r", "rad/s", "yaw rate in part (d)"),
    ],
    3: _VESSEL + _G + _TURN + [
        ("GM", "turn.gm", "m", "metacentric height"),
        ("z_G_raised", "turn.z_g_raised", "m", "z_G after re-ballasting, part (d)"),
    ],
    4: _VESSEL + [
        ("nu", "sensor.nu", "m/s, rad/s", "the state of Problem 2"),
        ("tau", "power.tau", "N, N m", "load [X, Y, Z, K, M, N]"),
    ],
    5: _VESSEL + _TURN,
    6: _VESSEL + [("tau_tow", "tow.tau", "N, N m", "towline load [X, Y, Z, K, M, N] at rest")],
    7: _VESSEL + [
        ("F_A", "crane.force", "N", "load-line force, BCS components"),
        ("r_A", "crane.point", "m", "where it acts, BCS"),
    ],
    8: [
        ("m_module", "module.mass", "kg", "mass of the module"),
        ("dims", "module.dimensions", "m", "outside dimensions along x, y, z"),
        ("Omega", "module.spin_rate", "rad/s", "steady spin rate for part (c)"),
        ("omega0", "module.omega0", "rad/s", "initial angular velocity for part (d)"),
        ("t_end", "module.t_end", "s", "duration of the integration in part (d)"),
    ],
    9: _VESSEL + _G + _TURN + [
        ("m_L", "load.mass", "kg", "mass of the lifted module"),
        ("r_L", "load.position", "m", "where it is held, BCS"),
        ("GM_loaded", "load.gm", "m", "metacentric height with the load"),
        ("GM_unloaded", "turn.gm", "m", "metacentric height of the empty ship (Problem 3)"),
    ],
    10: _VESSEL + [
        ("tau", "simulation.tau", "N, N m", "constant body-frame load"),
        ("t_end", "simulation.t_end", "s", "duration of the simulation"),
    ],
    11: [
        ("attitude", "euler.attitude", "rad", "[phi, theta, psi] of the vessel, part (a)"),
        ("theta_given", "euler.theta_given", "1", "logged Euler parameters, scalar first, part (a)"),
        ("theta_dot", "euler.theta_dot", "1/s", "parameter rates at the attitude of (a), part (b)"),
        ("omega_c", "euler.omega_body", "rad/s", "constant body angular velocity, part (c)"),
        ("h", "euler.step", "s", "fixed step of both integrators, part (c)"),
        ("t_c", "euler.t_end", "s", "length of the integration, part (c)"),
        ("p_node", "euler.node_position", "m", "node position (GCS), part (d)"),
        ("theta_node", "euler.node_theta", "1", "node Euler parameters, scalar first, part (d)"),
        ("v_node", "euler.node_velocity", "m/s", "node velocity (GCS), part (d)"),
        ("theta_dot_node", "euler.node_theta_dot", "1/s", "node parameter rates, part (d)"),
        ("r_A", "crane.point", "m", "crane tip A in the body frame (Problem 7), part (d)"),
        ("m_module", "module.mass", "kg", "mass of the box of Problem 8, part (e)"),
        ("dims", "module.dimensions", "m", "its outside dimensions along x, y, z"),
        ("omega0", "module.omega0", "rad/s", "its initial body angular velocity"),
        ("t_late", "euler.tumble_time", "s", "time of the Euler parameters asked in (e)"),
    ],
}


def _lookup(data: dict, path: str):
    value = data
    for part in path.split("."):
        value = value[part]
    return value


def data_source(problem: int, data: dict) -> str:
    """Source of the locked ``problem_data`` cell of one problem."""
    lines = [f"# Problem {problem} data: locked, generated from the course data. SI units, angles in rad.", ""]
    for name, path, unit, meaning in DATA_CELLS[problem]:
        value = _lookup(data, path)
        code = f"np.array({[float(v) for v in value]!r})" if isinstance(value, list) else repr(float(value))
        lines.append(f"{name} = {code}  # {unit}: {meaning}")
    return "\n".join(lines)


def notebook_path(problem: int, exercises: Path) -> Path:
    return exercises / f"problem{problem:02d}" / f"problem{problem:02d}.ipynb"


def render(data: dict, exercises: Path) -> list[Path]:
    """Rewrite the helper and data cells of every source notebook; return the notebooks changed."""
    import nbformat

    changed = []
    helpers = helpers_source()
    for problem in DATA_CELLS:
        path = notebook_path(problem, exercises)
        if not path.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        wanted = {HELPERS_ID: helpers, DATA_ID: data_source(problem, data)}
        found = set()
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in wanted:
                found.add(grade_id)
                if cell.source != wanted[grade_id]:
                    cell.source = wanted[grade_id]
                    changed.append(path)
                if grade_id == HELPERS_ID and not cell.metadata.get("jupyter", {}).get("source_hidden"):
                    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True  # shown collapsed
                    changed.append(path)
        missing = set(wanted) - found
        if missing:
            raise ValueError(f"{path}: expected locked cells with grade_id {sorted(missing)}")
        if path in changed:
            nbformat.write(nb, path)
    return sorted(set(changed))


def render_course(layout, data_path: str | None = None) -> list[Path]:
    """Render the course's notebooks from the reference data, or from ``data_path`` merged over it.

    With ``data_path`` the merged data is saved to ``layout.data_file``, which the grader then
    reads; without it that file is removed and the reference data applies.
    """
    import yaml

    # a data file may carry a `variants` section (per-student switch, salt): it is kept
    # in the saved course data, and the source notebooks show the course's own numbers
    from ..problems.variants import load_course_data, problem_data

    data = load_course_data(data_path)
    if data_path:
        layout.data_file.write_text(f"# Generated by `python -m rbtutor.course render --data {data_path}`.\n"
                                    + yaml.safe_dump(data, sort_keys=False))
    elif layout.data_file.exists():
        layout.data_file.unlink()
    return render(problem_data(data), layout.exercises)
