"""Ungraded cells (plots, self-checks) use only names a student is given.

A student who names things their own way must not meet a NameError in a cell they did
not write. For every released notebook:

* each name an ungraded code cell reads is defined at the top level of a locked cell (the
  data and helper cells), or appears in code in the notebook's markdown instructions, or is
  bound in the cell itself (found with ``ast``);
* answered with the key's computations (``test_assignments.answered``), the whole notebook
  runs, plots included (``AUTOGRADING`` unset, matplotlib's Agg backend), without an error.
"""

from __future__ import annotations

import ast
import builtins
import os
import re

import nbformat
import pytest
from test_assignments import PROBLEMS, answered, grade_meta, new_course, run_course


def _is_ungraded_code(cell) -> bool:
    meta = grade_meta(cell)
    return cell.cell_type == "code" and not meta.get("solution") and not meta.get("grade") \
        and not meta.get("locked")


def _source_tree(source: str) -> ast.Module:
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


class _TopLevel(ast.NodeVisitor):
    """Names bound at a cell's top level (not inside functions, classes or comprehensions)."""

    def __init__(self):
        self.bound = set()

    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Load):
            self.bound.add(node.id)

    def visit_Import(self, node):
        self.bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node):
        self.bound.add(node.name)  # the body's names are local to it

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node):
        pass

    def visit_ListComp(self, node):
        pass

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp


def top_level_names(source: str) -> set[str]:
    finder = _TopLevel()
    finder.visit(_source_tree(source))
    return finder.bound


def names_read(source: str) -> set[str]:
    """Names the cell loads that it does not bind anywhere itself (loop variables, arguments, ...)."""
    loads, bound = set(), set()
    for node in ast.walk(_source_tree(source)):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return loads - bound


def names_in_instructions(nb) -> set[str]:
    """Identifiers that appear in code (backticks or code blocks) in the notebook's markdown."""
    found = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for code in re.findall(r"```.*?```|`[^`]+`", cell.source, flags=re.S):
                found |= set(re.findall(r"[A-Za-z_]\w*", code))
    return found


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    course = new_course(tmp_path_factory.mktemp("ungraded"))
    result = run_course(course, "generate")
    assert result.returncode == 0, result.stdout + result.stderr
    return course


@pytest.mark.parametrize("name", PROBLEMS)
def test_ungraded_cells_read_only_given_names(released, name):
    nb = nbformat.read(released / "release" / name / f"{name}.ipynb", as_version=4)
    given = set(dir(builtins)) | names_in_instructions(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and grade_meta(cell).get("locked") and not grade_meta(cell).get("grade"):
            given |= top_level_names(cell.source)
    ungraded = [cell for cell in nb.cells if _is_ungraded_code(cell)]
    problems = {}
    for cell in ungraded:
        unknown = names_read(cell.source) - given
        if unknown:
            problems[cell.source.splitlines()[0][:60]] = sorted(unknown)
    assert not problems, f"{name}: ungraded cells read names the instructions never give: {problems}"


def test_the_check_sees_a_name_that_is_not_given():
    """The check itself: a plot reading a name the instructions never mention is caught."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Compute `a_O`."),
        nbformat.v4.new_code_cell("for k in range(3):\n    plot(a_O, alpha[k])"),
    ])
    given = set(dir(builtins)) | names_in_instructions(nb)
    assert names_read(nb.cells[1].source) - given == {"plot", "alpha"}
    assert top_level_names("def f(x):\n    y = 1\nz = [w for w in x]\nimport numpy as np") == {"f", "z", "np"}


@pytest.mark.parametrize("name", PROBLEMS)
def test_answered_notebook_runs_with_its_plots(released, name, tmp_path):
    from nbclient import NotebookClient

    source = released / "exercises" / name / f"{name}.ipynb"
    nb = answered(nbformat.read(released / "release" / name / f"{name}.ipynb", as_version=4), source)
    assert any(_is_ungraded_code(c) for c in nb.cells) or name == "problem04"
    env_before = {k: os.environ.get(k) for k in ("MPLBACKEND", "RBTUTOR_AUTOGRADING")}
    os.environ["MPLBACKEND"] = "Agg"
    os.environ.pop("RBTUTOR_AUTOGRADING", None)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                       ).execute()
    finally:
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    for cell in nb.cells:
        if _is_ungraded_code(cell):
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert not errors, f"{name}: {errors[0].ename}: {errors[0].evalue}"
