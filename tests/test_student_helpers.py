"""The helper cell every assignment notebook carries (rbtutor.grading.student), run in a real kernel.

The module is the single source of the cell: render() copies it below its marker. Here it runs
in a plain IPython kernel, as in a student's JupyterLab: form checks fail with one line that
puts the student's problem first, right forms pass and hand the value out in the protocol's
format, and a NameError gets its hint.
"""

import json

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from rbtutor.course.render import helpers_source
from rbtutor.grading import protocol, student


def run(*cells):
    nb = new_notebook(cells=[new_code_cell(helpers_source()), *map(new_code_cell, cells)])
    NotebookClient(nb, kernel_name="python3", timeout=60, allow_errors=True).execute()
    return nb.cells[1:]


def test_the_cell_and_the_module_agree_with_the_protocol():
    assert student.ANSWER_MIME == protocol.ANSWER_MIME
    assert "import rbtutor" not in helpers_source()
    assert "from rbtutor" not in helpers_source()


@pytest.fixture(scope="module")
def cells():
    return run(
        'K = [1.0, 2.0, 3.0, 4.0]\ncheck_form("K", K, shape=(3,))',
        'M = [[1.0, 2.0], [0.0, 1.0]]\ncheck_form("M_RB", M, shape=(2, 2), symmetric=True)',
        'check_form("K", 2.5e6, shape=())\nhand_in("p3.b.K", 2.5e6)',
        'check_form("q", [1.0, 0.0, 0.0, 0.0], shape=(4,), unit_quaternion=True)\nhand_in("p11.a.q", [1, 0, 0, 0])',
        'hand_in("p3.b.K", K_undefined)',
        'check_form("why", "because", text=True)\nhand_in("p3.e.text", "because")',
    )


def test_a_failed_form_check_is_one_line_with_the_problem_first(cells):
    for cell, expected in ((cells[0], "K should have shape (3,), got (4,)"), (cells[1], "M_RB should be symmetric")):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert len(errors) == 1
        assert errors[0].ename == "FormCheckFailed"
        assert errors[0].traceback == [f"Form check failed: {errors[0].evalue}"]
        assert errors[0].evalue.startswith(expected)


def test_right_forms_pass_and_hand_the_value_out(cells):
    for cell, answer_id, payload in ((cells[2], "p3.b.K", {"id": "p3.b.K", "value": 2.5e6}),
                                     (cells[3], "p11.a.q", {"id": "p11.a.q", "value": [1.0, 0.0, 0.0, 0.0]}),
                                     (cells[5], "p3.e.text", {"id": "p3.e.text", "text": "because"})):
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
        assert protocol.handed_in(cell, answer_id) == payload
        shown = next(o for o in cell.outputs if o.output_type == "display_data").data["text/plain"]
        assert shown == f"{answer_id}: form checks passed; the value is graded after you submit"
        json.dumps(payload)


def test_a_missing_name_gets_a_hint(cells):
    error = next(o for o in cells[4].outputs if o.output_type == "error")
    assert error.ename == "NameError"
    assert error.traceback[-1].startswith("Hint: name 'K_undefined'")


def test_the_helper_cell_is_shown_collapsed_in_every_source_notebook():
    from test_assignments import ROOT, grade_meta

    from rbtutor.course import CourseLayout

    layout = CourseLayout(ROOT)
    for name in layout.assignments():
        nb = nbformat.read(layout.source_notebook(name), as_version=4)
        helper = [c for c in nb.cells if grade_meta(c).get("grade_id") == protocol.HELPERS_ID]
        assert len(helper) == 1, name
        assert helper[0].metadata["jupyter"]["source_hidden"] is True, name
