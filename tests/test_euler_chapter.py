"""The Euler-parameter chapter derives what it states: its cells run, assert every step, and fail on a slip.

The two pages (book/euler/index.md and book/euler/node.md) are MyST notebooks. Their
code cells are run here in one namespace, in page order, as a reader running the
downloaded notebook would; a derivation cell (one that uses SymPy) must assert
something, and a slip planted in the page's algebra must make a cell fail. The
built pages are checked too: their checking cells ran and printed what they check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"index": ROOT / "book" / "euler" / "index.md", "node": ROOT / "book" / "euler" / "node.md"}
CELL = re.compile(r"```\{code-cell\} python3\n(.*?)```", re.S)

# What each page must derive, by the names its cells define (issue 24, deliverable 2).
DERIVED = {
    "index": ["quat_product", "conjugate", "R_full", "omega_0", "omega_b", "G_b", "G_0", "C_dot"],
    "node": ["M_theta", "Q_theta", "lagrange", "node_equations", "euler_equations", "det_augmented",
             "index3", "index2", "normalised", "reference"],
}


def code_cells(text: str) -> list[str]:
    """The code of each code cell of a MyST notebook page, without its options."""
    cells = []
    for body in CELL.findall(text):
        body = re.sub(r"\A---\n.*?\n---\n", "", body, flags=re.S)
        cells.append("\n".join(line for line in body.split("\n") if not line.startswith(":tags:")))
    return cells


def run_cells(cells: list[str], name: str) -> dict:
    """Run the cells in one namespace; return it. An error names the cell it came from."""
    namespace: dict = {"__name__": f"euler_{name}"}
    for number, code in enumerate(cells):
        try:
            exec(compile(code, f"<{name} cell {number}>", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{name}: cell {number} failed: {exc!r}\n{code[:400]}") from exc
    import matplotlib.pyplot as plt

    plt.close("all")
    return namespace


@pytest.fixture(scope="module", params=sorted(PAGES))
def page(request) -> tuple[str, list[str]]:
    return request.param, code_cells(PAGES[request.param].read_text(encoding="utf-8"))


def test_every_derivation_cell_asserts(page):
    """Each SymPy cell checks its step with an assert; the pages have SymPy cells at all."""
    name, cells = page
    derivations = [c for c in cells if re.search(r"\bsp\.", c)]
    assert len(derivations) >= 5, f"{name}: only {len(derivations)} SymPy cells"
    # A cell that defines helpers (the quaternion product, the G matrix) may set things up without
    # asserting; every other SymPy cell is a step and must check itself.
    silent = [c[:200] for c in derivations if "assert " not in c and not re.search(r"^def ", c, re.M)]
    assert not silent, f"{name}: SymPy cells that assert nothing:\n" + "\n---\n".join(silent)


def test_cells_run_and_define_the_derived_objects(page):
    """Every cell of the page runs (so every assert in it holds) and defines what the page derives."""
    name, cells = page
    namespace = run_cells(cells, name)
    missing = [n for n in DERIVED[name] if n not in namespace]
    assert not missing, f"{name}: not derived on the page: {missing}"


def test_the_derived_g_matrix_is_the_librarys():
    """The G_b the page derives from 2 vec(theta* x theta_dot), evaluated, equals rbtutor's."""
    import numpy as np
    import sympy as sp

    from rbtutor import euler_parameters as ep

    cells = code_cells(PAGES["index"].read_text(encoding="utf-8"))
    derivation = [c for c in cells if "G_b = omega_b.jacobian" in c]
    assert derivation, "the page does not derive G_b as a Jacobian"
    namespace = run_cells(cells[:cells.index(derivation[0]) + 1], "index")
    theta = np.array([0.3, -0.5, 0.7, 0.4]) / np.linalg.norm([0.3, -0.5, 0.7, 0.4])
    derived = sp.lambdify([namespace["theta"]], namespace["G_b"], "numpy")(theta)
    assert np.allclose(derived, ep.g_matrix_body(theta), rtol=0.0, atol=1e-15)


# A slip planted in the page's algebra, and the text the failure must name.
SLIPS = [
    ("index", "assert is_zero(G.T * (G * theta_dot) / 4 - (norm2 * theta_dot - theta * rate_dot))",
     "assert is_zero(G.T * (G * theta_dot) / 2 - (norm2 * theta_dot - theta * rate_dot))"),
    ("index", "    vector = p0 * q_vec + q0 * p_vec + p_vec.cross(q_vec)",
     "    vector = p0 * q_vec + q0 * p_vec - p_vec.cross(q_vec)"),
    ("node", "                  + 2 * theta * lam - G_b.T * tau_b)",
     "                  + theta * lam - G_b.T * tau_b)"),
    ("node", "    return g_num(q).T @ J_num @ g_num(q) @ a + 2.0 * g_num(v).T @ J_num @ g_num(q) @ v + 2.0 * q * lam_",
     "    return g_num(q).T @ J_num @ g_num(q) @ a + g_num(v).T @ J_num @ g_num(q) @ v + 2.0 * q * lam_"),
]


@pytest.mark.parametrize(("name", "right", "wrong"), SLIPS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SLIPS)])
def test_a_slip_in_the_algebra_fails_the_page(name, right, wrong):
    """Changing one factor or sign of the page's algebra makes one of its cells fail."""
    text = PAGES[name].read_text(encoding="utf-8")
    assert text.count(right) == 1, f"{name}: the line to change is not on the page once: {right!r}"
    with pytest.raises(AssertionError, match=r"cell \d+ failed"):
        run_cells(code_cells(text.replace(right, wrong)), name)


def test_problem11_links_to_the_chapter():
    """The Problem 11 notebook sends the student to the chapter and its node section."""
    notebook = json.loads((ROOT / "exercises" / "problem11" / "problem11.ipynb").read_text(encoding="utf-8"))
    intro = "".join(notebook["cells"][0]["source"])
    assert "book/euler/index" in intro, intro[-800:]
    assert "book/euler/node" in intro, intro[-800:]


# Printed by cells near the end of each page: seen in the built page, the cells before them ran too.
PRINTED = {
    "index": ["largest |G_b theta_dot - omega| over 0-4 s", "written-out model vs rbtutor.simulate"],
    "node": ["rank of M_theta at theta = [1, 0, 0, 0]: 3", "largest attitude difference",
             "error with h over error with h/2 at t = 2 s: 4.00"],
}


def test_built_pages_show_the_cells_ran(built_book: Path):
    """In the book build, each Euler page shows the output of its checking cells and no traceback
    (the build itself stops on a failing assert: execute.raise_on_error in _config.yml)."""
    for name in PAGES:
        html = (built_book / "book" / "euler" / f"{name}.html").read_text(encoding="utf-8")
        cells = len(re.findall(r'<div class="cell(?: tag_[^" ]+)* docutils container"', html))
        assert cells == len(code_cells(PAGES[name].read_text(encoding="utf-8"))), (name, cells)
        for text in PRINTED[name]:
            assert text in html.replace("&#39;", "'"), f"{name}: {text!r} not in the built page"
        assert "Traceback" not in html, name
        assert "AssertionError" not in html, name
