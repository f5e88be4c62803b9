"""The ten nbgrader assignments: the cells that come from the course, not from the author.

Two locked cells of every source notebook in ``exercises/problemNN/`` are written
here, never by hand:

* ``course_helpers`` defines ``check_form`` (shape, finiteness and structure of an
  answer, in the student's kernel, for Validate) and ``hand_in`` (passes the value
  to the grader as a ``application/vnd.rbtutor.answer+json`` output; nothing is
  judged in the student's kernel), and the ``AUTOGRADING`` flag;
* ``problem_data`` holds the numbers of the problem, from :mod:`rbtutor.problems`.

``python -m rbtutor.assignments render [--data FILE]`` rewrites both cells in
every notebook, so that the notebooks and the grader's reference values come
from the same data. With ``--data`` the merged data is also saved to
``exercises/problem_data.yaml``, which the grader reads; without it that file is
removed and the reference data applies.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"
DATA_FILE = EXERCISES / "problem_data.yaml"
ANSWER_MIME = "application/vnd.rbtutor.answer+json"
HELPERS_ID, DATA_ID = "course_helpers", "problem_data"

HELPERS_SOURCE = f'''\
# Course helpers: locked, do not edit. Validate runs check_form, which looks only at the
# FORM of an answer (type, shape, finite entries, structure). The VALUES are graded after
# you submit, by the course's grader, outside this notebook.
import os
import sys

import numpy as np
from IPython.display import display

AUTOGRADING = os.environ.get("RBTUTOR_AUTOGRADING") == "1"  # True while the course grades


def _hint_for_missing_answer(shell, etype, value, tb, tb_offset=None):
    """Add a hint to a NameError: usually an answer cell that was not run or not answered."""
    hint = (f"Hint: {{value}}. Run the answer cell of this part and assign your answer to that name "
            "(a cell that still raises NotImplementedError has not been answered yet).")
    stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    shell._showtraceback(etype, value, stb + [hint])


get_ipython().set_custom_exc((NameError,), _hint_for_missing_answer)  # noqa: F821 - IPython builtin


def check_form(name, value, shape=None, symmetric=False, positive_definite=False,
               skew_symmetric=False, rotation=False, unit_quaternion=False, text=False):
    """Raise AssertionError with a hint when the answer has the wrong form."""
    if "rbtutor" in sys.modules:
        print("Warning: this notebook imports rbtutor, the instructor's library. It is not "
              "available while your work is graded, so compute everything yourself.", file=sys.stderr)
    if text:
        assert isinstance(value, str) and value.strip(), f"{{name}} should be a non-empty string"
        return
    assert value is not None, f"{{name}} is None: assign your answer to it"
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{{name}} should be a number or an array of numbers, "
                             f"got {{type(value).__name__}}") from None
    if shape is not None:
        assert arr.size == int(np.prod(shape)) and arr.squeeze().shape == tuple(
            s for s in shape if s != 1), (f"{{name}} should have shape {{shape}}, got {{arr.shape}}; "
                                          "check which quantities you stacked")
        arr = arr.reshape(shape)
    assert np.all(np.isfinite(arr)), f"{{name}} has NaN or infinite entries; look for a division by zero"
    if symmetric:
        assert np.allclose(arr, arr.T, rtol=1e-9, atol=1e-9 * np.abs(arr).max()), (
            f"{{name}} should be symmetric; compare the off-diagonal blocks "
            "and the signs of the products of inertia")
    if positive_definite:
        assert np.all(np.linalg.eigvalsh((arr + arr.T) / 2) > 0), (
            f"{{name}} should be positive definite (kinetic energy is positive for any motion)")
    if skew_symmetric:
        assert np.allclose(arr, -arr.T, atol=1e-9 * max(np.abs(arr).max(), 1.0)), (
            f"{{name}} should be skew-symmetric: C + C^T = 0 for any velocity; check the signs of its blocks")
    if rotation:
        assert np.allclose(arr.T @ arr, np.eye(3), atol=1e-9) and np.linalg.det(arr) > 0, (
            f"{{name}} should be a rotation: orthonormal with determinant +1")
    if unit_quaternion:
        assert abs(np.linalg.norm(arr) - 1.0) < 1e-6, f"{{name}} should be a unit quaternion (norm 1)"


def hand_in(answer_id, value):
    """Pass the value to the grader. Nothing is judged here."""
    if isinstance(value, str):
        payload = {{"id": answer_id, "text": value}}
    else:
        try:
            payload = {{"id": answer_id, "value": np.asarray(value, dtype=float).tolist()}}
        except (TypeError, ValueError):
            payload = {{"id": answer_id, "unreadable": type(value).__name__}}
    note = f"{{answer_id}}: handed in, graded after submission"
    display({{"{ANSWER_MIME}": payload, "text/plain": note}}, raw=True)
'''

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


def notebook_path(problem: int, exercises: Path = EXERCISES) -> Path:
    return exercises / f"problem{problem:02d}" / f"problem{problem:02d}.ipynb"


def render(data: dict, exercises: Path = EXERCISES) -> list[Path]:
    """Rewrite the helper and data cells of every source notebook; return the notebooks changed."""
    import nbformat

    changed = []
    for problem in DATA_CELLS:
        path = notebook_path(problem, exercises)
        if not path.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        wanted = {HELPERS_ID: HELPERS_SOURCE.rstrip("\n"), DATA_ID: data_source(problem, data)}
        found = set()
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in wanted:
                found.add(grade_id)
                if cell.source != wanted[grade_id]:
                    cell.source = wanted[grade_id]
                    changed.append(path)
        missing = set(wanted) - found
        if missing:
            raise ValueError(f"{path}: expected locked cells with grade_id {sorted(missing)}")
        if path in changed:
            nbformat.write(nb, path)
    return sorted(set(changed))


def main(argv=None) -> int:
    from .problems import load_data

    parser = argparse.ArgumentParser(prog="python -m rbtutor.assignments")
    sub = parser.add_subparsers(dest="command", required=True)
    render_cmd = sub.add_parser("render", help="write the helper and data cells of every notebook")
    render_cmd.add_argument("--data", help="variant data (YAML) to merge over the reference data")
    render_cmd.add_argument("--exercises", default=str(EXERCISES))
    args = parser.parse_args(argv)
    exercises = Path(args.exercises)
    try:
        data = load_data(args.data)
    except (OSError, ValueError) as exc:
        print(f"rbtutor.assignments: {exc}", file=sys.stderr)
        return 2
    data_file = exercises / DATA_FILE.name
    if args.data:
        import yaml

        data_file.write_text(f"# Generated by `python -m rbtutor.assignments render --data {args.data}`.\n"
                             + yaml.safe_dump(data, sort_keys=False))
    elif data_file.exists():
        data_file.unlink()
    for path in render(data, exercises):
        print(f"updated {path.relative_to(exercises.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
