"""The text of the assignments quotes the course's numbers only through templates (rbtutor.course.render).

A number of the course data written by hand into an instruction would stay the reference's
when the course data change (``make assignments DATA=...``) or when a student fetches their
own variant; these tests keep every such number in a template and the committed notebooks
filled in from the reference data.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from rbtutor.course.render import PLACEHOLDER, TEMPLATE_KEY, fill_markdown, fill_text, format_number
from rbtutor.problems import load_data
from rbtutor.problems.variants import variant

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "exercises").glob("problem*/problem*.ipynb"))
DATA = load_data()
SPECS = ("g", ".1f", ".2f", ".3f", "2s", "3s", "tex2", "tex3")
EXAMPLES = {"0.5"}  # "(0.5 means 50 %)": how to write a ratio, not a number of the data


def leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def varied_numbers() -> set[float]:
    """The numbers of the reference data that some student's variant changes."""
    reference = dict(leaves(DATA))
    changed = set()
    for student in ("alice", "bob", "carol"):
        for path, value in leaves(variant(DATA, student)):
            if isinstance(value, float) and value != reference.get(path) and reference.get(path):
                changed.add(reference[path])
    return changed


@pytest.mark.parametrize(("value", "spec", "text"), [
    (0.05, "2s", "0.050"), (-0.05, "2s", "-0.050"), (5.0, "3s", "5.00"), (0.0995, "2s", "0.10"),
    (0.0, "2s", "0"), (28.0, "g", "28"), (-1.25, "g", "-1.25"), (1.8, ".2f", "1.80"),
    (-1.8e5, "tex3", r"-1.80\times10^{5}"), (9.996e5, "tex3", r"1.00\times10^{6}"),
    (2.5e7, "tex2", r"2.5\times10^{7}"),
])
def test_format_number(value, spec, text):
    assert format_number(value, spec) == text


def test_fill_text_names_a_bad_placeholder():
    assert fill_text("$u = [[turn.nu.0|.1f]]$ m/s", DATA) == f"$u = {DATA['turn']['nu'][0]:.1f}$ m/s"
    with pytest.raises(ValueError, match=r"\[\[turn.nope\|g\]\]"):
        fill_text("[[turn.nope|g]]", DATA)
    with pytest.raises(ValueError, match=r"turn.nu.9"):
        fill_text("[[turn.nu.9|g]]", DATA)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_templated_cells_show_the_reference_numbers(path):
    """The committed sources are filled in from the reference data (run `make assignments` if not)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        assert not PLACEHOLDER.search(cell.source), f"an unfilled placeholder in {path.name}: run render"
        template = cell.metadata.get(TEMPLATE_KEY, {}).get("text")
        if template is not None:
            assert cell.source == fill_text(template, DATA)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_instructions_quote_varied_numbers_only_through_templates(path):
    """No markdown cell outside a template (and no template outside its placeholders) writes a
    number that a student's variant changes, in any format the course prints numbers in."""
    numbers = varied_numbers()
    nb = nbformat.read(path, as_version=4)
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") or meta.get("task"):
            continue  # model answers and rubrics: removed from the student's notebook
        text = PLACEHOLDER.sub("", cell.metadata.get(TEMPLATE_KEY, {}).get("text", cell.source))
        for value in numbers:
            for spec in SPECS:
                shown = format_number(value, spec)
                if shown.isdigit() or shown in EXAMPLES:
                    continue  # "12": too plain to tell a data value from an index or an exponent
                pattern = r"(?<![\d.])" + re.escape(shown) + r"(?![\d])"
                for match in re.finditer(pattern, text):
                    found.append((index, text[max(0, match.start() - 30):match.end() + 10]))
    assert not found, found


def test_a_variant_fills_the_instructions_with_its_own_numbers():
    nb = nbformat.read(ROOT / "exercises" / "problem03" / "problem03.ipynb", as_version=4)
    own = variant(DATA, "alice")
    assert fill_markdown(nb, own)
    intro = nb.cells[0].source
    assert f"$GM = {own['turn']['gm']:.2f}$ m" in intro
    assert f"$u = {own['turn']['nu'][0]:.1f}$ m/s" in intro


def test_the_tracked_notebooks_are_what_the_renderer_writes(tmp_path):
    """The source notebooks in git are rendered: after a change to the helper cell (rbtutor/grading/
    student.py), the data or a template, `rbtutor render` must be run and its result committed."""
    import shutil

    from rbtutor.course.render import render
    from rbtutor.problems.variants import load_course_data, problem_data

    copy = tmp_path / "exercises"
    for path in SOURCES:
        (copy / path.parent.name).mkdir(parents=True)
        shutil.copy2(path, copy / path.parent.name / path.name)
    stale = render(problem_data(load_course_data(None)), copy)
    assert not stale, (f"{[p.name for p in stale]} differ from what the renderer writes: run `rbtutor render` "
                       "and commit the notebooks")
    assert len(SOURCES) == 12  # eleven problems and the quiz
