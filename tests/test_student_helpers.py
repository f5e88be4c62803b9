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


# --- check(): the form is checked in the kernel, free; the reply is one line (issue 35) ----------------


class StandIn:
    """A stand-in check service on 127.0.0.1 that records every request and gives the replies queued."""

    def __init__(self, replies):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests, self.replies = [], list(replies)
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                stand_in.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status, reply = stand_in.replies.pop(0)
                body = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _check_lines(stand_in, calls, problem=None):
    """What check() prints for each of ``calls`` in a fresh process (the helper cell as rendered)."""
    import os
    import subprocess
    import sys

    script = helpers_source(problem) + "\n" + "\n".join(f"check({c})" for c in calls) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "RBTUTOR_", "NBGRADER_"))}
    env.update(JUPYTERHUB_API_TOKEN="stand-in-token", RBTUTOR_CHECK_URL=stand_in.url)
    ran = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.splitlines()


MALFORMED_IN_THE_KERNEL = [
    ("'p11.a.q', [1.0, 0.0]", "p11.a.q: not checked (nothing spent): expected 4 numbers (a unit quaternion), "
                              "got 2 numbers"),
    ("'p11.a.q', [2.0, 0.0, 0.0, 0.0]", "p11.a.q: not checked (nothing spent): expected a unit quaternion, got norm 2: "
                                        "normalise it"),
    ("'p11.b.G_global', [[0.0] * 3] * 4", "p11.b.G_global: not checked (nothing spent): expected a 3 x 4 matrix, "
                                          "got a 4 x 3 matrix (rows and columns swapped?)"),
    ("'p11.d.R', [[2.0, 0, 0], [0, 1, 0], [0, 0, 1]]", "p11.d.R: not checked (nothing spent): expected a rotation "
                                                       "matrix: orthonormal, with determinant +1"),
    ("'p11.a.angles', 'zero'", "p11.a.angles: not checked (nothing spent): expected 3 numbers, got text"),
    ("'p11.a.angles', object()", "p11.a.angles: not checked (nothing spent): expected 3 numbers, got object"),
    ("'p11.a.angles', [1.0, float('nan'), 0.0]", "p11.a.angles: not checked (nothing spent): expected 3 numbers, "
                                                 "got NaN or infinity"),
    ("'p11.a.angles', [[1.0, 2.0], [3.0]]", "p11.a.angles: not checked (nothing spent): expected 3 numbers, got list"),
    ("'p3.b.K', 1.0", "'p3.b.K': not checked (nothing spent): no answer of this notebook has this id; the ids are "
                      "those of the test cells (p11.a.angles, p11.a.q, p11.b.G_body, ...)"),
]


def test_a_malformed_value_or_an_unknown_id_is_answered_in_the_kernel_and_nothing_is_sent():
    """Nothing reaches the (stand-in) service; the line says what was expected."""
    stand_in = StandIn([])
    try:
        lines = _check_lines(stand_in, [call for call, _ in MALFORMED_IN_THE_KERNEL], problem=11)
    finally:
        stand_in.close()
    assert lines == [line for _, line in MALFORMED_IN_THE_KERNEL]
    assert stand_in.requests == []


def test_a_well_formed_value_is_sent_and_the_reply_is_one_line_with_plurals_right():
    right = {"passed": True, "message": "", "diagnosis": None, "checks_left": 1}
    sign = {"passed": False, "message": "the sign is wrong (x forward, y to port, z up)", "diagnosis": "sign",
            "checks_left": 0}
    plain = {"passed": False, "message": "", "diagnosis": "wrong_value", "checks_left": 2}
    refused = {"error": "expected a single number, got 2 numbers"}
    stand_in = StandIn([(200, right), (200, sign), (200, plain), (400, refused)])
    try:
        lines = _check_lines(stand_in, ["'p3.b.K', 2.5e6", "'p3.b.K', -2.5e6", "'p3.b.K', [[3.0]]",
                                        "'p3.b.K', 2.0", "'p3.b.K', [1.0, 2.0]"], problem=3)
    finally:
        stand_in.close()
    note = "p3.b.K: checking with the course hub (a few seconds at most)..."
    assert [k for k, line in enumerate(lines) if line == note] == [0, 2, 4, 6], lines  # before each value sent
    lines = [line for line in lines if line != note]
    assert lines == ["p3.b.K: right. 1 check of this part left this hour.",
                     "p3.b.K: not right yet: the sign is wrong (x forward, y to port, z up). "
                     "0 checks of this part left this hour.",
                     "p3.b.K: not right yet. 2 checks of this part left this hour.",
                     "p3.b.K: not checked (nothing spent): expected a single number, got 2 numbers",
                     "p3.b.K: not checked (nothing spent): expected a single number, got 2 numbers"]
    assert stand_in.requests == [{"id": "p3.b.K", "value": v} for v in (2.5e6, -2.5e6, [[3.0]], 2.0)], (
        "the last value was refused in the kernel; the fourth, refused by the service, gets the same line")


def test_each_notebook_carries_the_forms_of_its_own_answers():
    from rbtutor.course.render import answer_forms
    from rbtutor.problems import answer_key

    forms = answer_forms(answer_key())
    assert forms["p11.a.q"] == "quaternion"
    assert forms["p11.d.R"] == "rotation"
    assert forms["p1.d.strongest_pair"] == "text"
    assert forms["p3.b.K"] == []
    assert forms["p11.b.G_global"] == [3, 4]
    namespace = {}
    exec(helpers_source(10).split("class FormCheckFailed")[0], namespace)  # the imports and ANSWER_FORMS
    assert namespace["ANSWER_FORMS"] == {i: f for i, f in forms.items() if i.startswith("p10.")}
    assert namespace["ANSWER_FORMS"], "problem 10 has answers"
